"""Replaying a recorded run (``relaxrepro rerun MANIFEST --confirm [--quick N | --full]``): where the replay
goes, what of the command is pointed there, and the replay recorded the way the run was recorded.

The replay's own manifest is written first and handed to the command (``RELAXREPRO_MANIFEST``), so a trainer
using the API records into it; ``lineage.parent`` is the original, ``lineage.replay_of`` its run id, and the
run's group, note, ``--outputs``, ``--metrics``, redaction, env prefixes, data inputs and repos
(``collection.recording``) are the replay's too. ``--quick N`` sets ``RELAXREPRO_MAX_STEPS=N`` (the API's
``should_stop``/``trace`` end the run after step N). ``rerun`` refuses and checks it first, and verifies what it
recorded against the original afterwards.

Nothing of the original is written over. The replay goes into a new directory (``--output-dir``, else
beside the original's: ``runs/det`` -> ``runs/det.replay-1``), and every argument or environment value
naming the original's directory or one of its recorded outputs is pointed there instead. An output of
the original that the command could still write (outside its directory and not named in the command,
so the trainer picks the path itself) refuses the replay until it is moved aside. ``--in-place`` alone
writes into the original's directory, as the command was recorded.
"""

from __future__ import annotations

import os
import sys

from ..manifest import reader
from ..manifest.fields import expand_home, get
from ..manifest.model import OUTPUT_DIR_ENV, RUN_ID_ENV
from ..manifest.trace import MAX_STEPS_ENV
from ..std import proc
from ..std.records import Record
from ..std.text import safe_text, say, shell_quote
from . import adopt, outcome
from .recording import RunOptions, record_run
from .results import after_run, shown_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple


def _under(path: str, root: str) -> Optional[str]:
    """``path`` relative to ``root`` ("" for root itself), or None when it lies outside it."""
    if path == root:
        return ""
    prefix = root.rstrip(os.sep) + os.sep
    return path[len(prefix):] if path.startswith(prefix) else None


def replay_dir(original: str, given: Optional[str], exists: Callable[[str], bool] = os.path.lexists) -> str:
    """The replay's directory (absolute): ``given``, else the first free ``<dir>.replay-<k>`` beside the
    original's directory; when that directory is the working one or above it (a manifest written to
    ``.``), the sibling would leave the project, so ``<dir>/<run id>.replay-<k>`` inside it instead."""
    if given:
        return os.path.abspath(given)
    directory = os.path.dirname(os.path.abspath(original))
    inside = _under(os.getcwd(), directory) is not None
    stem = os.path.basename(original)[len("manifest_"):-len(".json")] if os.path.basename(original).startswith(
        "manifest_") and original.endswith(".json") else "run"
    base = os.path.join(directory, stem) if inside else directory
    k = 1
    while exists("%s.replay-%d" % (base, k)):
        k += 1
    return "%s.replay-%d" % (base, k)


def recording(rec: Mapping[str, Any]) -> Dict[str, Any]:
    """The options the run was recorded with (``collection.recording``); {} for a manifest without them."""
    found = get(rec, "collection.recording", None)
    return found if isinstance(found, dict) else {}


def recorded_outputs(rec: Mapping[str, Any], cwd: str, home: Optional[str]) -> Dict[str, str]:
    """{absolute path on this machine: its recorded spelling} for every key of ``results.outputs`` and the
    run's own ``--outputs`` and ``--metrics`` file: what the replay writes elsewhere and must not touch."""
    outputs = get(rec, "results.outputs", None)
    named = [str(k) for k in outputs] if isinstance(outputs, dict) else []
    how = recording(rec)
    named += [str(v) for v in how.get("outputs") or () if isinstance(v, str)]
    if isinstance(how.get("metrics"), str):
        named.append(how["metrics"])
    return {os.path.normpath(os.path.join(cwd, expand_home(k, home))): k for k in named}


def redirect(p: Any, cwd: str, source: str, target: str, outputs: Mapping[str, str],
             run_cwd: Optional[str] = None) -> Tuple[Dict[str, str], List[Tuple[str, str, str]]]:
    """Point the command's arguments and env values that name the original's directory ``source`` (when it
    is a run directory, not the project) or one of its ``outputs`` at the replay's directory ``target``;
    a relative value stays relative, to ``run_cwd`` (where the replay runs; default ``cwd``).

    Changes ``p`` in place; returns ({original path: replay path} for every output, [(where, old, new)]).
    """
    project = _under(cwd, source) is not None  # a manifest written to "." or above: not a run directory
    moved: Dict[str, str] = {}
    for path in outputs:
        rel = _under(path, source)
        moved[path] = os.path.join(target, rel if rel and not project else os.path.basename(path))

    def new_place(value: str) -> Optional[str]:
        path = os.path.normpath(os.path.join(cwd, p.local(value)))
        if path in moved:
            return moved[path]
        return target if path == source and not project else None

    def spelled(value: str, place: str) -> str:  # relative stays relative
        return place if os.path.isabs(p.local(value)) else os.path.relpath(place, run_cwd or cwd)

    changes: List[Tuple[str, str, str]] = []
    for i, arg in enumerate(p.argv):
        head, eq, value = arg.partition("=")  # --out=runs/det as well as --out runs/det
        place = new_place(arg)
        if place is not None:
            new = spelled(arg, place)
        elif eq and value and new_place(value) is not None:
            new = head + eq + spelled(value, new_place(value) or "")
        else:
            continue
        changes.append(("argv[%d]" % i, arg, new))
        p.argv[i] = new
    for name, value in sorted(p.env.items()):
        place = new_place(value)
        if place is not None:
            p.env[name] = spelled(value, place)
            changes.append(("env " + name, value, p.env[name]))
    return moved, changes


def unprotected(outputs: Mapping[str, str], source: str, named: List[str], cwd: str) -> List[str]:
    """Outputs of the original that exist where the replay could write them: not named by the command
    (``named``: its arguments and env values, before :func:`redirect`) and not inside the original's run
    directory, so the trainer chooses those paths itself."""
    project = _under(cwd, source) is not None
    places = {os.path.normpath(os.path.join(cwd, v)) for value in named
              for v in (value, value.partition("=")[2]) if v}
    return sorted(path for path in outputs if path not in places and os.path.lexists(path)
                  and (project or _under(path, source) is None))


def as_typed(recorded: Any, argv: List[str], interpreter: Optional[str]) -> List[str]:
    """The command to record for the replay: ``argv`` (as redirected) with its first word as the original
    recorded it (``python``, ``torchrun``), not as ``rerun`` resolved it to an interpreter."""
    if not isinstance(recorded, list) or not recorded or not argv:
        return list(argv)
    first = str(recorded[0])
    if len(recorded) == len(argv) - 1 and argv[0] == interpreter and argv[1:2] == [first]:
        return argv[1:]  # a bare train.py was run by the interpreter
    if len(recorded) == len(argv) and (argv[0] == interpreter or os.path.basename(argv[0]) == os.path.basename(first)):
        return [first] + argv[1:]
    return list(argv)


def comparable(doc: Mapping[str, Any], cwd: str, home: Optional[str], root: str,
               moved: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """``doc`` with its outputs keyed by where they lie relative to ``root`` (the replay's directory), the
    original's moved to where its replay writes them, so the two name the same file alike."""
    out = dict(doc)
    results = dict(doc["results"]) if isinstance(doc.get("results"), dict) else {}
    if isinstance(results.get("outputs"), dict):
        keyed = {}
        for key, value in results["outputs"].items():
            path = os.path.normpath(os.path.join(cwd, expand_home(str(key), home)))
            path = (moved or {}).get(path, path)
            rel = _under(path, root)
            keyed[rel if rel else path] = value
        results["outputs"] = keyed
        out["results"] = results
    return out


def _has_trace(rec: Mapping[str, Any]) -> bool:
    trace = get(rec, "results.trace", None)
    return isinstance(trace, dict) and bool(trace)


def has_results(rec: Mapping[str, Any]) -> bool:
    results = get(rec, "results", None)
    return isinstance(results, dict) and any(results.get(k) for k in ("metrics", "outputs", "trace"))


def _fresh(directory: str) -> Optional[str]:
    """Why ``directory`` cannot take a replay (it holds files, or is not a directory), or None."""
    if not os.path.lexists(directory):
        return None
    if not os.path.isdir(directory) or os.path.islink(directory):
        return "is not a directory"
    try:
        return "is not empty" if os.listdir(directory) else None
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def label(quick: Optional[int], full: bool) -> str:
    """How the replay runs, as its flag: ``--quick N``, ``--full``, or ``--confirm`` (all of it, as recorded)."""
    return "--quick %d" % quick if quick else "--full" if full else "--confirm"


def refusal(rec: Mapping[str, Any], path: str, quick: Optional[int], target: str, *, full: bool = True,
            in_place: bool = False, redact_patterns: int = 0) -> Optional[str]:
    """Why the replay cannot start, said before anything runs (a long training must not end in "nothing to
    verify"), or None."""
    flag = label(quick, full)
    if quick and not _has_trace(rec):
        return ("%s: %s records no trace (results.trace), so its first steps cannot be compared; record one "
                "with relaxrepro.trace(step, loss=...), or replay with --full" % (flag, safe_text(path)))
    if full and not quick and not has_results(rec):
        return ("--full: %s records no results (metrics, outputs or trace): nothing to verify; record them with "
                "relaxrepro.result(...) or run --outputs/--metrics" % safe_text(path))
    patterns = recording(rec).get("redact_patterns")
    if isinstance(patterns, int) and patterns > redact_patterns:
        return ("%s: the run was recorded with %d --redact-pattern value%s, which its manifest does not keep (a "
                "pattern may spell the secret itself); give %s again with --redact-pattern" % (
                    safe_text(path), patterns, "" if patterns == 1 else "s", "it" if patterns == 1 else "them"))
    if in_place:
        return None
    why = _fresh(target)
    if why or target == os.path.dirname(os.path.abspath(path)):
        return "--output-dir %s %s: a replay starts in a new or empty directory%s" % (
            safe_text(target), why or "holds the original",
            "" if why else " (--in-place writes into the original's directory)")
    return None


def place(rec: Mapping[str, Any], p: Any, path: str, target: str, run_cwd: Optional[str] = None, *,
          in_place: bool = False) -> Tuple[Dict[str, str], List[Tuple[str, str, str]]]:
    """Point the plan ``p`` (``rerun``'s ``Plan``) at the replay's directory (:func:`redirect`); raises
    ValueError when an output of the original would be written over all the same. ``in_place``: nothing is
    pointed elsewhere ({output: itself}, no changes)."""
    source = os.path.dirname(os.path.abspath(path))
    cwd = p.local(p.cwd) if p.cwd else os.getcwd()
    outputs = recorded_outputs(rec, cwd, p.home)
    if in_place:
        return {o: o for o in outputs}, []
    exposed = unprotected(outputs, source, [p.local(v) for v in p.argv + list(p.env.values())], cwd)
    if exposed:
        raise ValueError("the original's output %s lies outside its directory and the command does not name it, "
                         "so the replay would write over it; move it aside first (or --in-place)"
                         % safe_text(exposed[0]))
    return redirect(p, cwd, source, target, outputs, run_cwd)


def run_directory(path: str, cwd: str) -> Optional[str]:
    """The original's own directory, watched whole by :mod:`.guard`; None when the manifest was written into
    the project (``.`` or above the working directory), which is no run's own."""
    source = os.path.dirname(os.path.abspath(path))
    return None if _under(cwd, source) is not None else source


def options(rec: Mapping[str, Any], path: str, target: str, flag: str, *, cwd: str, run_cwd: str,
            home: Optional[str], moved: Mapping[str, str], interpreter: Optional[str],
            redact_patterns: List[str], repos: Mapping[str, str]) -> RunOptions:
    """The replay recorded the way the run was (``collection.recording``, ``lineage.group`` and ``note``): its
    ``--outputs`` and ``--metrics`` where the replay writes them, its redaction, env prefixes, data inputs and
    repos (``repos``: {recorded path: where it is for the replay}), with ``lineage.parent`` the original."""
    how = recording(rec)

    def where(value: Any) -> str:  # a recorded path, spelled from where the replay runs
        full = os.path.normpath(os.path.join(cwd, expand_home(str(value), home)))
        return shown_path(moved.get(full, full), run_cwd)

    repo_items = []
    for item in how.get("repos") or ():
        name, _, repo_path = str(item).partition("=")
        repo_path = expand_home(repo_path, home)
        repo_items.append("%s=%s" % (name, repos.get(os.path.normpath(os.path.join(cwd, repo_path)), repo_path)))
    run_id = str(rec.get("run_id", ""))
    note = get(rec, "lineage.note", None)
    group = get(rec, "lineage.group", None)
    return RunOptions(
        output_dir=target, parent=os.path.abspath(path), python=interpreter,
        note=note if isinstance(note, str) and note else "replay of %s (%s)" % (run_id, flag),
        group=group if isinstance(group, str) and group else None,
        outputs=[where(o) for o in how.get("outputs") or ()],
        metrics=where(how["metrics"]) if isinstance(how.get("metrics"), str) else None,
        env_prefix=[str(e) for e in how.get("env_prefixes") or ()],
        data=[expand_home(str(d), home) for d in how.get("data") or ()], repo=repo_items,
        redact_pattern=list(redact_patterns), keep_paths=how.get("keep_paths") is True,
        private_patch=how.get("private_patch") is True)


class Replayed(Record):
    """What :func:`execute` saw: the command's exit status and the replay's manifest as read back."""

    status: int
    doc: Dict[str, Any]
    path: str


def execute(rec: Mapping[str, Any], argv: List[str], run_env: Dict[str, str], run_cwd: str,
            quick: Optional[int], target: str, changes: List[Tuple[str, str, str]], opts: RunOptions, *,
            recorded: List[str], moved: Mapping[str, str], flag: str) -> Optional[Replayed]:
    """Record the replay's manifest in ``target`` with ``opts``, run ``argv`` (confirmed by rerun) in
    ``run_cwd``, then add how it ended and its ``--outputs``/``--metrics``; None when refused (said why).

    The manifest records the command as the original did (``recorded``: ``python train.py``, not the
    interpreter ``argv`` resolved it to, which the environment section records), so that verify does not
    name the spelling as a cause and a replay of the replay runs alike."""
    run_id = str(rec.get("run_id", ""))
    run_env.pop(MAX_STEPS_ENV, None)  # one exported in the shell must not cut a --full replay short
    if quick:
        run_env[MAX_STEPS_ENV] = str(quick)
    run_env[OUTPUT_DIR_ENV] = target  # for a trainer that writes where the API's default points
    try:
        os.makedirs(target, exist_ok=True)
    except OSError as exc:
        say("relaxrepro rerun: refused: cannot make %s: %s", target, (exc.strerror or str(exc)).lower())
        return None
    say("relaxrepro rerun: replay of run %s (%s) into %s", run_id, flag, target)
    for where, old, new in changes:
        say("relaxrepro rerun: %s: %s -> %s (the original's files stay as they are)", where, old, new)
    mine = record_run(opts, recorded, dict(run_env), "rerun", cwd=run_cwd, replay_of=run_id)
    doc = mine.doc
    if mine.refused or mine.taken or mine.path is None or doc is None:
        say("relaxrepro rerun: refused: could not write the replay's manifest into %s", target)
        return None
    run_env.update({RUN_ID_ENV: str(doc.get("run_id")), adopt.ENV_MANIFEST: os.path.abspath(mine.path)})
    say("relaxrepro rerun: manifest %s", mine.path)
    say("relaxrepro rerun: running %s", " ".join(shell_quote(a) for a in argv))
    sys.stderr.flush()
    sys.stdout.flush()
    result = proc.run_foreground(argv, env=run_env, cwd=run_cwd)
    status = proc.exit_status(result)
    if result.error is not None:
        say("relaxrepro rerun: could not start %s: %s", argv[0], result.error)
    found, warnings = after_run(opts.outputs, opts.metrics, cwd=run_cwd, env=run_env)
    for w in warnings:
        say("relaxrepro rerun: warning: %s", w)
    new_id = str(doc.get("run_id"))
    warning = outcome.record(mine.path, outcome.from_process(result.rc, result.error, result.seconds),
                             run_id=new_id, results=found)
    if warning:
        say("relaxrepro: warning: %s", warning)
    try:
        new = reader.read_manifest_file(mine.path)[0]  # read as the original was: checked and normalised alike
    except reader.ManifestError as exc:
        say("relaxrepro rerun: cannot read the replay's manifest %s: %s", mine.path, exc)
        return None
    if not get(new, "results.outputs", None) and moved and not recording(rec):
        # A manifest from before collection.recording: its outputs, where the replay wrote them.
        places = sorted(set(p for p in moved.values() if os.path.lexists(p)))
        if places:
            found, _ = after_run(places, None, cwd=run_cwd, env=run_env)
            outcome.record(mine.path, None, run_id=new_id, results=found)
            new = reader.read_manifest_file(mine.path)[0]
    return Replayed(status, new, mine.path)
