"""The training interpreter: version, implementation, executable, prefix, venv / conda env, and how it was found."""

from __future__ import annotations

import os

from .. import interpreter
from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict


def collect(ctx: Context) -> Outcome:
    interp = interpreter.resolve(ctx)
    out = Outcome(warnings=list(interp.warnings))
    info: Dict[str, Any] = {
        "version": interp.version,
        "implementation": interp.implementation,
        "executable": interp.executable,
        "prefix": interp.prefix,
        "base_prefix": interp.base_prefix,
        "venv": interp.venv,
        "source": interp.source,
    }
    if interp.venv and interp.prefix:
        info["venv_name"] = os.path.basename(interp.prefix.rstrip("/"))
    conda = interp.conda_env
    if conda:
        info["conda_env"] = conda
    if interp.launcher:
        info["launcher"] = interp.launcher
    env: Dict[str, Any] = {"python": {k: v for k, v in info.items() if v is not None}}
    if interp.version:
        env["python_version"] = interp.version
    if interp.warnings and out.status == "ok":
        out.status = "partial"
    return Outcome(data={"environment": env}, status=out.status, warnings=out.warnings)
