"""A node's fragment, recorded as ``generate --node-report`` does: every node of a multi-node run writes its own
``node_<name>.json`` (whatever its rank), which ``merge`` folds into rank 0's manifest."""

from __future__ import annotations

import os
import sys

from ..collect import assemble, node
from ..collect.context import Context
from ..manifest.model import run_id_problem, valid_run_id
from ..manifest.nodes import fragment_filename
from ..std import proc
from ..std.text import safe_text, say
from . import session
from .recording import Recorded, RunOptions, make_redactor, write_said

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict, List


def record_fragment(options: RunOptions, env: Dict[str, str], command: List[str]) -> Recorded:
    """``generate --node-report``: collect and write this node's fragment ``node_<name>.json`` (every node
    reports, whatever its rank). Refused (said on stderr) without a safe run id shared with rank 0's manifest."""
    run_id = options.run_id or node.run_id_from_env(env)
    if not valid_run_id(run_id):
        sys.stderr.write("relaxrepro generate: error: --node-report needs a run id shared with rank 0's manifest: "
                         "--run-id, $RELAXREPRO_RUN_ID or $SLURM_JOB_ID%s\n" % (
                             " (%s: %s)" % (safe_text(repr(run_id), 60), run_id_problem(run_id)) if run_id else ""))
        return Recorded(refused=True)
    redactor = make_redactor(options, env, "generate")
    if redactor is None:
        return Recorded(refused=True)
    values = {"run_id": run_id, "source": "cli"}
    if options.python:
        values["python"] = options.python  # the training interpreter whose packages this node has
    ctx = Context(env=env, argv=command, argv_source="cli" if command else "none", options=values,
                  redactor=redactor)
    with proc.ending_all_on_termination():
        frag = node.collect_fragment(ctx)  # redacted once, with this policy (its redacted_by)
    for line in [] if options.quiet else assemble.probe_warnings(frag):
        say("relaxrepro: warning: probe %s", line)  # a node missing its packages says so, as rank 0 does
    path = options.output or os.path.join(session.output_directory(options.output_dir, env), fragment_filename(frag))
    return Recorded(frag, write_said(frag, options, env, redactor, path=path).path)
