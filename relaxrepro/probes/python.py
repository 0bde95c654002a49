"""The interpreter: version, implementation, executable (this process's; issue 4 finds the trainer's)."""

from __future__ import annotations

import platform
import sys

from ..context import Context
from ..runner import Outcome


def collect(ctx: Context) -> Outcome:
    version = "%d.%d.%d" % sys.version_info[:3]
    info = {
        "version": version,
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
    }
    return Outcome(data={"environment": {"python_version": version, "python": info}})
