"""The pages' charts as inline SVG: axes whose tick labels never repeat (log scale where the values span more
than a decade), and the two-run trace chart (both runs' lines over the steps, the step where they part marked,
``|a-b|`` beneath). Pure: numbers in, escaped text out.
"""

from __future__ import annotations

import math

from ...analyze.verify import number
from ...manifest.fields import get
from .html import esc

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

DECADE = 10.0
"""Values spanning more than this ratio (all positive) are drawn on a log scale."""


def wants_log(values: Sequence[float]) -> bool:
    """Whether ``values`` (finite) are all positive and span more than a decade."""
    return bool(values) and min(values) > 0 and max(values) / min(values) > DECADE


def label(value: float) -> str:
    """A tick label: ``1e-4`` for a power of ten far from 1, else ``%g``."""
    if value and abs(value) < 1e16:
        exp = math.log10(abs(value))
        if abs(exp - round(exp)) < 1e-9 and abs(round(exp)) >= 3:
            return "%s1e%d" % ("-" if value < 0 else "", round(exp))
    return "%g" % value


def _distinct(values: Sequence[float]) -> List[str]:
    """Labels for ``values``, with as many digits as it takes for no two to read the same."""
    for digits in range(3, 17):
        texts = [label(v) if digits == 3 else "%.*g" % (digits, v) for v in values]
        if len(set(texts)) == len(texts):
            return texts
    return ["%r" % v for v in values]


class Axis:
    """A value range mapped onto pixels ``[p0, p1]`` (``p1`` may be below ``p0``: a y axis)."""

    def __init__(self, values: Sequence[float], p0: float, p1: float, log: Optional[bool] = None) -> None:
        self.log = wants_log(values) if log is None else log
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        if self.log:
            lo, hi = math.log10(lo), math.log10(hi)
        if lo == hi:  # a flat series: a band around its one value, one tick
            pad = abs(lo) * 0.05 or 1.0
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.p0, self.p1 = lo, hi, p0, p1
        self.flat = values and min(values) == max(values)
        self.values = values

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.p0 + (self.p1 - self.p0) * (v - self.lo) / (self.hi - self.lo)

    def ticks(self) -> List[Tuple[float, str]]:
        """(value, label) pairs inside the range, labels all different."""
        if self.flat:
            values = [self.values[0]]
        elif self.log:
            values = [10.0 ** e for e in range(math.ceil(self.lo - 1e-9), math.floor(self.hi + 1e-9) + 1)]
            if len(values) < 2:
                values = [10.0 ** self.lo, 10.0 ** self.hi]
        else:
            raw = (self.hi - self.lo) / 4
            step = 10.0 ** math.floor(math.log10(raw))
            step *= next(m for m in (1, 2, 5, 10) if step * m >= raw)
            first = math.ceil(self.lo / step - 1e-9)
            values = [k * step for k in range(first, math.floor(self.hi / step + 1e-9) + 1)]
            values = [0.0 if abs(v) < step * 1e-9 else v for v in values] or [self.lo, self.hi]
        return list(zip(values, _distinct(values)))


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _points(pairs: Sequence[Tuple[float, float]], ax: Axis, ay: Axis) -> str:
    return " ".join("%.1f,%.1f" % (ax(x), ay(y)) for x, y in pairs)


def trace_chart(name: str, a: Sequence[Tuple[float, Any]], b: Sequence[Tuple[float, Any]],
                gaps: Sequence[Tuple[float, float]], mark: Optional[Tuple[float, Any]], names: Tuple[Any, Any],
                xlabel: str = "step") -> str:
    """One scalar of two runs: ``a`` and ``b`` as (x, value) lines on one axis (log y when the values span
    decades), a marker at ``mark`` (x, the step it shows), and ``gaps`` ((x, |a-b|)) in a panel beneath. One
    run alone: ``b`` empty, ``names[1]`` None."""
    a = [(x, y) for x, y in a if _finite(x) and _finite(y)]
    b = [(x, y) for x, y in b if _finite(x) and _finite(y)]
    if not a and not b:
        return '<p class="mute">%s: no numeric value to chart.</p>' % esc(name)
    w, h, left, right, top = 620, 200, 70, 14, 12
    xs = [x for x, _ in a + b] + ([mark[0]] if mark is not None else [])
    ax = Axis(xs, left, w - right, log=False)
    ay = Axis([y for _, y in a + b], h - 34, top)
    key_b = ' &middot; <span class="key-b">&#9644; %s</span>' % esc(names[1]) if names[1] is not None else ""
    out = ['<figure class="trace" data-scalar="%s"><figcaption><b>%s</b> &middot; <span class="key-a">&#9644; %s'
           '</span>%s</figcaption>' % (esc(name), esc(name), esc(names[0]), key_b),
           '<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'role="img" aria-label="%s of both runs over %ss%s">' % (w, h, w, h, esc(name), esc(xlabel),
                                                                    ", log scale" if ay.log else ""),
           '<path class="ax" d="M%d %dV%dH%d"/>' % (left, top, h - 34, w - right)]
    out += _y_ticks(ay, left) + _x_ticks(ax, h - 34)
    out.append('<text class="sub" x="%d" y="%d" text-anchor="end">%s</text>' % (w - right, h - 4, esc(xlabel)))
    for cls, run, line in (("ln a", names[0], a), ("ln b", names[1], b)):
        if line:
            out.append('<polyline class="%s" data-run="%s" points="%s"/>' % (cls, esc(run), _points(line, ax, ay)))
    if mark is not None:
        x = ax(mark[0])
        out.append('<line class="mark" data-step="%s" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><text x="%.1f" y="%d">'
                   'parts at step %s</text>' % (esc(mark[1]), x, top, x, h - 34, x + 4, top + 10, esc(mark[1])))
    out.append("</svg>")
    gaps = [(x, d) for x, d in gaps if _finite(x) and _finite(d)]
    if gaps:
        out.append(_gap_panel(gaps, ax, w, left, right, mark))
    return "".join(out) + "</figure>"


def _gap_panel(gaps: Sequence[Tuple[float, float]], ax: Axis, w: int, left: int, right: int,
               mark: Optional[Tuple[float, Any]]) -> str:
    h, top = 70, 8
    ay = Axis([0.0] + [d for _, d in gaps], h - 14, top, log=False)
    hi = max(d for _, d in gaps)
    parts = ['<svg class="chart gap" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
             'role="img" aria-label="|a-b| over the steps">' % (w, h, w, h),
             '<path class="ax" d="M%d %dV%dH%d"/>' % (left, top, h - 14, w - right),
             '<text x="%d" y="%d" text-anchor="end">|a&#8722;b|</text>' % (left - 4, h - 14),
             '<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 4, top + 8, esc("%.3g" % hi) if hi else "0")]
    parts.append('<polyline class="dl" points="%s"/>' % _points(gaps, ax, ay))
    if mark is not None:
        parts.append('<line class="mark" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>' % (ax(mark[0]), top, ax(mark[0]),
                                                                                 h - 14))
    return "".join(parts) + "</svg>"


def _y_ticks(ay: Axis, left: int) -> List[str]:
    return ['<text class="tick y" x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 4, ay(v) + 4, esc(t))
            for v, t in ay.ticks()]


def _x_ticks(ax: Axis, y: int) -> List[str]:
    return ['<text class="tick x" x="%.1f" y="%d" text-anchor="middle">%s</text>' % (ax(v), y + 14, esc(t))
            for v, t in ax.ticks()]


def trace_columns(trace: Any) -> Tuple[List[Any], Dict[str, List[Any]]]:
    """(steps, {scalar: values as numbers}) of a recorded trace, rows in the order written."""
    if not isinstance(trace, dict):
        return [], {}
    steps = trace.get("steps") if isinstance(trace.get("steps"), list) else []
    names = trace.get("names") if isinstance(trace.get("names"), list) else []
    values = trace.get("values") if isinstance(trace.get("values"), list) else []
    cols = {str(n): [number(v) for v in c] for n, c in zip(names, values) if isinstance(c, list)}
    return steps, cols


def row_keys(steps: Sequence[Any]) -> List[Tuple[Any, int]]:
    """Each row's (step, how many rows of that step came before): a step that comes again pairs by rank."""
    seen: Dict[Any, int] = {}
    out = []
    for s in steps:
        k = s if type(s) in (int, float) else repr(s)
        out.append((k, seen.get(k, 0)))
        seen[k] = seen.get(k, 0) + 1
    return out


def x_of(steps: Sequence[Any]) -> Tuple[List[float], str]:
    """The x of each row: its step where steps only grow and are numbers, else its row number."""
    if all(type(s) in (int, float) for s in steps) and all(x < y for x, y in zip(steps, steps[1:])):
        return [float(s) for s in steps], "step"
    return [float(i) for i in range(len(steps))], "row"


def run_trace(doc: Mapping[str, Any]) -> str:
    """A run's recorded trace: a small chart per scalar over the steps; empty when none was recorded."""
    steps, cols = trace_columns(get(doc, "results.trace", None))
    if not cols:
        return ""
    xs, xlabel = x_of(steps)
    return '<section id="trace"><h2>Trace</h2>%s</section>\n' % "".join(
        trace_chart(name, list(zip(xs, col)), [], [], None, (doc.get("run_id"), None), xlabel)
        for name, col in cols.items())
