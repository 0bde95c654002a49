"""Did run B reproduce run A? Outputs, metrics and the trace, bit for bit unless told (``verify``, and
``rerun --quick/--full`` after its replay).

Pure over two documents (:func:`verify`, and :func:`render` for people), so both commands print the same
verdict. Rules, each pinned by a test:

- bit-exact by default: two floats are the same when their bits are (``-0.0`` and ``0.0`` differ, and the
  report says it is the sign alone); any NaN equals any NaN (a trace keeps NaN as ``nan``, payload-free);
- with ``--rtol``/``--atol``: ``|a - b| <= atol + rtol * |b|`` (``b``: B's value; inclusive, as
  ``numpy.isclose``), so ``-0.0`` and ``0.0`` are the same; NaN still only equals NaN, an infinity only itself;
- an output is the same when both digests are; missing on one side (or both) it differs; a digest not
  recorded in full (an unreadable file) is never called the same: with nothing else differing the verdict is
  "nothing to verify" (exit 2), not "reproduced";
- a side without ``results`` (any manifest before 1.3) leaves "nothing to verify"; a section recorded on one
  side only (metrics, outputs, the trace) is a divergence;
- the trace is compared row by row in the order written, every row kept: the k-th row of a step (a per-epoch
  counter comes back to step 0) with the k-th row of that step on the other side; rows kept on one side only
  or in another order differ, runs of another length (last step or number of calls) differ, a trace cut by
  the size cap is compared on what is left and says so. ``--steps N``: only the first N rows each kept,
  nothing else (what a quick replay checks).
"""

from __future__ import annotations

import math

from ..std.text import safe_format
from .causes import likely_causes

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

REPRODUCED = "reproduced"
DIVERGED = "diverged"
NOTHING = "nothing to verify"

SAME, DIFFERS, MISSING, INCOMPLETE = "same", "differs", "missing", "incomplete"


# -- values -------------------------------------------------------------------------------------------

def number(value: Any) -> Any:
    """A recorded value as a number: an int as itself; a float; ``float.hex`` and ``"NaN"``/``"Infinity"``
    strings parsed; None for anything else (a ``repr`` the trace kept, a bad field)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float.fromhex(value) if "0x" in value else float(value)
        except (ValueError, OverflowError):
            return None
    return None


def same_value(a: Any, b: Any, rtol: float = 0.0, atol: float = 0.0) -> bool:
    """Whether two recorded values agree: bit for bit without a tolerance, else ``|a-b| <= atol + rtol*|b|``."""
    x, y = number(a), number(b)
    if x is None or y is None:
        return a == b and x is None and y is None  # two reprs: the same text
    if isinstance(x, float) and math.isnan(x) or isinstance(y, float) and math.isnan(y):
        return isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)
    if not rtol and not atol:
        if isinstance(x, int) and isinstance(y, int):
            return x == y
        return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= atol + rtol * abs(y)


def sign_only(a: Any, b: Any) -> bool:
    """``-0.0`` against ``0.0``: equal values, another sign bit."""
    x, y = number(a), number(b)
    return x is not None and y is not None and x == 0 and y == 0 and \
        math.copysign(1.0, x) != math.copysign(1.0, y)


def rel_diff(a: Any, b: Any) -> Any:
    """``|a-b| / |b|``; ``"Infinity"`` when ``b`` is 0 and ``a`` is not; None when either is no finite number."""
    x, y = number(a), number(b)
    if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
        return None
    if x == y:
        return 0.0
    return abs(x - y) / abs(y) if y else "Infinity"


def shown(value: Any) -> str:
    """A recorded value for people: a float in its shortest exact decimal form (``repr``), else as written."""
    x = number(value)
    if isinstance(value, str) and "0x" in value and x is not None:
        return repr(x)
    return "missing" if value is None else str(value)


# -- the comparison --------------------------------------------------------------------------------------

def _results(doc: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    results = doc.get("results")
    return results if isinstance(results, dict) and results else None


def compare_outputs(a: Any, b: Any) -> List[Dict[str, Any]]:
    """One row per path of either side: ``{path, status, old, new}`` (digests, None where absent), and
    ``old_path`` where the old run kept the same file elsewhere (see :func:`_moved`)."""
    a = a if isinstance(a, dict) else {}
    b = b if isinstance(b, dict) else {}
    moved = _moved(set(a) - set(b), set(b) - set(a))  # {new path: old path}
    pairs = [(moved.get(p, p), p) for p in sorted((set(a) - set(moved.values())) | set(b), key=str)]
    rows = []
    for old_path, path in pairs:
        ea, eb = a.get(old_path), b.get(path)
        da = ea.get("sha256") if isinstance(ea, dict) else None
        db = eb.get("sha256") if isinstance(eb, dict) else None
        row: Dict[str, Any] = {"path": path, "old": da, "new": db}
        if old_path != path:
            row["old_path"] = old_path
        if _absent(ea) and _absent(eb):  # neither run left it: nothing to tell them apart by
            row["status"] = INCOMPLETE
            row["why"] = "missing in both"
        elif _absent(ea) or _absent(eb):
            row["status"] = MISSING
            row["missing_in"] = "old" if _absent(ea) else "new"
        elif not isinstance(da, str) or not isinstance(db, str):
            row["status"] = INCOMPLETE
            row["why"] = "digest not recorded in full in %s" % ("both" if da == db else "old" if da is None else "new")
        else:
            row["status"] = SAME if da == db and ea.get("kind") == eb.get("kind") else DIFFERS
        rows.append(row)
    return rows


def _moved(only_a: Any, only_b: Any) -> Dict[str, str]:
    """{new path: old path} for outputs each run wrote into its own directory (``runs/a/weights.pt``,
    ``runs/b/weights.pt``): paired by file name where that name is one output's alone on each side."""
    def by_name(paths: Any) -> Dict[str, List[str]]:
        names: Dict[str, List[str]] = {}
        for p in paths:
            names.setdefault(str(p).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1], []).append(p)
        return names

    na, nb = by_name(only_a), by_name(only_b)
    return {nb[n][0]: na[n][0] for n in na if len(na[n]) == 1 and len(nb.get(n, ())) == 1}


def _absent(entry: Any) -> bool:
    return not isinstance(entry, dict) or entry.get("kind") == "missing"


def compare_metrics(a: Any, b: Any, rtol: float, atol: float) -> List[Dict[str, Any]]:
    """One row per metric of either side: ``{name, status, old, new, rel_diff}``."""
    a = a if isinstance(a, dict) else {}
    b = b if isinstance(b, dict) else {}
    rows = []
    for name in sorted(set(a) | set(b), key=str):
        va, vb = a.get(name), b.get(name)
        row: Dict[str, Any] = {"name": name, "old": va, "new": vb, "rel_diff": rel_diff(va, vb)}
        if name not in a or name not in b:
            row["status"] = MISSING
        elif number(va) is None or number(vb) is None:
            row["status"] = INCOMPLETE
        else:
            row["status"] = SAME if same_value(va, vb, rtol, atol) else DIFFERS
            if sign_only(va, vb) and row["status"] == DIFFERS:
                row["note"] = "-0.0 against 0.0: the same value with another sign bit"
        rows.append(row)
    return rows


def _trace_columns(trace: Mapping[str, Any]) -> Tuple[List[Any], Dict[str, List[Any]], List[str], bool]:
    """(steps, {name: column}, names, cut): every row in the order written; a cut trace (size cap) keeps its
    complete rows."""
    steps = trace.get("steps") if isinstance(trace.get("steps"), list) else []
    names = [str(x) for x in trace.get("names")] if isinstance(trace.get("names"), list) else []
    values = trace.get("values") if isinstance(trace.get("values"), list) else []
    columns = [c if isinstance(c, list) else [] for c in values[:len(names)]]
    n = min([len(steps)] + [len(c) for c in columns]) if names else len(steps)
    cut = n < len(steps) or any(len(c) != len(steps) for c in columns) or len(columns) < len(names) or \
        any(str(k).endswith("_truncated") for k in trace)
    return steps[:n], dict(zip(names, columns)), names, cut


def _pair_rows(steps_a: List[Any], steps_b: List[Any]) -> Tuple[List[int], List[int]]:
    """(rows of a, rows of b) paired: the k-th row of a step with the k-th row of that step on the other side (a
    per-epoch counter comes back to each step), so rows pair up in the order written also where one side kept
    rows the other did not."""
    rows_b: Dict[Any, List[int]] = {}
    for j, step in enumerate(steps_b):
        rows_b.setdefault(step if type(step) in (int, float) else repr(step), []).append(j)
    seen: Dict[Any, int] = {}
    ia: List[int] = []
    ib: List[int] = []
    for i, step in enumerate(steps_a):
        key = step if type(step) in (int, float) else repr(step)
        k = seen.get(key, 0)
        seen[key] = k + 1
        rows = rows_b.get(key)
        if rows is not None and k < len(rows):
            ia.append(i)
            ib.append(rows[k])
    return ia, ib


_EXACT_TYPES = frozenset({str, int, type(None)})
"""Values whose ``==`` is :func:`same_value`'s verdict at any tolerance (a float's is not: ``-0.0 == 0.0``)."""


def _differing(ca: Optional[List[Any]], cb: Optional[List[Any]], ia: Optional[List[int]], ib: Optional[List[int]],
               count: int, rtol: float, atol: float) -> List[int]:
    """The pairs (by position) where one scalar's values differ; ``ia``/``ib``: each pair's row on each side
    (None: row k with row k); a column absent on one side is a column of nulls."""
    if ia is None and ca is not None and cb is not None:
        xa, xb = ca[:count], cb[:count]
        if xa == xb and _EXACT_TYPES.issuperset(set(map(type, xa)) | set(map(type, xb))):
            return []  # the same values in the same rows, compared at C speed
    bad = []
    for k in range(count):
        a = None if ca is None else ca[k if ia is None else ia[k]]
        b = None if cb is None else cb[k if ib is None else ib[k]]
        if a is None and b is None or a == b and type(a) is type(b) and type(a) in _EXACT_TYPES:
            continue
        if a is None or b is None or not same_value(a, b, rtol, atol):
            bad.append(k)
    return bad


def _ordinal(n: int) -> str:
    return "%d%s" % (n, "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th"))


def compare_trace(a: Any, b: Any, rtol: float, atol: float, steps: Optional[int]) -> Optional[Dict[str, Any]]:
    """The traces side by side, row by row in the order written (a step that comes again is compared with the
    same step's row of the same rank on the other side): ``{status, compared, differing, first: {step, scalar,
    old, new[, occurrence]}, notes}``; None when neither side has one."""
    has_a, has_b = isinstance(a, dict), isinstance(b, dict)
    if not has_a and not has_b:
        return None
    if not has_a or not has_b:
        return {"status": MISSING, "missing_in": "old" if not has_a else "new", "compared": 0, "differing": 0,
                "first": None, "notes": []}
    steps_a, cols_a, names_a, cut_a = _trace_columns(a)
    steps_b, cols_b, names_b, cut_b = _trace_columns(b)
    notes: List[str] = []
    if steps is not None:
        steps_a, steps_b = steps_a[:steps], steps_b[:steps]
    ia: Optional[List[int]] = None
    ib: Optional[List[int]] = None
    count = min(len(steps_a), len(steps_b))
    if steps_a[:count] != steps_b[:count]:  # else one side's rows begin the other's: paired in place
        ia, ib = _pair_rows(steps_a, steps_b)
        count = len(ia)
    only_a, only_b = len(steps_a) - count, len(steps_b) - count
    first_k, first_name = count, None
    bad_rows = bytearray(count)
    for name in dict.fromkeys(names_a + names_b):
        bad = _differing(cols_a.get(name), cols_b.get(name), ia, ib, count, rtol, atol)
        for k in bad:
            bad_rows[k] = 1
        if bad and bad[0] < first_k:
            first_k, first_name = bad[0], name
    differing = bad_rows.count(1)
    first = None
    if first_name is not None:
        row = first_k if ia is None else ia[first_k]
        step = steps_a[row]
        old = cols_a[first_name][row] if first_name in cols_a else None
        new = cols_b[first_name][first_k if ib is None else ib[first_k]] if first_name in cols_b else None
        first = {"step": step, "scalar": first_name, "old": old, "new": new}
        if steps_a.count(step) > 1:
            first["occurrence"] = steps_a[:row].count(step) + 1
        if sign_only(old, new):
            first["note"] = "-0.0 against 0.0: the same value with another sign bit"
    status = DIFFERS if differing else SAME
    for cut, side in ((cut_a, "old"), (cut_b, "new")):
        if cut:
            notes.append("the %s trace was cut by the size cap: compared on the rows it kept" % side)
    if ib is not None and any(ib[k] > ib[k + 1] for k in range(len(ib) - 1)):
        status = DIFFERS
        notes.append("the rows come in another order")
    if (only_a or only_b) and not (cut_a or cut_b):
        status = DIFFERS
        notes.append("rows recorded on one side only: %d in old, %d in new" % (only_a, only_b))
    if steps is None and not (cut_a or cut_b):
        if a.get("last_step") != b.get("last_step"):
            status = DIFFERS
            notes.append("old ran to step %s, new to step %s" % (a.get("last_step"), b.get("last_step")))
        elif a.get("calls") != b.get("calls"):  # a per-epoch counter ends on the same step whatever the length
            status = DIFFERS
            notes.append("old called trace %s times, new %s" % (a.get("calls"), b.get("calls")))
    if not count:
        status = DIFFERS if status == DIFFERS else INCOMPLETE
        notes.append("no step recorded on both sides")
    return {"status": status, "compared": count, "differing": differing, "first": first, "notes": notes}


def verify(old: Mapping[str, Any], new: Mapping[str, Any], *, rtol: float = 0.0, atol: float = 0.0,
           steps: Optional[int] = None) -> Dict[str, Any]:
    """Whether ``new`` reproduced ``old``: ``{"verdict": "reproduced" | "diverged" | "nothing to verify",
    "why", "outputs", "metrics", "trace", "causes", ...}`` (see the module docstring for the rules).
    ``steps``: compare the first ``steps`` trace steps only, not outputs nor metrics."""
    out: Dict[str, Any] = {
        "old": {"run_id": old.get("run_id")}, "new": {"run_id": new.get("run_id")},
        "rtol": rtol, "atol": atol, "steps": steps, "exact": not rtol and not atol,
        "outputs": [], "metrics": [], "trace": None, "causes": [], "why": "",
    }
    ra, rb = _results(old), _results(new)
    if ra is None or rb is None:
        side = "either" if ra is None and rb is None else "old" if ra is None else "new"
        out.update(verdict=NOTHING, why="no results recorded in %s run (relaxrepro.result, trace, "
                   "run --outputs)" % side)
        return out
    if steps is None:
        out["outputs"] = compare_outputs(ra.get("outputs"), rb.get("outputs"))
        out["metrics"] = compare_metrics(ra.get("metrics"), rb.get("metrics"), rtol, atol)
    out["trace"] = compare_trace(ra.get("trace"), rb.get("trace"), rtol, atol, steps)
    if steps is not None and (out["trace"] is None or out["trace"]["status"] == MISSING):
        out.update(verdict=NOTHING, why="--steps compares the trace, and %s run recorded none" % (
            "either" if out["trace"] is None else out["trace"]["missing_in"]))
        return out
    statuses = [r["status"] for r in out["outputs"] + out["metrics"]]
    if out["trace"] is not None:
        statuses.append(out["trace"]["status"])
    if not statuses:
        out.update(verdict=NOTHING, why="neither run recorded outputs, metrics or a trace")
    elif any(s in (DIFFERS, MISSING) for s in statuses):
        out.update(verdict=DIVERGED, why=_count_line(statuses))
        out["causes"] = likely_causes(old, new)
    elif INCOMPLETE in statuses:
        out.update(verdict=NOTHING, why="nothing differs, but not everything was recorded in full: " +
                   _count_line(statuses))
    else:
        out.update(verdict=REPRODUCED, why=_count_line(statuses))
    return out


def _count_line(statuses: List[str]) -> str:
    counts = [(s, statuses.count(s)) for s in (SAME, DIFFERS, MISSING, INCOMPLETE) if s in statuses]
    return ", ".join("%d %s" % (n, s) for s, n in counts)


# -- showing it ----------------------------------------------------------------------------------------

def render(result: Mapping[str, Any]) -> str:
    """The report for people; every value from the manifests escaped."""
    how = "bit-exact" if result.get("exact") else "rtol=%g atol=%g" % (result.get("rtol"), result.get("atol"))
    if result.get("steps") is not None:
        how += ", first %d trace steps" % result["steps"]
    lines = [safe_format("verify %s -> %s: %s (%s)", result["old"].get("run_id"), result["new"].get("run_id"),
                         result["verdict"], how)]
    if result.get("why"):
        lines.append(safe_format("  %s", result["why"]))
    if result.get("outputs"):
        lines.append("outputs:")
        for r in result["outputs"]:
            if r["status"] == SAME:
                detail = safe_format("sha256 %s", str(r["new"])[:12])
            elif r["status"] == DIFFERS:
                detail = safe_format("sha256 %s -> %s", str(r["old"])[:12], str(r["new"])[:12])
            elif r["status"] == MISSING:
                detail = "missing in %s" % r["missing_in"]
            else:
                detail = safe_format("%s", r.get("why"))
            where = safe_format("%s -> %s", r["old_path"], r["path"]) if r.get("old_path") else r["path"]
            lines.append(safe_format("  %-10s %s  ", r["status"], where) + detail)
    if result.get("metrics"):
        lines.append("metrics:")
        for r in result["metrics"]:
            text = safe_format("  %-10s %s  %s", r["status"], r["name"], shown(r["old"]))
            if r["status"] != SAME:
                text += safe_format(" -> %s", shown(r["new"]))
                if isinstance(r.get("rel_diff"), float) and r["rel_diff"]:
                    text += " (relative difference %.3g)" % r["rel_diff"]
            if r.get("note"):
                text += safe_format("  (%s)", r["note"])
            lines.append(text)
    t = result.get("trace")
    if t is not None:
        if t["status"] == MISSING:
            lines.append("trace: missing in %s" % t["missing_in"])
        else:
            lines.append("trace: %s, %d row%s compared%s" % (
                t["status"], t["compared"], "" if t["compared"] == 1 else "s",
                ", %d differ" % t["differing"] if t["differing"] else ""))
            f = t.get("first")
            if f:
                where = " (%s occurrence)" % _ordinal(f["occurrence"]) if isinstance(f.get("occurrence"), int) else ""
                lines.append(safe_format("  first parts at step %s%s, %s: %s -> %s", f["step"], where, f["scalar"],
                                         shown(f["old"]), shown(f["new"])) +
                             safe_format(" (%s -> %s)", f["old"], f["new"]))
                if f.get("note"):
                    lines.append(safe_format("  (%s)", f["note"]))
            for note in t.get("notes") or ():
                lines.append(safe_format("  %s", note))
    if result.get("causes"):
        lines.append("likely causes:")
        lines.extend(safe_format("  - %s", c) for c in result["causes"])
    return "\n".join(lines) + "\n"
