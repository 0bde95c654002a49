"""The run index: one SQLite database per scanned root, in the per-user cache, that remembers each
manifest's row (:mod:`runrow`) under the file's path, size, mtime_ns and inode.

Why: a team's tree holds 100,000 manifests; reading them all takes seconds on every ``ls``. The index
is never trusted over the files: every use walks the tree (``scandir``) and ``stat``\\s each manifest,
re-reads what is new or changed and drops what is gone, so a listing costs the walk plus the changed
files. A file modified in the last few seconds is read but not stored (a second write within the same
mtime tick would look unchanged: git's "racy" case).

Where: ``<cache>/index/<sha256 of the root's real path>.sqlite`` (``RELAXREPRO_CACHE_DIR``, else
``$XDG_CACHE_HOME/relaxrepro``, else ``~/.cache/relaxrepro``; ``RELAXREPRO_NO_CACHE=1`` turns it off),
so a read-only run tree works and a shared file system is never locked by us. A database we do not
own, one others may write, a symlink, or one that is corrupt or of another version is never read:
the last two are rebuilt, the others bypassed, each with one warning. WAL and a busy timeout let
several processes list and update at once; a database still locked after the timeout is left alone
(the listing was already read from the files).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import time

from ..std.cache import cache_dir
from . import index
from .runrow import Row, read_row

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

VERSION = 1
BUSY_MS = 15000
RACY_NS = 3 * 10**9
CHUNK = 2000
"""Rows per write transaction: other processes' writes interleave with a long build."""

_COLUMNS = "path, size, mtime_ns, ino, run_id, gen, grp, parent, error, cells, doc, facts, pkgkey"
_SCHEMA = (
    "CREATE TABLE files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, ino INTEGER, run_id TEXT, "
    "gen TEXT, grp TEXT, parent TEXT, error TEXT, cells TEXT, doc TEXT, facts TEXT, pkgkey TEXT)",
    "CREATE TABLE pkgsets (pkgkey TEXT PRIMARY KEY, packages TEXT)",
    "PRAGMA user_version = %d" % VERSION,
)


class Broken(Exception):
    """The database cannot be used as it is: corrupt, of another version, not ours."""


class Listing:
    """The rows of a listing in walk order, the package sets their ``pkgkey`` names (with ``facts``), and
    the warnings to say once (a database bypassed or rebuilt)."""

    def __init__(self) -> None:
        self.rows: List[Row] = []
        self.packages: Dict[str, Dict[str, str]] = {}
        self.warnings: List[str] = []


def listing(roots: Sequence[str], *, use_index: bool = True, want: Sequence[str] = ("cells",),
            env: Optional[Mapping[str, str]] = None,
            progress: Optional[Callable[[int, int], None]] = None) -> Listing:
    """Every manifest below ``roots`` as rows, through the index unless ``use_index`` is false.

    ``want``: which of ``cells`` (the ``ls`` table), ``doc`` (``ls --json``), ``facts`` (a query) the
    caller reads; the rest is not loaded. The rows and their order are those of a scan either way.
    """
    out = Listing()
    linked: Set[str] = set()
    directory = cache_dir(os.environ if env is None else env) if use_index else None
    for root in roots:
        if directory is None or os.path.isfile(root):
            _scan(root, linked, want, out)
            continue
        before = set(linked)
        try:
            _indexed(root, linked, os.path.join(directory, "index"), want, out, progress)
        except _Bypass as exc:
            out.warnings.append(exc.args[0])
            linked.clear()
            linked.update(before)
            _scan(root, linked, want, out)
    return out


class _Bypass(Exception):
    pass


def _scan(root: str, linked: Set[str], want: Sequence[str], out: Listing) -> None:
    for path in index.walk_root(root, linked):
        row, pkgs = read_row(path, facts="facts" in want)
        out.rows.append(row)
        if pkgs is not None:
            out.packages[row.pkgkey] = pkgs  # type: ignore[index]


def db_path(directory: str, root: str) -> str:
    return os.path.join(directory, hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape"))
                        .hexdigest()[:32] + ".sqlite")


def _indexed(root: str, linked: Set[str], directory: str, want: Sequence[str], out: Listing,
             progress: Optional[Callable[[int, int], None]]) -> None:
    path = db_path(directory, root)
    why = _untrusted(directory, path)
    if why:
        raise _Bypass("run index %s: %s; listing without it" % (path, why))
    for attempt in (1, 2):
        try:
            conn = _connect(path)
        except (Broken, sqlite3.DatabaseError) as exc:
            if attempt == 2:
                raise _Bypass("run index %s: %s; listing without it" % (path, _why(exc))) from None
            out.warnings.append("run index %s: %s; rebuilt" % (path, _why(exc)))
            _remove(path)
            continue
        try:
            rows, packages = _refresh(conn, root, set(linked), want, progress, out.warnings)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "locked" in str(exc) or attempt == 2:
                raise _Bypass("run index %s: %s; listing without it" % (path, _why(exc))) from None
            out.warnings.append("run index %s: %s; rebuilt" % (path, _why(exc)))
            _remove(path)
            continue
        conn.close()
        linked.update(rows[1])
        out.rows.extend(rows[0])
        out.packages.update(packages)
        return


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _untrusted(directory: str, path: str) -> Optional[str]:
    """Why the index directory or database may not be used (None: it may)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        return "cannot create its directory (%s)" % (exc.strerror or exc)
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


def _remove(path: str) -> None:
    for p in (path + "-wal", path + "-shm", path):  # a stale WAL must never be applied to a new database
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _connect(path: str) -> sqlite3.Connection:
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
                    for statement in _SCHEMA:
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            version = VERSION
        if version != VERSION:
            raise Broken("index version %s, this relaxrepro writes %d" % (version, VERSION))
        if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
            raise Broken("cannot use write-ahead logging")
        conn.execute("PRAGMA synchronous = NORMAL")
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if names != {"files", "pkgsets"}:
            raise Broken("not a relaxrepro run index")
    except BaseException:
        conn.close()
        raise
    return conn


def _refresh(conn: sqlite3.Connection, root: str, linked: Set[str], want: Sequence[str],
             progress: Optional[Callable[[int, int], None]], warnings: List[str]
             ) -> Tuple[Tuple[List[Row], Set[str]], Dict[str, Dict[str, str]]]:
    """Bring the index of ``root`` up to date with the tree and return its rows in walk order."""
    import json

    prefix = os.path.join(root, "")
    select = ", ".join(c if c in ("path", "size", "mtime_ns", "ino", "run_id", "gen", "grp", "parent", "error")
                       or c in want or (c == "pkgkey" and "facts" in want) else "NULL"
                       for c in _COLUMNS.split(", "))
    known = {r[0]: r for r in conn.execute("SELECT %s FROM files" % select)}
    slots: List[Any] = []
    todo: List[Tuple[int, str, Optional[Tuple[int, int, int]]]] = []
    seen: Set[str] = set()
    for path in index.walk_root(root, linked):
        rel = path[len(prefix):]
        seen.add(rel)
        try:
            st = os.stat(path)
            key: Optional[Tuple[int, int, int]] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            key = None
        k = known.get(rel)
        if key is not None and k is not None and k[1:4] == key:
            slots.append(Row(path, k[4], k[5], k[6], k[7], k[8], k[10], k[9] or "", k[11], k[12]))
        else:
            todo.append((len(slots), rel, key))  # the key, not the stat_result: 100,000 of those are 20 MB
            slots.append(None)
    gone = [rel for rel in known if rel not in seen]
    del known
    now = time.time_ns() if hasattr(time, "time_ns") else int(time.time() * 1e9)
    fresh: Dict[str, Dict[str, str]] = {}
    pending: List[Tuple[Any, ...]] = []
    sets: List[Tuple[str, str]] = []
    writable = [True]
    for done, (i, rel, st) in enumerate(todo, 1):
        row, pkgs = read_row(prefix + rel, facts=True)
        if pkgs is not None and row.pkgkey not in fresh:
            fresh[row.pkgkey] = pkgs  # type: ignore[index]
            sets.append((row.pkgkey, json.dumps(pkgs, sort_keys=True, separators=(",", ":"))))  # type: ignore
        if st is not None and row.cacheable and now - st[1] > RACY_NS:
            pending.append((rel,) + st + (row.run_id, row.gen, row.group, row.parent, row.error, row.cells,
                                          row._doc, row._facts, row.pkgkey))
        if "facts" not in want:
            row._facts = None
        if "doc" not in want:
            row._doc = None
        if "cells" not in want:
            row.cells = ""
        slots[i] = row
        if len(pending) >= CHUNK:
            _write(conn, pending, sets, [], writable, warnings)
        if progress is not None and (done % 500 == 0 or done == len(todo)):
            progress(done, len(todo))
    if pending or gone:
        _write(conn, pending, sets, gone, writable, warnings)
    packages: Dict[str, Dict[str, str]] = {}
    if "facts" in want:
        keys = {r.pkgkey for r in slots if r.pkgkey} - set(fresh)
        for key, text in conn.execute("SELECT pkgkey, packages FROM pkgsets"):
            if key in keys:
                packages[key] = json.loads(text)
        packages.update(fresh)
    return (slots, linked), packages


def _write(conn: sqlite3.Connection, rows: List[Tuple[Any, ...]], sets: List[Tuple[str, str]], gone: List[str],
           writable: List[bool], warnings: List[str]) -> None:
    """Store ``rows`` and package ``sets``, drop ``gone``, in one transaction; emptied after. A database
    still locked after the busy timeout is left as it was: this listing is right without it."""
    if writable[0]:
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("DELETE FROM files WHERE path = ?", [(g,) for g in gone])
                conn.executemany("INSERT OR REPLACE INTO files VALUES (%s)" % ", ".join("?" * 13), rows)
                conn.executemany("INSERT OR IGNORE INTO pkgsets VALUES (?, ?)", sets)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            writable[0] = False
            warnings.append("run index busy (%s): not updated this time" % exc)
    del rows[:], sets[:], gone[:]
