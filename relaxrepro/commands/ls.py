"""``relaxrepro ls [DIR...]``: every manifest below directories, one line each, oldest first; with
``--where``/``--same-as``/``--since``/``--until``, only the runs that match. Read through the run index
(:mod:`relaxrepro.manifest.runindex`) unless ``--no-index``: the output is the same either way."""

from __future__ import annotations

import json
import os
import sys

from .._version import __version__
from ..manifest import query, runindex
from ..manifest.scan import Entry
from ..manifest.summary import COPY_RANK, algorithm, copy_kind, gpus, lineage_of, ls_cells, parent_id, repos, trackers
from ..std.records import Record
from ..std.sha import sha256_hex
from ..std.table import RelPaths, format_columns
from ..std.text import safe_format, safe_text
from ._common import Exit, UsageError, dirs_or_cwd, progress_line, report_missing, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Optional, Sequence, Tuple


def run(args: argparse.Namespace) -> int:
    dirs = dirs_or_cwd(args.dirs)
    try:
        clauses = [query.parse(w) for w in args.where]
        since = query.parse_date(args.since, "--since") if args.since else None
        until = query.parse_date(args.until, "--until", end=True) if args.until else None
    except query.QueryError as exc:
        raise UsageError("relaxrepro ls: error: %s" % exc) from None
    layout = Layout.of(args)
    filtered = bool(clauses or args.same_as or since or until)
    missing = report_missing(dirs, "ls")
    # A scan reads the facts for any query (a row's package set comes with them); the index keeps the
    # package set apart, so a package query loads no facts.
    want = ["doc" if args.json else "cells"] + (["facts"] if clauses or args.same_as or layout.metrics(args.json)
                                                 else [])
    present = [d for d in dirs if os.path.exists(d)]
    src = runindex.open_roots(present, use_index=not args.no_index, want=want, progress=progress_line())
    opened = want
    if not args.same_as and all(c.package is not None for c in clauses) and not layout.metrics(args.json):
        want = want[:1]
    try:
        for w in src.warnings:
            say("relaxrepro ls: warning: %s", w)
        # An unchanged tree gives the same answer: kept under the tree's digest, the options and cwd.
        key = _answer_key(args, present, layout) if src.tree() is not None else None
        kept = src.recall(key) if key else None
        if kept is not None:
            bad_count, total, shown = json.loads(kept[0])
            text = kept[1].decode("utf-8", "surrogateescape")
        else:
            try:
                text, bad_count, total, shown = _answer(src, args, want, clauses, since, until, dirs, filtered,
                                                        layout)
            except _Shape:
                # The index is never trusted over the files: a row without the cells it was asked for (a race
                # or a damaged database) costs a listing from the files, never a garbled table.
                say("relaxrepro ls: warning: the run index gave rows without their cells; listing without it")
                src.close()
                src = runindex.open_roots(present, use_index=False, want=opened)
                key = None
                text, bad_count, total, shown = _answer(src, args, opened, clauses, since, until, dirs, filtered,
                                                        layout)
            if key:
                src.keep(key, json.dumps([bad_count, total, shown]), text.encode("utf-8", "surrogateescape"))
    finally:
        src.close()
    sys.stdout.write(text)
    if bad_count:
        say("relaxrepro ls: %d of %d manifests unreadable", bad_count, total)
    elif filtered and not shown and total:
        say("relaxrepro ls: no run matches")
    elif not total and not missing:
        say("relaxrepro ls: no manifest_*.json under %s", ", ".join(dirs))
    return Exit.FAIL if missing else Exit.OK


CELLS = 9
"""The cells of a readable run's line but its path (:func:`~relaxrepro.manifest.summary.ls_cells`)."""


class _Shape(Exception):
    """A row of the listing lacks the cells of its line."""


def _answer_key(args: argparse.Namespace, roots: List[str], layout: Layout) -> str:
    what = ["copies", runindex.VERSION, __version__, sys.version, os.getcwd(), roots, bool(args.json), list(args.where),
            args.same_as, args.since, args.until, layout.sort, layout.descending, layout.limit, layout.columns,
            layout.width]
    return sha256_hex(json.dumps(what).encode("utf-8", "surrogateescape"))


def _answer(src: Any, args: argparse.Namespace, want: List[str], clauses: List[Any], since: Any, until: Any,
            dirs: List[str], filtered: bool, layout: Layout) -> Tuple[str, int, int, int]:
    """(stdout, unreadable files among those shown, manifests in all, rows shown)."""
    if not filtered and not args.json and layout.plain():
        table = src.table(RelPaths("."))
        if table is not None:
            good, bad = table
            good, copies = collapse_copies(good, lambda g: (g[1], g[2]))
            if copies:
                good = [g[:3] + (_marked(g[3], copies.get(id(g))),) for g in good]
            if layout.limit is not None:
                good = good[:layout.limit]
            text = ""
            if good or bad:
                cells = "\t".join([g[3] for g in good]).split("\t") if good else []
                if len(cells) != CELLS * len(good):
                    raise _Shape()
                columns = [cells[i::CELLS] for i in range(CELLS)]
                text = render_columns(columns, [g[2] for g in good], bad, width=layout.width)
            return text, len(bad), len(good) + len(bad), len(good) + len(bad)
    if not filtered:
        rows = src.find(want=want)
        total = len(rows)
    else:
        total = src.count()
        sets = src.packages()
        target = _same_target(src, args.same_as, dirs) if args.same_as else None
        # One query over the index: the runs that may pass every filter (and every unreadable file, which may
        # be one of them); the filters then decide on those alone, as they decide on every row of a scan.
        where, params = sql_filter(clauses, sets, since, until, target)
        rows = src.find("error IS NOT NULL OR (%s)" % where if where else "", params, None, want)
        rows = _select(rows, sets, clauses, since, until, target, dirs)
    good, copies = collapse_copies([r for r in rows if r.error is None], lambda r: (r.run_id, r.path))
    good = layout.order(good, args.json)
    bad = sorted(((r.path, r.error) for r in rows if r.error is not None), key=lambda pe: pe[0])
    text = ""
    if args.json:
        out = [dict(summary(r.entry()), metrics=json_metrics(r.facts.get("metric")),
                    copies=(copies.get(id(r)) or ("", []))[1]) for r in good]
        out += [{"path": p, "error": why} for p, why in bad]
        text = json.dumps(out, indent=1, sort_keys=True) + "\n"
    elif rows:
        cells = [_marked(r.cells, copies.get(id(r))).split("\t") for r in good]
        if any(len(c) != CELLS for c in cells):
            raise _Shape()
        text = render_rows(cells, [r.path for r in good], bad, layout=layout,
                           metrics=[r.facts.get("metric") or {} for r in good])
    return text, len(bad), total, len(good) + len(bad)


def collapse_copies(items: List[Any], key: Any) -> Tuple[List[Any], Dict[int, Tuple[str, List[Dict[str, str]]]]]:
    """A run listed once however many copies of it there are (``merge``'s ``.merged.json``, the copies the
    trackers keep: :func:`~relaxrepro.manifest.summary.copy_kind`): (the items, each run's preferred copy where
    the first of its copies stood; {id(item): (its kind, the others as ``{"path", "kind"}``)} for those that
    have copies). ``key``: an item's (run id, path). Two files of a run that are both its own manifest are two
    runs that share an id, and stay two rows."""
    run_ids = [key(item)[0] for item in items]
    if len(set(run_ids)) == len(run_ids):  # no two items share a run id (nor lack one): no copies
        return list(items), {}
    groups: Dict[str, List[Any]] = {}
    for item, run_id in zip(items, run_ids):
        if run_id:
            groups.setdefault(run_id, []).append(item)
    chosen: Dict[int, Any] = {}
    copies: Dict[int, Tuple[str, List[Dict[str, str]]]] = {}
    for run_id, group in groups.items():
        if len(group) < 2:
            continue
        kinds = [copy_kind(key(g)[1], run_id) for g in group]
        if kinds.count("manifest") > 1:
            continue
        best = min(range(len(group)), key=lambda i: (COPY_RANK.get(kinds[i], 2), i))
        copies[id(group[best])] = (kinds[best], [{"path": key(g)[1], "kind": k} for i, (g, k)
                                                 in enumerate(zip(group, kinds)) if i != best])
        for g in group:
            chosen[id(g)] = group[best]
    out, seen = [], set()
    for item in items:
        item = chosen.get(id(item), item)
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out, copies


def _marked(cells: str, copies: Optional[Tuple[str, List[Dict[str, str]]]]) -> str:
    """The tab-joined cells with the run cell marked: ``+merged`` when the row is the merged manifest,
    ``+TOOL`` for each tracker that holds a copy."""
    if not copies:
        return cells
    kind, others = copies
    marks = ["merged"] if kind == "merged" else []
    marks += sorted({c["kind"] for c in others} - {"manifest", "merged"})
    run, sep, rest = cells.partition("\t")
    return "".join([run] + [" +" + m for m in marks]) + sep + rest


def _same_target(src: Any, same_as: str, dirs: List[str]) -> str:
    """What ``--same-as RUN`` compares with (its facts' ``same``): the first run in walk order whose id or path
    is ``same_as``; a :class:`UsageError` when there is none, or when it is not fully recorded."""
    target = [r for r in src.named(same_as, ["facts"]) if r.error is None]
    if not target:
        raise UsageError("relaxrepro ls: error: --same-as %s: no such run under %s" % (same_as, ", ".join(dirs)))
    same = target[0].facts.get("same")
    if same is None:
        raise UsageError("relaxrepro ls: error: --same-as %s: its code, config hash or packages are not fully "
                         "recorded, so no run can be called the same" % same_as)
    return same


def sql_filter(clauses: List[Any], sets: Dict[str, Dict[str, str]], since: Optional[str], until: Optional[str],
               same: Optional[str]) -> Tuple[str, List[Any]]:
    """(a condition over the index's ``files`` table, its parameters) that every run passing the filters meets
    ("" when none narrows them): the package sets that pass the package clauses, each clause's terms, the time
    range, the ``--same-as`` key."""
    where, params = query.narrowing(clauses, sets)
    conds = [where] if where else []
    for cond, value in (("gen >= ?", since), ("gen <= ?", until)):
        if value is not None:
            conds.append(cond)
            params.append(value)
    if same is not None:
        conds.append("path IN (SELECT path FROM terms WHERE key = 'same' AND value = ?)")
        params.append(same)
    return " AND ".join(conds), params


def _select(rows: List[Any], packages: Any, clauses: List[Any], since: Any, until: Any, same_as: Optional[str],
            dirs: List[str]) -> List[Any]:
    """The rows that pass every filter (``same_as``: the ``same`` key of the ``--same-as`` run); an unreadable
    file is kept (it may be one of them: say so)."""
    same = same_as
    by_set: dict = {}
    out = []
    for r in rows:
        if r.error is not None:
            out.append(r)
            continue
        if (since is not None and r.generated_at < since) or (until is not None and r.generated_at > until):
            continue
        pkgs = packages.get(r.pkgkey) if r.pkgkey else None
        ok = True
        for c in clauses:  # a package test once per package set: runs share a few hundred
            if c.package is not None:
                key = (id(c), r.pkgkey)
                if key not in by_set:
                    by_set[key] = c.test({}, pkgs)
                if not by_set[key]:
                    ok = False
                    break
        if ok and same is not None and r.facts.get("same") != same:
            ok = False
        if ok and all(c.test(r.facts, pkgs) for c in clauses if c.package is None):
            out.append(r)
    return out


# -- the table's shape: order, limit, columns, width -----------------------------------------------

NAMES = ("run", "time", "code", "algo", "gpus", "group", "parent", "outcome", "trackers", "path")
"""The columns ``--columns`` and ``--sort`` name (the first nine are the stored cells), besides ``metric.NAME``."""

HEADS = ("RUN", "TIME (UTC)", "CODE", "ALGO", "GPUS", "GROUP", "PARENT", "OUTCOME", "TRACKERS", "PATH")

DROPPED_FIRST = ("parent", "trackers", "algo", "gpus", "code", "group")
"""The columns a table too wide for the terminal loses first, in this order (after the ones empty in every row)."""

MIN_PATH = 24
"""A path is shortened in the middle down to this many characters, not below: the file name must stay readable."""


class Layout(Record):
    """How the table is shaped: ``--sort`` (a column or ``metric.NAME``; descending with a leading ``-``),
    ``--limit``, ``--columns`` (None: the default ones) and the width to fit (None: ``--wide``, or not a
    terminal and no ``$COLUMNS``)."""

    sort: Optional[str] = None
    descending: bool = False
    limit: Optional[int] = None
    columns: Optional[List[str]] = None
    width: Optional[int] = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> Layout:
        sort, descending = args.sort, False
        if sort is not None:
            descending = sort.startswith("-")
            sort = sort.lstrip("-+")
            if not _known(sort):
                raise UsageError("relaxrepro ls: error: --sort %s: not a column (%s, or metric.NAME)"
                                 % (safe_text(args.sort), ", ".join(NAMES)))
        columns = None
        if args.columns is not None:
            columns = [c.strip() for c in args.columns.split(",") if c.strip()]
            unknown = [c for c in columns if not _known(c)]
            if unknown or not columns:
                raise UsageError("relaxrepro ls: error: --columns %s: %s (choose from %s, metric.NAME)"
                                 % (safe_text(args.columns), "no such column: " + safe_text(unknown[0]) if unknown
                                    else "no column", ", ".join(NAMES)))
        width = None if args.wide or args.json else _terminal_width()
        return cls(sort, descending, args.limit, columns, width)

    def plain(self) -> bool:
        """The stored order and columns: the listing needs no row objects."""
        return self.sort in (None, "time") and not self.descending and self.columns is None

    def metrics(self, as_json: bool) -> bool:
        """Whether the rows need their metrics (the facts)."""
        named = [self.sort or ""] + list(self.columns or ())
        return as_json or any(n.startswith("metric.") for n in named)

    def order(self, rows: List[Any], as_json: bool = False) -> List[Any]:
        """The readable rows in the listing's order, cut at ``limit``: by time and run id, the walk's order
        breaking ties (``as_json``: the path, for a run without an id). Without a value for the key (a ``-``
        cell, a metric the run lacks) a run comes last, either way."""
        rows = sorted(rows, key=lambda r: (r.generated_at, r.run_id or (r.path if as_json else "")))
        if self.sort not in (None, "time") or self.descending:
            keyed = [(_sort_value(r, self.sort or "time"), r) for r in rows]
            have = [kr for kr in keyed if kr[0] is not None]
            have.sort(key=lambda kr: kr[0], reverse=self.descending)
            rows = [r for _, r in have] + [r for v, r in keyed if v is None]
        return rows[:self.limit] if self.limit is not None else rows


def _known(name: str) -> bool:
    return name in NAMES or (name.startswith("metric.") and len(name) > len("metric."))


def _sort_value(row: Any, key: str) -> Any:
    if key == "time":
        return (row.generated_at, row.run_id or "") if row.generated_at else None
    if key == "path":
        return row.path
    if key.startswith("metric."):
        value = (row.facts.get("metric") or {}).get(key[len("metric."):])
        return value if isinstance(value, float) and value == value else None  # NaN: no order
    cells = row.cells.split("\t") if row.cells else ls_cells(row.doc, row.run_id)
    cell = cells[NAMES.index(key)]
    return None if cell == "-" else cell


def _terminal_width() -> Optional[int]:
    """``$COLUMNS``, else the width of the terminal stdout is; None when it is not one."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns if sys.stdout.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def shorten_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters: its head, ``...``, and its longer tail (a path's file name)."""
    if len(text) <= width:
        return text
    head = (width - 3) // 3
    return text[:head] + "..." + text[len(text) - (width - 3 - head):]


def _line_width(heads: Sequence[str], cols: Sequence[Sequence[str]]) -> int:
    widths = [max([len(h)] + [len(c) for c in col]) for h, col in zip(heads, cols)]
    return sum(widths) + 2 * (len(widths) - 1)


def fit(names: List[str], heads: List[str], cols: List[Sequence[str]], width: int, auto: bool) -> None:
    """Shape the table (in place) to ``width``: columns empty in every row out, then paths shortened in the
    middle, then (``auto``: the default columns) the least needed columns out, one by one."""
    if _line_width(heads, cols) <= width:
        return
    if auto:
        for i in reversed(range(len(names))):
            if names[i] not in ("run", "time", "path") and cols[i].count("-") == len(cols[i]):
                del names[i], heads[i], cols[i]
    paths = cols[names.index("path")] if "path" in names else None
    drop = [n for n in DROPPED_FIRST if auto]
    while True:
        if paths is not None:
            i = names.index("path")
            cols[i] = paths
            over = _line_width(heads, cols) - width
            if over > 0:
                longest = max(len(p) for p in paths)
                cols[i] = [shorten_middle(p, max(MIN_PATH, longest - over)) for p in paths]
        drop = [n for n in drop if n in names]
        if _line_width(heads, cols) <= width or not drop:
            return
        i = names.index(drop.pop(0))
        del names[i], heads[i], cols[i]


def json_metrics(metrics: Any) -> Dict[str, Any]:
    """A run's final metrics for JSON: numbers, and the non-finite ones as the manifest writes them."""
    out: Dict[str, Any] = {}
    for name, value in sorted((metrics or {}).items()):
        if value != value:
            value = "NaN"
        elif value in (float("inf"), float("-inf")):
            value = "Infinity" if value > 0 else "-Infinity"
        out[name] = value
    return out


# -- the table and the JSON form -----------------------------------------------------------------

def summary(entry: Entry) -> Dict[str, Any]:
    """The machine form of one ``ls`` line."""
    doc = entry.doc
    if entry.error is not None:
        return {"path": entry.path, "error": entry.error}
    count, model = gpus(doc)
    lin = lineage_of(doc)
    return {
        "path": entry.path,
        "run_id": entry.run_id,
        "generated_at": doc.get("generated_at"),
        "code": repos(doc),
        "algorithm": algorithm(doc),
        "gpus": {"count": count, "model": model},
        "group": lin.get("group"),
        "parent": parent_id(doc),
        "outcome": doc.get("outcome") if isinstance(doc.get("outcome"), dict) else None,
        "trackers": trackers(doc),
    }


def ls_order(entries: Sequence[Entry]) -> Tuple[List[Entry], List[Entry]]:
    """(readable entries by time then run id, walk order breaking ties; unreadable ones by path)."""
    good = sorted((e for e in entries if e.error is None),
                  key=lambda e: (str(e.doc.get("generated_at") or ""), e.run_id or ""))
    return good, sorted((e for e in entries if e.error is not None), key=lambda e: e.path)


def render_ls(entries: Sequence[Entry], *, cwd: str = ".") -> str:
    """The ``ls`` table: readable runs by time, then one ``unreadable`` line per bad file, by path."""
    good, bad = ls_order(entries)
    return render_rows([ls_cells(e.doc, e.run_id) for e in good], [e.path for e in good],
                       [(e.path, e.error) for e in bad], cwd=cwd)


def render_rows(cells: Sequence[List[str]], paths: Sequence[str], bad: Sequence[Tuple[str, Any]], *,
                cwd: str = ".", layout: Optional[Layout] = None, metrics: Sequence[Dict[str, Any]] = ()) -> str:
    """The ``ls`` table from each row's cells (:func:`ls_cells`) and path, then a line per (path, why) of a bad file;
    ``layout``: its columns (``metrics``: each row's, for ``metric.NAME`` columns) and width."""
    rel = RelPaths(cwd)
    columns: List[Sequence[str]] = list(zip(*cells)) if cells else [()] * CELLS
    shown = rel.many(paths)
    bad = [(rel(p), why) for p, why in bad]
    if layout is None or layout.columns is None:
        return render_columns(columns, shown, bad, width=layout.width if layout else None)
    by_name = dict(zip(NAMES, list(columns) + [shown]))
    for name in layout.columns:
        if name.startswith("metric."):
            by_name[name] = [_metric_cell(m.get(name[len("metric."):])) for m in metrics]
    names = list(layout.columns)
    heads = [HEADS[NAMES.index(n)] if n in NAMES else n for n in names]
    cols = [by_name[n] for n in names]
    return _table(names, heads, cols, shown, bad, layout.width, auto=False)


def _metric_cell(value: Any) -> str:
    if not isinstance(value, float):
        return "-"
    return "%.6g" % value


def render_columns(columns: List[Sequence[str]], shown: Sequence[str], bad: Sequence[Tuple[str, Any]], *,
                   width: Optional[int] = None) -> str:
    """:func:`render_rows` from the cells column by column (100,000 rows cost a few C loops, not 100,000
    lists), with the paths as shown (:class:`RelPaths`); ``width``: the terminal's, to fit (:func:`fit`)."""
    names, heads, cols = list(NAMES), list(HEADS), list(columns) + [shown]
    if shown and cols[8].count("-") == len(cols[8]):  # the column appears once a run was attached
        del names[8], heads[8], cols[8]
    return _table(names, heads, cols, shown, bad, width, auto=True)


def _table(names: List[str], heads: List[str], cols: List[Sequence[str]], shown: Sequence[str],
           bad: Sequence[Tuple[str, Any]], width: Optional[int], auto: bool) -> str:
    text = ""
    if shown:
        if width is not None:
            fit(names, heads, cols, width, auto)
        # the stored cells and metrics are escaped already; the paths are not
        safe = names.index("path") if "path" in names else len(cols)
        text = format_columns(heads, cols, safe=safe)
    for path, why in bad:
        text += safe_format("unreadable  %s: %s\n", path, why)
    return text
