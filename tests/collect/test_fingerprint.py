"""Data fingerprints: scan, quick digest, full digest, the sqlite cache and its failure modes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from relaxrepro.collect import fingerprint
from relaxrepro.collect.fingerprint import Cache, full_digest, quick_digest, scan
from tests.helpers.common import clean_env, run_cli


def _tree(root: Path) -> Path:
    (root / "shard").mkdir(parents=True)
    (root / "shard" / "b.bin").write_bytes(b"b" * 10_000)
    (root / "a.txt").write_text("hello\n")
    (root / "link").symlink_to("a.txt")
    return root


def _reference_merkle(root: Path) -> str:
    """The documented tree digest, computed independently of the implementation."""
    lines = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                lines.append("%s\0link\0%s\n" % (rel, os.readlink(p)))
            else:
                lines.append("%s\0file\0%s\n" % (rel, hashlib.sha256(Path(p).read_bytes()).hexdigest()))
    return "sha256:" + hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()


def _cache(tmp_path: Path, readonly: bool = False) -> Cache:
    return Cache(str(tmp_path / "cache" / "fingerprints.sqlite"), readonly=readonly)


def test_scan_tree_lists_files_and_records_symlinks(tmp_path):
    s = scan(str(_tree(tmp_path / "d")))
    assert s.kind == "tree" and s.complete and s.error is None
    assert [(e.rel, e.kind) for e in s.entries] == [("a.txt", "file"), ("link", "link"), ("shard/b.bin", "file")]
    assert s.entries[1].target == "a.txt"
    assert s.total_bytes == 10_006


def test_full_digest_of_a_file_is_its_sha256(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(os.urandom(3 * fingerprint.CHUNK + 17))
    full = full_digest(scan(str(f)), None, hash_missing=True)
    assert full.sha256 == "sha256:" + hashlib.sha256(f.read_bytes()).hexdigest()


def test_full_digest_of_a_tree_is_the_documented_merkle(tmp_path):
    root = _tree(tmp_path / "d")
    assert full_digest(scan(str(root)), None, hash_missing=True).sha256 == _reference_merkle(root)


def test_symlink_loop_inside_the_tree_is_recorded_not_followed(tmp_path):
    root = _tree(tmp_path / "d")
    (root / "loop").symlink_to("loop")
    (root / "up").symlink_to("..")  # out of the tree and back in: followed, it would never end
    s = scan(str(root))
    assert s.complete and s.error is None
    assert {e.rel: e.target for e in s.entries if e.kind == "link"} == {"link": "a.txt", "loop": "loop", "up": ".."}
    assert full_digest(s, None, hash_missing=True).sha256 == _reference_merkle(root)


def test_root_that_is_a_symlink_loop(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    s = scan(str(tmp_path / "a"))
    assert (s.kind, s.error) == ("missing", "symlink loop")


def test_root_that_is_a_symlink_is_followed(tmp_path):
    root = _tree(tmp_path / "v3")
    (tmp_path / "current").symlink_to("v3")
    s = scan(str(tmp_path / "current"))
    assert s.kind == "tree" and s.real == str(root.resolve())


def test_missing_path(tmp_path):
    assert scan(str(tmp_path / "nope")).error == "not found"


def test_path_vanishing_mid_scan(tmp_path):
    root = _tree(tmp_path / "d")

    def delete_shard(listed_dir: str) -> None:
        if listed_dir.endswith("/shard"):  # listed, not yet stat-ed: the rotation race
            (root / "shard" / "b.bin").unlink()

    s = scan(str(root), on_listed=delete_shard)
    assert s.vanished == ["shard/b.bin"]
    assert [e.rel for e in s.entries] == ["a.txt", "link"]
    assert quick_digest(s)["complete"] is False
    assert full_digest(s, None, hash_missing=True).status == "incomplete"


def test_root_vanishing_mid_scan(tmp_path):
    root = _tree(tmp_path / "d")

    def delete_root(listed_dir: str) -> None:
        for p in sorted(root.rglob("*"), reverse=True):
            p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
        root.rmdir()

    s = scan(str(root), on_listed=delete_root)
    assert (s.kind, s.error, s.entries) == ("missing", "vanished during the scan", [])
    assert full_digest(s, None, hash_missing=True).status == "incomplete"


def test_file_vanishing_between_scan_and_quick_read(tmp_path):
    root = _tree(tmp_path / "d")
    s = scan(str(root))
    (root / "a.txt").unlink()
    q = quick_digest(s)
    assert q["complete"] is False and s.vanished == ["a.txt"]


def test_quick_digest_sees_a_rewrite_that_kept_size_and_mtime(tmp_path):
    f = tmp_path / "data.bin"
    f.write_bytes(b"a" * 20_000)
    before = quick_digest(scan(str(f)))
    st = f.stat()
    with open(f, "r+b") as fh:
        fh.seek(19_999)
        fh.write(b"b")  # the last byte: only the tail sample can see it
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = quick_digest(scan(str(f)))
    assert before["complete"] and after["complete"]
    assert before["sha256"] != after["sha256"]


def test_quick_digest_out_of_time_is_marked_incomplete(tmp_path):
    root = _tree(tmp_path / "d")
    q = quick_digest(scan(str(root)), deadline=0.0)  # long past
    assert q["complete"] is False


def test_scan_out_of_time_is_marked_incomplete(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(300):  # the deadline is checked every 256 entries
        (root / ("f%03d" % i)).write_bytes(b"")
    s = scan(str(root), deadline=0.0)
    assert s.complete is False and len(s.entries) < 300
    assert full_digest(s, None, hash_missing=True).status == "incomplete"


# -- the cache ---------------------------------------------------------------------------------------

def test_cache_makes_launch_record_the_full_digest_only_when_fresh(tmp_path):
    root = _tree(tmp_path / "d")
    ro = _cache(tmp_path, readonly=True)
    assert full_digest(scan(str(root)), ro, hash_missing=False).status == "uncached"  # no database yet
    rw = _cache(tmp_path)
    filled = full_digest(scan(str(root)), rw, hash_missing=True, settle=True)
    assert (filled.status, filled.hashed, filled.reused) == ("fresh", 2, 0)
    rw.close()

    ro = _cache(tmp_path, readonly=True)
    launch = full_digest(scan(str(root)), ro, hash_missing=False)
    assert (launch.status, launch.sha256, launch.reused) == ("fresh", filled.sha256, 2)

    (root / "a.txt").write_text("changed, same tree\n")
    stale = full_digest(scan(str(root)), ro, hash_missing=False)
    assert (stale.status, stale.sha256) == ("stale", None)
    (root / "new.txt").write_text("x")
    ro.close()


def test_cache_notices_a_replaced_file_with_the_same_size_and_mtime(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"1" * 100)
    rw = _cache(tmp_path)
    full_digest(scan(str(f)), rw, hash_missing=True)
    st = f.stat()
    tmp = tmp_path / "w.tmp"
    tmp.write_bytes(b"2" * 100)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, f)  # an atomic checkpoint save: new inode
    assert full_digest(scan(str(f)), rw, hash_missing=False).status == "stale"
    rw.close()


def test_new_file_in_a_cached_tree_is_uncached(tmp_path):
    root = _tree(tmp_path / "d")
    rw = _cache(tmp_path)
    full_digest(scan(str(root)), rw, hash_missing=True, settle=True)
    (root / "z.txt").write_text("new")
    assert full_digest(scan(str(root)), rw, hash_missing=False).status == "uncached"
    again = full_digest(scan(str(root)), rw, hash_missing=True, settle=True)
    assert (again.status, again.hashed, again.reused) == ("fresh", 1, 2)
    rw.close()


def test_sibling_directory_with_a_shared_prefix_is_not_mixed_in(tmp_path):
    a = _tree(tmp_path / "d")
    b = _tree(tmp_path / "d2")
    rw = _cache(tmp_path)
    full_digest(scan(str(b)), rw, hash_missing=True)
    assert rw.lookup(str(a.resolve()), tree=True) == {}
    rw.close()


@pytest.mark.parametrize("garbage", [
    pytest.param(b"this is not a database" * 100, id="text"),
    pytest.param(b"SQLite format 3\x00" + b"\xff" * 4000, id="bad-header"),
    pytest.param(b"", id="empty-file"),
])
def test_corrupt_cache_is_never_fatal(tmp_path, garbage):
    root = _tree(tmp_path / "d")
    path = tmp_path / "cache" / "fingerprints.sqlite"
    path.parent.mkdir()
    path.write_bytes(garbage)

    ro = Cache(str(path), readonly=True)
    launch = full_digest(scan(str(root)), ro, hash_missing=False)
    assert launch.sha256 is None
    if garbage:
        assert launch.status == "no-cache"
        assert len(ro.warnings) == 1 and "is unreadable" in ro.warnings[0]
    ro.close()

    rw = Cache(str(path), readonly=False)
    filled = full_digest(scan(str(root)), rw, hash_missing=True, settle=True)
    assert filled.status == "fresh"
    if garbage:
        assert rw.warnings == ["fingerprint cache was corrupt (file is not a database): moved to %s.corrupt "
                               "and rebuilt" % path]
        assert (tmp_path / "cache" / "fingerprints.sqlite.corrupt").read_bytes() == garbage
    rw.close()
    assert full_digest(scan(str(root)), Cache(str(path), readonly=True), hash_missing=False).status == "fresh"


def test_cache_directory_that_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("")
    rw = Cache(str(tmp_path / "file" / "relaxrepro" / "fingerprints.sqlite"), readonly=False)
    assert rw.db is None and "Not a directory" in rw.warnings[0]
    full = full_digest(scan(str(_tree(tmp_path / "d"))), rw, hash_missing=True)
    assert full.status == "fresh"  # the digest is still computed, only not remembered


def test_default_cache_path(tmp_path):
    home = str(tmp_path)
    assert fingerprint.default_cache_path({"XDG_CACHE_HOME": "/x", "HOME": home}) == \
        "/x/relaxrepro/fingerprints.sqlite"
    assert fingerprint.default_cache_path({"HOME": home}) == home + "/.cache/relaxrepro/fingerprints.sqlite"
    assert fingerprint.default_cache_path({"HOME": home + "/missing"}) is None  # a missing home is never made
    assert fingerprint.default_cache_path({}) is None
    assert fingerprint.default_cache_path({"RELAXREPRO_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x",
                                           "RELAXREPRO_NO_CACHE": "1"}) == "/c/fingerprints.sqlite"


def test_rewrite_in_place_that_restores_size_mtime_and_inode_is_hashed_again(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"1" * 100)
    old = os.stat(f)
    os.utime(f, ns=(old.st_atime_ns, old.st_mtime_ns - 10 * fingerprint.DOUBT_NS))  # hashed long after its change
    res = run_cli("fingerprint", "--json", str(f), env=clean_env(XDG_CACHE_HOME=str(tmp_path / "c")), cwd=tmp_path)
    assert json.loads(res.stdout)[0]["sha256"] == "sha256:" + hashlib.sha256(b"1" * 100).hexdigest()
    before = os.stat(f)
    with open(f, "r+b") as fh:  # the same inode, the same size
        fh.write(b"2" * 100)
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(f)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)

    res = run_cli("fingerprint", "--json", str(f), env=clean_env(XDG_CACHE_HOME=str(tmp_path / "c")), cwd=tmp_path)
    got = json.loads(res.stdout)[0]
    assert (got["sha256"], got["hashed"]) == ("sha256:" + hashlib.sha256(b"2" * 100).hexdigest(), 1)


def test_a_file_changed_just_before_it_was_hashed_is_not_trusted_later(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"1" * 100)
    rw = _cache(tmp_path)
    first = full_digest(scan(str(f)), rw, hash_missing=True)
    assert first.status == "fresh"
    # Changed within the same clock tick as the write the digest was taken after: nothing in the stat
    # would tell, so a digest taken this close to a change is never reused ...
    assert full_digest(scan(str(f)), rw, hash_missing=False).status == "stale"
    # ... and `relaxrepro fingerprint` waits for the file to settle, so the launch after it can use it.
    settled = full_digest(scan(str(f)), rw, hash_missing=True, settle=True)
    assert (settled.status, settled.hashed) == ("fresh", 1)
    assert full_digest(scan(str(f)), rw, hash_missing=False).status == "fresh"
    rw.close()


def test_cache_from_before_the_ctime_was_kept_is_not_trusted(tmp_path):
    import sqlite3

    f = tmp_path / "w.bin"
    f.write_bytes(b"1" * 100)
    path = tmp_path / "cache" / "fingerprints.sqlite"
    path.parent.mkdir()
    st = f.stat()
    db = sqlite3.connect(str(path))
    db.execute("CREATE TABLE files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, "
               "inode INTEGER NOT NULL, sha256 TEXT NOT NULL, hashed_at REAL NOT NULL)")
    db.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, 0)", (str(f.resolve()), st.st_size, st.st_mtime_ns,
                                                                st.st_ino, "0" * 64))
    db.commit()
    db.close()
    assert full_digest(scan(str(f)), _cache(tmp_path, readonly=True), hash_missing=False).status == "uncached"
    rw = _cache(tmp_path)
    assert rw.warnings == []
    assert full_digest(scan(str(f)), rw, hash_missing=True).sha256 == \
        "sha256:" + hashlib.sha256(b"1" * 100).hexdigest()
    rw.close()


def test_special_files_and_symlinks_in_a_tree_are_named_not_skipped(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    (root / "a").symlink_to("/etc/hostname")
    (root / "b").symlink_to("nowhere")
    only_links = full_digest(scan(str(root)), None, hash_missing=True).sha256
    empty = tmp_path / "empty"
    empty.mkdir()
    assert only_links != full_digest(scan(str(empty)), None, hash_missing=True).sha256
    os.mkfifo(str(root / "pipe"))
    with_fifo = scan(str(root))
    assert with_fifo.skipped() == "1 special file(s) not read: pipe (fifo)"
    assert full_digest(with_fifo, None, hash_missing=True).sha256 not in (only_links, None)

    res = run_cli("fingerprint", "out", env=clean_env(XDG_CACHE_HOME=str(tmp_path / "c")), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == "relaxrepro fingerprint: warning: out: 1 special file(s) not read: pipe (fifo)\n"
    assert res.stdout.endswith("  0 files  2 symlinks  0 bytes  out\n")
