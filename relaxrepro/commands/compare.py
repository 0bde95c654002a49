"""A sweep side by side: the runs of one ``lineage.group`` and only what varies across them.

What is compared: resolved arguments (``arg.*``), selected environment (``env.*``), installed
packages (``pkg.*``) and code (``code.<repo>``: short commit, ``*`` when dirty, plus the patch
digest so two dirty runs with different edits differ). Everything equal in all runs is left out.
"""

from __future__ import annotations

import json
import sys

from ..manifest import summary
from ..manifest.fields import patch_incomplete
from ..manifest.flat import ARG_DEPTH, cell, flatten
from ..std.table import format_table, rel_path
from ..std.text import safe_format
from ._common import EXIT_FAIL, EXIT_OK, dirs_or_cwd, report_missing, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Optional, Sequence

GROUP_FIELDS = ("schema_version", "run_id", "generated_at", "lineage")


_NOT_FULLY_RECORDED = " patch:not fully recorded"


def values(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The comparable values of one run, flat, keyed ``arg.lr``, ``env.NCCL_ALGO``, ``pkg.torch``, ``code.repo``."""
    out: Dict[str, Any] = {}
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
    for prefix, node in (("arg", config.get("resolved_args")), ("env", config.get("selected_env")),
                         ("pkg", env.get("packages"))):
        if isinstance(node, dict):
            flat = flatten(node, max_depth=ARG_DEPTH)
            out.update({"%s.%s" % (prefix, k): v for k, v in flat.items()})
    code = doc.get("code")
    if isinstance(code, dict):
        for name, repo in code.items():
            if isinstance(repo, dict):
                cell = summary.short(repo.get("commit")) + ("*" if repo.get("dirty") else "")
                patch = repo.get("patch")
                if repo.get("dirty") and patch_incomplete(patch):
                    cell += _NOT_FULLY_RECORDED
                elif repo.get("dirty") and isinstance(patch, dict) and isinstance(patch.get("sha256"), str):
                    cell += " patch:" + patch["sha256"][:7]
                out["code.%s" % name] = cell
    return out


def compare_group(group: str, roots: Sequence[str], *, use_index: bool = True,
                  warnings: Optional[List[str]] = None) -> Dict[str, Any]:
    """``{group, runs: [{run_id, path, generated_at, note}], varying: {key: [value per run]}, compared,
    unreadable: [...], copies: [paths of identical copies of a run's manifest, counted once]}``; runs ordered
    by time. ``warnings``: where to add what the run index says."""
    from ..manifest import runindex
    from ..manifest.reader import ManifestError, load_manifest

    src = runindex.open_roots(roots, use_index=use_index)
    try:
        if warnings is not None:
            warnings.extend(src.warnings)
        members = [e for e in src.lookup("group", group) if e.run_id is not None]
        lost = src.lookup("run_id", None)
    finally:
        src.close()
    members.sort(key=lambda e: (e.generated_at, e.run_id or ""))
    runs: List[Dict[str, Any]] = []
    flat: List[Dict[str, Any]] = []
    results: List[Any] = []
    # A file that cannot be read may be of the group: say so rather than compare without it in silence.
    unreadable: List[str] = ["%s: %s" % (e.path, e.error) for e in lost]
    seen: Dict[Any, Dict[str, Any]] = {}
    copies: List[str] = []
    for e in members:
        try:
            doc = load_manifest(e.path)
        except ManifestError as exc:
            unreadable.append("%s: %s" % (e.path, exc))
            continue
        # A tracker's copy (TensorBoard's log dir, MLflow's local artifact store) is the same run again:
        # counted twice it would skew the group's statistics and reproducibility.
        if seen.get(doc.get("run_id")) == doc:
            copies.append(e.path)
            continue
        seen[doc.get("run_id")] = doc
        runs.append({"run_id": doc.get("run_id"), "path": e.path, "generated_at": doc.get("generated_at"),
                     "note": summary.lineage_of(doc).get("note")})
        flat.append(values(doc))
        results.append(doc.get("results") if isinstance(doc.get("results"), dict) else {})
    keys = sorted(set().union(*flat)) if flat else []
    varying = {}
    for k in keys:
        column = [f.get(k) for f in flat]
        # Patches not taken in full cannot be told apart: such a row is always shown, never "the same".
        if any(v != column[0] for v in column[1:]) or (
                len(column) > 1 and any(isinstance(v, str) and v.endswith(_NOT_FULLY_RECORDED) for v in column)):
            varying[k] = column
    return {"group": group, "runs": runs, "varying": varying, "compared": len(keys), "unreadable": sorted(unreadable),
            "metrics": metric_stats(results), "reproducibility": reproducibility(results), "copies": copies}


def metric_stats(results: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per metric across the runs that recorded it: ``{runs, mean, std, min, max}`` over the finite values
    (``std``: the sample standard deviation, 0 for one run), ``non_finite``: how many were NaN or infinite."""
    import math

    columns: Dict[str, List[float]] = {}
    odd: Dict[str, int] = {}
    for r in results:
        metrics = r.get("metrics") if isinstance(r.get("metrics"), dict) else {}
        for name, value in metrics.items():
            try:
                x = float(value)  # "NaN", "Infinity" read back as the contract says
            except (TypeError, ValueError):
                continue
            if math.isfinite(x) and not isinstance(value, bool):
                columns.setdefault(name, []).append(x)
            else:
                odd[name] = odd.get(name, 0) + 1
    out: Dict[str, Dict[str, Any]] = {}
    for name in sorted(set(columns) | set(odd)):
        xs = columns.get(name, [])
        entry: Dict[str, Any] = {"runs": len(xs) + odd.get(name, 0)}
        if xs:
            mean = math.fsum(xs) / len(xs)
            std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
            entry.update(mean=mean, std=std, min=min(xs), max=max(xs))
        if odd.get(name):
            entry["non_finite"] = odd[name]
        out[name] = entry
    return out


def reproducibility(results: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """How alike the runs came out: ``outputs`` (the weight-hash match rate: runs whose output digests all
    equal the most common set's, wherever each run wrote them) and ``trace`` (runs whose trace is
    bit-identical to the most common one),
    each ``{runs, matching, rate}`` over the runs that recorded it in full."""
    outputs: List[str] = []
    traces: List[str] = []
    for r in results:
        out = r.get("outputs")
        if isinstance(out, dict) and out:
            # By content alone: each run of a sweep writes its weights into its own directory, so the paths
            # always differ (runs/a/weights.pt, runs/b/weights.pt) where the files may not.
            digests = [e.get("sha256") if isinstance(e, dict) else None for e in out.values()]
            if all(isinstance(d, str) for d in digests):  # a digest not taken in full matches nothing
                outputs.append(json.dumps(sorted(digests)))
        trace = r.get("trace")
        if isinstance(trace, dict) and trace.get("steps"):
            traces.append(json.dumps({k: trace.get(k) for k in ("steps", "names", "values", "last_step")},
                                     sort_keys=True))
    return {"outputs": _share(outputs), "trace": _share(traces)}


def _share(keys: List[str]) -> Dict[str, Any]:
    if not keys:
        return {"runs": 0, "matching": 0, "rate": None}
    top = max(keys.count(k) for k in set(keys))
    return {"runs": len(keys), "matching": top, "rate": top / len(keys)}


def render(result: Dict[str, Any], *, cwd: str = ".") -> str:
    runs = result["runs"]
    lines = [safe_format("group %s: %d run%s, %d of %d recorded values vary",
                         result["group"], len(runs), "" if len(runs) == 1 else "s", len(result["varying"]),
                         result["compared"])]
    for i, r in enumerate(runs, 1):
        note = safe_format("  (%s)", r["note"]) if r.get("note") else ""
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
        lines.append("reproducibility:")
        lines.extend(parts)
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def run(args: argparse.Namespace) -> int:
    dirs = dirs_or_cwd(args.dirs)
    if report_missing(dirs, "compare"):
        return EXIT_FAIL
    warnings: List[str] = []
    result = compare_group(args.group, dirs, use_index=not args.no_index, warnings=warnings)
    for w in warnings:
        say("relaxrepro compare: warning: %s", w)
    for line in result["unreadable"]:
        say("relaxrepro compare: warning: unreadable: %s", line)
    if not result["runs"]:
        say("relaxrepro compare: error: no runs in group '%s' under %s", args.group, ", ".join(dirs))
        return EXIT_FAIL
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(result))
    return EXIT_OK
