"""Rows read by forked children (a cold index of many files) are the rows read in process, in the same order,
whatever a child does; no child outlives the read."""

from __future__ import annotations

import os
import threading
import time

import pytest

from relaxrepro.manifest import fanout, runindex
from relaxrepro.manifest.runrow import STORED, read_row
from tests.manifest.test_runindex_terms import _env, _tree

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork: always read in process")


@pytest.fixture
def forked(monkeypatch):
    """Children for any count, 3 of them, 2 paths a batch: every child serves several batches."""
    monkeypatch.setattr(fanout, "children_for", lambda count: 3)
    monkeypatch.setattr(fanout, "BATCH", 2)
    real = os.fork
    _FORKED.clear()

    def fork():
        pid = real()
        if pid:
            _FORKED.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)


_FORKED = []
"""The pids of the children the read forked (the ``forked`` fixture's): the test process has others of its own
(a session's SLURM daemons, say), so "no child" means each of these reaped, not no child at all."""


def _paths(runs):
    return sorted(str(p) for p in runs.rglob("manifest_*.json"))


def _shown(got):
    out, seen = [], set()
    for row, pkgs in got:
        first = row.pkgkey not in seen
        seen.add(row.pkgkey)
        # repr: a NaN term is equal to none, not even to itself read again
        out.append((tuple(getattr(row, f) for f in STORED), row.cacheable, repr(row.terms), pkgs if first else "-"))
    return out


def _no_children():
    assert _FORKED, "the read forked no child"
    assert not [t for t in threading.enumerate() if t.name == "relaxrepro-fanout"], "the batch taker outlived the read"
    for pid in _FORKED:
        with pytest.raises(ChildProcessError):  # reaped: no longer a child of ours
            os.waitpid(pid, os.WNOHANG)


def test_rows_read_by_children_are_the_rows_read_in_process(tmp_path, forked):
    paths = _paths(_tree(tmp_path))
    assert len(paths) > 10
    want = _shown(read_row(p, facts=True) for p in paths)
    assert _shown(fanout.rows(lambda: iter(paths), len(paths))) == want
    _no_children()


def test_a_child_that_fails_leaves_its_batches_to_the_parent(tmp_path, forked, monkeypatch):
    paths = _paths(_tree(tmp_path))
    want = _shown(read_row(p, facts=True) for p in paths)
    serve = fanout._serve

    def failing(paths_, k, n, out, card):
        if k == 1:
            os._exit(3)  # killed, out of memory: it sends nothing
        if k == 2:
            out.write(b"\x05\x00\x00\x00\x00\x00\x00\x00garb")  # a batch cut short
            return
        serve(paths_, k, n, out, card)

    monkeypatch.setattr(fanout, "_serve", failing)
    assert _shown(fanout.rows(lambda: iter(paths), len(paths))) == want
    _no_children()


def test_no_child_outlives_a_read_stopped_early(tmp_path, forked):
    paths = _paths(_tree(tmp_path))
    got = fanout.rows(lambda: iter(paths), len(paths))
    next(got)
    got.close()
    _no_children()


def test_a_read_stopped_early_with_the_taker_waiting_on_a_full_queue_ends(tmp_path, forked, monkeypatch):
    monkeypatch.setattr(fanout, "AHEAD", 1)
    paths = _paths(_tree(tmp_path))
    got = fanout.rows(lambda: iter(paths), len(paths))
    next(got)
    time.sleep(0.3)  # the children and the taker run ahead until the queue is full
    got.close()
    _no_children()


def test_few_files_or_one_core_are_read_in_process(monkeypatch):
    # Only this process's own thread: a thread another test left behind (a stuck probe's, MLflow's artifact pool
    # until it is collected) must not decide the cores' case. The threads' own case is the one below.
    monkeypatch.setattr(fanout.threading, "active_count", lambda: 1)
    assert fanout.children_for(fanout.MIN_FILES - 1) == 0
    if hasattr(os, "sched_getaffinity"):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
        assert fanout.children_for(10 ** 6) == 0
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
        assert fanout.children_for(10 ** 6) == fanout.MAX_CHILDREN


def test_a_process_with_another_thread_running_does_not_fork(monkeypatch):
    # A fork while another thread holds a lock can deadlock in the child: a trainer's threads mean in process.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.setattr(fanout.threading, "active_count", lambda: 2)
    assert fanout.children_for(10 ** 6) == 0


def test_an_index_built_by_children_lists_and_queries_as_a_scan(tmp_path, forked):
    runs = _tree(tmp_path)
    env = _env(tmp_path)
    want = ("cells", "doc", "facts")
    cold = runindex.listing([str(runs)], want=want, env=env)  # built by the children
    assert not cold.warnings
    warm = runindex.listing([str(runs)], want=want, env=env)  # read back from the database
    scan = runindex.listing([str(runs)], want=want, env=env, use_index=False)
    for got in (cold, warm):
        assert [(tuple(getattr(r, f) for f in STORED)) for r in got.rows] == \
               [(tuple(getattr(r, f) for f in STORED)) for r in scan.rows]
        assert got.packages == scan.packages
    _no_children()


def test_no_fork_now_means_every_batch_is_read_in_process(tmp_path, forked, monkeypatch):
    paths = _paths(_tree(tmp_path))
    want = _shown(read_row(p, facts=True) for p in paths)
    real = os.fork
    forks = []

    def fork():
        if forks:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        forks.append(1)
        return real()

    monkeypatch.setattr(os, "fork", fork)
    assert _shown(fanout.rows(lambda: iter(paths), len(paths))) == want
    _no_children()
