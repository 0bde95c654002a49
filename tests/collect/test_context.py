"""The collection context's file reads: what a probe gets from a system file that is not one."""

from __future__ import annotations

import os
import threading

import pytest

from relaxrepro.collect.context import Context


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs, /dev/zero")
def test_read_text_gives_none_for_a_fifo_or_a_device_and_reads_a_symlinked_file(tmp_path):
    # /proc/meminfo as a FIFO (open() would wait for a writer), os-release linked to /dev/zero
    # (1 MB of NULs read as text), the real os-release of distros: a symlink to ../usr/lib/os-release.
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    os.mkfifo(str(tmp_path / "proc" / "meminfo"))
    (tmp_path / "etc" / "os-release").symlink_to("/dev/zero")
    (tmp_path / "usr" / "lib" / "os-release").write_text('ID="ubuntu"\n')
    (tmp_path / "etc" / "lsb-release").symlink_to("../usr/lib/os-release")
    ctx = Context(env={}, root=str(tmp_path))
    box = {}

    def read() -> None:
        box["got"] = [ctx.read_text(p) for p in ("/proc/meminfo", "/etc/os-release", "/etc/lsb-release")]

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(30)  # a hang guard: a regression fails here instead of hanging the suite
    assert not t.is_alive(), "read_text blocked on a FIFO"
    assert box["got"] == [None, None, 'ID="ubuntu"\n']
