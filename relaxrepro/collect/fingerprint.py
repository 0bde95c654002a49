"""Fingerprints of data, models and checkpoints: a quick one at launch, a full one from a cache.

- :func:`scan` lists a file or a tree (``lstat`` only, symlinks recorded and never followed, so a
  link loop or a link out of the tree costs nothing), under a deadline.
- :func:`quick_digest` hashes paths, sizes, mtimes and the head and tail bytes of each file: cheap
  enough for launch, and it changes when a file is rewritten, truncated or appended to.
- :func:`full_digest` is sha256 for a file and, for a tree, sha256 over the sorted lines
  ``<relative path>\\0file\\0<sha256>\\n`` / ``<relative path>\\0link\\0<target>\\n`` (a Merkle digest
  of depth one: one file's change changes the root, and per-file digests are reusable). A FIFO, socket
  or device in a tree is never read (opening a FIFO blocks, a device never ends): it enters the digest as
  ``<relative path>\0special\0<what>\n`` and :meth:`Scan.skipped` names it for a warning. Hashing a
  checkpoint takes minutes, so launch only reads it from :class:`Cache`, filled ahead of time by
  ``relaxrepro fingerprint PATH...``; :func:`trusted` is the one rule for when a cached digest still
  describes the file.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from ..std.records import Factory, Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

HEAD_TAIL = 4096
"""Bytes read from each end of every file by the quick fingerprint."""
CHUNK = 1 << 20
"""Read size of the full digest: large enough that hashing, not syscalls, sets the pace."""
MAX_LISTED = 32
"""Unreadable or vanished paths named in a record; the count says how many there were."""


DOUBT_NS = 2_000_000_000
"""A file changed this close to when it was hashed may have changed again within the same timestamp
(coarse clocks tick in milliseconds, FAT in 2 s, an NFS server's clock drifts): its cached digest is
not trusted, and ``relaxrepro fingerprint`` waits this long after a change before it hashes."""

_SPECIAL = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
            (stat.S_ISBLK, "block device"))


class Entry:
    """One file, symlink or special file of a scan (a slotted class: a 100k-file tree makes 100k of them)."""

    __slots__ = ("rel", "kind", "size", "mtime_ns", "inode", "target", "ctime_ns")

    def __init__(self, rel: str, kind: str, size: int = 0, mtime_ns: int = 0, inode: int = 0,
                 target: Optional[str] = None, ctime_ns: int = 0) -> None:
        self.rel = rel
        """Path relative to the scanned root with ``/`` separators; ``""`` when the root is a file."""
        self.kind = kind
        """``file``, ``link`` or ``special`` (then ``target`` says what: ``fifo``, ``socket``, ...)."""
        self.size = size
        self.mtime_ns = mtime_ns
        self.inode = inode
        self.target = target
        self.ctime_ns = ctime_ns
        """The inode's change time: no user can set it, so a rewrite that restores size and mtime still moves it."""

    def __repr__(self) -> str:
        return "Entry(%r, %r)" % (self.rel, self.kind)


class Scan(Record):
    """What :func:`scan` found. ``path``: the root as the caller named it; ``real``: its resolved absolute
    path, the cache key prefix; ``kind``: ``file``, ``tree`` or ``missing`` (then ``error`` says why)."""

    path: str
    real: str = ""
    kind: str = "missing"
    entries: List[Entry] = Factory(list)
    unreadable: List[str] = Factory(list)
    vanished: List[str] = Factory(list)
    complete: bool = True
    error: Optional[str] = None

    @property
    def files(self) -> List[Entry]:
        return [e for e in self.entries if e.kind == "file"]

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries if e.kind == "file")

    def full_path(self, entry: Entry) -> str:
        return self.real if not entry.rel else self.real + "/" + entry.rel

    def skipped(self) -> Optional[str]:
        """The special files (FIFOs, sockets, devices) in the tree, five named, or None: their names are
        in the digest, their content is not."""
        special = ["%s (%s)" % (e.rel, e.target) for e in self.entries if e.kind == "special"]
        return ("%d special file(s) not read: %s" % (len(special), ", ".join(special[:5]))) if special else None

    def not_read(self) -> Optional[str]:
        """Why the content was not read in full (the unreadable and vanished paths, five named), or None."""
        problems = sorted(set(self.unreadable)) + ["%s (vanished)" % v for v in sorted(set(self.vanished))]
        return "could not read %d path(s): %s" % (len(problems), ", ".join(problems[:5])) if problems else None


def _sha256(data: bytes = b"") -> Any:
    """A new ``hashlib.sha256`` (streaming: ``std.sha`` is for small values)."""
    import hashlib  # lazy: OpenSSL costs ~4 ms of every start, fingerprinted data or not

    return hashlib.sha256(data)


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT:
        return "not found"
    return (exc.strerror or type(exc).__name__).lower()


def scan(
    path: str,
    *,
    cwd: Optional[str] = None,
    deadline: Optional[float] = None,
    on_listed: Optional[Callable[[str], None]] = None,
) -> Scan:
    """List ``path`` (a file, or a tree walked without following symlinks) until ``deadline``.

    A root that is itself a symlink is followed: the user named it. Files that vanish between the
    listing and their ``lstat`` (a checkpoint rotated mid-scan) go to ``vanished``; directories that
    cannot be listed go to ``unreadable``. ``on_listed(dir)`` runs after each directory is listed
    (tests use it to delete files at exactly that moment). Never raises.
    """
    full = path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path)
    result = Scan(path=path)
    try:
        st = os.stat(full)
        result.real = os.path.realpath(full)
    except OSError as exc:
        result.error = _reason(exc)
        return result
    except ValueError as exc:  # an embedded NUL in a path from args
        result.error = str(exc)
        return result
    if stat.S_ISREG(st.st_mode):
        result.kind = "file"
        result.entries.append(Entry("", "file", st.st_size, st.st_mtime_ns, st.st_ino, ctime_ns=st.st_ctime_ns))
        return result
    if not stat.S_ISDIR(st.st_mode):
        result.error = "not a regular file or directory"
        return result
    result.kind = "tree"
    stack = [""]
    n = 0
    while stack:
        rel_dir = stack.pop()
        where = result.real + ("/" + rel_dir if rel_dir else "")
        try:
            with os.scandir(where) as it:
                listed = list(it)
        except FileNotFoundError:
            if not rel_dir:
                result.error = "vanished during the scan"
                result.kind = "missing"
                return result
            result.vanished.append(rel_dir + "/")
            continue
        except OSError:
            result.unreadable.append((rel_dir or ".") + "/")
            continue
        if on_listed is not None:
            on_listed(where)
        subdirs = []
        prefix = rel_dir + "/" if rel_dir else ""
        append = result.entries.append
        for d in listed:
            rel = prefix + d.name
            n += 1
            if deadline is not None and not n & 255 and time.monotonic() > deadline:
                result.complete = False
                stack.clear()
                break
            try:
                # is_symlink/is_dir/is_file answer from d_type without a syscall; only files are lstat-ed.
                if d.is_symlink():
                    append(Entry(rel, "link", target=os.readlink(d.path)))
                elif d.is_dir(follow_symlinks=False):
                    subdirs.append(rel)
                elif d.is_file(follow_symlinks=False):
                    st = d.stat(follow_symlinks=False)
                    append(Entry(rel, "file", st.st_size, st.st_mtime_ns, st.st_ino, ctime_ns=st.st_ctime_ns))
                else:
                    mode = d.stat(follow_symlinks=False).st_mode
                    what = next((name for test, name in _SPECIAL if test(mode)), "special file")
                    append(Entry(rel, "special", target=what))
            except FileNotFoundError:
                result.vanished.append(rel)
            except OSError:
                result.unreadable.append(rel)
        stack.extend(subdirs)
    if result.vanished and not os.path.isdir(result.real):
        # The whole tree went (a checkpoint directory rotated away): nothing here describes it.
        return Scan(path=path, real=result.real, error="vanished during the scan", vanished=result.vanished)
    result.entries.sort(key=lambda e: e.rel)
    return result


# -- the quick fingerprint -------------------------------------------------------------------------

def _head_tail(path: str, size: int) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(HEAD_TAIL)
        if size <= 2 * HEAD_TAIL:
            return head + fh.read()
        fh.seek(-HEAD_TAIL, os.SEEK_END)
        return head + fh.read(HEAD_TAIL)


def quick_digest(s: Scan, *, deadline: Optional[float] = None) -> Dict[str, object]:
    """``{sha256, complete}`` over paths, sizes, mtimes and head+tail bytes, read until ``deadline``.

    Files not reached in time enter the digest as ``-`` and ``complete`` is false: the digest is still
    a faithful record of what was seen, but only complete digests compare across runs.
    """
    h = _sha256()
    complete = s.complete
    out_of_time = False
    for e in s.entries:
        if e.kind != "file":
            h.update(_line(e).encode("utf-8", "surrogateescape"))
            continue
        sample = "-"
        if not out_of_time and deadline is not None and time.monotonic() > deadline:
            out_of_time = True
        if not out_of_time:
            try:
                sample = _sha256(_head_tail(s.full_path(e), e.size)).hexdigest()
            except FileNotFoundError:
                s.vanished.append(e.rel)
                complete = False
            except OSError:
                s.unreadable.append(e.rel)
                complete = False
        else:
            complete = False
        h.update(("%s\0file\0%d\0%d\0%s\n" % (e.rel, e.size, e.mtime_ns, sample)).encode("utf-8", "surrogateescape"))
    return {"sha256": "sha256:" + h.hexdigest(), "complete": complete and not s.unreadable and not s.vanished}


# -- the full digest -------------------------------------------------------------------------------

def file_sha256(path: str, deadline: Optional[float] = None) -> str:
    """sha256 of one file, streamed through a reused buffer (keeps pace with ``sha256sum``).

    Past ``deadline`` (``time.monotonic()``) it stops and raises :class:`OutOfTime`.
    """
    h = _sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            h.update(view[:n])
            if deadline is not None and time.monotonic() > deadline:
                raise OutOfTime(path)
    return h.hexdigest()


class OutOfTime(Exception):
    """:func:`file_sha256` reached its deadline before the end of the file."""


HASH_RATE = 250 << 20
"""Bytes per second :func:`file_digest` counts on when it decides whether a file can be hashed in time:
sha256 runs at about 1 GB/s on an idle core, a loaded node or a network filesystem reads slower, and a
hash given up at the deadline is time lost at every launch."""


def file_digest(path: str, cache_path: Optional[str], *, deadline: float) -> Tuple[Optional[str], Optional[str]]:
    """``("sha256:<hex>", None)`` for one file, from the cache when :func:`trusted`, else hashed and stored
    when that can end before ``deadline`` (``time.monotonic()``); ``(None, why)`` otherwise.

    A container image is one large file read again at every launch: the first launch hashes it (or
    ``relaxrepro fingerprint`` did), every later one costs a lookup.
    """
    s = scan(path)
    if s.kind != "file":
        return None, s.error or "not a regular file"
    cache = Cache(cache_path, readonly=True) if cache_path else None
    try:
        full = full_digest(s, cache, hash_missing=False)
    finally:
        if cache is not None:
            cache.close()
    if full.sha256:
        return full.sha256, None
    size = s.entries[0].size
    if time.monotonic() + size / HASH_RATE > deadline:
        return None, "%d MB cannot be hashed within the launch budget" % (size >> 20)
    try:
        before = os.stat(s.real)
        started = time.time_ns()
        digest = file_sha256(s.real, deadline)
        after = os.stat(s.real)
    except OutOfTime:
        return None, "hashing did not end within the launch budget"
    except OSError as exc:
        return None, _reason(exc)
    if _key(before) != _key(after):
        return None, "changed while it was hashed"
    if cache_path:
        writer = Cache(cache_path, readonly=False)
        writer.store([(s.real,) + _key(after) + (digest, started)])
        writer.close()
    return "sha256:" + digest, None


def _line(e: Entry, digest: str = "") -> str:
    """One entry's line in a tree digest: a file with its digest, a link with its target, a special file
    with what it is."""
    return "%s\0%s\0%s\n" % (e.rel, e.kind, digest if e.kind == "file" else e.target)


def merkle(s: Scan, digests: Mapping[str, str]) -> str:
    """The tree digest over sorted entries (see the module docstring); sha256 itself for a file."""
    if s.kind == "file":
        return "sha256:" + digests[""]
    lines = [_line(e, digests.get(e.rel, "")) for e in s.entries]
    return "sha256:" + _sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def listing_digest(s: Scan) -> str:
    """A digest of what the cache keys on (paths, sizes, mtimes, ctimes, inodes, link targets) for the tree.

    Equal listings mean every per-file cache key matches, so a tree's cached digest is reused with
    one lookup instead of one per file (100k files at launch).
    """
    lines = [_line(e, "%d\0%d\0%d\0%d" % (e.size, e.mtime_ns, e.ctime_ns, e.inode)) for e in s.entries]
    return _sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


class Full(Record):
    """A full digest, or why there is none: ``status`` is ``fresh`` (digest recorded), ``stale``,
    ``uncached``, ``incomplete`` or ``no-cache``."""

    sha256: Optional[str] = None
    status: str = 'uncached'
    reused: int = 0
    hashed: int = 0


def trusted(row: Tuple[int, int, int, int, str, int], e: Entry) -> bool:
    """Whether the cached ``row`` (size, mtime_ns, ctime_ns, inode, sha256, hashed_ns) still describes the
    file ``e``: the one rule for the cache's freshness.

    Size, mtime and inode can all be put back after a rewrite in place (``os.utime``); the ctime cannot,
    so it must match too. A file whose ctime falls within :data:`DOUBT_NS` of the moment its hashing began
    may have been changed again within one timestamp tick: its content is read again instead.
    """
    return row[:4] == (e.size, e.mtime_ns, e.ctime_ns, e.inode) and row[2] < row[5] - DOUBT_NS


def _settle(files: List[Entry]) -> None:
    """Wait (once, at most :data:`DOUBT_NS`) until the newest change among ``files`` is that long past, so
    that the digests about to be taken are trusted later."""
    wait = (max((e.ctime_ns for e in files), default=0) + DOUBT_NS - time.time_ns()) / 1e9
    if wait > 0:
        time.sleep(min(wait, DOUBT_NS / 1e9) + 0.01)


def full_digest(s: Scan, cache: Optional["Cache"], *, hash_missing: bool, settle: bool = False) -> Full:
    """The full digest from cached per-file digests; with ``hash_missing`` the rest are hashed and stored.

    At launch ``hash_missing`` is false: the digest is recorded only when every file's cache entry is
    :func:`trusted`. With ``settle`` a file changed in the last :data:`DOUBT_NS` is hashed once that
    time has passed (``relaxrepro fingerprint``: its digests are for launches to come).
    """
    if s.kind == "missing" or not s.complete:
        return Full(status="incomplete")
    broken = bool(s.unreadable or s.vanished)
    if broken and not hash_missing:
        return Full(status="incomplete")
    listing = listing_digest(s) if s.kind == "tree" and cache is not None else None
    if listing is not None and cache is not None:
        cached = cache.lookup_tree(s.real)
        if cached is not None and cached[0] == listing:
            return Full(sha256=cached[1], status="fresh", reused=len(s.files))
    known = cache.lookup(s.real, tree=s.kind == "tree") if cache is not None else {}
    digests: Dict[str, str] = {}
    fresh_rows: List[Tuple[str, int, int, int, int, str, int]] = []
    doubt = False
    stale = False
    result = Full()
    if settle and hash_missing:
        _settle([e for e in s.files if e.ctime_ns > time.time_ns() - DOUBT_NS])
    for e in s.files:
        p = s.full_path(e)
        row = known.get(p)
        if row is not None and trusted(row, e):
            digests[e.rel] = row[4]
            result.reused += 1
            continue
        stale = stale or row is not None
        if not hash_missing:
            usable = cache is not None and cache.usable
            result.status = "stale" if stale else ("uncached" if usable else "no-cache")
            if stale:
                return result
            continue
        # Hash on past an unreadable file: the user learns every problem in one run, and the
        # readable files' digests are cached all the same.
        try:
            before = os.stat(p)
            started = time.time_ns()
            digest = file_sha256(p)
            after = os.stat(p)
        except FileNotFoundError:
            s.vanished.append(e.rel)
            broken = True
            continue
        except OSError:
            s.unreadable.append(e.rel)
            broken = True
            continue
        if _key(before) != _key(after):
            s.vanished.append(e.rel)  # rewritten while we read it: the digest describes no real state
            broken = True
            continue
        digests[e.rel] = digest
        fresh_rows.append((p,) + _key(after) + (digest, started))
        doubt = doubt or after.st_ctime_ns >= started - DOUBT_NS
        result.hashed += 1
    if cache is not None and fresh_rows:
        cache.store(fresh_rows)
    if broken:
        result.status = "incomplete"
        return result
    if len(digests) != len(s.files):
        return result
    result.sha256 = merkle(s, digests)
    result.status = "fresh"
    if listing is not None and cache is not None and not doubt:
        cache.store_tree(s.real, listing, result.sha256)
    return result


def _key(st: os.stat_result) -> Tuple[int, int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


# -- the persistent cache --------------------------------------------------------------------------

def default_cache_path(env: Mapping[str, str]) -> Optional[str]:
    """``fingerprints.sqlite`` in relaxrepro's per-user directory (``$RELAXREPRO_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/relaxrepro``, else ``~/.cache/relaxrepro``)."""
    from ..std.cache import base_dir  # lazy: ~5 ms (json), only when a cache is read or written

    base = base_dir(env)
    return None if base is None else os.path.join(base, "fingerprints.sqlite")


_SCHEMA = (
    # ``files`` and ``trees`` of caches written before the ctime was kept are dropped: their rows
    # cannot tell a rewrite in place from the file they hashed.
    "DROP TABLE IF EXISTS files",
    "DROP TABLE IF EXISTS trees",
    "CREATE TABLE IF NOT EXISTS digests (path TEXT PRIMARY KEY, size INTEGER NOT NULL, "
    "mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, inode INTEGER NOT NULL, sha256 TEXT NOT NULL, "
    "hashed_ns INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tree_digests (path TEXT PRIMARY KEY, listing TEXT NOT NULL, sha256 TEXT NOT NULL)",
)
_COLUMNS = "path, size, mtime_ns, ctime_ns, inode, sha256, hashed_ns"


class Cache:
    """Per-file sha256 digests in sqlite. Read-only at launch; a corrupt database is never fatal.

    Table ``digests`` keys each digest by real path with the size, mtime, ctime and inode it was taken
    at and when its hashing began (see :func:`trusted`); table ``tree_digests`` keeps a tree's digest
    with its :func:`listing_digest`, so a cached 100k-file tree costs one lookup at launch (per-file
    rows still serve a tree that changed in part).

    The writer (``relaxrepro fingerprint``) moves a corrupt file aside and starts a new one; a
    read-only user treats it as empty and says so in ``warnings``.
    """

    def __init__(self, path: str, *, readonly: bool) -> None:
        self.path = path
        self.readonly = readonly
        self.warnings: List[str] = []
        self.db = None
        self.usable = True
        """False when the database exists but cannot be used (then ``warnings`` says why)."""
        try:
            import sqlite3  # lazy: ~4 ms, only with a cache; a minimal Python may lack it
        except ImportError:  # Python builds without _sqlite3 (some minimal containers)
            self.warnings.append("sqlite3 is not available in this Python: no fingerprint cache")
            self.usable = False
            return
        self._sqlite3 = sqlite3
        try:
            self.db = self._open()
        except sqlite3.DatabaseError as exc:
            self.db = None
            self.usable = False
            if readonly:
                self.warnings.append("fingerprint cache %s is unreadable (%s); full digests not recorded"
                                     % (path, exc))
                return
            self._set_aside(exc)
        except OSError as exc:
            self.usable = False
            self.warnings.append("fingerprint cache %s: %s" % (path, exc))

    def _open(self):  # type: ignore[no-untyped-def]
        sqlite3 = self._sqlite3
        if self.readonly:
            if not os.path.isfile(self.path):
                return None
            db = sqlite3.connect("file:%s?mode=ro" % _uri_path(self.path), uri=True, timeout=0.5,
                                 check_same_thread=False)
            try:
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "digests" not in tables:  # a cache from before the ctime was kept: nothing in it is trusted
                    db.close()
                    return None
                db.execute("SELECT %s FROM digests LIMIT 1" % _COLUMNS).fetchall()
            except sqlite3.DatabaseError:
                db.close()
                raise
            return db
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        db = sqlite3.connect(self.path, timeout=5.0)
        try:
            for statement in _SCHEMA:
                db.execute(statement)
            db.execute("SELECT %s FROM digests LIMIT 1" % _COLUMNS).fetchall()
            db.commit()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _set_aside(self, exc: Exception) -> None:
        aside = self.path + ".corrupt"  # one kept for a post-mortem; a later corruption replaces it
        try:
            os.replace(self.path, aside)
            for suffix in ("-journal", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.unlink(self.path + suffix)
            self.db = self._open()
            self.usable = True
            self.warnings.append("fingerprint cache was corrupt (%s): moved to %s and rebuilt" % (exc, aside))
        except (OSError, self._sqlite3.DatabaseError) as again:
            self.db = None
            self.warnings.append("fingerprint cache %s is corrupt and could not be rebuilt: %s" % (self.path, again))

    def lookup(self, real: str, *, tree: bool) -> Dict[str, Tuple[int, int, int, int, str, int]]:
        """``{path: (size, mtime_ns, ctime_ns, inode, sha256, hashed_ns)}`` for a file or every file under a tree."""
        if self.db is None:
            return {}
        try:
            if tree:
                prefix = real.rstrip("/") + "/"
                # One range scan on the primary key: "0" is the character after "/".
                rows = self.db.execute("SELECT %s FROM digests WHERE path >= ? AND path < ?" % _COLUMNS,
                                       (prefix, prefix[:-1] + "0")).fetchall()
            else:
                rows = self.db.execute("SELECT %s FROM digests WHERE path = ?" % _COLUMNS, (real,)).fetchall()
        except self._sqlite3.DatabaseError as exc:
            self.warnings.append("fingerprint cache %s: %s" % (self.path, exc))
            return {}
        return {r[0]: tuple(r[1:]) for r in rows}

    def lookup_tree(self, real: str) -> Optional[Tuple[str, str]]:
        """``(listing digest, tree digest)`` stored for the tree at ``real``, if any."""
        if self.db is None:
            return None
        try:
            row = self.db.execute("SELECT listing, sha256 FROM tree_digests WHERE path = ?", (real,)).fetchone()
        except self._sqlite3.DatabaseError as exc:
            self.warnings.append("fingerprint cache %s: %s" % (self.path, exc))
            return None
        return (row[0], row[1]) if row else None

    def store_tree(self, real: str, listing: str, digest: str) -> None:
        if self.db is None or self.readonly:
            return
        try:
            self.db.execute("INSERT OR REPLACE INTO tree_digests VALUES (?, ?, ?)", (real, listing, digest))
            self.db.commit()
        except self._sqlite3.DatabaseError as exc:
            self.warnings.append("fingerprint cache %s: could not store digests: %s" % (self.path, exc))

    def store(self, rows: Iterable[Tuple[str, int, int, int, int, str, int]]) -> None:
        """Keep ``(path, size, mtime_ns, ctime_ns, inode, sha256, hashed_ns)`` rows."""
        if self.db is None or self.readonly:
            return
        try:
            self.db.executemany("INSERT OR REPLACE INTO digests VALUES (?, ?, ?, ?, ?, ?, ?)", list(rows))
            self.db.commit()
        except self._sqlite3.DatabaseError as exc:
            self.warnings.append("fingerprint cache %s: could not store digests: %s" % (self.path, exc))

    def close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except Exception:
                pass
            self.db = None


def _uri_path(path: str) -> str:
    from urllib.parse import quote  # lazy: ~3 ms, only when the cache is opened read-only

    return quote(os.path.abspath(path))
