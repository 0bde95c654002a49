"""The run index's database: its schema, opening it (ours, of this version, or rebuilt), and the writes that
bring it up to date with a walk, a directory at a time. The questions asked of it are :mod:`runindex`'s.

Tables: ``files`` (a :class:`~relaxrepro.manifest.runrow.Row`'s columns: run id, group, parent, time, the ``ls``
cells, the package set; and ``id``, what its terms and documents name it by), ``docs`` (the slim document and the
query facts as JSON text, apart so that a listing does not read them), ``fileterms`` (each fact a query looks up
-- ``status``, ``note``, ``commit.REPO``, ``metric.NAME``, ``arg.NAME``, ``same`` -- as a ``(key id, value)`` row,
indexed by key and value, whose rowid names its file: :func:`query.terms`; ``termkeys``, the keys by id; the view
``terms`` gives them as ``(path, key, value)``, what a clause's SQL asks), ``dirs`` (each directory's signature),
``pkgsets``, ``state`` and ``outputs`` (answers kept for an unchanged tree), ``cards`` (what ``report`` keeps of a
file beside its row: made of the bytes :func:`update` reads for the row when its caller passes a card maker, else
kept by report, :meth:`runindex.Source.keep_cards`) and ``cardsets`` (the parts cards share, by digest).

A cold build (a database with no rows) drops the indexes, reads the files in forked children where there are
many (:mod:`fanout`), writes the rows in transactions of :data:`CHUNK`, and makes the indexes at the end. A table
of a file's rows besides ``files``, ``docs`` and ``fileterms`` goes in :data:`_BY_PATH` (deleted with its file).
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
import stat
import time

from ..std.records import Record
from ..std.sha import sha256
from . import fanout
from .runrow import Row
from .treesig import KEY, join, signature, stored_signatures, tree_digest, unsign

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

    from .runrow import Card
    from .treesig import Walked

VERSION = 6
"""The schema's version (``PRAGMA user_version``): a database of another one is rebuilt, never read. 6: a term's
file is its rowid's high bits (no ``id`` column, no index by it), its key an id (``termkeys``); a run's id, group
and parent are terms only where ``files`` does not hold them as text (:func:`query.terms`); ``repo`` and ``commit``
(any repo) none: they ask the ``commit.REPO`` terms; a commit or digest is its first characters
(:data:`query.DIGEST_CHARS`)."""
BUSY_MS = 15000
RACY_NS = 3 * 10**9
CHUNK = 2000
CHECKPOINT_PAGES = 1000
"""SQLite's default: a checkpoint when the log holds 1,000 pages (4 MB) after a commit."""
COLD_CHECKPOINT_PAGES = 16384
TERM_BITS = 24
"""A term's rowid is its file's ``id`` shifted by this, plus its place among the file's terms: a file's terms are
one range of the table (deleted by it, found by the rowid that :data:`_INDEXES`' ``terms_kv`` holds), with no
``id`` column nor an index by it to write. A file of 10 MB (:data:`model.READ_LIMIT_BYTES`) makes fewer than a
tenth of the 16 million terms this leaves it; one with more is listed, not stored (:func:`update`)."""

_TERM_SPAN = 1 << TERM_BITS
_DELETE_TERMS = ("DELETE FROM fileterms WHERE rowid BETWEEN (SELECT id FROM files WHERE path = ?1) << %d"
                 " AND ((SELECT id FROM files WHERE path = ?1) << %d) + %d" % (TERM_BITS, TERM_BITS, _TERM_SPAN - 1))
COLUMN = {"generated_at": "gen", "group": "grp", "doc_json": "doc", "facts_json": "facts"}
"""The :class:`Row` fields stored under another column name: ``gen`` is the run's ``generated_at`` (not the
write counter, ``state.gen``); the names are kept so that an index of this version stays readable."""
_FILES = ("path", "run_id", "generated_at", "group", "parent", "error", "cells", "pkgkey")
_DOCS = ("path", "doc_json", "facts_json")
"""The :class:`Row` fields of the ``files`` and ``docs`` tables, in their columns' order."""
_files_values = operator.attrgetter(*_FILES[1:])  # the path stored is the one relative to the root
_docs_values = operator.attrgetter(*_DOCS[1:])
_SCHEMA = (
    # ``id``: what a file's terms name it by. The documents apart: a listing's scan reads ~30 MB of rows, not
    # the 200 MB that holds them too.
    "CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, run_id, gen, grp, parent, error, cells,"
    " pkgkey)",
    "CREATE TABLE docs (id INTEGER PRIMARY KEY, doc, facts)",  # a file's, by its id: no index of paths to write
    # A clause is a range of (key, value) and gives paths without reading the table (query.terms). A term names
    # its file by id, not path: 100,000 runs make 1.7 million terms, and a path repeated in each of them and
    # in two indexes was three quarters of the database (the cold build's writes and sorts with it); the id is
    # the rowid's high bits (TERM_BITS), the key a small integer, so a row is a number and a value.
    "CREATE TABLE termkeys (kid INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL)",
    "CREATE TABLE fileterms (kid INTEGER NOT NULL, value)",
    "CREATE VIEW terms AS SELECT files.path AS path, termkeys.key AS key, value FROM fileterms JOIN termkeys"
    " USING (kid) JOIN files ON files.id = fileterms.rowid >> %d" % TERM_BITS,
    "CREATE TABLE dirs (dir TEXT PRIMARY KEY, sig BLOB)",
    "CREATE TABLE pkgsets (pkgkey TEXT PRIMARY KEY, packages TEXT)",
    "CREATE TABLE state (id INTEGER PRIMARY KEY, tree BLOB, gen INTEGER)",
    "INSERT INTO state VALUES (0, NULL, 0)",
    "CREATE TABLE outputs (key TEXT PRIMARY KEY, tree BLOB, meta TEXT, body BLOB)",
    # A file's card goes with its row (deleted when the file is read again or gone); a set is kept while its
    # database is, like a package set.
    "CREATE TABLE cards (path TEXT PRIMARY KEY, card TEXT)",
    "CREATE TABLE cardsets (key TEXT PRIMARY KEY, body TEXT)",
    "PRAGMA user_version = %d" % VERSION,
)
_TABLES = {"files", "docs", "fileterms", "termkeys", "dirs", "pkgsets", "state", "outputs", "cards", "cardsets"}
_BY_PATH = ("cards",)
"""The tables besides ``files``, ``docs`` and ``fileterms`` (by the file's id) whose rows are a file's, keyed by its
relative path: deleted with it (a file gone or read again)."""
_INDEXES = {name: "CREATE INDEX IF NOT EXISTS %s ON %s" % (name, on) for name, on in (
    ("files_run", "files (run_id)"), ("files_parent", "files (parent)"), ("files_grp", "files (grp)"),
    ("files_pkg", "files (pkgkey)"), ("terms_kv", "fileterms (kid, value)"))}
"""Made after the rows by a cold build (sorting once is several times cheaper than inserting each row's
entries into six B-trees one by one), and again by :func:`connect` where a build stopped before it made them."""


class Bypass(Exception):
    """The database is not to be used this time (not ours, read-only, locked): the listing goes without it."""


class Broken(Exception):
    """The database cannot be used as it is: corrupt, of another version, not ours."""


def db_path(directory: str, root: str) -> str:
    return os.path.join(directory, sha256(os.path.realpath(root).encode("utf-8", "surrogateescape"))
                        .hexdigest()[:32] + ".sqlite")


def reason_of(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def untrusted(directory: str, path: str) -> Optional[str]:
    """Why the index directory or database may not be used (None: it may)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        return "cannot create its directory (%s)" % (exc.strerror or exc)
    if not os.access(directory, os.W_OK) or (os.path.lexists(path) and not os.access(path, os.W_OK)):
        return "the cache is read-only"  # a snapshot, a read-only home: a database there cannot even be read (WAL)
    for p, what in ((directory, "directory"), (path, "database")):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return "cannot stat its %s (%s)" % (what, exc.strerror or exc)
        if what == "database" and not stat.S_ISREG(st.st_mode):
            return "the database is not a regular file"
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            return "the %s belongs to uid %d, not to us" % (what, st.st_uid)
        if st.st_mode & 0o022:
            return "the %s is writable by others" % what
    return None


def remove(path: str, why: BaseException) -> None:
    """Remove the broken database at ``path`` (``why``: what is wrong with it); :class:`Bypass` when it cannot be."""
    for p in (path + "-wal", path + "-shm", path):  # a stale WAL must never be applied to a new database
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise Bypass("%s: %s, and it cannot be removed (%s)" % (path, reason_of(why), exc.strerror or exc)
                         ) from None


def rollback(conn: sqlite3.Connection) -> None:
    """End a failed write: SQLite ends the transaction itself on some errors (a full disk), and a ROLLBACK
    then would raise over the error that matters."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def connect(path: str) -> sqlite3.Connection:
    """The database at ``path``, created when absent; :class:`Broken` when it is not one of ours."""
    old = os.umask(0o077)
    try:
        conn = sqlite3.connect(path, timeout=BUSY_MS / 1000.0, isolation_level=None)
    finally:
        os.umask(old)
    try:
        conn.execute("PRAGMA busy_timeout = %d" % BUSY_MS)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] == 0:  # nobody made it meanwhile
                    if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                        raise Broken("not a relaxrepro run index")
                    for statement in _SCHEMA + tuple(_INDEXES.values()):
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            version = VERSION
        if version != VERSION:
            raise Broken("index version %s, this relaxrepro writes %d" % (version, VERSION))
        if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
            # Another process holds the new database (it switches on its first open): circumstances, not damage.
            raise sqlite3.OperationalError("cannot switch to write-ahead logging now")
        conn.execute("PRAGMA synchronous = NORMAL")
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if names != _TABLES or conn.execute("SELECT count(*) FROM state").fetchone()[0] != 1:
            raise Broken("not a relaxrepro run index")
        _indexes(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def storable(path: str) -> bool:
    """Whether sqlite can hold ``path``: a name that is not UTF-8 (read with ``surrogateescape``) is listed
    from memory, never stored, so its directory is read again by every listing."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Update(Record):
    """What :func:`update` did: ``extra``, the rows read but not stored (by path), ``fresh``, the same by
    relative path, ``digest``, the digest of the tree the database now holds, and whether it was stored
    (``written``; ``failed``: why a write did not go in)."""

    extra: List[Row]
    fresh: Dict[str, Row]
    digest: bytes
    written: bool
    failed: Optional[str] = None


class _Writes(Record):
    """Where our writes stand: ``count``, the database's write counter (``state.gen``) as our last write left
    it; ``clean``: no other process wrote since we compared; ``failed``: why a write did not go in (locked
    past the busy timeout, read-only, a full disk), None while they do."""

    count: int
    clean: bool = True
    failed: Optional[str] = None


class _DirWrite(Record):
    """One directory to write: its signature as compared (``old_sig``) and as it is to be (``new_sig``, None:
    the directory is dropped), the relative paths of the files ``gone``, and ``rows`` by relative path."""

    dir: str
    old_sig: Optional[bytes]
    new_sig: Optional[bytes]
    gone: List[str]
    rows: List[Tuple[str, Row]]


def _plan(walked: Walked, sigs: List[Tuple[str, bytes]], stored: Dict[str, bytes]
          ) -> List[Tuple[str, List[str], List[Optional[bytes]], Optional[bytes], List[Tuple[str, Optional[bytes]]]]]:
    """The walked directories whose stored signature differs: (dir, names, keys, stored signature, the
    (name, key) of each file to read)."""
    plan = []
    sig_of = dict(sigs)
    for rel, names, keys in walked:
        if rel in sig_of and stored.get(rel) == sig_of[rel] and None not in keys:
            continue
        old = unsign(stored.get(rel))
        todo = [(n, k) for n, k in zip(names, keys) if k is None or old.get(n) != k]
        plan.append((rel, names, keys, stored.get(rel), todo))
    return plan


def update(conn: sqlite3.Connection, prefix: str, walked: Walked, sigs: List[Tuple[str, bytes]],
            stored: Dict[str, bytes], writes: int, progress: Optional[Callable[[int, int], None]],
            card: Optional[Card] = None) -> Update:
    """Re-read what differs from ``stored`` (the directory signatures when the write counter was ``writes``)
    and write it, a directory at a time; ``card``: a caller's card maker (:func:`runrow.read_row`), whose card
    of each file read goes in beside its row, in the same transaction."""
    plan = _plan(walked, sigs, stored)
    todo_count = sum(len(todo) for *_, todo in plan)
    cold = not stored and todo_count > 0
    if cold:
        _indexes(conn, drop=True)
        # A checkpoint (the log copied into the database, each side synced) per 64 MB of log, not per 4 MB: a
        # cold build of 100,000 runs writes ~400 MB. Only when: WAL stays as safe, the log only grows larger.
        conn.execute("PRAGMA wal_autocheckpoint = %d" % COLD_CHECKPOINT_PAGES)
    walked_dirs = {rel for rel, _, _ in walked}
    dropped = [(rel, sig) for rel, sig in stored.items() if rel not in walked_dirs]
    now = time.time_ns()
    fresh: Dict[str, Row] = {}
    uncached: Set[str] = set()
    state = _Writes(writes)
    pending: List[_DirWrite] = []
    sets: List[Tuple[str, str]] = []
    seen_sets: Set[str] = set()
    card_sets: List[Tuple[str, str]] = []
    seen_cards: Set[str] = set()
    done = 0
    rows_pending = 0
    # Read in forked children where there are many (fanout.py): in the order of the plan either way.
    read = fanout.rows(lambda: (prefix + join(rel, n) for rel, _, _, _, todo in plan for n, _ in todo), todo_count,
                       card)
    try:
        for rel, names, keys, old_sig, todo in plan:
            new_rows = []
            for name, key in todo:
                path = join(rel, name)
                row, pkgs = next(read)
                if pkgs is not None and row.pkgkey not in seen_sets:
                    seen_sets.add(row.pkgkey)  # type: ignore[arg-type]
                    sets.append((row.pkgkey, json.dumps(pkgs, sort_keys=True, separators=(",", ":"))))  # type: ignore
                if row.card is not None and row.card[1] is not None and row.card[1][0] not in seen_cards:
                    seen_cards.add(row.card[1][0])
                    card_sets.append(row.card[1])
                if (key is not None and row.cacheable and now - KEY.unpack(key)[1] > RACY_NS and storable(path)
                        and (row.terms is None or len(row.terms[0]) < _TERM_SPAN)):
                    new_rows.append((path, row))
                else:
                    uncached.add(path)
                    fresh[path] = row  # only these: a cold build keeps no 100,000 rows in memory
                done += 1
                if progress is not None and (done % 500 == 0 or done == todo_count):
                    progress(done, todo_count)
            keep = [(n, k) for n, k in zip(names, keys) if k is not None and join(rel, n) not in uncached]
            new_sig = signature([n for n, _ in keep], [k for _, k in keep]) if keep else None  # type: ignore[misc]
            kept = {n for n, _ in keep}
            gone = [join(rel, n) for n in unsign(old_sig) if n not in kept]
            if new_sig != old_sig or new_rows:
                pending.append(_DirWrite(rel, old_sig, new_sig, gone, new_rows))
                rows_pending += len(new_rows) + 1
            if rows_pending >= CHUNK:
                state = _write(conn, pending, sets, None, state, card_sets)
                pending, sets, card_sets, rows_pending = [], [], [], 0
    finally:
        read.close()  # no child outlives the reads, even when a write fails
    for rel, sig in dropped:
        pending.append(_DirWrite(rel, sig, None, [join(rel, n) for n in unsign(sig)], []))
    expected = tree_digest(stored_signatures(walked, uncached, sigs))
    extra = [fresh[p] for p in sorted(uncached)]
    state = _write(conn, pending, sets, expected, state, card_sets)
    if cold:
        _indexes(conn)
        conn.execute("PRAGMA wal_autocheckpoint = %d" % CHECKPOINT_PAGES)
    return Update(extra, fresh, expected, state.clean and not state.failed, state.failed)


def _indexes(conn: sqlite3.Connection, drop: bool = False) -> None:
    """Make the indexes of :data:`_INDEXES` that are missing (``drop``: drop them, before a cold build's rows). Quietly
    not when the database cannot be written now: the queries are right without them, only slower."""
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    todo = [n for n in _INDEXES if (n in have) == drop]
    if not todo:
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for name in todo:
                conn.execute("DROP INDEX IF EXISTS %s" % name if drop else _INDEXES[name])
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
    except sqlite3.OperationalError:
        pass


def _write(conn: sqlite3.Connection, pending: List[_DirWrite], sets: List[Tuple[str, str]],
           digest: Optional[bytes], before: _Writes, card_sets: Sequence[Tuple[str, str]] = ()) -> _Writes:
    """Write ``pending`` directories (rows and signature together, each only when its stored signature is
    still the one it was compared with) and package ``sets``; with ``digest``, the last write: the tree's
    digest is stored when no other process wrote since we compared. Returns where our writes stand now. A
    database still locked after the busy timeout, read-only or on a full disk is left as it was (``failed``
    says why): this listing is right without it. ``card_sets``: the parts the rows' cards name (``cardsets``)."""
    if before.failed:
        return before
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            after = _write_in(conn, pending, sets, digest, before, card_sets)
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
    except sqlite3.OperationalError as exc:
        return _Writes(before.count, before.clean, failed=reason_of(exc))
    return after


def _write_in(conn: sqlite3.Connection, pending: List[_DirWrite], sets: List[Tuple[str, str]],
              digest: Optional[bytes], before: _Writes, card_sets: Sequence[Tuple[str, str]] = ()) -> _Writes:
    """:func:`_write` inside its transaction."""
    count = conn.execute("SELECT gen FROM state").fetchone()[0]
    clean = before.clean and count == before.count  # else another writer: our tree digest may not be the database's
    next_id = conn.execute("SELECT ifnull(max(id), 0) + 1 FROM files").fetchone()[0]
    kids = dict(conn.execute("SELECT key, kid FROM termkeys").fetchall())  # read in the transaction: current
    for d in pending:
        got = conn.execute("SELECT sig FROM dirs WHERE dir = ?", (d.dir,)).fetchone()
        if (got[0] if got else None) != d.old_sig:
            clean = False
            continue
        # A file gone or read again loses its rows (a cold build's directories have none).
        _delete(conn, d.gone + [rel for rel, _ in d.rows] if d.old_sig is not None else d.gone)
        ids = range(next_id, next_id + len(d.rows))
        next_id += len(d.rows)
        conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(i, rel) + _files_values(row) for i, (rel, row) in zip(ids, d.rows)])
        conn.executemany("INSERT OR REPLACE INTO docs VALUES (?, ?, ?)",
                         [(i,) + _docs_values(row) for i, (_, row) in zip(ids, d.rows)])
        conn.executemany("INSERT INTO fileterms (rowid, kid, value) VALUES (?, ?, ?)",
                         _term_rows(conn, ids, d.rows, kids))
        conn.executemany("INSERT OR REPLACE INTO cards VALUES (?, ?)",
                         [(rel, row.card[0]) for rel, row in d.rows if row.card is not None])
        if d.new_sig is None:
            conn.execute("DELETE FROM dirs WHERE dir = ?", (d.dir,))
        else:
            conn.execute("INSERT OR REPLACE INTO dirs VALUES (?, ?)", (d.dir, d.new_sig))
    conn.executemany("INSERT OR IGNORE INTO pkgsets VALUES (?, ?)", sets)
    conn.executemany("INSERT OR REPLACE INTO cardsets VALUES (?, ?)", card_sets)
    tree = digest if digest is not None and clean else None
    if pending or tree is None or conn.execute("SELECT tree FROM state").fetchone()[0] != tree:
        count += 1
        conn.execute("UPDATE state SET tree = ?, gen = ?", (tree, count))
    return _Writes(count, clean)



def _term_rows(conn: sqlite3.Connection, ids: range, rows: List[Tuple[str, Row]], kids: Dict[str, int]
               ) -> List[Tuple[int, int, Any]]:
    """The ``fileterms`` rows of ``rows`` (their files' ``ids``): (rowid, key id, value); a key not in ``kids``
    (``termkeys`` by key) is added to both."""
    out: List[Tuple[int, int, Any]] = []
    for i, (_, row) in zip(ids, rows):
        if row.terms is None:
            continue
        keys, values = row.terms
        at = i << TERM_BITS
        mark = len(out)
        try:  # zipped in C: 1.7 million terms at 100,000 runs
            out.extend(zip(range(at, at + len(keys)), map(kids.__getitem__, keys), values))
        except KeyError:  # a key new to the database
            del out[mark:]
            for k in keys:
                if k not in kids:
                    kids[k] = conn.execute("INSERT INTO termkeys (key) VALUES (?)", (k,)).lastrowid
            out.extend(zip(range(at, at + len(keys)), map(kids.__getitem__, keys), values))
    return out


def _delete(conn: sqlite3.Connection, paths: List[str]) -> None:
    """Delete the rows of the files at ``paths`` (relative) from every table that holds a file's."""
    if not paths:
        return
    keys = [(p,) for p in paths]
    conn.executemany(_DELETE_TERMS, keys)
    conn.executemany("DELETE FROM docs WHERE id IN (SELECT id FROM files WHERE path = ?)", keys)
    for table in ("files",) + _BY_PATH:
        conn.executemany("DELETE FROM %s WHERE path = ?" % table, keys)
