"""Many manifests' rows read by forked children: a cold run index of 100,000 manifests is a loop of read, parse
and facts over files (~75% of its CPU time; the rest is the database's, which has one writer), and a machine
has more than one core.

The parent hands out batches of paths in turn (batch ``b`` to child ``b % n``); each child reads its batches
with :func:`runrow.read_row` (and a caller's card maker, inherited with the fork) and sends each as one pickle
over a pipe, the row's card with it; the parent takes them back in order, so the rows come in the order a
serial read gives, and each child is at most one batch ahead (a full pipe stops it): memory is bounded by a
batch, not by the tree. A child that fails (killed, out of memory) leaves its
batches to the parent, read in process as before. No child outlives :func:`rows`: they are reaped when it
ends, and killed first when it ends early.

The parent takes the batches' bytes in a thread of its own (:func:`_take`), up to :data:`AHEAD` of them ahead
of its caller: the caller writes a database a chunk of rows at a time, and a child that waited for those writes
to end before its next batch was taken idled ~40% of a cold build.

Only where it pays and is safe: ``fork`` (not Windows), more than one core for us, one thread in the process
(a fork with threads running can deadlock in the child), and at least :data:`MIN_FILES` files.
"""

from __future__ import annotations

import gc
import itertools
import os
import pickle
import signal
import struct
import threading

from ..std import deadline
from .runrow import Row, read_row

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import queue
    from typing import Any, BinaryIO, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

    from .runrow import Card

    Read = Tuple[Row, Optional[Dict[str, str]]]

MIN_FILES = 4000
"""Fewer files are read in process: two forks cost a few ms, and an update of a few changed files is the
usual case."""
BATCH = 128
"""Paths per batch: ~400 KB of rows, a few pipe buffers."""
AHEAD = 24
"""Batches taken from the children ahead of the caller (~3,000 rows, ~15 MB): more than the rows of one of
the cold build's write transactions (indexdb.CHUNK), so the children read on through a write."""
MAX_CHILDREN = 4
_HEADER = struct.Struct("<Q")
_FIELDS = ("path", "run_id", "generated_at", "group", "parent", "error", "cells", "doc_json", "facts_json",
           "pkgkey", "cacheable")


def children_for(count: int) -> int:
    """How many children read ``count`` files (0: read them in process)."""
    if count < MIN_FILES or not hasattr(os, "fork") or threading.active_count() != 1:
        return 0
    try:
        cores = len(os.sched_getaffinity(0))  # a container's or taskset's share, not the machine's
    except AttributeError:
        cores = os.cpu_count() or 1
    return min(cores, MAX_CHILDREN) if cores > 1 else 0


def rows(paths: Callable[[], Iterable[str]], count: int, card: Optional[Card] = None) -> Iterator[Read]:
    """``read_row(path, facts=True, card=card)`` of each of the ``count`` paths that ``paths()`` gives, in its
    order (each child calls ``paths()`` too, so it must give the same paths each time; a child inherits
    ``card`` with the fork, and its row's card comes back with the row)."""
    n = children_for(count)
    if not n:
        for path in paths():
            yield read_row(path, facts=True, card=card)
        return
    import queue  # lazy: ~1 ms (queue, heapq) that a listing which forks no reader never uses

    kids: List[_Child] = []
    ahead: queue.Queue = queue.Queue(AHEAD)
    stop = threading.Event()
    taker = None
    try:
        try:
            for k in range(n):
                kids.append(_fork(paths, k, n, kids, card))
        except OSError:  # no fork now (a process limit, no memory): every batch is read here
            for kid in kids:
                kid.end()
            kids = [_Child(0, None)] * n
        # Started after the forks: a fork with a thread running can deadlock in the child.
        taker = deadline.start(lambda: _take(paths, kids, ahead, stop), name="relaxrepro-fanout").thread
        while True:
            got = ahead.get()
            if got is None:
                break
            if isinstance(got, BaseException):
                raise got
            batch, data = got
            done = _decoded(data, len(batch)) if data is not None else None
            if done is None:  # the child failed (or sent what does not load): the batch is read here
                done = [read_row(path, facts=True, card=card) for path in batch]
            yield from done
    finally:
        if taker is not None and taker.is_alive():  # ended early: the taker may wait on a child or on the queue
            stop.set()
            for kid in kids:
                kid.kill()  # its pipe ends: a read of it returns
            while taker.is_alive():
                try:
                    while True:
                        ahead.get_nowait()
                except queue.Empty:
                    pass
                taker.join(0.05)
        for kid in kids:
            kid.end()


def _take(paths: Callable[[], Iterable[str]], kids: List[_Child], ahead: queue.Queue, stop: threading.Event
          ) -> None:
    """The parent's thread: each batch's paths and the bytes its child sent (None: the child failed, the batch
    is to be read in process) in order onto ``ahead``, then None; an error instead, when one is raised here.
    Ends early, doing nothing more, once ``stop`` is set. It only waits on pipes and copies bytes: the rows
    are loaded by the caller's thread, so this one seldom wants the GIL while the caller's SQLite steps have
    let it go (a thread that unpickled here made the writes wait for it, ~5 ms a time)."""
    try:
        todo = iter(paths())
        n = len(kids)
        for b in itertools.count():
            batch = list(itertools.islice(todo, BATCH))
            if not batch:
                break
            data = kids[b % n].receive()
            if stop.is_set():
                return
            _put(ahead, (batch, data), stop)
        _put(ahead, None, stop)
    except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
        _put(ahead, exc, stop)


def _decoded(data: bytes, count: int) -> Optional[List[Read]]:
    """The ``count`` rows a child sent as ``data``, or None when it does not load as that."""
    try:
        got = pickle.loads(data)
    except Exception:  # noqa: BLE001 - whatever a broken child wrote: the batch is read in process
        return None
    if not isinstance(got, list) or len(got) != count:
        return None
    out = []
    for values, terms, card, pkgs in got:
        row = Row(*values)
        row.terms, row.card = terms, card
        out.append((row, pkgs))
    return out


def _put(ahead: queue.Queue, item: Any, stop: threading.Event) -> None:
    import queue  # loaded by rows() already

    while not stop.is_set():
        try:
            ahead.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


class _Child:
    """A forked reader: its pid and the read end of its pipe (None once it failed or ended)."""

    def __init__(self, pid: int, out: Optional[BinaryIO]) -> None:
        self.pid = pid
        self.out: Optional[BinaryIO] = out

    def receive(self) -> Optional[bytes]:
        """The bytes of the child's next batch, or None when it sent none whole: it failed, and reads no more."""
        if self.out is None:
            return None
        try:
            head = self.out.read(_HEADER.size)
            size = _HEADER.unpack(head)[0] if len(head) == _HEADER.size else 0
            data = self.out.read(size) if size else b""
        except Exception:  # noqa: BLE001 - a child that died mid-batch: read it here
            data = b""
        if not data or len(data) != size:
            self.end()
            return None
        return data

    def kill(self) -> None:
        """Kill it if it still runs (reaped by :meth:`end`)."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def end(self) -> None:
        """Close our end of its pipe (a child still writing gets EPIPE), kill it if it still runs, reap it."""
        if self.out is not None:
            self.out.close()
            self.out = None
        if self.pid:
            try:
                pid, _status = os.waitpid(self.pid, os.WNOHANG)
                if pid == 0:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0


def _fork(paths: Callable[[], Iterable[str]], k: int, n: int, kids: List[_Child], card: Optional[Card]) -> _Child:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(r)
            for kid in kids:  # the earlier children's pipes: held here, a failed parent read would not end them
                if kid.out is not None:
                    kid.out.close()
            gc.disable()  # nothing here makes cycles; no finalizer of the parent's objects (its database) runs
            with open(w, "wb") as out:
                _serve(paths, k, n, out, card)
            code = 0
        except BaseException:  # noqa: BLE001 - the parent reads what we did not send
            pass
        finally:
            os._exit(code)
    os.close(w)
    return _Child(pid, open(r, "rb"))


def _serve(paths: Callable[[], Iterable[str]], k: int, n: int, out: Any, card: Optional[Card]) -> None:
    """The child ``k`` of ``n``: read the batches ``k``, ``k + n``, ... and write each as one pickle."""
    todo = iter(paths())
    seen = set()
    parts = set()
    for b in itertools.count():
        batch = list(itertools.islice(todo, BATCH))
        if not batch:
            return
        if b % n != k:
            continue
        got = []
        for path in batch:
            row, pkgs = read_row(path, facts=True, card=card)
            made = row.card
            if made is not None and made[1] is not None:  # a card's shared part: sent once, like a package set
                if made[1][0] in parts:
                    made = (made[0], None)
                else:
                    parts.add(made[1][0])
            if pkgs is not None:
                # The parent keeps the first of each set it meets, in order: the batch where it meets a set first
                # is this child's first with it too (an earlier one of ours would be earlier in order).
                pkgs = None if row.pkgkey in seen else pkgs
                seen.add(row.pkgkey)
            got.append((tuple(getattr(row, f) for f in _FIELDS), row.terms, made, pkgs))
        data = pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_HEADER.pack(len(data)))
        out.write(data)
        out.flush()
