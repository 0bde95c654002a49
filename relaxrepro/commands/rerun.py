"""``relaxrepro rerun MANIFEST (--dry-run | --confirm)``: replay a recorded run.

Nothing from the file runs unless the user confirms. ``--dry-run`` prints a POSIX sh script to
review, every recorded value quoted with :func:`shlex.quote` (``$(...)``, backticks, quotes and
newlines stay literal arguments), and ``<HOME>`` as ``"${HOME}"``; a value holding a control or
line-breaking character is written as a bash ``$'...'`` word instead, which shows it (``\\e``, ``\\n``),
and the script is then for bash. ``--confirm`` resolves ``<HOME>`` to this machine's home, runs ``check``
first, refuses on FAIL, on redacted values nobody supplied, on a missing command or interpreter, and on a
command that names the manifest being replayed; then runs the command and exits with its status. It never
installs anything and never touches git state: a recorded patch is pointed at, not applied.
"""

from __future__ import annotations

import os
import re
import sys

from ..analyze import verify
from ..analyze.check import FAIL, judge
from ..collect.here import closest_interpreter, collect_here
from ..manifest import fields
from ..manifest.fields import get, scalar, section
from ..record import replay
from ..std import proc
from ..std.records import Factory, Record
from ..std.text import safe_lines, safe_text, shell_quote
from ._common import Exit, pairs, read_with_notes, say, verify_exit

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARGV_KEY = re.compile(r"^argv\[(\d+)\]$")
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")


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

    def local(self, value: str) -> str:
        """A recorded value as it reads on this machine: ``<HOME>`` resolved to :attr:`home`."""
        return fields.expand_home(value, self.home)


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
    p.argv = with_interpreter(argv, exe, lambda q: _is_tool(p.local(q)))
    # "." is "wherever it ran" (Relax writes nothing else): the replay runs where it is started.
    p.cwd, p.cwd_here = (None, True) if cwd == "." else (cwd, False)
    for name in sorted(recorded_env):
        value = recorded_env[name]
        if not _ENV_NAME.match(name):
            p.skipped_env[name] = "not a shell variable name"
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


def _is_tool(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def with_interpreter(argv: List[str], exe: Optional[str], is_tool: Callable[[str], bool] = _is_tool) -> List[str]:
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


# -- the dry-run script ------------------------------------------------------------------------

def _q(value: str) -> str:
    """One shell word: quoted (``$'...'`` when it holds controls), each ``<HOME>`` as ``"${HOME}"``."""
    parts = value.split("<HOME>")
    return '"${HOME}"'.join(shell_quote(part) if part else "" for part in parts) or "''"


# The head of a script in which a value needed $'...' (in place of #!/bin/sh): dash would read $'\e' as
# "$" and "\e" and run something other than what was recorded, so a plain sh stops at once instead.
_BASH_ONLY = """#!/usr/bin/env bash
# Some recorded values hold control characters or line breaks: they are written as bash $'...' words
# whose escapes (\\e, \\n, \\xHH) show them. Run this script with bash.
if [ -z "${BASH_VERSION:-}" ]; then echo 'relaxrepro: run this replay script with bash' >&2; exit 1; fi
"""


def _comment(value: Any) -> str:
    # one comment line can never end early: newlines and control characters are escaped
    return safe_text(value, 400)


def script(p: Plan, manifest_path: str, env: Mapping[str, str]) -> str:
    """A POSIX sh script that verifies the code, exports the env and runs the command."""
    out: List[str] = [
        "#!/bin/sh",
        "# Replay of run %s, written by: relaxrepro rerun --dry-run %s" % (_comment(p.run_id),
                                                                         _comment(manifest_path)),
        "# Review it before running. It installs nothing and changes no git state.",
        "set -eu",
        "",
    ]
    if p.redacted:
        out.append("# These recorded values were redacted and cannot be replayed as they stand;")
        out.append("# supply them with rerun --set KEY=VALUE (or edit them below), then delete the exit line:")
        out.extend("#   %s" % _comment(r) for r in p.redacted)
        out.append("echo 'relaxrepro: the command holds redacted values; see the comments at the top' >&2")
        out.append("exit 1")
        out.append("")
    nul = nul_bytes(p)
    if nul:
        out.append("# These recorded values hold a NUL byte, which no command line or environment can carry,")
        out.append("# so they are not written below: %s" % _comment(", ".join(nul)))
        out.append("echo 'relaxrepro: the command holds NUL bytes; see the comments at the top' >&2")
        out.append("exit 1")
        out.append("")
    out.append("# -- code: every recorded repository must be at its recorded commit")
    for repo in p.repos:
        out.extend(_repo_lines(repo, manifest_path))
    if not p.repos:
        out.append("# (no repository recorded)")
    out.append("")
    if p.interpreter and p.argv and p.argv[0] == p.interpreter:
        closest = _closest(p, env)
        gone = "relaxrepro: the recorded interpreter %s is gone" % safe_text(p.interpreter)
        if closest:
            gone += " (closest match here: %s)" % safe_text(closest)
        out.append("# -- the training interpreter recorded in the manifest (Python %s)" % _comment(
            p.interpreter_version or "?"))
        out.append("if [ ! -x %s ]; then" % _q(p.interpreter))
        out.append("  echo %s >&2" % _q(gone))
        out.append("  exit 1")
        out.append("fi")
        out.append("")
    out.append("# -- environment: the recorded selected variables (redacted ones are not exported)")
    for name, value in sorted(p.env.items()):
        out.append("# not exported (a NUL byte): %s" % name if "\0" in value else "export %s=%s" % (name, _q(value)))
    for name, why in sorted(p.skipped_env.items()):
        out.append("# not exported (%s): %s" % (why, _comment(name)))
    if not p.env and not p.skipped_env:
        out.append("# (no environment recorded)")
    out.append("")
    if p.cwd and "\0" in p.cwd:
        out.append("# (the working directory holds a NUL byte: not written)")
    elif p.cwd:
        out.append("cd %s" % _q(p.cwd))
    elif p.cwd_here:
        out.append('# (working directory recorded as ".": runs where this script is started)')
    else:
        out.append("# (no working directory recorded: runs where this script is started)")
    if p.argv and any("\0" in a for a in p.argv):
        out.append("# (the command holds a NUL byte: not written)")
    elif p.argv:
        out.append("exec " + " ".join(_q(a) for a in p.argv))
    else:
        out.append("echo 'relaxrepro: the manifest records no command' >&2")
        out.append("exit 1")
    text = "\n".join(out) + "\n"
    if "$'" in text:  # also for a value that merely spells $' (shlex-quoted): bash reads both alike
        text = _BASH_ONLY + text[len("#!/bin/sh\n"):]
    return text


def _repo_lines(repo: Repo, manifest_path: str) -> List[str]:
    lines = ["# repo %s" % _comment(repo.name)]
    if not repo.path or not repo.commit:
        lines.append("# (path or commit not recorded: cannot be verified)")
        return lines
    if repo.path == ".":
        lines.append('# (the run\'s repository, recorded in its working directory "."; checked where this runs)')
    fail = "relaxrepro: repo %s at %s is not at commit %s" % (safe_text(repo.name), safe_text(repo.path),
                                                                safe_text(repo.commit))
    lines += [
        "relaxrepro_head=$(git -C %s rev-parse HEAD 2>/dev/null) || relaxrepro_head=" % _q(repo.path),
        'if [ "$relaxrepro_head" != %s ]; then' % _q(repo.commit),
        "  echo %s >&2" % _q(fail),
        "  exit 1",
        "fi",
    ]
    digest = fields.patch_digest(repo.patch)
    incomplete = fields.patch_incomplete(repo.patch)
    if digest or incomplete or repo.dirty is True:
        files = repo.patch.get("files")
        names = ", ".join(str(f.get("path") if isinstance(f, dict) else f) for f in files) if isinstance(
            files, list) else ""
        lines.append("# The run had uncommitted changes%s%s." % (
            " (patch sha256 %s)" % _comment(digest) if digest else
            " (the patch is incomplete: %s)" % _comment(incomplete) if incomplete else " (no patch was recorded)",
            ": " + _comment(names) if names else ""))
        sidecar = scalar(repo.patch.get("sidecar"))
        where = None
        if sidecar:
            where = os.path.join(os.path.dirname(os.path.abspath(manifest_path)), sidecar)
            lines.append("# The patch is the sidecar file %s" % _comment(where))
        elif isinstance(repo.patch.get("text"), str):
            lines.append("# The patch is inline in the manifest (code.%s.patch.text)." % _comment(repo.name))
        if digest:
            lines.append("# Apply it on a clean checkout of the commit with:")
            lines.append("#   git -C %s apply --binary %s" % (_comment(_q(repo.path)),
                                                             _comment(_q(where)) if where else "PATCHFILE"))
            lines.append("# or rebuild the whole source tree elsewhere with:")
            lines.append("#   relaxrepro restore %s --into NEW_DIR" % _comment(_q(manifest_path)))
            lines.append("# (relaxrepro check says whether the changes here match the recorded patch.)")
    return lines


def _closest(p: Plan, env: Mapping[str, str]) -> Optional[str]:
    if not p.interpreter or os.path.exists(p.local(p.interpreter)):
        return None
    return closest_interpreter(p.local(p.interpreter), p.interpreter_version, env)


# -- the command -------------------------------------------------------------------------------

def confirm(rec: Mapping[str, Any], manifest_path: str, p: Plan, *, repos: Mapping[str, str],
            env: Mapping[str, str]) -> Tuple[List[str], Dict[str, str], Optional[str]]:
    """Every refusal, in the order a user fixes them; returns (argv, env, cwd) to run."""
    if not p.argv:
        raise Refusal("the manifest records no command (command.argv is empty): nothing to rerun")
    if nul_bytes(p):
        raise Refusal("the recorded %s hold a NUL byte, which no command line or environment can carry"
                      % ", ".join(nul_bytes(p)))
    if p.redacted:
        raise Refusal("the command or its env hold redacted values; supply them with --set KEY=VALUE "
                      "(KEY: an env var, argv[N], cwd, or a placeholder such as <HOME>):\n"
                      + "\n".join("  " + safe_text(r, 200) for r in p.redacted))
    argv, cwd = [p.local(a) for a in p.argv], p.local(p.cwd) if p.cwd else None
    if p.interpreter and p.argv[0] == p.interpreter and not _is_tool(argv[0]):
        closest = _closest(p, env)
        raise Refusal("the recorded interpreter %s is gone%s" % (
            safe_text(argv[0]), "; closest match here: %s" % safe_text(closest) if closest
            else "; no Python of that version on PATH"))
    if cwd and not os.path.isdir(cwd):
        raise Refusal("the recorded working directory %s does not exist here (--set cwd=DIR)" % safe_text(cwd))
    clash = names_manifest(p, manifest_path)
    if clash:
        raise Refusal("the recorded command names the manifest being replayed in %s; refusing so that it "
                      "cannot be overwritten" % safe_text(clash))
    report = judge(rec, *collect_here(rec, repos=repos, env=env))
    fails = [i for i in report.items if i.verdict == FAIL]
    if fails:
        raise Refusal("check found differences that make this run irreproducible here:\n" + "\n".join(
            "  %s: recorded %s, here %s%s" % (safe_text(i.item), safe_text(i.recorded), safe_text(i.here),
                                              " (%s)" % safe_text(i.note) if i.note else "") for i in fails))
    run_env = dict(env)
    run_env.update((k, p.local(v)) for k, v in p.env.items())
    return argv, run_env, cwd


def run_cli(path: str, *, dry_run: bool, values: Mapping[str, str], repos: Mapping[str, str],
            env: Optional[Mapping[str, str]] = None) -> int:
    """The subcommand. Dry run: print the script (0). Confirm: the command's exit status, 2 when refused."""
    env = dict(os.environ if env is None else env)
    rec = read_with_notes("rerun", path)
    if rec is None:
        return Exit.USAGE
    try:
        p = plan(rec, values, env)
        if dry_run:
            sys.stdout.write(script(p, path, env))
            return Exit.OK
        argv, run_env, cwd = confirm(rec, path, p, repos=repos, env=env)
    except Refusal as exc:
        sys.stderr.write("relaxrepro rerun: refused: %s\n" % safe_lines(str(exc)))  # its values are escaped
        return Exit.REFUSED
    sys.stderr.write("relaxrepro rerun: running %s\n" % safe_text(" ".join(shell_quote(a) for a in argv), 400))
    sys.stderr.flush()
    sys.stdout.flush()
    result = proc.run_foreground(argv, env=run_env, cwd=cwd)
    if result.error:
        say("relaxrepro rerun: could not start %s: %s", argv[0], result.error)
    return proc.exit_status(result)


def run_replay(path: str, *, quick: Optional[int], output_dir: Optional[str], values: Mapping[str, str],
               repos: Mapping[str, str], rtol: float = 0.0, atol: float = 0.0,
               env: Optional[Mapping[str, str]] = None) -> int:
    """``--confirm --quick N`` (``quick``) or ``--full`` (``quick`` None): refused, checked and run as
    ``--confirm`` is, recorded by :mod:`relaxrepro.record.replay` and verified; the verdict's exit status."""
    env = dict(os.environ if env is None else env)
    rec = read_with_notes("rerun", path)
    if rec is None:
        return Exit.REFUSED
    target = replay.replay_dir(path, output_dir)
    why = replay.refusal(rec, path, quick, target)
    if why:
        say("relaxrepro rerun: %s", why)
        return Exit.REFUSED
    try:
        p = plan(rec, values, env)
        try:
            moved, changes = replay.place(rec, p, path, target)
        except ValueError as exc:
            raise Refusal(str(exc)) from None
        argv, run_env, cwd = confirm(rec, path, p, repos=repos, env=env)
    except Refusal as exc:
        sys.stderr.write("relaxrepro rerun: refused: %s\n" % safe_lines(str(exc)))  # its values are escaped
        return Exit.REFUSED
    cwd = cwd or os.getcwd()
    replayed = replay.record_replay(
        rec, path, argv, run_env, cwd, quick, target, changes, moved, interpreter=p.interpreter,
        recorded=replay.as_typed(get(rec, "command.argv", None), [p.local(a) for a in p.argv], p.interpreter))
    if replayed is None:
        return Exit.REFUSED
    status, new = replayed
    old = replay.comparable(rec, cwd, p.home, target, moved)
    verdict = verify.verify(old, replay.comparable(new, cwd, p.home, target), rtol=rtol, atol=atol, steps=quick)
    sys.stdout.write(verify.render(verdict))
    recorded_status = get(rec, "outcome.exit_code", None)
    if status != 0 and status != recorded_status:
        say("relaxrepro rerun: the replay exited with status %d, the original with %s", status,
            "status %s" % recorded_status if isinstance(recorded_status, int) else "no recorded status")
        return Exit.FAIL
    return verify_exit(verdict)


def run(args: argparse.Namespace) -> int:
    if args.quick or args.full:
        if args.dry_run:
            say("relaxrepro rerun: error: --quick and --full replay with --confirm, not --dry-run")
            return Exit.USAGE
        return run_replay(args.manifest, quick=args.quick, output_dir=args.output_dir,
                          values=pairs(args.set_values, "--set"), repos=pairs(args.repo, "--repo"),
                          rtol=args.rtol, atol=args.atol)
    if args.output_dir is not None or args.rtol or args.atol:
        say("relaxrepro rerun: error: --output-dir, --rtol and --atol go with --quick N or --full")
        return Exit.USAGE
    return run_cli(args.manifest, dry_run=args.dry_run, values=pairs(args.set_values, "--set"),
                   repos=pairs(args.repo, "--repo"))
