"""``relaxrepro run -- COMMAND``: write the manifest, run COMMAND with its stdio, add how it ended."""

from __future__ import annotations

import os
import sys

from ..collect.context import safe_getcwd
from ..manifest.model import RUN_ID_ENV
from ..record import adopt, outcome, results
from ..record.recording import Recorded, RunOptions, record_run
from ..std import proc
from ._common import Exit, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict


def run(args: argparse.Namespace) -> int:
    command = list(args.command_argv)
    if not command:
        sys.stderr.write("relaxrepro run: error: give the command to run after --, "
                         "e.g. relaxrepro run -- python train.py\n")
        return Exit.USAGE
    env = dict(os.environ)
    try:
        recorded = record_run(RunOptions.of(args), command, env, "run")
    except Exception as exc:  # a bug of ours must not keep the training from running
        say("relaxrepro: warning: no manifest: internal error: %s: %s", type(exc).__name__, exc)
        recorded = Recorded()
    if recorded.refused:
        return Exit.USAGE
    if recorded.taken:
        return Exit.FAIL
    doc, path = recorded.doc, recorded.path
    if path is not None:
        say("relaxrepro: manifest %s", path)
    elif args.strict and doc is not None:
        sys.stderr.write("relaxrepro run: error: no manifest written; not running the command (--strict)\n")
        return Exit.FAIL
    if args.strict and recorded.problems:
        sys.stderr.write("relaxrepro run: error: a probe failed; not running the command (--strict)\n")
        return Exit.FAIL
    if path is not None and doc is not None:
        # The trainer's API adopts this run id and folds what it sees into this file (record/adopt.py).
        env = dict(env, **{RUN_ID_ENV: str(doc.get("run_id")), adopt.ENV_MANIFEST: os.path.abspath(path)})
    result = proc.run_foreground(command, env=env)
    status = proc.exit_status(result)
    if result.error is not None:
        say("relaxrepro run: cannot start %s: %s", command[0], result.error)
    if path is not None and doc is not None:
        ended = outcome.from_process(result.rc, result.error, result.seconds)
        found = _metrics(args)
        if getattr(args, "outputs", None):
            # The outcome first, the outputs marked unhashed: hashing a checkpoint takes minutes, and a
            # SIGTERM meanwhile (the job's time limit) must not lose how the command ended.
            found["outputs"] = results.unhashed_outputs(args.outputs, cwd=safe_getcwd())
            _record(path, ended, str(doc.get("run_id")), found)
            found = {"outputs": _outputs(args)}
        # record() reads the file again: the trainer may have folded its own view into it meanwhile.
        _record(path, ended, str(doc.get("run_id")), found)
    return status


def _record(path: str, ended: Dict[str, Any], run_id: str, found: Dict[str, Any]) -> None:
    warning = outcome.record(path, ended, run_id=run_id, results=found)
    if warning:
        say("relaxrepro: warning: %s", warning)


def _metrics(args: argparse.Namespace) -> Dict[str, Any]:
    """``--metrics`` read once the command has exited; a problem is one warning line, never another exit status."""
    found, warnings = results.after_run([], args.metrics, cwd=safe_getcwd(), env=os.environ)
    for w in warnings:
        say("relaxrepro run: warning: %s", w)
    return found


def _outputs(args: argparse.Namespace) -> Dict[str, Any]:
    """``--outputs`` fingerprinted once the command has exited; each problem one warning line."""
    found, warnings = results.after_run(args.outputs, None, cwd=safe_getcwd(), env=os.environ)
    for w in warnings:
        say("relaxrepro run: warning: %s", w)
    return found.get("outputs", {})
