"""The lineage graph as inline SVG: a layered layout (parents above children, each layer ordered by where its
parents stand so lines cross less), edges routed through the gaps between boxes (never through one) and labelled
with the first thing that changed, runs of a group on a shared band, runs with no parent or child here set apart.
"""

from __future__ import annotations

from ...manifest.fields import get
from ...manifest.summary import gpu_cell, repos, short
from .html import anchor, esc

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

NW, NH, GX, GY, PER_ROW, PAD = 196, 40, 28, 56, 6, 20
"""Box width and height, the gaps between columns and rows, boxes per row at most, the margin."""
TOP = PAD + 12
"""The first row's top: room above it for a line that comes back up (a parent drawn below its child: a cycle)."""


def _cell(value: Any) -> str:
    text = "%g" % value if isinstance(value, float) else str(value)
    return text if len(text) <= 14 else text[:13] + "\u2026"


def first_change(parent: Any, child: Any) -> str:
    """The first thing that changed from ``parent`` to ``child``, short: a commit, an argument (from the resolved
    arguments, else the command line), the GPUs; empty when none of these is recorded differently."""
    old = {r["name"]: r for r in repos(parent)} if isinstance(parent, dict) else {}
    new = {r["name"]: r for r in repos(child)} if isinstance(child, dict) else {}
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            return "%s %s" % ("+" if a is None else "-", name)
        if a["commit"] != b["commit"]:
            return "commit %s \u2192 %s" % (short(a["commit"])[:4], short(b["commit"])[:4])
    args_a, args_b = get(parent, "config.resolved_args", None), get(child, "config.resolved_args", None)
    if isinstance(args_a, dict) and isinstance(args_b, dict):
        for k in sorted(set(args_a) | set(args_b), key=str):
            if args_a.get(k) != args_b.get(k):
                return "%s %s \u2192 %s" % (k, _cell(args_a.get(k, "-")), _cell(args_b.get(k, "-")))
    argv_a, argv_b = get(parent, "command.argv", None), get(child, "command.argv", None)
    if isinstance(argv_a, list) and isinstance(argv_b, list) and argv_a != argv_b:
        for i, (x, y) in enumerate(zip(argv_a, argv_b)):
            if x != y:
                flag = argv_b[i - 1] if i and str(argv_b[i - 1]).startswith("-") else "argv[%d]" % i
                return "%s %s \u2192 %s" % (flag, _cell(x), _cell(y))
        return "argv %+d" % (len(argv_b) - len(argv_a))
    if isinstance(parent, dict) and isinstance(child, dict) and gpu_cell(parent) != gpu_cell(child):
        return "gpus %s \u2192 %s" % (_cell(gpu_cell(parent)), _cell(gpu_cell(child)))
    return ""


def _order(layers: Dict[int, List[Mapping[str, Any]]], parents: Mapping[str, List[str]]) -> List[List[Mapping]]:
    """Each layer's nodes ordered by the mean place of their parents above (then group, then id)."""
    place: Dict[str, float] = {}
    out = []
    for depth in sorted(layers):
        def key(n: Mapping[str, Any]) -> Tuple[float, str, str]:
            ps = [place[p] for p in parents.get(str(n["id"]), ()) if p in place]
            return (sum(ps) / len(ps) if ps else -1.0, str(n.get("group") or ""), str(n["id"]))
        layer = sorted(layers[depth], key=key)
        for i, n in enumerate(layer):
            place[str(n["id"])] = i + len(place) * 1e-6
        out.append(layer)
    return out


def layout(nodes: Sequence[Mapping[str, Any]], edges: Sequence[Tuple[str, str, str]]
           ) -> Tuple[Dict[str, Tuple[int, int]], int, int, Optional[int]]:
    """({id: (x, y) of its box}, width, height, y of the strip of runs set apart or None)."""
    ids = {str(n["id"]) for n in nodes}
    parents: Dict[str, List[str]] = {}
    linked = set()
    for a, b, kind in edges:
        if kind == "parent" and a in ids and b in ids and a != b:
            parents.setdefault(b, []).append(a)
            linked.update((a, b))
    joined = [n for n in nodes if str(n["id"]) in linked] if linked else list(nodes)
    apart = [n for n in nodes if linked and str(n["id"]) not in linked]
    layers: Dict[int, List[Mapping[str, Any]]] = {}
    for n in joined:
        layers.setdefault(int(n["depth"]), []).append(n)
    pos: Dict[str, Tuple[int, int]] = {}
    row, cols = 0, 1
    rows: List[List[Mapping[str, Any]]] = []
    for layer in _order(layers, parents):
        rows += [layer[i:i + PER_ROW] for i in range(0, len(layer), PER_ROW)]
    apart_row = len(rows) if apart else None
    apart = sorted(apart, key=lambda n: (str(n.get("group") or ""), str(n["id"])))
    rows += [apart[i:i + PER_ROW] for i in range(0, len(apart), PER_ROW)]
    for row, members in enumerate(rows):
        for col, n in enumerate(members):
            pos[str(n["id"])] = (PAD + col * (NW + GX), TOP + 18 * (apart_row is not None and row >= apart_row)
                                 + row * (NH + GY))
        cols = max(cols, len(members))
    height = TOP + PAD + len(rows) * (NH + GY) - GY + (18 if apart_row is not None else 0)
    apart_y = TOP + apart_row * (NH + GY) if apart_row is not None else None
    return pos, 2 * PAD + cols * (NW + GX) - GX, height, apart_y


def route(a: Tuple[int, int], b: Tuple[int, int], lane: int) -> List[Tuple[float, float]]:
    """The path from box ``a`` (a parent) down to box ``b``: out of a's bottom into the gap below its row, along
    that gap, down the gap between columns, along the gap above b's row, into b's top. ``lane`` (0-3) keeps
    lines that share a gap apart."""
    (ax, ay), (bx, by) = a, b
    below = ay + NH + 8 + 4 * lane
    points = [(ax + NW / 2, ay + NH), (ax + NW / 2, below)]
    if by == ay + NH + GY:  # the next row: the one gap between them holds the whole turn
        points += [(bx + NW / 2, below), (bx + NW / 2, by)]
    else:
        above = by - 22 + 4 * lane
        gap_x = bx - GX / 2 + (lane - 1.5) * 3
        points += [(gap_x, below), (gap_x, above), (bx + NW / 2, above), (bx + NW / 2, by)]
    return points


def lineage_svg(nodes: Sequence[Mapping[str, Any]], edges: Sequence[Tuple[str, str, str]],
                linked: Iterable[str] = (), labels: Optional[Mapping[Tuple[str, str], str]] = None) -> str:
    """Runs as boxes, parents above children; ``edges`` are (from id, to id, "parent" | "group"): a parent edge
    is an arrow labelled with ``labels[(from, to)]``; a group is a band behind its runs that stand side by side.
    A node is ``{id, depth, sub, bad, missing, group}``; those in ``linked`` link to their section of the page."""
    linked = set(linked)
    labels = labels or {}
    pos, w, h, apart_y = layout(nodes, edges)
    parts = ['<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
             'role="img" aria-label="lineage of %d runs"><defs><marker id="ar" viewBox="0 0 8 8" refX="8" refY="4" '
             'markerWidth="7" markerHeight="7" orient="auto"><path d="M0 0L8 4L0 8z" class="p"/></marker></defs>'
             % (w, h, w, h, len(nodes))]
    parts += _bands(nodes, pos)
    if apart_y is not None:
        parts.append('<text class="sub" x="%d" y="%d">runs with no parent or child here</text>' % (PAD, apart_y + 6))
    lanes: Dict[int, int] = {}
    for a, b, kind in edges:
        if kind != "parent" or a not in pos or b not in pos or a == b:
            continue
        lane = lanes.get(pos[a][1], 0)
        lanes[pos[a][1]] = lane + 1
        pts = route(pos[a], pos[b], lane % 4)
        label = labels.get((a, b), "")
        parts.append('<g class="e"><path class="p" data-edge="parent" data-from="%s" data-to="%s" d="M%s" '
                     'marker-end="url(#ar)"><title>%s</title></path><text class="el" x="%.1f" y="%.1f">%s</text></g>'
                     % (esc(a), esc(b), "L".join("%.1f %.1f" % p for p in pts), esc("%s \u2192 %s %s" % (a, b, label)),
                        pos[b][0] + 4, pos[b][1] - 3, esc(label or "derived", 34)))
    for n in nodes:
        x, y = pos[str(n["id"])]
        cls = "n" + (" bad" if n.get("bad") else "") + (" missing" if n.get("missing") else "")
        body = ('<g class="%s" data-run="%s"><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="5"/>'
                '<text x="%d" y="%d">%s</text><text class="sub" x="%d" y="%d">%s</text></g>'
                % (cls, esc(n["id"]), esc(n.get("title") or n["id"]), x, y, NW, NH, x + 6, y + 16,
                   esc(n["id"], 30), x + 6, y + 32, esc(n.get("sub") or "", 30)))
        if str(n["id"]) in linked:
            body = '<a href="#%s">%s</a>' % (anchor(n["id"]), body)
        parts.append(body)
    parts.append("</svg>")
    legend = ('<p class="mute">Legend: arrow: derived from (parent &rarr; child), labelled with the first thing that '
              'changed; shaded band: runs of one group; red box: did not end ok; dashed box: recorded as parent, no '
              'manifest found.</p>')
    return '<div class="scroll">%s</div>%s' % ("".join(parts), legend)


def _bands(nodes: Sequence[Mapping[str, Any]], pos: Mapping[str, Tuple[int, int]]) -> List[str]:
    """A band behind each run of side-by-side boxes of one group (each box names its group)."""
    rows: Dict[int, List[Tuple[int, str]]] = {}
    for n in nodes:
        x, y = pos[str(n["id"])]
        rows.setdefault(y, []).append((x, str(n.get("group") or "")))
    out = []
    for y, members in sorted(rows.items()):
        members.sort()
        i = 0
        while i < len(members):
            j = i
            while j + 1 < len(members) and members[j + 1][1] == members[i][1]:
                j += 1
            group = members[i][1]
            if group:
                x0, x1 = members[i][0] - 6, members[j][0] + NW + 6
                out.append('<rect class="gband" data-group="%s" x="%d" y="%d" width="%d" height="%d" rx="8">'
                           '<title>group %s</title></rect>' % (esc(group), x0, y - 5, x1 - x0, NH + 10, esc(group)))
            i = j + 1
    return out
