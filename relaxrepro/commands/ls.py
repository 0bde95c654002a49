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
from ..manifest.summary import algorithm, gpus, lineage_of, ls_cells, parent_id, repos, trackers
from ..std.sha import sha256_hex
from ..std.table import RelPaths, format_columns
from ..std.text import safe_format
from ._common import Exit, UsageError, dirs_or_cwd, progress_line, report_missing, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Sequence, Tuple


def run(args: argparse.Namespace) -> int:
    dirs = dirs_or_cwd(args.dirs)
    try:
        clauses = [query.parse(w) for w in args.where]
        since = query.parse_date(args.since, "--since") if args.since else None
        until = query.parse_date(args.until, "--until", end=True) if args.until else None
    except query.QueryError as exc:
        raise UsageError("relaxrepro ls: error: %s" % exc) from None
    filtered = bool(clauses or args.same_as or since or until)
    missing = report_missing(dirs, "ls")
    # A scan reads the facts for any query (a row's package set comes with them); the index keeps the
    # package set apart, so a package query loads no facts.
    want = ["doc" if args.json else "cells"] + (["facts"] if clauses or args.same_as else [])
    present = [d for d in dirs if os.path.exists(d)]
    src = runindex.open_roots(present, use_index=not args.no_index, want=want, progress=progress_line())
    opened = want
    if not args.same_as and all(c.package is not None for c in clauses):
        want = want[:1]
    try:
        for w in src.warnings:
            say("relaxrepro ls: warning: %s", w)
        # An unchanged tree gives the same answer: kept under the tree's digest, the options and cwd.
        key = _answer_key(args, present) if src.tree() is not None else None
        kept = src.recall(key) if key else None
        if kept is not None:
            bad_count, total, shown = json.loads(kept[0])
            text = kept[1].decode("utf-8", "surrogateescape")
        else:
            try:
                text, bad_count, total, shown = _answer(src, args, want, clauses, since, until, dirs, filtered)
            except _Shape:
                # The index is never trusted over the files: a row without the cells it was asked for (a race
                # or a damaged database) costs a listing from the files, never a garbled table.
                say("relaxrepro ls: warning: the run index gave rows without their cells; listing without it")
                src.close()
                src = runindex.open_roots(present, use_index=False, want=opened)
                key = None
                text, bad_count, total, shown = _answer(src, args, opened, clauses, since, until, dirs, filtered)
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


def _answer_key(args: argparse.Namespace, roots: List[str]) -> str:
    what = [runindex.VERSION, __version__, sys.version, os.getcwd(), roots, bool(args.json), list(args.where),
            args.same_as, args.since, args.until]
    return sha256_hex(json.dumps(what).encode("utf-8", "surrogateescape"))


def _answer(src: Any, args: argparse.Namespace, want: List[str], clauses: List[Any], since: Any, until: Any,
            dirs: List[str], filtered: bool) -> Tuple[str, int, int, int]:
    """(stdout, unreadable files among those shown, manifests in all, rows shown)."""
    if not filtered and not args.json:
        table = src.table(RelPaths("."))
        if table is not None:
            good, bad = table
            text = ""
            if good or bad:
                cells = "\t".join([g[3] for g in good]).split("\t") if good else []
                if len(cells) != CELLS * len(good):
                    raise _Shape()
                columns = [cells[i::CELLS] for i in range(CELLS)]
                text = render_columns(columns, [g[2] for g in good], bad)
            return text, len(bad), len(good) + len(bad), len(good) + len(bad)
    if not filtered:
        rows = src.find(want=want)
        total = len(rows)
    else:
        total = src.count()
        sets = src.packages()
        by_pkg = [c for c in clauses if c.package is not None]
        rows = None
        if by_pkg and not args.same_as:  # only the runs of the package sets that pass: found by index
            match = [k for k, p in sets.items() if all(c.test({}, p) for c in by_pkg)]
            if len(match) <= 500:
                keys = set(match)
                rows = src.find("error IS NOT NULL OR pkgkey IN (%s)" % ", ".join("?" * len(match)), match,
                                lambda r: r.error is not None or r.pkgkey in keys, want)
        if rows is None:
            rows = src.find(want=want)
        rows = _select(rows, sets, clauses, since, until, args.same_as, dirs)
    text = ""
    if args.json:
        out = [summary(r.entry()) for r in rows]
        out.sort(key=lambda r: ("error" in r, str(r.get("generated_at") or ""), str(r.get("run_id") or r["path"])))
        text = json.dumps(out, indent=1, sort_keys=True) + "\n"
    elif rows:
        good = sorted((r for r in rows if r.error is None), key=lambda r: (r.generated_at, r.run_id or ""))
        bad = sorted(((r.path, r.error) for r in rows if r.error is not None), key=lambda pe: pe[0])
        cells = [r.cells.split("\t") for r in good]
        if any(len(c) != CELLS for c in cells):
            raise _Shape()
        text = render_rows(cells, [r.path for r in good], bad)
    return text, sum(1 for r in rows if r.error is not None), total, len(rows)


def _select(rows: List[Any], packages: Any, clauses: List[Any], since: Any, until: Any, same_as: Any,
            dirs: List[str]) -> List[Any]:
    """The rows that pass every filter; an unreadable file is kept (it may be one of them: say so)."""
    same = None
    if same_as:
        target = [r for r in rows if r.error is None and (r.run_id == same_as or r.path == same_as)]
        if not target:
            raise UsageError("relaxrepro ls: error: --same-as %s: no such run under %s" % (same_as, ", ".join(dirs)))
        same = target[0].facts.get("same")
        if same is None:
            raise UsageError("relaxrepro ls: error: --same-as %s: its code, config hash or packages are not fully "
                             "recorded, so no run can be called the same" % same_as)
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
                cwd: str = ".") -> str:
    """The ``ls`` table from each row's cells (:func:`ls_cells`) and path, then a line per (path, why) of a bad file."""
    rel = RelPaths(cwd)
    return render_columns(list(zip(*cells)), rel.many(paths), [(rel(p), why) for p, why in bad])


def render_columns(columns: List[Sequence[str]], shown: Sequence[str], bad: Sequence[Tuple[str, Any]]) -> str:
    """:func:`render_rows` from the cells column by column (100,000 rows cost a few C loops, not 100,000
    lists), with the paths as shown (:class:`RelPaths`)."""
    text = ""
    if shown:
        tracked = columns[8].count("-") != len(columns[8])  # the column appears once a run was attached
        if not tracked:
            del columns[8]
        columns.append(shown)
        text = format_columns(["RUN", "TIME (UTC)", "CODE", "ALGO", "GPUS", "GROUP", "PARENT", "OUTCOME"]
                              + ["TRACKERS"] * tracked + ["PATH"], columns, safe=len(columns) - 1)
    for path, why in bad:
        text += safe_format("unreadable  %s: %s\n", path, why)
    return text
