"""The training interpreter: the Python that runs the training, often not the one running relaxrepro.

Found, in this order, from ``--python PATH`` (``options["python"]``: the user said so), from the
recorded command (``python …``, ``python3.11 -m …``, ``/venv/bin/python …``, ``env VAR=x python …``,
a launcher such as ``torchrun``/``accelerate``/``deepspeed`` through its shebang, the entrypoint after
``ray job submit --``), else the current interpreter. Shared by the python, packages, CUDA and git
probes through ``ctx.memo``; another interpreter is asked for its ``sys.path`` in one child process.
"""

from __future__ import annotations

import json
import os
import re
import sys

from ..std import proc
from ..std.files import read_regular
from ..std.records import Factory, Record
from .context import Context

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import List, Optional, Sequence, Tuple

# Runs in the training interpreter, whatever its age: no f-strings, and Python 2 has no sys.implementation.
_SITE_CODE = "import json, platform, sys; print(json.dumps({'version': '%d.%d.%d' % tuple(sys.version_info[:3]), " \
             "'implementation': getattr(getattr(sys, 'implementation', None), 'name', None) " \
             "or platform.python_implementation().lower(), 'executable': sys.executable, 'prefix': sys.prefix, " \
             "'base_prefix': getattr(sys, 'base_prefix', sys.prefix), 'path': sys.path}))"

_PYTHON_NAME = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)*)?(?:-dbg)?(?:\.exe)?$")
"""``python``, ``python3``, ``python3.11``, ``pypy3.10``: what a shell runs as an interpreter."""

_MPI_LAUNCHERS = {"srun", "mpirun", "mpiexec", "horovodrun", "prterun"}
"""Launchers that take their own options, then run a command on each rank: ``srun -N2 python train.py``."""

_WRAPPERS = {"nohup", "exec", "time", "stdbuf", "nice", "ionice", "numactl", "taskset", "chrt"}
"""Wrappers that run the rest of the command unchanged (their own options are skipped)."""


class Interpreter(Record):
    """The training interpreter. ``source``: where it was found, ``option`` (--python), ``command``,
    ``launcher`` (a shebang) or ``current``; ``launcher``: the launcher whose shebang named it
    (``torchrun``), when ``source == "launcher"``."""

    executable: str
    version: Optional[str] = None
    implementation: Optional[str] = None
    prefix: Optional[str] = None
    base_prefix: Optional[str] = None
    sys_path: List[str] = Factory(list)
    source: str = 'current'
    launcher: Optional[str] = None
    warnings: List[str] = Factory(list)

    @property
    def site_dirs(self) -> List[str]:
        """Existing directories on its sys.path that can hold distributions' metadata."""
        return [p for p in self.sys_path if p and os.path.isdir(p) and not p.endswith(".zip")]

    @property
    def venv(self) -> bool:
        """A virtual environment (PEP 405: its prefix differs from the base, or holds pyvenv.cfg)."""
        if self.prefix and self.base_prefix and self.prefix != self.base_prefix:
            return True
        return bool(self.prefix) and os.path.isfile(os.path.join(self.prefix or "", "pyvenv.cfg"))

    @property
    def conda_env(self) -> Optional[str]:
        """The conda environment's name (``base`` for the root install), from its ``conda-meta`` dir."""
        prefix = self.prefix
        if not prefix or not os.path.isdir(os.path.join(prefix, "conda-meta")):
            return None
        # Named envs live in <root>/envs/<name>; the root install itself is "base".
        if os.path.basename(os.path.dirname(prefix)) == "envs":
            return os.path.basename(prefix)
        return "base"


def resolve(ctx: Context) -> Interpreter:
    """The training interpreter, computed once per collection."""
    return ctx.memo("interpreter", lambda: _resolve(ctx))


def _resolve(ctx: Context) -> Interpreter:
    chosen = ctx.options.get("python")
    if chosen:
        return describe(ctx, _absolute(ctx, str(chosen)), source="option")
    notes: List[str] = []
    found = from_command(ctx, ctx.argv, notes)
    if found is not None:
        exe, source, launcher = found
        interp = describe(ctx, exe, source=source)
        interp.launcher = launcher
        if interp.version is not None:
            interp.warnings = notes + interp.warnings
            return interp
        notes.extend(interp.warnings)
    cur = _current()
    cur.warnings = notes
    return cur


def from_command(ctx: Context, argv: Sequence[str], notes: List[str]) -> Optional[Tuple[str, str, Optional[str]]]:
    """``(executable, source, launcher)`` named by a recorded command, or None (a note says why)."""
    args = _strip_wrappers(list(argv))
    if not args:
        return None
    head = args[0]
    name = os.path.basename(head)
    if _PYTHON_NAME.match(name):
        exe = _find(ctx, head)
        if exe is None:
            notes.append("the command's interpreter %s was not found on PATH; used the current one" % head)
            return None
        return exe, "command", None
    if name == "ray" and "--" in args:
        # `ray job submit … -- python train.py`: the entrypoint's interpreter, not Ray's CLI.
        inner = from_command(ctx, args[args.index("--") + 1:], notes)
        if inner is not None:
            return inner
    if name in _MPI_LAUNCHERS:
        # Their options may take values (`-np 8`), so the first python-named word is the command.
        for i, word in enumerate(args[1:], 1):
            if _PYTHON_NAME.match(os.path.basename(word)):
                return from_command(ctx, args[i:], notes)
        return None
    exe = _find(ctx, head)
    if exe is None:
        return None
    shebang = _shebang_python(ctx, exe)
    if shebang is None:
        return None
    return shebang, "launcher", name


def _strip_wrappers(args: List[str]) -> List[str]:
    """Drop ``env VAR=x -u NAME``, ``nohup``, ``numactl --cpunodebind=0`` and the like."""
    while args:
        name = os.path.basename(args[0])
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", args[0]):
            args = args[1:]  # `VAR=x python …`, as a shell would have it in a recorded string command
            continue
        if name == "env":
            args = args[1:]
            while args and (args[0].startswith("-") or "=" in args[0]):
                takes_value = args[0] in ("-u", "--unset", "-C", "--chdir")
                args = args[2:] if takes_value else args[1:]
            continue
        if name in _WRAPPERS:
            args = args[1:]
            while args and args[0].startswith("-"):
                args = args[1:]
            continue
        break
    return args


def _absolute(ctx: Context, path: str) -> str:
    if os.sep in path and not os.path.isabs(path):
        return os.path.normpath(os.path.join(ctx.cwd, path))
    return path


def _find(ctx: Context, head: str) -> Optional[str]:
    """The executable a shell would run for ``head`` (relative paths against the run's cwd)."""
    if os.sep in head:
        path = _absolute(ctx, head)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return ctx.which(head)


def _shebang_python(ctx: Context, path: str) -> Optional[str]:
    """The Python interpreter a script's ``#!`` line names, if it names one."""
    try:
        head = read_regular(path, 1024)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    lines = head.decode("utf-8", "replace").splitlines()
    words = lines[0][2:].split()
    if not words:
        return None
    # pip writes `#!/bin/sh` + `'''exec' "/very/long/path/python" "$0" "$@"` when the venv path
    # exceeds the kernel's 127-byte shebang limit (pip's distlib ScriptMaker).
    if os.path.basename(words[0]) == "sh" and len(lines) > 1:
        m = re.match(r"""^'''exec' "?([^"\s]+)"?""", lines[1])
        if m and _PYTHON_NAME.match(os.path.basename(m.group(1))):
            return m.group(1)
        return None
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if rest and _PYTHON_NAME.match(os.path.basename(rest[0])):
            return ctx.which(rest[0])
        return None
    if _PYTHON_NAME.match(os.path.basename(words[0])):
        return words[0]
    return None


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


def _sibling_of_current(executable: str) -> bool:
    """``bin/python`` while we run as ``bin/python3.11``: the same binary reached from the same directory
    is the same interpreter with the same prefix, so asking it in a child (50-70 ms where a site ``.pth``
    imports certifi) tells nothing new. Another directory may be a venv of it: that one is asked."""
    here = os.path.abspath(sys.executable)
    there = os.path.abspath(executable)
    if os.path.dirname(here) != os.path.dirname(there):
        return False
    try:
        return os.path.realpath(here) == os.path.realpath(there)
    except OSError:
        return False


def describe(ctx: Context, executable: str, *, source: str) -> Interpreter:
    """Ask another interpreter for its version and sys.path (one child process, under budget)."""
    # Compare unresolved paths: a venv's bin/python is a symlink to the base interpreter, so
    # realpath() would mistake the base install for the venv (and list the wrong packages).
    if os.path.abspath(executable) == os.path.abspath(sys.executable):
        cur = _current()
        cur.source = source
        return cur
    if _sibling_of_current(executable):
        cur = _current()
        cur.executable, cur.source = os.path.abspath(executable), source
        return cur
    res = proc.run_python(executable, _SITE_CODE, timeout=min(ctx.budget(), 2.0), isolated=False,
                          env=ctx.env)
    interp = Interpreter(executable=executable, source=source)
    if not res.ok:
        interp.warnings.append("could not query %s: %s" % (executable, res.describe()))
        return interp
    try:
        info = json.loads(res.stdout.strip().splitlines()[-1])
        if not isinstance(info, dict):
            raise ValueError(info)
    except (ValueError, IndexError):
        interp.warnings.append("%s printed no usable answer" % executable)
        return interp
    interp.version = info.get("version") if isinstance(info.get("version"), str) else None
    interp.implementation = info.get("implementation")
    interp.executable = info.get("executable") or executable
    interp.prefix = info.get("prefix")
    interp.base_prefix = info.get("base_prefix")
    interp.sys_path = [p for p in info.get("path", []) if isinstance(p, str) and p]
    return interp
