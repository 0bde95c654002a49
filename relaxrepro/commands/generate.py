"""``relaxrepro generate``: collect this run's manifest and write it (or, with ``--node-report``, this
node's fragment). Best effort: a partial manifest is still written, and only ``--strict`` fails on it."""

from __future__ import annotations

import os
import sys

from ..record import session
from ._common import Exit, UsageError, print_json, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Optional

    from ..record.recording import Recorded


def run(args: argparse.Namespace) -> int:
    command: List[str] = list(args.command_argv)
    env = dict(os.environ)
    as_json = getattr(args, "json", False)
    if as_json and args.print_doc:
        raise UsageError("relaxrepro generate: error: --json and --print both write stdout: choose one")
    if not args.node_report and not session.records_here(env, args.all_ranks):
        if as_json:
            print_json(written(None, None, "another rank writes"))
        return Exit.OK  # under a multi-rank launcher only rank 0 writes
    # lazy: ~50 ms (the probes, the context, the redaction rules), which a rank that writes nothing skips
    from ..record import recording

    options = recording.RunOptions.of(args)
    if args.node_report:
        from ..record import fragment  # lazy: ~8 ms (the node fragment and its merge rules), only for --node-report

        return node_report(fragment.record_fragment(options, env, command), args.strict, as_json)
    recorded = recording.record_run(options, command, env, "generate")
    if recorded.refused:
        return Exit.USAGE
    if recorded.taken:
        return Exit.FAIL
    if as_json:
        print_json(written(recorded.doc, recorded.path, None if recorded.doc is not None else "another rank writes"))
    if recorded.doc is None:
        return Exit.OK  # rank 0 writes
    if recorded.path is None:
        return Exit.FAIL if args.strict else Exit.OK
    if as_json:
        pass
    elif args.print_doc:
        say("%s", recorded.path)  # stdout holds the manifest alone, for a pipe into jq
    else:
        say("%s", recorded.path, out=sys.stdout)
    if args.strict and recorded.problems:
        return Exit.FAIL
    return Exit.OK


def node_report(recorded: Recorded, strict: bool, as_json: bool = False) -> int:
    """``generate --node-report``: the exit code of writing this node's fragment ``node_<name>.json``."""
    if recorded.refused:
        return Exit.USAGE
    if as_json:
        print_json(written(recorded.doc, recorded.path, None))
    if recorded.path is None:
        return Exit.FAIL if strict else Exit.OK
    if not as_json:
        say("%s", recorded.path, out=sys.stdout)
    return Exit.OK


def written(doc: Optional[Dict[str, Any]], path: Optional[str], skipped: Optional[str]) -> Dict[str, Any]:
    """``generate --json``: what was written where (``path`` None: nothing), how each probe fared, and which
    failed or timed out (what ``--strict`` fails on); ``skipped``: why this rank wrote nothing."""
    probes = (doc or {}).get("collection", {}).get("probes", {}) if isinstance(doc, dict) else {}
    statuses = {str(k): v.get("status") for k, v in probes.items() if isinstance(v, dict)} if isinstance(probes, dict) \
        else {}
    return {"path": path, "written": path is not None, "run_id": (doc or {}).get("run_id"), "skipped": skipped,
            "probes": statuses, "failed": sorted(k for k, v in statuses.items() if v in ("failed", "timeout"))}
