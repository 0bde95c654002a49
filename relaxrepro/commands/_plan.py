"""The replay's plan: everything ``rerun`` would do, decided from the manifest and ``--set`` values, before
anything runs (:func:`plan`), and the refusals it can raise; shared by the dry-run script, ``--confirm`` and
``--sbatch``."""

from __future__ import annotations

import os
import re

from ..manifest import fields
from ..manifest.fields import get, scalar, section
from ..std.records import Factory, Record
from ..std.text import safe_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Mapping, Optional
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARGV_KEY = re.compile(r"^argv\[(\d+)\]$")
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
_JOB_ENV_PREFIXES = ("SLURM_", "SLURMD_")


class Refusal(Exception):
    """Why a rerun cannot go ahead; the message is one line for the user."""


class Repo(Record):
    name: str
    path: Optional[str]
    commit: Optional[str]
    patch: Dict[str, Any]
    dirty: Any


class Plan(Record):
    """Everything the replay would do, decided from the manifest and ``--set`` values."""

    argv: List[str] = Factory(list)
    env: Dict[str, str] = Factory(dict)
    skipped_env: Dict[str, str] = Factory(dict)
    cwd: Optional[str] = None
    interpreter: Optional[str] = None
    interpreter_version: Optional[str] = None
    repos: List[Repo] = Factory(list)
    redacted: List[str] = Factory(list)
    """Values still holding a redaction placeholder, as ``where: value`` lines."""
    run_id: str = ""
    home: Optional[str] = None
    """This machine's home, for the ``<HOME>`` left in the values above (None: unset, so unresolvable)."""
    cwd_here: bool = False
    """The working directory was recorded as ``"."``: wherever the run was started (Relax)."""
    wrap: List[str] = Factory(list)
    """``--container``: the prefix that runs the command inside the recorded image."""

    def local(self, value: str) -> str:
        """A recorded value as it reads on this machine: ``<HOME>`` resolved to :attr:`home`."""
        return fields.expand_home(value, self.home)

    def for_execution(self) -> None:
        """``<HOME>`` resolved to this home in the interpreter, working directory, arguments, env and repo
        paths: what a replay runs, and what its own probes query, never holds the placeholder. Without a
        home the placeholder stays, and :attr:`redacted` refuses it."""
        if not self.home:
            return
        self.interpreter = self.local(self.interpreter) if self.interpreter else None
        self.cwd = self.local(self.cwd) if self.cwd else self.cwd
        self.argv = [self.local(a) for a in self.argv]
        self.env = {k: self.local(v) for k, v in self.env.items()}
        for repo in self.repos:
            repo.path = self.local(repo.path) if repo.path else repo.path


def _as_str_list(value: Any) -> Optional[List[str]]:
    if not isinstance(value, list):
        return None
    return [v if isinstance(v, str) else str(v) for v in value]


def plan(rec: Mapping[str, Any], values: Mapping[str, str], env: Mapping[str, str]) -> Plan:
    """Decide the replay. ``values`` are ``--set`` pairs; raises :class:`Refusal` on a bad one."""
    home = env.get("HOME") or None
    p = Plan(run_id=str(rec.get("run_id", "")), home=home if home and os.path.isabs(home) else None)
    # Relax's names too (command.working_directory, config.environment) for a document the reader left
    # as it was; its <home> is our <HOME>, written "${HOME}" in the script and resolved by --confirm.
    home_ = fields.canonical_home
    argv = [home_(a) for a in _as_str_list(get(rec, "command.argv", None)) or []]
    cwd = scalar(fields.recorded(rec, "command.cwd", None))
    cwd = home_(cwd) if cwd else cwd
    selected = fields.recorded(rec, "config.selected_env", None)
    recorded_env = {str(k): home_(v if isinstance(v, str) else str(v)) for k, v in selected.items()
                    if v is not None} if isinstance(selected, dict) else {}
    exe = scalar(get(rec, "environment.python.executable", None))
    exe = home_(exe) if exe else exe
    p.interpreter_version = scalar(get(rec, "environment.python.version", None)) or scalar(
        get(rec, "environment.python_version", None))

    # --set: placeholders are substituted everywhere first, then exact slots are filled.
    substitutions = {home_(k): v for k, v in values.items() if k in fields.PLACEHOLDERS or "***" in k}

    def fill(text: str) -> str:
        for old, new in substitutions.items():
            text = text.replace(old, new)
        return text

    argv = [fill(a) for a in argv]
    cwd = fill(cwd) if cwd else cwd
    exe = fill(exe) if exe else exe
    recorded_env = {k: fill(v) for k, v in recorded_env.items()}
    for key, value in values.items():
        if home_(key) in substitutions:
            continue
        m = _ARGV_KEY.match(key)
        if m:
            index = int(m.group(1))
            if index >= len(argv):
                raise Refusal("--set %s: the recorded command has %d arguments" % (key, len(argv)))
            argv[index] = value
        elif key == "cwd":
            cwd = value
        elif _ENV_NAME.match(key):
            recorded_env[key] = value
        else:
            raise Refusal("--set %s: KEY is an env var name, argv[N], cwd, or a placeholder such as <HOME>"
                          % safe_text(key))

    def redacted(value: str) -> bool:
        # <HOME> is this machine's home when it has one: the script writes "${HOME}", confirm resolves it
        return any(part != "<HOME>" or not p.home for part in fields.redacted_parts(value))

    p.interpreter = exe
    p.argv = with_interpreter(argv, exe, lambda q: is_tool(p.local(q)))
    # "." is "wherever it ran" (Relax writes nothing else): the replay runs where it is started.
    p.cwd, p.cwd_here = (None, True) if cwd == "." else (cwd, False)
    for name in sorted(recorded_env):
        value = recorded_env[name]
        if not _ENV_NAME.match(name):
            p.skipped_env[name] = "not a shell variable name"
        elif name.startswith(_JOB_ENV_PREFIXES):
            # the old job's id, nodes and steps: exported into a replay (in a new job, or none) they would
            # point srun at a finished job and record the old job as the replay's
            p.skipped_env[name] = "set by SLURM for each job"
        elif redacted(value):
            p.skipped_env[name] = "redacted"
            p.redacted.append("env %s: %s" % (name, value))
        else:
            p.env[name] = value
    for i, a in enumerate(p.argv):
        if redacted(a):
            p.redacted.append("argv[%d]: %s" % (i, a))
    if cwd and redacted(cwd):
        p.redacted.append("cwd: %s" % cwd)

    code = section(rec, "code")
    for name, r in sorted(code.items(), key=lambda kv: str(kv[0])):
        r = r if isinstance(r, dict) else {}
        patch = r.get("patch") if isinstance(r.get("patch"), dict) else {}
        path = r.get("path") if isinstance(r.get("path"), str) and r.get("path") else None
        if path is None and cwd == "." and len(code) == 1:
            # Relax records its one checkout without a path, run from "." (where the replay runs too)
            path = "."
        p.repos.append(Repo(str(name), home_(path) if path else path, scalar(r.get("commit")), patch,
                            r.get("dirty")))
    return p


def is_tool(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def with_interpreter(argv: List[str], exe: Optional[str], is_tool: Callable[[str], bool] = is_tool) -> List[str]:
    """The recorded command run by the recorded interpreter, not whatever ``python`` is on PATH.

    ``python``/``python3.11``/``/usr/bin/python3`` become the recorded interpreter; a bare
    ``train.py`` gets it in front; a bare launcher (``torchrun``, ``deepspeed``) is taken from the
    interpreter's own bin directory when it is there (a venv's torchrun, not the system one).
    """
    if not argv or not exe:
        return list(argv)
    first = os.path.basename(argv[0])
    if _PYTHON_NAME.match(first):
        return [exe] + argv[1:]
    if argv[0].endswith(".py"):
        return [exe] + argv
    if "/" not in argv[0]:
        beside = os.path.join(os.path.dirname(exe), argv[0])
        if is_tool(beside):
            return [beside] + argv[1:]
    return list(argv)


def names_manifest(p: Plan, manifest_path: str) -> Optional[str]:
    """The first argument or env value naming the manifest (or its sidecars), which a rerun must not touch."""
    targets = {os.path.realpath(manifest_path)}
    directory = os.path.dirname(os.path.abspath(manifest_path))
    for repo in p.repos:
        sidecar = scalar(repo.patch.get("sidecar"))
        if sidecar and "/" not in sidecar:
            targets.add(os.path.realpath(os.path.join(directory, sidecar)))
    cwd = p.local(p.cwd) if p.cwd else None
    base = cwd if cwd and os.path.isdir(cwd) else os.getcwd()
    candidates = [("argv[%d]" % i, p.local(a)) for i, a in enumerate(p.argv)] + [
        ("env " + k, p.local(v)) for k, v in p.env.items()]
    for where, value in candidates:
        for part in {value, value.partition("=")[2]}:
            if part and os.path.realpath(os.path.join(base, part)) in targets:
                return "%s (%s)" % (where, part)
    return None


def nul_bytes(p: Plan) -> List[str]:
    """Where the plan holds a NUL byte (``argv[1]``, ``env NAME``, ``cwd``): no command line, environment or
    path can carry one (``exec`` refuses it; bash cuts a ``$'...\\x00'`` word short), so such a run is not
    replayed as recorded."""
    where = ["argv[%d]" % i for i, a in enumerate(p.argv) if "\0" in a]
    where += ["env %s" % name for name, value in sorted(p.env.items()) if "\0" in value]
    return where + (["cwd"] if p.cwd and "\0" in p.cwd else [])
