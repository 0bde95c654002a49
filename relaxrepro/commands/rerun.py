"""``relaxrepro rerun MANIFEST (--dry-run | --confirm)``: replay a recorded run.

Nothing from the file runs unless the user confirms. ``--dry-run`` prints a POSIX sh script to
review, every recorded value quoted with :func:`shlex.quote` (``$(...)``, backticks, quotes and
newlines stay literal arguments), and ``<HOME>`` as ``"${HOME}"``; a value holding a control or
line-breaking character is written as a bash ``$'...'`` word instead, which shows it (``\\e``, ``\\n``),
and the script is then for bash. ``--confirm`` resolves ``<HOME>`` to this machine's home, runs ``check``
first, refuses on FAIL, on redacted values nobody supplied, on a missing command or interpreter, and on a
command that names the manifest being replayed; then runs the command in a directory of its own
(:mod:`relaxrepro.record.replay`; ``--in-place``: the original's), records it the way the run was recorded,
checks that the original's files are as they were (:mod:`relaxrepro.record.guard`) and verifies. It never
installs anything and never touches the user's git state: a recorded patch is pointed at, or applied to a
restored workspace of the replay's own (``--workspace``, :mod:`relaxrepro.record.workspace`).
"""

from __future__ import annotations

import os
import sys

from ..analyze import sbatch, verify
from ..analyze.check import FAIL, judge
from ..collect.context import which_on_path
from ..collect.here import closest_interpreter, collect_here
from ..manifest import fields
from ..manifest.fields import get, scalar, section
from ..record import adopt, container_wrap, guard, replay, workspace
from ..record.restore import RestoreError
from ..std import proc
from ..std.records import Factory, Record
from ..std.text import safe_lines, safe_text, shell_quote
from ._common import Exit, pairs, print_json, say, verify_exit
from ._plan import Plan, Refusal, Repo, is_tool, names_manifest, nul_bytes, plan
from ._runs import read_with_notes, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Mapping, Optional, Tuple



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
        if p.wrap:
            out.append("# -- inside the recorded container image, pinned by its digest (--container)")
        out.append("exec " + " ".join(_q(a) for a in p.wrap + p.argv))
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

def container_prefix(rec: Mapping[str, Any], p: Plan, env: Mapping[str, str], workspace_dir: str, *,
                     binds: Tuple[str, ...] = (), env_names: Tuple[str, ...] = (), command: List[str],
                     here: bool = True) -> List[str]:
    """``--container``: the wrapper of :mod:`relaxrepro.record.container_wrap` for the recorded image, its
    SIF path as it reads here; refused when the record does not pin it or (``here``) this machine cannot have
    it. ``here=False``: a batch job's node runs it, and judges that when it does."""
    c = get(rec, "container", None)
    if not isinstance(c, dict) or not c:
        raise Refusal("--container: the manifest records no container; replay without --container")
    c = dict(c)
    image = c.get("image")
    if isinstance(image, dict) and isinstance(image.get("path"), str):
        c["image"] = dict(image, path=p.local(image["path"]))
    try:
        argv = container_wrap.wrapper(c, workspace_dir, binds=binds, env_names=env_names, gpus=_gpu_vendor(rec),
                                      command=command)
    except container_wrap.WrapError as exc:
        raise Refusal("--container: %s" % exc) from None
    why = container_wrap.unavailable(c, argv, env, command) if here else None
    if why:
        raise Refusal("--container: %s" % why)
    return argv


def _gpu_vendor(rec: Mapping[str, Any]) -> Optional[str]:
    """The vendor of the GPUs the run used (None: it used none): ``hardware.gpu_vendor``, else NVIDIA when the
    recorded model says so (Relax records no vendor)."""
    count = get(rec, "hardware.gpu_count", None)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None
    vendor = scalar(get(rec, "hardware.gpu_vendor", None))
    model = scalar(get(rec, "hardware.gpu_model", None)) or ""
    return vendor or ("nvidia" if model.upper().startswith("NVIDIA") else None)


_IN_THE_IMAGE = ("python", "package", "packages", "container", "cuda", "nccl", "cudnn")
"""The rows of check that describe the recorded image, not this host (its GPUs, driver and architecture still
count): with --container they do not refuse."""


def confirm(rec: Mapping[str, Any], manifest_path: str, p: Plan, *, repos: Mapping[str, str],
            env: Mapping[str, str], in_container: bool = False) -> Tuple[List[str], Dict[str, str], Optional[str]]:
    """Every refusal, in the order a user fixes them; returns (argv, env, cwd) to run. ``in_container``:
    the command runs in the recorded image, whose interpreter and packages this host need not have."""
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
    if p.interpreter and p.argv[0] == p.interpreter and not is_tool(argv[0]) and not in_container:
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
    fails = [i for i in report.items if i.verdict == FAIL
             and not (in_container and i.item.split(" ")[0] in _IN_THE_IMAGE)]
    if fails:
        raise Refusal("check found differences that make this run irreproducible here:\n" + "\n".join(
            "  %s: recorded %s, here %s%s" % (safe_text(i.item), safe_text(i.recorded), safe_text(i.here),
                                              " (%s)" % safe_text(i.note) if i.note else "") for i in fails))
    run_env = dict(env)
    run_env.update((k, p.local(v)) for k, v in p.env.items())
    return argv, run_env, cwd


def run_cli(path: str, *, values: Mapping[str, str], env: Optional[Mapping[str, str]] = None,
            as_json: bool = False, container: bool = False) -> int:
    """``--dry-run``: print the script (``as_json``: in a JSON object) (0), 2 when refused."""
    env = dict(os.environ if env is None else env)
    rec = read_with_notes("rerun", path)
    if rec is None:
        return Exit.USAGE
    try:
        p = plan(rec, values, env)
        if container:
            p.wrap = container_prefix(rec, p, env, p.local(p.cwd) if p.cwd else os.getcwd(),
                                      command=[p.local(a) for a in p.argv])
        text = script(p, path, env)
        if as_json:
            print_json({"manifest": path, "run_id": rec.get("run_id"), "script": text})
        else:
            sys.stdout.write(text)
    except Refusal as exc:
        sys.stderr.write("relaxrepro rerun: refused: %s\n" % safe_lines(str(exc)))  # its values are escaped
        return Exit.REFUSED
    return Exit.OK


def _relaxrepro() -> List[str]:
    """The argv that runs this relaxrepro: ``python PYZ`` from a zipapp (its ``__main__`` is inside the file; the
    package itself may be imported from an unpacked copy), else ``python -m relaxrepro`` (the job inherits the
    submitting shell's environment, and with it whatever made the package importable here)."""
    main = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    pyz = os.path.dirname(os.path.abspath(main)) if main else ""
    return [sys.executable, pyz] if pyz and os.path.isfile(pyz) else [sys.executable, "-m", "relaxrepro"]


def run_sbatch(path: str, *, nodes: Optional[int], submit: bool, replay_options: List[str], as_json: bool = False,
               env: Optional[Mapping[str, str]] = None, container: bool = False) -> int:
    """``--sbatch``: print the SLURM batch script replaying the run (:mod:`relaxrepro.analyze.sbatch`);
    ``submit``: hand it to ``sbatch`` and print the job id. 2 when refused, 1 when sbatch rejected it."""
    env = dict(os.environ if env is None else env)
    rec = read_with_notes("rerun", path)
    if rec is None:
        return Exit.REFUSED
    quick = int(replay_options[1]) if replay_options[:1] == ["--quick"] else None
    patterns = replay.recording(rec).get("redact_patterns")
    patterns = patterns if isinstance(patterns, int) and patterns > 0 else 0
    # the job reads the run's --redact-pattern values from its environment: only --quick/--full can refuse here
    why = replay.refusal(rec, path, quick, "", full="--full" in replay_options, in_place=True,
                         redact_patterns=patterns)
    p = plan(rec, {}, env)
    if not why and not p.argv:
        why = "the manifest records no command (command.argv is empty): nothing to rerun"
    if not why and get(rec, "scheduler.type", None) != "slurm" and nodes is None:
        why = "%s was not recorded in a SLURM job (no scheduler.type slurm): give --nodes N" % safe_text(path)
    if not why:
        p.for_execution()
        try:  # what the job's rerun --confirm would refuse for the files alone, said before it queues
            replay.place(rec, p, path, os.path.dirname(os.path.abspath(path)) + ".replay-job")
        except ValueError as exc:
            why = str(exc)
    wrap = None
    if not why and container:
        try:  # the record must pin the image; whether the node can run it, the job's rerun --container says
            wrap = container_prefix(rec, p, env, p.cwd or os.getcwd(), command=p.argv, here=False)
        except Refusal as exc:
            why = str(exc)
    fill = sbatch.fill_keys(p.redacted)
    missing = sbatch.needs(fill, patterns, env) if submit else []
    sbatch_exe = which_on_path("sbatch", env.get("PATH", "")) if submit else None
    if not why and missing:
        why = ("the job reads values the manifest redacted from its environment, and %s %s not set here: export "
               "%s, or write the script without --submit and fill it in" % (
                   ", ".join(missing), "is" if len(missing) == 1 else "are", "it" if len(missing) == 1 else "them"))
    if not why and submit and not sbatch_exe:
        why = "--submit: sbatch is not on PATH (submit from a SLURM login node, or write the script without --submit)"
    if why:
        say("relaxrepro rerun: refused: %s", why)
        return Exit.REFUSED
    text = sbatch.script(rec, os.path.abspath(path), relaxrepro=_relaxrepro(), fill=fill, redact_patterns=patterns,
                         replay=replay_options, nodes=nodes, container=wrap)
    job_id = None
    if submit:
        result = proc.run([sbatch_exe or "sbatch", "--parsable"], timeout=60, env=env,
                          stdin_data=text.encode())
        job_id = sbatch.parse_job_id(result.stdout or "") if result.rc == 0 else None
        if job_id is None:
            say("relaxrepro rerun: sbatch did not take the script: %s", safe_text(
                (result.error or (result.stderr or "").strip() or (result.stdout or "").strip() or
                 "exit status %s" % result.rc).splitlines()[-1], 300))
            return Exit.FAIL
    if as_json:
        print_json({"manifest": path, "run_id": rec.get("run_id"), "script": text, "job_id": job_id})
    elif job_id is not None:
        sys.stdout.write(job_id + "\n")
        say("relaxrepro rerun: submitted batch job %s replaying run %s", job_id, rec.get("run_id"))
    else:
        sys.stdout.write(text)
    return Exit.OK


class Replay(Record):
    """How ``--confirm`` replays: ``quick`` steps, ``full``, or as recorded (neither); where, and from what."""

    quick: Optional[int] = None
    full: bool = False
    output_dir: Optional[str] = None
    in_place: bool = False
    workspace: Optional[str] = None
    """None: run in the recorded working directory; "": a workspace beside the replay's directory; else there."""
    keep: bool = False
    sources: Dict[str, str] = Factory(dict)
    redact_patterns: List[str] = Factory(list)
    rtol: float = 0.0
    atol: float = 0.0
    as_json: bool = False
    """Say the outcome as one JSON object on stdout, after what the command itself printed there."""
    container: bool = False
    """Run the command inside the recorded image (:func:`container_prefix`)."""


def run_replay(path: str, how: Replay, *, values: Mapping[str, str], repos: Mapping[str, str],
               env: Optional[Mapping[str, str]] = None) -> int:
    """``--confirm`` (``--quick N``, ``--full``): refused and checked first, run in a new directory of its own
    (``--in-place``: the original's), recorded the way the run was (:mod:`relaxrepro.record.replay`) and
    verified. The exit status: the verdict's (``--confirm`` alone: the command's, then the verdict's when the
    original recorded results); 1 when the replay changed the original's files."""
    env = dict(os.environ if env is None else env)
    rec = read_with_notes("rerun", path)
    if rec is None:
        return Exit.REFUSED
    flag = replay.label(how.quick, how.full)
    target = os.path.dirname(os.path.abspath(path)) if how.in_place else replay.replay_dir(path, how.output_dir)
    why = replay.refusal(rec, path, how.quick, target, full=how.full, in_place=how.in_place,
                         redact_patterns=len(how.redact_patterns))
    if why:
        say("relaxrepro rerun: %s", why)
        return Exit.REFUSED
    made: Optional[str] = None
    try:
        p = plan(rec, values, env)
        p.for_execution()
        cwd = p.cwd or os.getcwd()
        trees: Dict[str, str] = {}
        if how.workspace is not None:
            into = os.path.abspath(how.workspace or workspace.default_dir(target))
            trees = _restore(rec, path, into, p, cwd, how, env)
            made, p.cwd = into, cwd  # ours from here on: removed when refused
        run_cwd = workspace.inside(cwd, trees) or cwd if trees else cwd
        try:
            moved, changes = replay.place(rec, p, path, target, run_cwd, in_place=how.in_place)
        except ValueError as exc:
            raise Refusal(str(exc)) from None
        if trees:
            changes += workspace.relocate(p, trees, [c[0] for c in changes])
            repos = dict(repos, **{str(n): os.path.join(made or "", str(n)) for n in section(rec, "code")})
        argv, run_env, _ = confirm(rec, path, p, repos=repos, env=env, in_container=how.container)
        if how.container:
            names = _PASSED_ON + tuple(sorted(p.env))
            argv = container_prefix(rec, p, env, run_cwd, binds=(target,), env_names=names, command=argv) + argv
    except Refusal as exc:
        if made:
            workspace.remove(made)
        sys.stderr.write("relaxrepro rerun: refused: %s\n" % safe_lines(str(exc)))  # its values are escaped
        return Exit.REFUSED
    run_dir = replay.run_directory(path, cwd)
    before = guard.snapshot(rec, path, moved, run_dir, env=env)
    opts = replay.options(rec, path, target, flag, cwd=cwd, run_cwd=run_cwd, home=p.home, moved=moved,
                          interpreter=p.interpreter, redact_patterns=how.redact_patterns, repos=trees)
    done = replay.execute(rec, argv, run_env, run_cwd, how.quick, target, changes, opts, moved=moved, flag=flag,
                          recorded=replay.as_typed(get(rec, "command.argv", None), list(p.argv), p.interpreter))
    if done is None:
        if made:
            workspace.remove(made)
        return Exit.REFUSED
    ours = [made] if made else []
    if not how.in_place:
        ours.append(target)  # an --output-dir may lie inside the original's directory
    touched = [t for t in guard.changes(before, rec, path, moved, run_dir, env=env)
               if t != os.path.abspath(done.path) and not any(t.startswith(d.rstrip(os.sep) + os.sep) for d in ours)]
    verdict = None
    if how.quick or how.full or replay.has_results(rec):
        old = replay.comparable(rec, cwd, p.home, target, moved)
        verdict = verify.verify(old, replay.comparable(done.doc, run_cwd, p.home, target), rtol=how.rtol,
                                atol=how.atol, steps=how.quick)
        if not how.as_json:
            sys.stdout.write(verify.render(verdict))
    code = _exit(rec, done.status, verdict, how)
    for t in touched:
        say("relaxrepro rerun: %s: the replay changed the original run's %s", "note (--in-place)" if how.in_place
            else "ERROR", t)
    if touched and not how.in_place:
        say("relaxrepro rerun: the original run %s no longer matches its manifest", rec.get("run_id"))
        code = Exit.FAIL
    kept = None
    if made:
        if code == Exit.OK and verdict is not None and not how.keep:
            workspace.remove(made)
            say("relaxrepro rerun: workspace %s removed (reproduced; --keep keeps it)", made)
        else:
            kept = made
            say("relaxrepro rerun: workspace kept: %s", made)
    say("relaxrepro rerun: the replay is in %s (manifest %s)", target, done.path)
    if how.as_json:
        print_json({"original": path, "run_id": rec.get("run_id"), "replay_dir": target, "manifest": done.path,
                    "status": done.status, "exit_code": int(code), "verdict": verdict, "changed": touched,
                    "workspace": kept})
    return code


_PASSED_ON = (replay.RUN_ID_ENV, adopt.ENV_MANIFEST, replay.OUTPUT_DIR_ENV, replay.MAX_STEPS_ENV)
"""What the replay hands its command (set by :func:`relaxrepro.record.replay.execute`), passed into a container."""


def _restore(rec: Mapping[str, Any], path: str, into: str, p: Plan, cwd: str, how: Replay,
             env: Mapping[str, str]) -> Dict[str, str]:
    """Every recorded repo restored under ``into`` ({recorded path: its tree}); refused when it cannot be."""
    if os.path.lexists(into):
        raise Refusal("--workspace %s exists: a workspace is a new directory" % safe_text(into))
    try:
        trees, notes = workspace.build(rec, path, into, cwd=cwd, home=p.home, sources=how.sources, env=env)
    except RestoreError as exc:
        raise Refusal("--workspace: %s" % exc) from None
    for n in notes:
        say("relaxrepro rerun: note: %s", n)
    say("relaxrepro rerun: workspace %s: %s", into, ", ".join(sorted(os.path.basename(t) for t in trees.values())))
    return trees


def _exit(rec: Mapping[str, Any], status: int, verdict: Optional[Dict[str, Any]], how: Replay) -> int:
    recorded_status = get(rec, "outcome.exit_code", None)
    if not how.quick and not how.full:
        return status if status != 0 or verdict is None else verify_exit(verdict)
    if status != 0 and status != recorded_status:
        say("relaxrepro rerun: the replay exited with status %d, the original with %s", status,
            "status %s" % recorded_status if isinstance(recorded_status, int) else "no recorded status")
        return Exit.FAIL
    return verify_exit(verdict or {})


def run(args: argparse.Namespace) -> int:
    if not resolve_args("rerun", args, "manifest"):
        return Exit.USAGE
    values = pairs(args.set_values, "--set")
    if (args.submit or args.nodes is not None) and not args.sbatch:
        say("relaxrepro rerun: error: --submit and --nodes go with --sbatch")
        return Exit.USAGE
    if args.sbatch:
        if values or args.redact_pattern or args.output_dir is not None or args.in_place or (
                args.workspace is not None or args.repo):
            say("relaxrepro rerun: error: --sbatch takes no --set or --redact-pattern (the job reads redacted values "
                "from its environment), --output-dir, --in-place, --workspace or --repo")
            return Exit.USAGE
        options = (["--quick", str(args.quick)] if args.quick else ["--full"] if args.full else []) + (
            ["--rtol", repr(args.rtol)] if args.rtol else []) + (["--atol", repr(args.atol)] if args.atol else [])
        return run_sbatch(args.manifest, nodes=args.nodes, submit=args.submit, replay_options=options,
                          as_json=args.json, container=args.container)
    if args.dry_run:
        if args.quick or args.full:
            say("relaxrepro rerun: error: --quick and --full replay with --confirm, not --dry-run")
            return Exit.USAGE
        if args.output_dir is not None or args.rtol or args.atol or args.in_place or args.workspace is not None:
            say("relaxrepro rerun: error: --output-dir, --in-place, --workspace, --rtol and --atol go with --confirm")
            return Exit.USAGE
        return run_cli(args.manifest, values=values, as_json=args.json, container=args.container)
    if args.in_place and args.output_dir is not None:
        say("relaxrepro rerun: error: --in-place writes into the original's directory: not with --output-dir")
        return Exit.USAGE
    if (args.keep or args.sources) and args.workspace is None:
        say("relaxrepro rerun: error: --keep and --from go with --workspace")
        return Exit.USAGE
    how = Replay(quick=args.quick, full=args.full, output_dir=args.output_dir, in_place=args.in_place,
                 workspace=args.workspace, keep=args.keep, sources=pairs(args.sources, "--from"),
                 redact_patterns=list(args.redact_pattern), rtol=args.rtol, atol=args.atol, as_json=args.json,
                 container=args.container)
    return run_replay(args.manifest, how, values=values, repos=pairs(args.repo, "--repo"))
