"""``relaxrepro compare --group NAME``: a sweep side by side, only what varies across its runs. The comparison is
:func:`relaxrepro.analyze.compare.compare_group`'s; here, how it is shown."""

from __future__ import annotations

import json
import sys

from ..analyze.compare import compare_group, replays_line
from ..manifest.flat import cell
from ..std.table import format_table, rel_path
from ..std.text import safe_format
from ._common import Exit, dirs_or_cwd, report_missing, say, unreadable_tail

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List


def render(result: Dict[str, Any], *, cwd: str = ".") -> str:
    runs = result["runs"]
    lines = [safe_format("group %s: %d run%s, %d of %d recorded values vary",
                         result["group"], len(runs), "" if len(runs) == 1 else "s", len(result["varying"]),
                         result["compared"])]
    for i, r in enumerate(runs, 1):
        note = safe_format("  (%s)", r["note"]) if r.get("note") else ""
        if r.get("replay_of"):
            note += safe_format("  [replay of %s: %s]", r["replay_of"], r.get("verdict") or "not verified")
        lines.append(safe_format("  [%d] %s  %s", i, r["run_id"], rel_path(r["path"], cwd)) + note)
    for path in result.get("copies") or ():
        lines.append(safe_format("  (a copy, counted once: %s)", rel_path(path, cwd)))
    text = "\n".join(lines) + "\n"
    if result["varying"]:
        rows = [["KEY"] + ["[%d]" % i for i in range(1, len(runs) + 1)]]
        for key, column in result["varying"].items():
            rows.append([key] + [cell(v) for v in column])
        # Pad every column (the last too): values line up under their run's number.
        rows = [r + [""] for r in rows]
        text += "\n" + format_table(rows)
    return text + _render_results(result)


def _render_results(result: Dict[str, Any]) -> str:
    lines: List[str] = []
    metrics = result.get("metrics") or {}
    if metrics:
        lines.append("metrics across the runs:")
        for name, m in metrics.items():
            text = safe_format("  %s  %d run%s", name, m["runs"], "" if m["runs"] == 1 else "s")
            if "mean" in m:
                text += "  mean %.6g  std %.3g  min %.6g  max %.6g" % (m["mean"], m["std"], m["min"], m["max"])
            if m.get("non_finite"):
                text += "  (%d not finite)" % m["non_finite"]
            lines.append(text)
    rep = result.get("reproducibility") or {}
    parts = []
    for key, label in (("outputs", "outputs match the most common (weight-hash match rate)"),
                       ("trace", "traces bit-identical to the most common")):
        r = rep.get(key) or {}
        if r.get("runs"):
            parts.append("  %s: %d of %d runs (%.0f%%)" % (label, r["matching"], r["runs"], 100 * r["rate"]))
    if parts:
        lines.append("reproducibility%s:" % (" (replays apart)" if (result.get("replays") or {}).get("runs") else ""))
        lines.extend(parts)
    replays = replays_line(result)
    if replays:
        lines.append(replays)
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def run(args: argparse.Namespace) -> int:
    dirs = dirs_or_cwd(args.dirs)
    if report_missing(dirs, "compare"):
        return Exit.FAIL
    warnings: List[str] = []
    result = compare_group(args.group, dirs, use_index=not args.no_index, warnings=warnings)
    for w in warnings:
        say("relaxrepro compare: warning: %s", w)
    for line in result["unreadable"]:
        say("relaxrepro compare: warning: unreadable: %s", line)
    if not result["runs"]:
        say("relaxrepro compare: error: no runs in group '%s' under %s%s", args.group, ", ".join(dirs),
            unreadable_tail(len(result["unreadable"])))
        return Exit.FAIL
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(result))
    return Exit.OK
