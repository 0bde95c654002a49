"""The training interpreter: the Python that runs the training, often not the one running relaxrepro.

Foundation version: the current interpreter, or ``options["python"]`` when given. Issue 4 finds it
from the recorded command (``python …``, launchers' shebangs, ``python -m …``). Shared by the
package, editable-install and CUDA-library probes through ``ctx.memo``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import List, Optional

from .context import Context

_SITE_CODE = "import json, sys; print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3], " \
             "'implementation': sys.implementation.name, 'executable': sys.executable, 'prefix': sys.prefix, " \
             "'base_prefix': getattr(sys, 'base_prefix', sys.prefix), 'path': sys.path}))"


@dataclass
class Interpreter:
    executable: str
    version: Optional[str] = None
    implementation: Optional[str] = None
    prefix: Optional[str] = None
    base_prefix: Optional[str] = None
    sys_path: List[str] = field(default_factory=list)
    source: str = "current"
    """Where it was found: ``current``, ``option`` (--python), ``command``."""
    warnings: List[str] = field(default_factory=list)

    @property
    def site_dirs(self) -> List[str]:
        """Existing directories on its sys.path that can hold distributions' metadata."""
        return [p for p in self.sys_path if p and os.path.isdir(p) and not p.endswith(".zip")]


def resolve(ctx: Context) -> Interpreter:
    """The training interpreter, computed once per collection."""
    return ctx.memo("interpreter", lambda: _resolve(ctx))


def _resolve(ctx: Context) -> Interpreter:
    chosen = ctx.options.get("python")
    if chosen:
        return describe(ctx, chosen, source="option")
    return _current()


def _current() -> Interpreter:
    return Interpreter(
        executable=sys.executable,
        version="%d.%d.%d" % sys.version_info[:3],
        implementation=sys.implementation.name,
        prefix=sys.prefix,
        base_prefix=getattr(sys, "base_prefix", sys.prefix),
        sys_path=[p for p in sys.path if p],
        source="current",
    )


def describe(ctx: Context, executable: str, *, source: str) -> Interpreter:
    """Ask another interpreter for its version and sys.path (one child process, under budget)."""
    if os.path.realpath(executable) == os.path.realpath(sys.executable):
        cur = _current()
        cur.source = source
        return cur
    from . import proc

    res = proc.run_python(executable, _SITE_CODE, timeout=min(ctx.budget(), 2.0), isolated=False,
                          env=ctx.env)
    interp = Interpreter(executable=executable, source=source)
    if not res.ok:
        interp.warnings.append("could not query %s: %s" % (executable, res.describe()))
        return interp
    try:
        info = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        interp.warnings.append("%s printed no usable answer" % executable)
        return interp
    interp.version = info.get("version")
    interp.implementation = info.get("implementation")
    interp.executable = info.get("executable") or executable
    interp.prefix = info.get("prefix")
    interp.base_prefix = info.get("base_prefix")
    interp.sys_path = [p for p in info.get("path", []) if isinstance(p, str) and p]
    return interp
