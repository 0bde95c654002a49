"""``relaxrepro generate``: collect this run's manifest and write it (or, with ``--node-report``, this
node's fragment). Best effort: a partial manifest is still written, and only ``--strict`` fails on it."""

from __future__ import annotations

import os
import sys

from ..manifest.model import RUN_ID_ENV, valid_run_id
from ..record import session
from ._common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, parse_repos, say

ARGS_JSON_LIMIT_BYTES = 16 << 20
"""Far above any real argument dump (a few KB); the bound keeps a mistaken path from filling memory."""

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import List, Optional, Tuple


def run(args: argparse.Namespace) -> int:
    command: List[str] = list(args.command_argv)
    if args.node_report:
        return node_report(args, dict(os.environ), command)
    code, doc, path, problems = record_run(args, command, dict(os.environ), "generate")
    if code is not None:
        return code
    if doc is None:
        return EXIT_OK  # rank 0 writes
    if path is None:
        return EXIT_FAIL if args.strict else EXIT_OK
    if args.print_doc:
        say("%s", path)  # stdout holds the manifest alone, for a pipe into jq
    else:
        say("%s", path, out=sys.stdout)
    if args.strict and problems:
        return EXIT_FAIL
    return EXIT_OK


def record_run(args: argparse.Namespace, command: List[str], env: dict, verb: str, *, cwd: Optional[str] = None,
               replay_of: Optional[str] = None) -> Tuple[Optional[int], Optional[dict], Optional[str], List[str]]:
    """Collect and write as ``generate`` does: (exit code to stop with, document, path, probe problems).

    Shared by ``generate``, ``run`` and ``rerun --quick/--full`` (which runs the command in ``cwd`` and
    records the run id it replays). Skipped on ranks other than 0 unless ``--all-ranks``.
    """
    if not session.records_here(env, args.all_ranks):
        return None, None, None, []  # under a multi-rank launcher only rank 0 writes
    if args.run_id is None and env.get(RUN_ID_ENV):
        args.run_id = env[RUN_ID_ENV]  # shared with every node's --node-report, so merge can match them
    if args.run_id is not None and not valid_run_id(args.run_id):
        sys.stderr.write("relaxrepro %s: error: --run-id %r: use letters, digits, '.', '_' and '-' only\n"
                         % (verb, args.run_id))
        return EXIT_USAGE, None, None, []

    repos, problem = parse_repos(args.repo)
    if problem:
        say("relaxrepro %s: error: %s", verb, problem)
        return EXIT_USAGE, None, None, []

    from ..collect import assemble
    from ..collect.context import Context
    from ..std import proc

    redactor = _redactor(args, env, verb)
    if redactor is None:
        return EXIT_USAGE, None, None, []
    directory = None if args.output else session.output_directory(args.output_dir, env)
    options = {"parent": args.parent, "group": args.group, "note": args.note,
               "output_dir": directory or os.path.dirname(os.path.abspath(args.output)),
               "env_prefixes": list(args.env_prefix), "data": list(args.data), "repos": repos,
               "private_patch": args.private_patch, "python": args.python, "replay_of": replay_of}
    if args.args_json is not None:
        loaded = _load_args_json(args.args_json)
        if isinstance(loaded, str):
            say("relaxrepro %s: error: --args-json %s: %s", verb, args.args_json, loaded)
            return EXIT_USAGE, None, None, []
        options["args_json"] = loaded
    ctx = Context(env=env, cwd=cwd, argv=command, argv_source="cli" if command else "none",
                  options={k: v for k, v in options.items() if v is not None}, redactor=redactor)
    with proc.ending_all_on_termination():  # a job killed meanwhile leaves no tool of ours running
        doc = assemble.build(ctx, run_id=args.run_id)
    rank = session.rank(env)
    if rank is not None:
        doc.setdefault("runtime", {})["rank"] = rank
    problems = assemble.probe_problems(doc)
    for line in [] if args.quiet else assemble.probe_warnings(doc):
        say("relaxrepro: warning: probe %s", line)  # may quote a tool's stderr
    unfound = session.unfound_parent(doc)
    if unfound:
        say("relaxrepro: warning: %s", unfound)
    # assemble.build redacted it with this very policy (its redacted_by): the writer does not again.
    result = session.write(doc, path=args.output, directory=directory, env=env, redactor=redactor)
    for w in result.warnings:
        say("relaxrepro: warning: %s", w)
    if args.print_doc:
        _print_doc(doc)
    if args.strict and result.path is not None and args.run_id is not None and result.run_id != args.run_id:
        # Node fragments carry the run id given: under another one, merge cannot match them.
        say("relaxrepro %s: error: run id %s is taken (--strict)%s", verb, args.run_id,
            "; not running the command" if verb == "run" else "")
        return EXIT_FAIL, doc, result.path, problems
    return None, doc, result.path, problems


def _redactor(args: argparse.Namespace, env: dict, verb: str) -> object:
    """The run's one redaction policy from ``--redact-pattern`` and ``--keep-paths``; None (said why) if bad."""
    from ..collect.context import default_policy

    try:
        return default_policy(env, extra_patterns=args.redact_pattern, keep_paths=args.keep_paths)
    except ValueError as exc:
        say("relaxrepro %s: error: %s", verb, exc)
        return None


def node_report(args: argparse.Namespace, env: dict, command: List[str]) -> int:
    """``generate --node-report``: this node's fragment ``node_<name>.json``."""
    from ..collect import assemble, node
    from ..collect.context import Context
    from ..manifest.nodes import fragment_filename
    from ..std import proc

    run_id = args.run_id or node.run_id_from_env(env)
    if not valid_run_id(run_id):
        sys.stderr.write("relaxrepro generate: error: --node-report needs a run id shared with rank 0's manifest: "
                         "--run-id, $RELAXREPRO_RUN_ID or $SLURM_JOB_ID%s\n" % (" (%r is unsafe)" % run_id if run_id
                                                                                else ""))
        return EXIT_USAGE
    redactor = _redactor(args, env, "generate")
    if redactor is None:
        return EXIT_USAGE
    options = {"run_id": run_id, "source": "cli"}
    if args.python:
        options["python"] = args.python  # the training interpreter whose packages this node has
    ctx = Context(env=env, argv=command, argv_source="cli" if command else "none", options=options,
                  redactor=redactor)
    with proc.ending_all_on_termination():
        frag = node.collect_fragment(ctx)  # redacted once, with this policy (its redacted_by)
    for line in [] if args.quiet else assemble.probe_warnings(frag):
        say("relaxrepro: warning: probe %s", line)  # a node missing its packages says so, as rank 0 does
    path = args.output or os.path.join(session.output_directory(args.output_dir, env), fragment_filename(frag))
    result = session.write(frag, path=path, env=env, redactor=redactor)  # so not redacted again
    for w in result.warnings:
        say("relaxrepro: warning: %s", w)
    if args.print_doc:
        _print_doc(frag)
    if result.path is None:
        return EXIT_FAIL if args.strict else EXIT_OK
    say("%s", result.path, out=sys.stdout)
    return EXIT_OK


def _print_doc(doc: dict) -> None:
    """``--print``: the document as written, with the C1 controls and bidi characters that JSON leaves raw
    in strings escaped (``\\u009b``), since a terminal may be reading."""
    from ..manifest import writer
    from ..std.text import safe_json

    sys.stdout.write(safe_json(writer.serialize(doc).decode("utf-8")))


def _load_args_json(path: str) -> object:
    """The parsed JSON object, or a one-line reason (str) why it cannot be used."""
    from ..manifest.reader import ManifestError, parse_json
    from ..std.files import read_regular
    from ..std.text import safe_text

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
