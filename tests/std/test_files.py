"""The one way a file is read (relaxrepro/std/files.py): a regular file, or a symlink to one, bounded;
a FIFO refused without blocking, a device refused unread, a directory named as one."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from relaxrepro.std import cache as facts
from relaxrepro.std.files import NotRegularFile, open_regular, read_regular

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _in_thread(fn):
    """Run ``fn`` in a thread and give it 30 s: a hang guard, so a regression fails instead of hanging pytest."""
    box = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test below
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "blocked: open() waited on a FIFO nobody writes to"
    return box


def test_a_regular_file_and_a_symlink_to_one_are_read_up_to_the_bound(tmp_path):
    f = tmp_path / "args.json"
    f.write_bytes(b"0123456789")
    (tmp_path / "link.json").symlink_to(f)
    assert read_regular(f, 4) == b"0123"
    assert read_regular(tmp_path / "link.json", 100) == b"0123456789"
    fh, st = open_regular(str(f))
    with fh:
        assert (fh.read(), st.st_size) == (b"0123456789", 10)


@needs_fifo
@pytest.mark.parametrize("via", ["fifo", "symlink-to-fifo"])
def test_a_fifo_is_refused_without_blocking(tmp_path, via):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(str(fifo))
    path = fifo
    if via == "symlink-to-fifo":
        path = tmp_path / "link.json"
        path.symlink_to(fifo)
    box = _in_thread(lambda: read_regular(str(path), 100))
    err = box["error"]
    assert isinstance(err, NotRegularFile) and isinstance(err, OSError)
    assert (str(err), err.strerror, err.errno) == ("%s is not a regular file" % path, "not a regular file", None)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_symlink_to_dev_zero_is_refused_unread(tmp_path):
    # stat says size 0 and read() never ends: refused on what fstat says, before any read.
    link = tmp_path / "manifest_z.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(NotRegularFile) as info:
        read_regular(str(link), 1 << 30)
    assert str(info.value) == "%s is not a regular file" % link


def test_a_directory_and_a_missing_file_are_the_os_errors_they_always_were(tmp_path):
    with pytest.raises(IsADirectoryError) as info:
        read_regular(str(tmp_path), 100)
    assert (info.value.errno, info.value.strerror) == (errno.EISDIR, os.strerror(errno.EISDIR))
    with pytest.raises(FileNotFoundError):
        read_regular(str(tmp_path / "missing"), 100)


def test_a_bytes_path_is_named_in_the_message(tmp_path):
    os.mkfifo(str(tmp_path / "p"))
    with pytest.raises(NotRegularFile) as info:
        read_regular(os.fsencode(str(tmp_path / "p")), 100)
    assert str(info.value) == "%s is not a regular file" % (tmp_path / "p")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_proc_files_are_regular_files_of_size_zero_and_are_read():
    assert os.stat("/proc/self/status").st_size == 0
    assert read_regular("/proc/self/status", 1 << 16).startswith(b"Name:")


@needs_fifo
def test_a_fifo_where_the_facts_cache_file_belongs_means_no_cache(tmp_path):
    d = tmp_path / "c"
    d.mkdir(mode=0o700)
    os.mkfifo(str(d / facts.FILENAME), 0o600)
    box = _in_thread(lambda: facts.Facts(str(d)))
    assert "error" not in box and box["value"].get("libversion", "k") is None
