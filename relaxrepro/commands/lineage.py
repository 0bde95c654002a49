"""``relaxrepro lineage RUN``: the ancestry of a run, oldest first, and what changed at each step (``--down``:
its descendants, as a tree). The analysis is :mod:`relaxrepro.analyze.lineage`'s; here, how it is shown."""

from __future__ import annotations

import json
import os
import sys

from ..analyze.lineage import ancestry, descendants
from ..manifest import runindex
from ..manifest.summary import time_cell
from ..std.table import rel_path
from ..std.text import safe_format
from ._common import Exit, dirs_or_cwd, report_missing, say
from ._runs import read_or_report, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, Iterator, List, Tuple


def descendant_lines(result: Dict[str, Any], *, cwd: str = ".") -> Iterator[str]:
    """The tree, one run a line, each child indented under its parent; every value escaped. Drawn with a
    stack, not recursion, one line at a time: a chain of any length."""
    stack = [(result["root"], "", "")] if result["root"] is not None else []
    while stack:
        n, lead, branch = stack.pop()
        yield lead + branch + safe_format("%s  %s  %s", n["run_id"], time_cell(n["generated_at"]),
                                          rel_path(n["path"], cwd))
        kids = n["children"]
        below = lead + ("" if not branch else ("    " if branch == "`-- " else "|   "))
        stack.extend((c, below, "`-- " if i == len(kids) - 1 else "|-- ") for i, c in reversed(list(enumerate(kids))))


def json_chunks(value: Any) -> Iterator[str]:
    """The text of ``json.dumps(value, indent=1, sort_keys=True)``, piece by piece, from a stack: ``json``
    recurses once per level, and a tree of descendants is as deep as the chain is long. An indent is made
    when it is written, so what waits on the stack stays small however deep the tree."""
    stack: List[Tuple[str, Any, int]] = [("v", value, 0)]
    while stack:
        tag, v, level = stack.pop()
        if tag == "l":  # (text before the line break, text after the indent)
            yield v[0] + "\n" + " " * level + v[1]
            continue
        if isinstance(v, dict) and v:
            parts: List[Tuple[str, Any, int]] = []
            for i, k in enumerate(sorted(v)):
                parts += [("l", ("," if i else "", json.dumps(str(k)) + ": "), level + 1), ("v", v[k], level + 1)]
            yield "{"
            stack.append(("l", ("", "}"), level))
            stack.extend(reversed(parts))
        elif isinstance(v, list) and v:
            yield "["
            stack.append(("l", ("", "]"), level))
            stack.extend(reversed([p for i, x in enumerate(v) for p in (("l", ("," if i else "", ""), level + 1),
                                                                        ("v", x, level + 1))]))
        else:
            yield json.dumps(v)


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
    # The directories walked once: the run's id looked up and its lineage followed in the same snapshot.
    src = runindex.open_roots(dirs, use_index=not args.no_index)
    try:
        if not resolve_args("lineage", args, "run", first=args.dirs, warnings=warnings, src=(dirs, src)):
            return Exit.USAGE
        find = descendants if args.down else ancestry
        result = find(args.run, dirs, use_index=not args.no_index, warnings=warnings, src=src)
    finally:
        src.close()
    for w in dict.fromkeys(warnings):  # each once: the run's lookup and the walk may both bypass a database
        say("relaxrepro lineage: warning: %s", w)
    for line in result["unreadable"]:  # a parent among them shows as missing: this says why
        say("relaxrepro lineage: warning: unreadable: %s", line)
    if args.json:
        sys.stdout.writelines(json_chunks(result))
        sys.stdout.write("\n")
    elif args.down:
        sys.stdout.writelines(line + "\n" for line in descendant_lines(result))
    else:
        sys.stdout.write(render_ancestry(result))
    if result["error"]:
        say("relaxrepro lineage: error: %s", result["error"])
        return Exit.FAIL
    if result.get("missing"):
        say("relaxrepro lineage: warning: parent %s not found under %s; the chain stops there",
            result["missing"], ", ".join(dirs))
    if result["cycle"]:
        say("relaxrepro lineage: error: cycle in lineage: %s", " -> ".join(result["cycle"]))
        return Exit.FAIL
    return Exit.OK
