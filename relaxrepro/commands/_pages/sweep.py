"""A sweep (a group of runs, ``compare_group``'s result) on the page: its table, each metric charted against each
argument that varies (log x when the values span more than a decade, categories as bands; failed runs and
replays drawn apart), and how alike the runs came out, as a sentence and a bar."""

from __future__ import annotations

import json

from ...analyze.compare import replays_line
from ...manifest.fields import get
from . import html as H
from .charts import Axis

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, List, Mapping, Optional, Sequence, Tuple

MAX_METRICS, MAX_AXES = 6, 3
"""Small multiples: at most this many metrics, each against at most this many varying values."""


def _metrics(doc: Any) -> Mapping[str, Any]:
    m = get(doc, "results.metrics", None)
    return m if isinstance(m, dict) else {}


def _kind(run: Mapping[str, Any], doc: Any) -> str:
    """``replay`` (of another run), ``failed`` (did not end ok) or ``ok``."""
    if run.get("replay_of"):
        return "replay"
    status = get(doc, "outcome.status", None)
    return "failed" if status not in (None, "ok") and get(doc, "outcome", None) is not None else "ok"


def _axes(varying: Mapping[str, Sequence[Any]]) -> List[str]:
    """The varying values worth a chart: the arguments first, then the environment, packages and code."""
    order = ("arg.", "env.", "pkg.", "code.")
    keys = [k for k in varying if k.startswith(order)]
    return sorted(keys, key=lambda k: (next(i for i, p in enumerate(order) if k.startswith(p)), k))[:MAX_AXES]


def _text(value: Any) -> str:
    """A category's name, unescaped (the tick escapes it once)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def scatter_svg(metric: str, along: str, points: Sequence[Tuple[Any, Optional[float], str, str]]) -> str:
    """``metric`` against ``along``: a point per run ((x value, y, run id, kind)); numbers on a linear or log
    axis, anything else as one band per distinct value; ok runs joined in x order."""
    got = [p for p in points if p[1] is not None]
    if not got:
        return '<p class="mute">%s</p>' % H.esc("%s: no numeric value to chart" % metric)
    w, h, left, right, top, bottom = 420, 220, 64, 12, 24, 40
    numeric = all(H.number(x) is not None for x, _, _, _ in got)
    if numeric:  # the range of every run's value, so the charts of one sweep share their x axis
        ax = Axis([H.number(x) for x, _, _, _ in points if H.number(x) is not None], left + 8, w - right - 8)
        xpos = {i: ax(H.number(p[0])) for i, p in enumerate(got)}
        xticks = [(ax(v), t) for v, t in ax.ticks()]
        bands = ""
    else:
        cats = sorted({_text(x) for x, _, _, _ in got})
        step = (w - left - right) / len(cats)
        xpos = {i: left + step * (cats.index(_text(p[0])) + 0.5) for i, p in enumerate(got)}
        xticks = [(left + step * (i + 0.5), c[:24]) for i, c in enumerate(cats)]
        bands = "".join('<rect class="band" x="%.1f" y="%d" width="%.1f" height="%d"/>' % (
            left + step * i, top, step, h - bottom - top) for i in range(0, len(cats), 2))
    ay = Axis([y for _, y, _, _ in got], h - bottom - 6, top + 6)
    out = ['<svg class="chart sweep" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'role="img" aria-label="%s against %s%s" data-x="%s" data-y="%s">'
           % (w, h, w, h, H.esc(metric), H.esc(along), ", log x" if numeric and ax.log else "", H.esc(along),
              H.esc(metric)), bands,
           '<text class="title" x="%d" y="%d">%s</text>' % (left, 14, H.esc(metric, 50)),
           '<path class="ax" d="M%d %dV%dH%d"/>' % (left, top, h - bottom, w - right)]
    out += ['<text class="tick y" x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 4, ay(v) + 4, H.esc(t))
            for v, t in ay.ticks()]
    out += ['<text class="tick x" x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x, h - bottom + 14, H.esc(t))
            for x, t in xticks]
    out.append('<text class="sub" x="%d" y="%d" text-anchor="end">%s%s</text>' % (
        w - right, h - 6, H.esc(along, 50), " (log)" if numeric and ax.log else ""))
    line = sorted((xpos[i], ay(p[1])) for i, p in enumerate(got) if p[3] == "ok")
    if numeric and len(line) > 1:
        out.append('<polyline class="ln" points="%s"/>' % " ".join("%.1f,%.1f" % xy for xy in line))
    # A replay sits where its original does: a wider ring beneath, so both stay visible.
    for i, (x, y, run, kind) in sorted(enumerate(got), key=lambda p: (p[1][3] != "replay", p[0])):
        cls = "pt" if kind == "ok" else "pt " + kind
        out.append('<circle class="%s" data-run="%s" cx="%.1f" cy="%.1f" r="%d"><title>%s: %s %s, %s %s%s</title>'
                   '</circle>' % (cls, H.esc(run), xpos[i], ay(y), 7 if kind == "replay" else 4, H.esc(run),
                                  H.esc(along), H.cell(x, 40), H.esc(metric), H.esc("%g" % y),
                                  " (%s)" % kind if kind != "ok" else ""))
    return "".join(out) + "</svg>"


def _share_line(what: str, share: Any) -> Tuple[str, Optional[float]]:
    if not isinstance(share, dict) or not share.get("runs"):
        return "", None
    return "%d of %d runs %s" % (share["matching"], share["runs"], what), share.get("rate")


def reproducibility_block(result: Mapping[str, Any]) -> str:
    """``compare_group``'s reproducibility as a sentence, with a bar per measure (its share of matching runs)."""
    rep = result.get("reproducibility") or {}
    rows = [_share_line("have a bit-identical trace", rep.get("trace")),
            _share_line("wrote the same weights (output digests matching)", rep.get("outputs"))]
    rows = [(text, rate) for text, rate in rows if text]
    if not rows:
        return '<p class="mute">Reproducibility: no run of this group recorded a trace or output digests.</p>'
    bars = "".join('<div class="bar" title="%s"><svg xmlns="http://www.w3.org/2000/svg" width="160" height="10" '
                   'viewBox="0 0 160 10" role="img" aria-label="%s"><rect class="track" width="160" height="10"/>'
                   '<rect class="fill" width="%.1f" height="10"/></svg> %s</div>'
                   % (H.esc(t), H.esc(t), 160 * (rate or 0), H.esc(t)) for t, rate in rows)
    return '<p class="repro">Reproducibility: %s.</p>%s' % (H.esc("; ".join(t for t, _ in rows)), bars)


def sweep_section(result: Mapping[str, Any], docs: Mapping[str, Any], chart: Optional[str] = None,
                  max_columns: int = 40) -> str:
    """``compare_group``'s result: a sortable table (a run per row, a column per varying value, then the
    metrics), each metric charted against each varying value (``chart``: only that metric, or only that value),
    and the group's reproducibility."""
    runs = result["runs"]
    run_docs = [docs.get(str(r["run_id"]), {}) for r in runs]
    metrics = sorted({k for d in run_docs for k in _metrics(d)})
    columns = list(result["varying"])
    cols = [("metric." + k, [_metrics(d).get(k) for d in run_docs]) for k in metrics]
    cols += [(k, result["varying"][k]) for k in columns[:max_columns]]
    head = ["run"] + [H.esc(k) for k, _ in cols]
    rows = []
    for i, r in enumerate(runs):
        rows.append(['<a href="#%s">%s</a>' % (H.anchor(r["run_id"]), H.esc(r["run_id"]))]
                    + [(H.metric(col[i]) if name.startswith("metric.") else H.cell(col[i], 80), H.number(col[i]))
                       for name, col in cols])
    gid = "group-" + H.anchor(result["group"])[4:]
    text = ['<section id="%s" class="sweep"><h2>Sweep %s</h2><p>%s</p>' % (
        gid, H.esc(result["group"]), H.esc("%d runs; %d of %d recorded values vary" % (
            len(runs), len(result["varying"]), result["compared"])))]
    text.append(reproducibility_block(result))
    replays = replays_line(result)
    if replays:
        text.append("<p>%s</p>" % H.esc(replays))
    if result.get("copies"):
        text.append('<p class="mute">%s</p>' % H.esc("%d identical copies of a run's manifest counted once"
                                                     % len(result["copies"])))
    if len(columns) > max_columns:
        text.append('<p class="mute">%s</p>' % H.esc("%d more varying values not shown (relaxrepro compare --group "
                                                     "shows them all)" % (len(columns) - max_columns)))
    text.append(table_and_charts(cols, runs, run_docs, metrics, chart, head, rows))
    return "".join(text) + "</section>\n"


def table_and_charts(cols: Sequence[Tuple[str, Sequence[Any]]], runs: Sequence[Mapping[str, Any]],
                     run_docs: Sequence[Any], metrics: Sequence[str], chart: Optional[str], head: Sequence[str],
                     rows: Sequence[Any]) -> str:
    out = [H.table(head, rows, sortable=True)]
    col = dict(cols)
    names = ["metric." + m for m in metrics]
    axes = _axes({k: v for k, v in cols if not k.startswith("metric.")})
    if chart is not None:
        if chart not in col:
            return "".join(out) + '<p class="mute">%s</p>' % H.esc("chart: %s does not vary in this group" % chart)
        if chart.startswith("metric."):
            names = [chart]
        else:
            axes = [chart]
            names = names or [chart]
    if not axes:  # nothing varies but the results: the metric in run order
        for name in names[:MAX_METRICS]:
            out.append(H.chart_svg(name, [(str(r["run_id"]), H.number(v)) for r, v in zip(runs, col[name])]))
        return "".join(out)
    kinds = [_kind(r, d) for r, d in zip(runs, run_docs)]
    charts = []
    for name in names[:MAX_METRICS]:
        for along in axes:
            pts = [(x, H.number(y), str(r["run_id"]), k) for x, y, r, k in zip(col[along], col[name], runs, kinds)]
            charts.append(scatter_svg(name, along, pts))
    legend = ('<p class="mute">Each metric against each value that varies; filled: ended ok; red ring: did not end '
              'ok; a wide ring: a replay of another run.</p>')
    return "".join(out) + '<div class="multiples">%s</div>%s' % ("".join(charts), legend)
