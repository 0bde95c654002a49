"""This machine, collected as a recorded run saw its own: aimed at the recorded repos, command, data and
interpreter, so ``check`` and ``rerun`` compare like with like."""

from __future__ import annotations

import os

from ..manifest import fields
from ..manifest.fields import get, scalar, section
from ..manifest.redact import redact_document
from ..std import proc
from . import gitfs, registry, runner
from .assemble import build
from .context import Context
from .probes.git import git_argv, git_env

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

    from ..manifest.redact import Redactor


def repo_paths(rec: Mapping[str, Any], overrides: Mapping[str, str], env: Mapping[str, str]
               ) -> Tuple[Dict[str, str], List[str]]:
    """Where each recorded repo is on this machine: ``--repo`` first, else its recorded path when it is
    here, else the repo holding the recorded working directory (Relax records ``"."``: where ``check``
    runs) when the recorded commit is in it."""
    home = env.get("HOME")
    out: Dict[str, str] = {}
    notes: List[str] = []
    repos = section(rec, "code")
    for name in overrides:
        if name not in repos:
            notes.append("--repo %s: the manifest records no repo of that name (it has: %s)"
                         % (name, ", ".join(sorted(map(str, repos))) or "none"))
    unplaced = []
    for name, r in repos.items():
        path = overrides.get(name) or fields.resolve_home(get(r, "path", None), home)
        if path:
            out[str(name)] = os.path.abspath(os.path.expanduser(path))
        if name not in overrides and not (path and os.path.isdir(path)):
            unplaced.append(name)  # not found, unless the working directory's repo holds its commit
    top = _cwd_repo(rec, home) if unplaced else None
    if top is not None and top not in [p for n, p in out.items() if n not in unplaced]:
        for name in sorted(unplaced, key=str):
            commit = scalar(get(repos[name], "commit", None))
            if commit and _has_commit(top, commit, env):
                out[str(name)] = top
                break
    return out, notes


def _cwd_repo(rec: Mapping[str, Any], home: Optional[str]) -> Optional[str]:
    """The top of the git repo holding the recorded working directory here (a relative one, Relax's
    ``"."``, is relative to where we run), or None."""
    cwd = fields.resolve_home(get(rec, "command.cwd", None), home)
    if not cwd:
        return None
    try:
        return gitfs.find_toplevel(os.path.abspath(os.path.expanduser(cwd)))
    except (OSError, ValueError):
        return None


def _has_commit(top: str, commit: str, env: Mapping[str, str]) -> bool:
    """Whether the repo at ``top`` holds ``commit``: its HEAD (read from the files), else ``git cat-file``."""
    gd = gitfs.locate(top)
    if gd is not None and gitfs.read_head(gd).commit == commit:
        return True
    if not gitfs.is_sha(commit):  # never an option or a revision expression on git's command line
        return False
    res = proc.run(git_argv(top, "cat-file", "-e", commit + "^{commit}"), timeout=5.0, env=git_env(dict(env)))
    return res.ok


def closest_interpreter(recorded: str, version: Optional[str], env: Mapping[str, str]) -> Optional[str]:
    """The nearest stand-in for a vanished interpreter: itself under this home (a recorded ``<HOME>``),
    then the same name on PATH, then pythonX.Y, pythonX, python."""
    import shutil  # lazy: ~3 ms (fnmatch, bz2, lzma), only for the stand-in rerun asks for

    here = fields.expand_home(recorded, env.get("HOME"))
    if here != recorded and os.path.isfile(here) and os.access(here, os.X_OK):
        return here

    path = env.get("PATH", os.defpath)
    names = [os.path.basename(recorded)]
    mm = fields.major_minor(version)
    if mm:
        names.append("python" + mm)
        names.append("python" + mm.split(".")[0])
    names += ["python3", "python"]
    for name in names:
        if name:
            found = shutil.which(name, path=path)
            if found:
                return found
    return None


def is_interpreter(path: str) -> bool:
    """Whether ``path`` can be run as the interpreter to judge (``--python``): an executable file."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _interpreter(rec: Mapping[str, Any], env: Mapping[str, str], python: Optional[str],
                 options: Dict[str, Any]) -> Dict[str, Any]:
    """Aim ``options`` at the interpreter to judge: ``python`` when given, else the recorded one when it is
    here (else the collection finds one from the recorded command, as generate would); the hints for check."""
    if python:
        options["python"] = python
        return {}
    hints: Dict[str, Any] = {}
    exe = fields.resolve_home(get(rec, "environment.python.executable", None), env.get("HOME"))
    if exe:
        exists = is_interpreter(exe)
        hints["interpreter"] = {"exists": exists}
        if exists:
            options["python"] = exe  # judge the training interpreter, not the one running check
        else:
            hints["interpreter"]["closest"] = closest_interpreter(exe, scalar(fields.python_version(rec)), env)
    return hints


def _recorded_argv(rec: Mapping[str, Any], home: Optional[str]) -> List[str]:
    argv = get(rec, "command.argv", None)
    return [fields.expand_home(a, home) for a in argv if isinstance(a, str)] if isinstance(argv, list) else []


def collect_environment(rec: Mapping[str, Any], *, env: Mapping[str, str], python: Optional[str] = None
                        ) -> Dict[str, Any]:
    """Only the python and packages probes, aimed at the interpreter :func:`collect_here` would judge (or
    ``python``): the document ``env --check`` compares with the recorded packages."""
    home = env.get("HOME")
    argv = _recorded_argv(rec, home)
    options: Dict[str, Any] = {}
    _interpreter(rec, env, python, options)
    cwd = _choose_cwd(fields.resolve_home(get(rec, "command.cwd", None), home), {})
    ctx = Context(env=env, cwd=cwd, argv=argv, argv_source="cli" if argv else "none", options=options)
    probes = [p for p in registry.PROBES if p.name in ("python", "packages")]
    return dict(build(ctx, probes=probes, derivers=()))


def collect_here(rec: Mapping[str, Any], *, repos: Mapping[str, str], env: Mapping[str, str],
                 python: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, Any], List[str]]:
    """Run the registered probes once, aimed at the recorded repos, command and interpreter (``python``:
    this interpreter instead).

    Returns (this machine's document with repos keyed by the recorded names, hints, notes).
    """
    home = env.get("HOME")
    paths, notes = repo_paths(rec, repos, env)
    argv = _recorded_argv(rec, home)
    cwd = _choose_cwd(fields.resolve_home(get(rec, "command.cwd", None), home), paths)
    options: Dict[str, Any] = {"repos": dict(paths)}
    inputs = get(rec, "data.inputs", None)
    data = [fields.resolve_home(e.get("path"), home) for e in inputs if isinstance(e, dict)] \
        if isinstance(inputs, list) else []
    if any(data):
        options["data"] = [d for d in data if d]  # fingerprint the same inputs here (as generate --data does)
    hints = _interpreter(rec, env, python, options)
    ctx = Context(env=env, cwd=cwd, argv=argv, argv_source="cli" if argv else "none", options=options)
    here = dict(build(ctx))
    found = section(here, "code")
    mapped: Dict[str, Any] = {}
    git_probes = [p for p in registry.PROBES if p.name in ("git", "code")]
    for name, path in paths.items():
        entry = match_repo(name, path, found, home)
        if entry is None and os.path.isdir(path) and git_probes:
            # Not reached by the main collection (another repo held the cwd): the same git probe, aimed here.
            sub = Context(env=env, cwd=path, argv=argv, options={"repos": {name: path}}, redactor=ctx.redactor)
            sections, _ = runner.run_probes(git_probes, sub)
            redacted = redact_document(sections, ctx.redactor)  # the one policy of this collection
            entry = match_repo(name, path, section(redacted, "code"), home)
        if entry is not None:
            mapped[name] = entry
    here["code"] = mapped
    _select_recorded_env(rec, here, env, ctx.redactor)
    return here, hints, notes


def _select_recorded_env(rec: Mapping[str, Any], here: Dict[str, Any], env: Mapping[str, str],
                        redactor: Redactor) -> None:
    """Add to this machine's ``config.selected_env`` every variable the run recorded that our allow-list does
    not pick (Relax records ``PYTHONPATH``, ``TOKENIZERS_PARALLELISM``...), redacted by the same policy: a
    recorded variable is compared with its value here, never reported "unset" because we did not look."""
    recorded = get(rec, "config.selected_env", None)
    config = here.get("config")
    if not isinstance(recorded, dict) or not isinstance(config, dict):
        return
    selected = dict(config.get("selected_env") or {})
    for name in recorded:
        if isinstance(name, str) and name not in selected and name in env:
            selected[name] = redactor.text(env[name], key=name)
    here["config"] = dict(config, selected_env=selected)


def _choose_cwd(recorded_cwd: Optional[str], paths: Mapping[str, str]) -> str:
    """Where the run started, when it exists here (relative config paths resolve as they did);
    else the first recorded repo; else where we are. Repos outside it are probed on their own."""
    if recorded_cwd and os.path.isdir(recorded_cwd):
        return recorded_cwd
    for p in paths.values():
        if os.path.isdir(p):
            return p
    return os.getcwd() if os.path.isdir(os.curdir) else "/"


def match_repo(name: str, path: str, found: Mapping[str, Any], home: Optional[str]) -> Optional[Dict[str, Any]]:
    """The collected entry for the repo at ``path``: by its real path, whatever the probe named it."""
    real = os.path.realpath(path)
    candidates = [found.get(name)] + [found[k] for k in sorted(found, key=str) if k != name]
    for entry in candidates:
        if not isinstance(entry, dict):
            continue
        where = fields.resolve_home(entry.get("path"), home)
        if where and os.path.realpath(where) == real:
            return entry
    # Redaction turns any /home/<user> into <HOME>, not only ours (root checking alice's repo):
    # the entry of the same name whose path ends the same way is the one.
    entry = found.get(name)
    where = entry.get("path") if isinstance(entry, dict) else None
    if isinstance(where, str) and where.startswith("<HOME>/") and real.endswith(where[len("<HOME>"):]):
        return entry
    return None
