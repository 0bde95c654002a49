"""The run index: one SQLite database per scanned root, in the per-user cache, that remembers each
manifest's row (:mod:`runrow`) under the file's path, size, mtime_ns and inode.

Why: a team's tree holds 100,000 manifests; reading them all takes seconds on every ``ls``. The index
is never trusted over the files: every use walks the tree (``scandir``) and ``stat``\\s each manifest,
re-reads what is new or changed and drops what is gone, so a listing costs the walk plus the changed
files. A file modified in the last few seconds is read but not stored (a second write within the same
mtime tick would look unchanged: git's "racy" case).

How the check stays cheap: each directory's manifests make a signature (their names and the packed
size, mtime_ns and inode of each), stored with the directory's rows in one transaction, and the walk's
signatures fold into a digest of the whole tree. A database whose stored digest equals the walk's holds
exactly the tree's rows, so nothing is loaded to check it, and a command asks it for the rows it needs
(a run id, a group, a package set) by indexed column. Otherwise only the directories whose signature
differs are compared file by file.

Where: ``<cache>/index/<sha256 of the root's real path>.sqlite`` (``RELAXREPRO_CACHE_DIR``, else
``$XDG_CACHE_HOME/relaxrepro``, else ``~/.cache/relaxrepro``; ``RELAXREPRO_NO_CACHE=1`` turns it off),
so a read-only run tree works and a shared file system is never locked by us. A database we do not
own, one others may write, a symlink, or one that is corrupt or of another version is never read:
the last two are rebuilt, the others bypassed, each with one warning. WAL and a busy timeout let
several processes list and update at once; every write bumps a generation counter, and the tree's
digest is only stored by a writer that saw no other write since it compared, so a race costs a
re-check, never a stale row.
"""

from __future__ import annotations

import itertools
import json
import operator
import os
import sqlite3

from ..std.cache import cache_dir
from ..std.records import Factory, Record
from ..std.sha import sha256_hex
from .indexdb import (
    COLUMN,
    Broken,
    Bypass,
    Update,
    connect,
    db_path,
    reason_of,
    remove,
    rollback,
    storable,
    untrusted,
    update,
)
from .indexdb import VERSION as VERSION  # what ls keys its kept answers by
from .query import narrowing, parse
from .runrow import STORED, Row, read_row
from .scan import Walk, walk_root
from .treesig import join, stored_signatures, tree_digest, walk

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

    from .runrow import Card
    from .treesig import Walked

"""Rows per write transaction: other processes' writes interleave with a long build."""
KEPT = 16
"""Answers kept per tree, the newest first, as long as they also fit in :data:`KEPT_BYTES`."""
KEPT_BYTES = 64 << 20
"""The kept answers' size (the newest is kept whatever its size): an ``ls`` of 100,000 runs is ~15 MB, a query
that matches a few runs a few KB, so a team's rotation of queries (the bench asks six) does not push out the
table, which costs ~2x the walk to make again at that size."""
_LAZY = {"cells": "''", "doc_json": "NULL", "facts_json": "NULL"}
"""What a SELECT reads for each field a caller may leave out (see :func:`listing`'s ``want``)."""

class Listing(Record):
    """The rows of a listing in walk order, the package sets their ``pkgkey`` names (with ``facts``), the
    warnings to say once (a database bypassed or rebuilt), and why the database does not hold the rows
    (``unstored``: bypassed, read-only, a failed write; empty when stored, files written just now aside)."""

    rows: List[Row] = Factory(list)
    packages: Dict[str, Dict[str, str]] = Factory(dict)
    warnings: List[str] = Factory(list)
    unstored: List[str] = Factory(list)


def listing(roots: Sequence[str], *, use_index: bool = True, want: Sequence[str] = ("cells",),
            env: Optional[Mapping[str, str]] = None,
            progress: Optional[Callable[[int, int], None]] = None) -> Listing:
    """Every manifest below ``roots`` as rows, through the index unless ``use_index`` is false.

    ``want``: which of ``cells`` (the ``ls`` table), ``doc`` (``ls --json``), ``facts`` (a query) the
    caller reads; the rest is not loaded. The rows and their order are those of a scan either way.
    """
    src = open_roots(roots, use_index=use_index, want=want, env=env, progress=progress)
    try:
        rows = src.find(want=want)
        packages = src.packages({r.pkgkey for r in rows if r.pkgkey}) if "facts" in want else {}
        return Listing(rows, packages, src.warnings, src.unstored)
    finally:
        src.close()


def open_roots(roots: Sequence[str], *, use_index: bool = True, want: Sequence[str] = (),
               env: Optional[Mapping[str, str]] = None,
               progress: Optional[Callable[[int, int], None]] = None, memo: Optional[Dict[str, Any]] = None,
               card: Optional[Card] = None, kept: Optional[Dict[str, Dict[str, Any]]] = None) -> Source:
    """The manifests below ``roots``, checked against the files now, to be asked with :meth:`Source.find`
    (close it after). ``want``: what a scan without the index reads of each file (see :func:`listing`);
    ``memo``: a dictionary kept by a caller that opens the same roots again (:class:`Runs`), where each
    root's last walk and its digest are remembered: a walk equal to the last needs no digest computed;
    ``card``: a card maker (:func:`runrow.read_row`) for each file the index reads now, its card stored beside
    the row (:meth:`Source.cards`), so a caller that wants the cards reads no file twice; ``kept``: by root, the
    directory listings a caller keeps between walks (:func:`treesig.walk`'s, ``Runs(check="dirs")``)."""
    src = Source()
    rule = Walk.of(roots)
    directory = cache_dir(os.environ if env is None else env) if use_index else None
    for root in roots:
        if directory is None or os.path.isfile(root) or not storable(os.path.abspath(root)):
            src.parts.append(_scan(root, rule, want))
            continue
        try:
            src.parts.append(_indexed(root, rule, os.path.join(directory, "index"), want, src.warnings,
                                      progress, memo, card, None if kept is None else kept.setdefault(root, {})))
        except Bypass as exc:
            src.warnings.append("run index %s; listing without it" % exc.args[0])
            src.unstored.append("run index %s" % exc.args[0])
            src.parts.append(_scan(root, rule, want))
            continue
        if src.parts[-1].unstored:
            src.unstored.append(src.parts[-1].unstored)
    left = rule.warning()
    if left:
        src.warnings.append(left)
    return src


def find_run(run_id: str, roots: Sequence[str]) -> Optional[str]:
    """The path of a manifest of run ``run_id`` below ``roots`` (the first in walk order), or None."""
    src = open_roots(roots)
    try:
        return next((r.path for r in src.lookup("run_id", run_id)), None)
    finally:
        src.close()


CHECKS = ("files", "dirs")
"""What a :class:`Runs` call looks at before it answers: every manifest, or every directory (see there)."""


def runs(*roots: str, use_index: bool = True, check: str = "files") -> Runs:
    """The runs below the directories ``roots``, to ask from Python (``relaxrepro.runs``): see :class:`Runs`."""
    if not roots:
        raise ValueError("relaxrepro.runs: name at least one directory")
    if check not in CHECKS:
        raise ValueError("relaxrepro.runs: check must be 'files' or 'dirs', not %r" % (check,))
    if check == "dirs" and not use_index:
        raise ValueError("relaxrepro.runs: check='dirs' keeps what the run index read; use_index=False reads every "
                         "manifest at every call")
    for root in roots:
        if not os.path.isdir(root):
            raise FileNotFoundError("relaxrepro.runs: no such directory: %s" % root)
    return Runs(list(roots), use_index, check)


class Runs:
    """The runs below some directories, asked from Python as ``ls`` asks them: ``get(run_id)`` and
    ``where("metric.auc>0.9", ...)`` (the ``--where`` language, :mod:`query`).

    By default (``check="files"``) each call checks the tree as it is at that moment, as every command does (the
    directories walked, each manifest ``stat``\\ed, a new or changed file read again): the answer is a scan's,
    with the index or without (``use_index=False``), however long the object is kept. So a call costs the walk,
    about 4 us a manifest here, plus the index's answer (~6% more); keeping the object saves only hashing an
    unchanged tree again (bench/RESULTS.md, issue 32: 10,000 runs, ~9x MLflow's get_run on SQLite, ~5x its
    search_runs).

    ``check="dirs"`` (with the index): a call ``stat``\\s each directory, not each manifest, and lists again
    only a directory whose stat changed since this object last listed it, or that was changing then (see
    :func:`treesig.walk`). A run written, removed, renamed or replaced (every write of relaxrepro's replaces
    the file) is seen at the next call; a manifest rewritten in place, keeping its inode, is not, until the
    object is made again. At 10,000 runs in 150 directories a call costs ~2 ms here, not ~38 ms.
    The rows are :class:`~relaxrepro.manifest.runrow.Row`\\ s with their ``doc`` and ``facts``. ``warnings``:
    what the last call had to say (a database bypassed or rebuilt)."""

    _WANT = ("doc", "facts")

    def __init__(self, roots: List[str], use_index: bool = True, check: str = "files") -> None:
        self.roots, self.use_index, self.check = roots, use_index, check
        self.warnings: List[str] = []
        self._memo: Dict[str, Any] = {}  # each root's last walk and digest (open_roots)
        self._kept: Optional[Dict[str, Dict[str, Any]]] = {} if check == "dirs" else None  # listings, by root
        # A changed tree is hashed again (treesig.tree_digest): OpenSSL's sha256 is ~6x faster than the builtin
        # one, and an object kept for many calls pays its import once.
        import hashlib  # noqa: F401 - lazy: ~3.3 ms, only for an object that is asked again and again

    def _open(self) -> Source:
        src = open_roots([r for r in self.roots if os.path.exists(r)], use_index=self.use_index, want=self._WANT,
                         memo=self._memo, kept=self._kept)
        self.warnings = list(src.warnings)
        return src

    def get(self, run_id: str) -> Optional[Row]:
        """The run ``run_id`` (the first in walk order when copies share it), or None. A manifest whose listed
        fields cannot be read but that records the id is found with its ``error`` set, as ``lineage`` finds it."""
        src = self._open()
        try:
            return next(iter(src.lookup("run_id", run_id, self._WANT)), None)
        finally:
            src.close()

    def where(self, *exprs: str) -> List[Row]:
        """The readable runs that pass every expression (``ls --where``'s), in walk order;
        :class:`~relaxrepro.manifest.query.QueryError` (a ``ValueError``) for one that does not parse, before
        anything is read. Unreadable manifests are left out (``ls`` names them)."""
        clauses = [parse(e) for e in exprs]
        src = self._open()
        try:
            sets = src.packages() if any(c.package is not None for c in clauses) else {}
            cond, params = narrowing(clauses, sets)
            rows = src.find(cond, params, None, self._WANT)
        finally:
            src.close()
        return [r for r in rows if r.error is None
                and all(c.test(r.facts, sets.get(r.pkgkey) if r.pkgkey else None) for c in clauses)]


class Source(Record):
    """What :func:`open_roots` found, root by root: each part answers from the database (a snapshot that
    matches the tree, plus the rows of files not stored) or from rows in memory."""

    parts: List[_Part] = Factory(list)
    warnings: List[str] = Factory(list)
    unstored: List[str] = Factory(list)

    def find(self, where: str = "", params: Sequence[Any] = (), test: Optional[Callable[[Row], bool]] = None,
             want: Sequence[str] = ()) -> List[Row]:
        """The rows (walk order) for which ``test`` holds; ``where``: the same condition in SQL over the
        columns of the ``files`` table, so a database answers by index without loading the rest."""
        out: List[Row] = []
        for part in self.parts:
            out.extend(part.find(where, params, test, want))
        return out

    def table(self, shown: Any) -> Optional[Tuple[List[Tuple[str, str, str, str]], List[Tuple[str, str]]]]:
        """What the ``ls`` table shows, without making a row object per run: ((time, run id, path as shown,
        cells) of the readable runs, in the table's order; (path as shown, why) of the others, by path), the
        paths as ``shown`` (a :class:`~relaxrepro.std.table.RelPaths`) shows them. None when two runs share a
        time and run id: then the walk order breaks the tie (:meth:`find` and a sort)."""
        good: List[Tuple[str, str, str, str]] = []
        bad: List[Tuple[str, str, str]] = []
        for part in self.parts:
            rows = part.rows
            if rows is None:
                head = shown.head(part.prefix)
                got = part.conn.execute("SELECT gen, ifnull(run_id, ''), ? || path, cells, error FROM files",
                                        (head,)).fetchall()
                good.extend([t for t in got if t[4] is None])
                cut = len(head)
                bad.extend([(part.prefix + t[2][cut:], t[2], t[4]) for t in got if t[4] is not None])
                rows = part.extra
            for r in rows:
                if r.error is None:
                    good.append((r.generated_at, r.run_id or "", shown(r.path), r.cells))
                else:
                    bad.append((r.path, shown(r.path), r.error))
        by = operator.itemgetter(0, 1)
        if len(set(map(operator.itemgetter(1), good))) != len(good) and len(set(map(by, good))) != len(good):
            return None
        good.sort(key=by)
        bad.sort(key=operator.itemgetter(0))  # by the path itself, as the scan sorts them
        return good, [(b[1], b[2]) for b in bad]

    def lookup(self, attr: str, value: Optional[str], want: Sequence[str] = ()) -> List[Row]:
        """The rows whose ``attr`` (``run_id``, ``parent``, ``group``) is ``value`` (None: not recorded), in
        walk order: by index from a database, by a dictionary made once from rows in memory."""
        out: List[Row] = []
        for part in self.parts:
            out.extend(part.lookup(attr, value, want))
        return out

    def named(self, name: str, want: Sequence[str] = ()) -> List[Row]:
        """The rows whose run id or path is ``name``, in walk order (by index from a database)."""
        out: List[Row] = []
        for part in self.parts:
            rel = name[len(part.prefix):] if name.startswith(part.prefix) else None
            out.extend(part.find("run_id IS ? OR path IS ?", (name, rel),
                                 lambda r: r.run_id == name or r.path == name, want))
        return out

    def count(self) -> int:
        return sum(p.count() for p in self.parts)

    def packages(self, keys: Optional[Iterable[str]] = None) -> Dict[str, Dict[str, str]]:
        """The package sets named ``keys`` (all known sets when None)."""
        out: Dict[str, Dict[str, str]] = {}
        for part in self.parts:
            out.update(part.packages(keys))
        return out

    def tree(self) -> Optional[str]:
        """A digest of every root's state, when all are answered by a database with nothing unstored:
        the key under which a rendered answer may be kept (:meth:`recall`, :meth:`keep`); else None."""
        digests = [p.digest for p in self.parts]
        if not digests or any(d is None for d in digests):
            return None
        return sha256_hex(b"".join(digests))  # type: ignore[arg-type]

    def recall(self, key: str) -> Optional[Tuple[str, bytes]]:
        """(meta, body) kept under ``key`` for this very tree, or None."""
        tree = self.tree()
        if tree is None:
            return None
        got = self.parts[0].conn.execute("SELECT tree, meta, body FROM outputs WHERE key = ?", (key,)).fetchone()
        return (got[1], got[2]) if got is not None and got[0] == tree and isinstance(got[2], bytes) else None

    def keep(self, key: str, meta: str, body: bytes) -> None:
        """Remember an answer for this tree, the second time it is asked for (the first leaves a mark: a
        one-off query neither pays for writing its answer nor pushes out the ones asked again), and drop
        those of other trees. Quietly not when the database is busy: no one waits for a cache."""
        tree = self.tree()
        if tree is None:
            return

        def write(conn: sqlite3.Connection) -> None:
            asked = conn.execute("SELECT 1 FROM outputs WHERE key = ? AND tree = ?", (key, tree)).fetchone()
            conn.execute("DELETE FROM outputs WHERE tree != ?", (tree,))
            conn.execute("INSERT OR REPLACE INTO outputs VALUES (?, ?, ?, ?)",
                         (key, tree, meta, body) if asked else (key, tree, None, None))
            conn.execute("DELETE FROM outputs WHERE key IN (SELECT key FROM outputs WHERE body IS NULL "
                         "ORDER BY rowid DESC LIMIT -1 OFFSET 64)")
            total, drop = 0, []
            for i, (old, size) in enumerate(conn.execute(
                    "SELECT key, length(body) FROM outputs WHERE body IS NOT NULL ORDER BY rowid DESC")):
                total += size
                if i >= KEPT or (i and total > KEPT_BYTES):
                    drop.append((old,))
            conn.executemany("DELETE FROM outputs WHERE key = ?", drop)
        _cache_write(self.parts[0].conn, write)

    def cards(self) -> Dict[str, str]:
        """The cards the databases hold, by path: a text a reader derived from a file and stored beside its row
        (``report``'s, :meth:`keep_cards`, or made as the index read it: :func:`open_roots`'s ``card``), and
        those made of the files read now but not stored (written just now); other rows in memory have none."""
        out: Dict[str, str] = {}
        for part in self.parts:
            if part.conn is not None:
                p = part.prefix
                out.update((p + path, card) for path, card in part.conn.execute("SELECT path, card FROM cards"))
                out.update((r.path, r.card[0]) for r in part.extra if r.card is not None)
        return out

    def card_sets(self, keys: Iterable[str]) -> Dict[str, str]:
        """The texts stored under ``keys`` by :meth:`keep_cards` (the parts many cards share)."""
        out: Dict[str, str] = {}
        for part in self.parts:
            if part.conn is not None:
                for key in keys:
                    if key not in out:
                        got = part.conn.execute("SELECT body FROM cardsets WHERE key = ?", (key,)).fetchone()
                        if got is not None:
                            out[key] = got[0]
        return out

    def keep_cards(self, cards: Sequence[Tuple[str, str]], sets: Sequence[Tuple[str, str]]) -> None:
        """Store ``cards`` ((path, text) of files read now) beside the rows of this snapshot, with the ``sets``
        (key, text) they name. Only where no other process wrote since the snapshot (a row may be another
        file's now) and only for files the database holds (not those written just now); quietly not when the
        database is busy: no one waits for a cache. A file read again, or gone, loses its card."""
        for part in self.parts:
            mine = [(path[len(part.prefix):], text) for path, text in cards if path.startswith(part.prefix)]
            if part.conn is None or part.gen is None or not (mine or sets):
                continue

            def write(conn: sqlite3.Connection, gen: int = part.gen, mine: List[Tuple[str, str]] = mine) -> None:
                if conn.execute("SELECT gen FROM state").fetchone()[0] == gen:
                    conn.executemany("INSERT OR REPLACE INTO cards SELECT ?, ? WHERE EXISTS "
                                     "(SELECT 1 FROM files WHERE path = ?)", [(r, t, r) for r, t in mine])
                    conn.executemany("INSERT OR REPLACE INTO cardsets VALUES (?, ?)", sets)
            _cache_write(part.conn, write)

    def close(self) -> None:
        for part in self.parts:
            part.close()


def _cache_write(conn: sqlite3.Connection, write: Callable[[sqlite3.Connection], None]) -> None:
    """``write`` in a transaction of its own, after the snapshot read so far (which it ends): what a command
    keeps for the next one. Quietly not when the database is busy or cannot be written: no one waits for a cache."""
    try:
        if conn.in_transaction:
            conn.execute("COMMIT")
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("BEGIN IMMEDIATE")
        try:
            write(conn)
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
    except sqlite3.Error:
        pass


class _Part(Record):
    """One root (``prefix``: its path and a separator): rows in memory (``rows``), or a database snapshot
    (``conn`` in a read transaction) plus the rows of files not stored (``extra``); ``sets``: package sets
    in memory; ``digest``: the snapshot's tree digest when it holds every row; ``order``: each directory's
    place in the walk; ``by``: the rows in memory by ``run_id``, ``parent`` or ``group``, made when asked;
    ``gen``: the snapshot's write counter (``state.gen``)."""

    prefix: str
    rows: Optional[List[Row]] = None
    sets: Dict[str, Dict[str, str]] = Factory(dict)
    conn: Any = None
    digest: Optional[bytes] = None
    extra: List[Row] = Factory(list)
    order: Dict[str, int] = Factory(dict)
    by: Dict[str, Dict[Optional[str], List[Row]]] = Factory(dict)
    unstored: Optional[str] = None
    gen: Optional[int] = None

    def find(self, where: str, params: Sequence[Any], test: Optional[Callable[[Row], bool]],
             want: Sequence[str]) -> List[Row]:
        if self.rows is not None:
            return [r.trimmed(want) for r in self.rows if test is None or test(r)]
        got = self.stored(where, params, want)
        if test is not None:
            got = [r for r in got if test(r)]
        got.extend(r.trimmed(want) for r in self.extra if test is None or test(r))
        return self.walk_order(got)

    def stored(self, where: str, params: Sequence[Any], want: Sequence[str]) -> List[Row]:
        """The stored rows where ``where`` holds, with what ``want`` asks for (see :func:`listing`)."""
        cols = ", ".join(_LAZY[f] if f in _LAZY and _want_of(f) not in want else COLUMN.get(f, f) for f in STORED)
        join = " LEFT JOIN docs USING (id)" if "doc" in want or "facts" in want else ""
        rows = list(itertools.starmap(Row, self.conn.execute(
            "SELECT %s FROM files%s%s" % (cols, join, " WHERE " + where if where else ""), params)))
        p = self.prefix
        for r in rows:
            r.path = p + r.path  # stored relative to the root
        return rows

    def lookup(self, attr: str, value: Optional[str], want: Sequence[str]) -> List[Row]:
        if self.rows is None:
            return self.find(COLUMN.get(attr, attr) + " IS ?", (value,), lambda r: getattr(r, attr) == value, want)
        by = self.by.get(attr)
        if by is None:
            by = self.by[attr] = {}
            for r in self.rows:
                by.setdefault(getattr(r, attr), []).append(r)
        return [r.trimmed(want) for r in by.get(value, ())]

    def walk_order(self, rows: List[Row]) -> List[Row]:
        order, sep, cut = self.order, os.sep, len(self.prefix)

        def key(r: Row) -> Tuple[int, str]:
            rel = r.path[cut:]
            return order.get(rel[:max(rel.rfind(sep), 0)], -1), rel
        rows.sort(key=key)
        return rows

    def count(self) -> int:
        if self.rows is not None:
            return len(self.rows)
        return self.conn.execute("SELECT count(*) FROM files").fetchone()[0] + len(self.extra)

    def packages(self, keys: Optional[Iterable[str]]) -> Dict[str, Dict[str, str]]:
        out = dict(self.sets) if keys is None else {k: self.sets[k] for k in keys if k in self.sets}
        if self.conn is not None:
            wanted = None if keys is None else set(keys)
            for key, text in self.conn.execute("SELECT pkgkey, packages FROM pkgsets"):
                if (wanted is None or key in wanted) and key not in out:
                    out[key] = json.loads(text)
        return out

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _want_of(field: str) -> str:
    """The name a caller's ``want`` gives a field it may leave out: ``doc`` for ``doc_json``."""
    return field[:-5] if field.endswith("_json") else field


def _scan(root: str, rule: Walk, want: Sequence[str]) -> _Part:
    part = _Part(os.path.join(root, ""), rows=[])
    for path in walk_root(root, rule):
        row, pkgs = read_row(path, facts="facts" in want)
        part.rows.append(row)
        if pkgs is not None:
            part.sets[row.pkgkey] = pkgs  # type: ignore[index]
    return part


def _indexed(root: str, rule: Walk, directory: str, want: Sequence[str], warnings: List[str],
             progress: Optional[Callable[[int, int], None]], memo: Optional[Dict[str, Any]] = None,
             card: Optional[Card] = None, kept: Optional[Dict[str, Any]] = None) -> _Part:
    path = db_path(directory, root)
    refused = untrusted(directory, path)
    if refused:
        raise Bypass("%s: %s" % (path, refused))
    walked = walk(root, rule, kept)
    for attempt in (1, 2):
        # An OperationalError is the database's circumstances (locked, read-only, a full disk, no memory):
        # the index is left as it is. Only one that is not ours, or corrupt, is removed and built again.
        try:
            conn = connect(path)
        except sqlite3.OperationalError as exc:
            raise Bypass("%s: %s" % (path, reason_of(exc))) from None
        except (Broken, sqlite3.DatabaseError) as exc:
            if attempt == 2:
                raise Bypass("%s: %s" % (path, reason_of(exc))) from None
            remove(path, exc)
            warnings.append("run index %s: %s; rebuilt" % (path, reason_of(exc)))
            continue
        try:
            part = _refresh(conn, root, walked, want, progress, memo, card)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) or attempt == 2:
                raise Bypass("%s: %s" % (path, reason_of(exc))) from None
            remove(path, exc)
            warnings.append("run index %s: %s; rebuilt" % (path, reason_of(exc)))
            continue
        if part.unstored:  # the listing is right: the rows not stored were read
            part.unstored = "run index %s: not updated this time (%s)" % (path, part.unstored)
            warnings.append(part.unstored)
        return part
    raise AssertionError("unreachable")


def _refresh(conn: sqlite3.Connection, root: str, walked: Walked, want: Sequence[str],
             progress: Optional[Callable[[int, int], None]], memo: Optional[Dict[str, Any]] = None,
             card: Optional[Card] = None) -> _Part:
    """Bring the index of ``root`` up to date with the walk; the part that answers for it (``want``: what
    its rows hold when they must be kept in memory, see :func:`listing`; ``memo``: see :func:`open_roots`)."""
    part = _Part(os.path.join(root, ""), order={rel: i for i, (rel, _, _) in enumerate(walked)})
    last = memo.get(root) if memo is not None else None
    if last is not None and last[0] == walked:  # every name and key as last time: the same signatures
        sigs, digest, whole = last[1], last[2], True
    else:
        sigs = stored_signatures(walked, set())
        digest = tree_digest(sigs)
        whole = not any(None in keys for _, _, keys in walked)  # no file vanished between listing and stat
        if memo is not None and whole:
            memo[root] = (walked, sigs, digest)
    conn.execute("BEGIN")
    tree, writes = conn.execute("SELECT tree, gen FROM state").fetchone()
    if tree == digest and whole:  # this snapshot is the tree
        part.conn, part.digest, part.gen = conn, digest, writes
        return part
    stored = dict(conn.execute("SELECT dir, sig FROM dirs"))
    conn.execute("COMMIT")
    done = update(conn, part.prefix, walked, sigs, stored, writes, progress, card)
    part.unstored = done.failed
    conn.execute("BEGIN")
    part.conn = conn
    tree, part.gen = conn.execute("SELECT tree, gen FROM state").fetchone()
    if done.written and tree == done.digest:
        part.extra = done.extra
        part.digest = done.digest if not done.extra else None
        return part
    # Another process wrote in between, or we could not: check directory by directory, in one snapshot.
    _recheck(part, walked, done, want)
    return part


def _recheck(part: _Part, walked: Walked, update: Update, want: Sequence[str]) -> None:
    """Turn ``part`` (its snapshot open) into rows in memory: a stored row where its directory's stored
    signature is the walk's, else the row just read, else the file read now."""
    stored = dict(part.conn.execute("SELECT dir, sig FROM dirs"))
    expected = stored_signatures(walked, {r.path[len(part.prefix):] for r in update.extra})
    good = {rel for rel, sig in expected if stored.get(rel) == sig}
    rows = {}
    for row in part.stored("", (), want):
        rel = row.path[len(part.prefix):]
        if rel[:max(rel.rfind(os.sep), 0)] in good:
            rows[rel] = row
    part.sets = part.packages(None)
    part.close()
    part.rows = []
    for rel, names, _ in walked:
        for name in names:
            path = join(rel, name)
            row = rows.get(path) or update.fresh.get(path)
            if row is None:
                row, pkgs = read_row(part.prefix + path, facts="facts" in want)
                if pkgs is not None:
                    part.sets[row.pkgkey] = pkgs  # type: ignore[index]
            part.rows.append(row.trimmed(want))
