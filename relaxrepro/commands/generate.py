"""``relaxrepro generate``: collect this run's manifest and write it (or, with ``--node-report``, this
node's fragment). Best effort: a partial manifest is still written, and only ``--strict`` fails on it."""

from __future__ import annotations

import os
import sys

from ..manifest.model import valid_run_id
from ..record import session
from ..record.recording import RunOptions, make_redactor, print_doc, record_run
from ._common import Exit, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import List


def run(args: argparse.Namespace) -> int:
    command: List[str] = list(args.command_argv)
    options = RunOptions.of(args)
    if args.node_report:
        return node_report(options, dict(os.environ), command)
    recorded = record_run(options, command, dict(os.environ), "generate")
    if recorded.refused:
        return Exit.USAGE
    if recorded.taken:
        return Exit.FAIL
    if recorded.doc is None:
        return Exit.OK  # rank 0 writes
    if recorded.path is None:
        return Exit.FAIL if args.strict else Exit.OK
    if args.print_doc:
        say("%s", recorded.path)  # stdout holds the manifest alone, for a pipe into jq
    else:
        say("%s", recorded.path, out=sys.stdout)
    if args.strict and recorded.problems:
        return Exit.FAIL
    return Exit.OK


def node_report(args: RunOptions, env: dict, command: List[str]) -> int:
    """``generate --node-report``: this node's fragment ``node_<name>.json``."""
    # lazy, these four: ~20 ms (node fragments) on top of the probes, which recording also imports only when
    # it records
    from ..collect import assemble, node
    from ..collect.context import Context
    from ..manifest.nodes import fragment_filename
    from ..std import proc

    run_id = args.run_id or node.run_id_from_env(env)
    if not valid_run_id(run_id):
        sys.stderr.write("relaxrepro generate: error: --node-report needs a run id shared with rank 0's manifest: "
                         "--run-id, $RELAXREPRO_RUN_ID or $SLURM_JOB_ID%s\n" % (" (%r is unsafe)" % run_id if run_id
                                                                                else ""))
        return Exit.USAGE
    redactor = make_redactor(args, env, "generate")
    if redactor is None:
        return Exit.USAGE
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
        print_doc(frag)
    if result.path is None:
        return Exit.FAIL if args.strict else Exit.OK
    say("%s", result.path, out=sys.stdout)
    return Exit.OK
