"""``relaxrepro lineage RUN``: the ancestry of a run, oldest first, and what changed at each step (``--down``:
its descendants, as a tree). The analysis is :mod:`relaxrepro.analyze.lineage`'s; here, how it is shown."""

from __future__ import annotations

import json
import os
import sys

from ..analyze.lineage import ancestry, descendants
from ..manifest.summary import time_cell
from ..std.table import rel_path
from ..std.text import safe_format
from ._common import Exit, dirs_or_cwd, report_missing, say
from ._runs import read_or_report, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List


def render_descendants(result: Dict[str, Any], *, cwd: str = ".") -> str:
    """The tree, one run a line, each child indented under its parent; every value escaped."""
    lines: List[str] = []

    def walk(n: Dict[str, Any], lead: str, branch: str) -> None:
        lines.append(lead + branch + safe_format("%s  %s  %s", n["run_id"], time_cell(n["generated_at"]),
                                                 rel_path(n["path"], cwd)))
        kids = n["children"]
        for i, c in enumerate(kids):
            last = i == len(kids) - 1
            walk(c, lead + ("" if not branch else ("    " if branch == "`-- " else "|   ")), "`-- " if last else "|-- ")
    if result["root"] is not None:
        walk(result["root"], "", "")
    return "\n".join(lines) + ("\n" if lines else "")


def render_ancestry(result: Dict[str, Any], *, cwd: str = ".") -> str:
    """Oldest first: one line per run, and under it how it differs from the run above; every value
    escaped, so a manifest cannot add a line or a terminal control."""
    steps = {s["to"]: s for s in result["steps"]}
    lines = []
    for item in result["chain"]:
        step = steps.get(item["run_id"]) if not item.get("missing") else None
        if step is not None:
            lines.append(safe_format("  | %s: %s", step["reason"], step["summary"]))
        if item.get("missing"):
            lines.append(safe_format("%s  (missing: recorded as parent, no manifest found)", item["run_id"]))
        else:
            lines.append(safe_format("%s  %s  %s", item["run_id"], time_cell(item["generated_at"]),
                                     rel_path(item["path"], cwd)))
    return "\n".join(lines) + ("\n" if lines else "")


def run(args: argparse.Namespace) -> int:
    dirs = dirs_or_cwd(args.dirs)
    if report_missing(dirs, "lineage"):
        return Exit.FAIL
    if os.path.lexists(args.run) and not os.path.isdir(args.run) and read_or_report("lineage", args.run) is None:
        return Exit.USAGE  # a manifest file named, and it cannot be read: one line, as check says it
    warnings: List[str] = []
    if not resolve_args("lineage", args, "run", first=args.dirs, warnings=warnings):
        return Exit.USAGE
    find, render = (descendants, render_descendants) if args.down else (ancestry, render_ancestry)
    result = find(args.run, dirs, use_index=not args.no_index, warnings=warnings)
    for w in dict.fromkeys(warnings):  # each once: the run's lookup and the walk may both bypass a database
        say("relaxrepro lineage: warning: %s", w)
    for line in result["unreadable"]:  # a parent among them shows as missing: this says why
        say("relaxrepro lineage: warning: unreadable: %s", line)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(result))
    if result["error"]:
        say("relaxrepro lineage: error: %s", result["error"])
        return Exit.FAIL
    if args.down:
        return Exit.OK
    if result["missing"]:
        say("relaxrepro lineage: warning: parent %s not found under %s; the chain stops there",
            result["missing"], ", ".join(dirs))
    if result["cycle"]:
        say("relaxrepro lineage: error: cycle in lineage: %s", " -> ".join(result["cycle"]))
        return Exit.FAIL
    return Exit.OK
