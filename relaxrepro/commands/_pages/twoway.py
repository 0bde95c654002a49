"""The page of two runs (``report A B``, ``verify A B --html FILE``): when both recorded results, ``verify``'s
verdict first, each traced scalar of both runs on one chart with the step where they part marked, the outputs
and metrics side by side; then ``diff``'s changes and both cards."""

from __future__ import annotations

from ...analyze.diff import CATEGORIES, diff_documents, summary_line
from ...analyze.verify import DIVERGED, REPRODUCED, shown, verify
from ...manifest.fields import get
from . import html as H
from .charts import row_keys, trace_chart, trace_columns, x_of

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Mapping, Optional, Sequence, Tuple


def has_results(doc: Mapping[str, Any]) -> bool:
    return isinstance(doc.get("results"), dict) and bool(doc["results"])


def trace_charts(result: Mapping[str, Any], old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """A chart per traced scalar of either run, both runs' lines over the steps; the first step ``verify``
    found them parting marked (none when nothing differs)."""
    sa, ca = trace_columns(get(old, "results.trace", None))
    sb, cb = trace_columns(get(new, "results.trace", None))
    if not ca and not cb:
        return ""
    xa, xlabel = x_of(sa)
    xb, xlabel_b = x_of(sb)
    if xlabel != xlabel_b:
        xa, xb, xlabel = [float(i) for i in range(len(sa))], [float(i) for i in range(len(sb))], "row"
    row_b = {k: j for j, k in enumerate(row_keys(sb))}
    pairs = [(i, row_b[k]) for i, k in enumerate(row_keys(sa)) if k in row_b]
    first = (result.get("trace") or {}).get("first")
    mark = None
    if first:
        want = (first["step"] if type(first["step"]) in (int, float) else repr(first["step"]),
                int(first.get("occurrence") or 1) - 1)
        rows = [i for i, k in enumerate(row_keys(sa)) if k == want]
        if rows:
            mark = (xa[rows[0]], first["step"])
    ids = (old.get("run_id"), new.get("run_id"))
    out = []
    for name in dict.fromkeys(list(ca) + list(cb)):
        a, b = ca.get(name, []), cb.get(name, [])
        gaps = [(xa[i], abs(a[i] - b[j])) for i, j in pairs if i < len(a) and j < len(b)
                and a[i] is not None and b[j] is not None]
        out.append(trace_chart(name, list(zip(xa, a)), list(zip(xb, b)), gaps, mark, ids, xlabel))
    return '<h3>Trace</h3>%s' % "".join(out)


def _status(text: str) -> Tuple[str, None, str]:
    return (H.esc(text), None, "ok" if text == "same" else "bad")


def verify_section(result: Mapping[str, Any], old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """``verify``'s verdict, then the traces, the metrics and outputs side by side, and the likely causes."""
    verdict = result["verdict"]
    cls = "ok" if verdict == REPRODUCED else "bad" if verdict == DIVERGED else "WARN"
    how = "bit-exact" if result.get("exact") else "rtol=%g atol=%g" % (result.get("rtol"), result.get("atol"))
    text = ['<section id="verify"><h2>Did it reproduce?</h2><p class="verdict" data-verdict="%s">'
            '<span class="%s">%s</span> <span class="mute">(%s)</span></p><p>%s</p>'
            % (H.esc(verdict), cls, H.esc(verdict), H.esc(how), H.esc(result.get("why")))]
    t = result.get("trace") or {}
    first = t.get("first")
    if first:
        text.append("<p>%s</p>" % H.esc("The runs part at step %s: %s %s in %s, %s in %s." % (
            first["step"], first["scalar"], shown(first["old"]), old.get("run_id"), shown(first["new"]),
            new.get("run_id"))))
    for note in t.get("notes") or ():
        text.append('<p class="mute">%s</p>' % H.esc(note))
    text.append(trace_charts(result, old, new))
    ids = [H.esc(old.get("run_id")), H.esc(new.get("run_id"))]
    if result.get("metrics"):
        rows = [[H.esc(r["name"]), _status(r["status"]), H.esc(shown(r["old"])), H.esc(shown(r["new"])),
                 (H.esc("%.3g" % r["rel_diff"] if isinstance(r.get("rel_diff"), float) else r.get("rel_diff")),
                  r["rel_diff"] if isinstance(r.get("rel_diff"), float) else None)] for r in result["metrics"]]
        text.append("<h3>Metrics</h3>" + H.table(["metric", "status"] + ids + ["relative difference"], rows))
    if result.get("outputs"):
        rows = [[H.esc(r["path"]), _status(r["status"]), H.esc(str(r["old"] or "-")[:16]),
                 H.esc(str(r["new"] or "-")[:16])] for r in result["outputs"]]
        text.append("<h3>Outputs (sha256)</h3>" + H.table(["output", "status"] + ids, rows))
    if result.get("causes"):
        text.append("<h3>Likely causes</h3><ul>%s</ul>" % "".join("<li>%s</li>" % H.esc(c)
                                                                    for c in result["causes"]))
    return "".join(text) + "</section>\n"


def two_run_page(paths: Sequence[str], docs: Sequence[Mapping[str, Any]],
                 result: Optional[Mapping[str, Any]] = None) -> str:
    """Two runs: ``verify``'s verdict and traces when both recorded results (``result``: one already computed),
    then ``diff``'s changes in its ranking, then both cards."""
    old, new = docs[0], docs[1]
    body = ""
    if result is None and has_results(old) and has_results(new):
        result = verify(old, new)
    if result is not None:
        body += verify_section(result, old, new)
    changes, hidden = diff_documents(old, new)
    body += H.diff_section(changes, hidden, summary_line(changes, hidden, how=""), old.get("run_id"), new.get("run_id"),
                           CATEGORIES)
    body += '<div class="two">%s</div>' % "".join("<div>%s</div>" % H.run_section(d, full=False) for d in docs)
    return H.page("%s vs %s" % (old.get("run_id"), new.get("run_id")), "diff", body, H.esc(" vs ".join(paths)))
