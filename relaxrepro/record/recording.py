"""Recording a run as ``generate`` does: collect the manifest once and write it, from plain options.

Shared by ``generate``, ``run`` and ``rerun --quick/--full`` (:mod:`.replay`), each of which builds a
:class:`RunOptions`. What it says to people (probe warnings, a bad option) goes to stderr as it happens.
"""

from __future__ import annotations

import os
import re
import sys

from ..collect import assemble
from ..collect.context import Context, default_policy
from ..manifest import writer
from ..manifest.model import RUN_ID_ENV, run_id_problem, valid_run_id
from ..manifest.reader import ManifestError, parse_json
from ..std import proc
from ..std.files import read_regular
from ..std.records import Factory, Record
from ..std.text import safe_json, safe_text, say
from . import session

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Sequence, Tuple

ARGS_JSON_LIMIT_BYTES = 16 << 20
"""Far above any real argument dump (a few KB); the bound keeps a mistaken path from filling memory."""


class RunOptions(Record):
    """The options of ``generate`` and ``run`` that recording reads (``rerun`` sets them for a replay)."""

    output: Optional[str] = None
    output_dir: Optional[str] = None
    run_id: Optional[str] = None
    strict: bool = False
    quiet: bool = False
    all_ranks: bool = False
    print_doc: bool = False
    parent: Optional[str] = None
    group: Optional[str] = None
    note: Optional[str] = None
    python: Optional[str] = None
    redact_pattern: List[str] = Factory(list)
    keep_paths: bool = False
    args_json: Optional[str] = None
    env_prefix: List[str] = Factory(list)
    data: List[str] = Factory(list)
    repo: List[str] = Factory(list)
    private_patch: bool = False
    outputs: List[str] = Factory(list)
    """``run --outputs``: fingerprinted once the command has exited."""
    metrics: Optional[str] = None
    """``run --metrics``: read once the command has exited."""

    @classmethod
    def of(cls, args: Any) -> RunOptions:
        """The options as parsed (an ``argparse.Namespace`` of ``generate`` or ``run``; ``generate`` has no
        ``--outputs``/``--metrics``)."""
        return cls(**{name: getattr(args, name) for name in cls._fields if hasattr(args, name)})

    def recording(self) -> Dict[str, Any]:
        """How the run was recorded (``collection.recording``), so that ``rerun`` records its replay alike.
        The ``--redact-pattern`` values are counted, not kept: a pattern may spell the very secret."""
        out: Dict[str, Any] = {}
        for key, value in (("outputs", [os.fspath(o) for o in self.outputs]), ("metrics", self.metrics),
                           ("env_prefixes", list(self.env_prefix)), ("data", list(self.data)),
                           ("repos", list(self.repo)), ("redact_patterns", len(self.redact_pattern)),
                           ("keep_paths", self.keep_paths), ("private_patch", self.private_patch)):
            if value:
                out[key] = value
        return out


class Recorded(Record):
    """What :func:`record_run` did. ``doc`` None: another rank writes, or it stopped (``refused``/``taken``)."""

    doc: Optional[Dict[str, Any]] = None
    path: Optional[str] = None
    """Where the manifest was written; None when it could not be (said as a warning)."""
    problems: List[str] = Factory(list)
    """The probes that failed (``--strict`` fails on them)."""
    refused: bool = False
    """A bad option value, said on stderr: nothing collected (a usage error)."""
    taken: bool = False
    """``--strict`` and the ``--run-id`` given was taken, said on stderr (written under another id)."""


def record_run(options: RunOptions, command: List[str], env: Dict[str, str], verb: str, *,
               cwd: Optional[str] = None, replay_of: Optional[str] = None) -> Recorded:
    """Collect and write as ``generate`` does. ``verb`` names the subcommand in what is said; a replay runs
    its command in ``cwd`` and records the run id it replays. Skipped on ranks other than 0 unless
    ``all_ranks``."""
    if not session.records_here(env, options.all_ranks):
        return Recorded()  # under a multi-rank launcher only rank 0 writes
    run_id = options.run_id
    if run_id is None and env.get(RUN_ID_ENV):
        run_id = env[RUN_ID_ENV]  # shared with every node's --node-report, so merge can match them
    if run_id is not None and not valid_run_id(run_id):
        say("relaxrepro %s: error: %s %s: %s", verb, "--run-id" if options.run_id is not None else "$" + RUN_ID_ENV,
            repr(run_id)[:60] + ("..." if len(repr(run_id)) > 60 else ""), run_id_problem(run_id))
        return Recorded(refused=True)
    repos, problem = parse_repos(options.repo)
    if problem:
        say("relaxrepro %s: error: %s", verb, problem)
        return Recorded(refused=True)

    redactor = make_redactor(options, env, verb)
    if redactor is None:
        return Recorded(refused=True)
    directory = None if options.output else session.output_directory(options.output_dir, env)
    values = {"parent": options.parent, "group": options.group, "note": options.note,
              "output_dir": directory or os.path.dirname(os.path.abspath(options.output)),
              "env_prefixes": list(options.env_prefix), "data": list(options.data), "repos": repos,
              "private_patch": options.private_patch, "python": options.python, "replay_of": replay_of,
              "recording": options.recording() or None}
    if options.args_json is not None:
        loaded = _load_args_json(options.args_json)
        if isinstance(loaded, str):
            say("relaxrepro %s: error: --args-json %s: %s", verb, options.args_json, loaded)
            return Recorded(refused=True)
        values["args_json"] = loaded
    ctx = Context(env=env, cwd=cwd, argv=command, argv_source="cli" if command else "none",
                  options={k: v for k, v in values.items() if v is not None}, redactor=redactor)
    with proc.ending_all_on_termination():  # a job killed meanwhile leaves no tool of ours running
        doc = assemble.build(ctx, run_id=run_id)
    rank = session.rank(env)
    if rank is not None:
        doc.setdefault("runtime", {})["rank"] = rank
    problems = assemble.probe_problems(doc)
    for line in [] if options.quiet else assemble.probe_warnings(doc):
        say("relaxrepro: warning: probe %s", line)  # may quote a tool's stderr
    if not options.quiet and _no_repository(doc):
        say("relaxrepro: warning: no git repository recorded (the working directory is not inside one; add one "
            "with --repo NAME=PATH): check, restore and rerun will have no code to go by")
    unfound = session.unfound_parent(doc)
    if unfound:
        say("relaxrepro: warning: %s", unfound)
    # assemble.build redacted it with this very policy (its redacted_by): the writer does not again.
    result = write_said(doc, options, env, redactor, path=options.output, directory=directory)
    if options.strict and result.path is not None and run_id is not None and result.run_id != run_id:
        # Node fragments carry the run id given: under another one, merge cannot match them.
        say("relaxrepro %s: error: run id %s is taken (--strict)%s", verb, run_id,
             "; not running the command" if verb == "run" else "")
        return Recorded(doc, result.path, problems, taken=True)
    return Recorded(doc, result.path, problems)



_REPO_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def parse_repos(items: Sequence[str]) -> Tuple[Dict[str, str], Optional[str]]:
    """``--repo NAME=PATH`` values -> ({name: path}, None) or ({}, the problem in one line)."""
    repos: Dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path:
            return {}, "--repo %r: expected NAME=PATH (e.g. --repo megatron=/opt/Megatron-LM)" % item
        if not _REPO_NAME_RE.match(name):
            return {}, "--repo %r: NAME may hold letters, digits, '.', '_' and '-' only" % item
        if name in repos:
            return {}, "--repo %r: NAME %s given twice" % (item, name)
        repos[name] = path
    return repos, None


def make_redactor(options: RunOptions, env: Dict[str, str], verb: str) -> Any:
    """The run's one redaction policy from ``--redact-pattern`` and ``--keep-paths``; None (said why) if bad."""
    try:
        return default_policy(env, extra_patterns=options.redact_pattern, keep_paths=options.keep_paths)
    except ValueError as exc:
        say("relaxrepro %s: error: %s", verb, exc)
        return None


def write_said(doc: Dict[str, Any], options: RunOptions, env: Dict[str, str], redactor: Any, *,
               path: Optional[str] = None, directory: Optional[str] = None) -> Any:
    """Write ``doc`` (already redacted with ``redactor``, so not again), say the writer's warnings, print the
    document for ``--print``; the :class:`~relaxrepro.manifest.writer.WriteResult`."""
    result = session.write(doc, path=path, directory=directory, env=env, redactor=redactor)
    for w in result.warnings:
        say("relaxrepro: warning: %s", w)
    if options.print_doc:
        print_doc(doc)
    return result


def print_doc(doc: Dict[str, Any]) -> None:
    """``--print``: the document as written, with the C1 controls and bidi characters that JSON leaves raw
    in strings escaped (``\\u009b``), since a terminal may be reading."""
    sys.stdout.write(safe_json(writer.serialize(doc).decode("utf-8")))


def _no_repository(doc: Dict[str, Any]) -> bool:
    """No repo recorded, and git itself worked (a failed git probe has said so already): the only word of it
    would otherwise be the git probe's warning, in the JSON alone, since an absent probe is no news."""
    probe = ((doc.get("collection") or {}).get("probes") or {}).get("git") or {}
    return not doc.get("code") and probe.get("status") == "absent"


def _load_args_json(path: str) -> object:
    """The parsed JSON object, or a one-line reason (str) why it cannot be used."""
    try:
        raw = read_regular(path, ARGS_JSON_LIMIT_BYTES + 1)  # a FIFO or /dev/zero: refused, not read
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    if len(raw) > ARGS_JSON_LIMIT_BYTES:
        return "over %d MB: not an argument file" % (ARGS_JSON_LIMIT_BYTES >> 20)
    try:
        value = parse_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except ManifestError as exc:
        return safe_text(exc)  # it may quote a key from the file
    if not isinstance(value, dict):
        return "expected a JSON object of argument names, got %s" % type(value).__name__
    return value
