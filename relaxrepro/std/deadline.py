"""Calls run in a thread with a deadline: the one place relaxrepro starts a thread.

Some calls ignore every timeout we can give them (a ``stat`` on a hung network filesystem, a wedged
driver, a tracker waiting on its server): the only way to bound them is to wait for them in another
thread and stop waiting. :func:`call` runs one call within a deadline, :func:`call_all` several at
once within one deadline, :func:`start` one now to be waited for later. Each hands back a
:class:`Call`: the value, or the exception it raised, or that it was still running when the caller
stopped waiting (then ``done`` is False and the record never changes afterwards).

The threads are daemons (not ``concurrent.futures``, whose workers are joined at interpreter exit): a
call still running past its deadline is left behind, listed by :func:`stray_threads`, and the process
still exits promptly.
"""

from __future__ import annotations

import threading
import time

from .records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, List, Optional, Sequence

_POLL_S = 0.05
"""How often a wait whose end depends on when the call started looks again (the start is set by the thread)."""


class Call(Record):
    """How one call in a thread ended, as seen when its caller stopped waiting.

    ``done``: it returned (``value``) or raised (``error``) in time; False when it was still running.
    ``started_at``/``ended_at``: the clock when the call began and returned (None if it had not).
    """

    value: Any = None
    error: Optional[BaseException] = None
    done: bool = False
    started_at: Optional[float] = None
    ended_at: Optional[float] = None

    @property
    def ok(self) -> bool:
        """It returned a value in time."""
        return self.done and self.error is None

    def why(self, late: str) -> str:
        """Why there is no value, in one line: the exception as ``Type: message``, else ``late``."""
        if self.error is not None:
            return "%s: %s" % (type(self.error).__name__, self.error)
        return late


class Running:
    """A call started in a daemon thread; :meth:`wait` for how it ended."""

    __slots__ = ("thread", "_box", "_started", "_clock")

    def __init__(self, fn: Callable[[], Any], name: str, clock: Callable[[], float]) -> None:
        self._box: List[Any] = []
        self._started: List[float] = []
        self._clock = clock
        self.thread = threading.Thread(target=self._body, args=(fn,), name=name, daemon=True)
        self.thread.start()

    def _body(self, fn: Callable[[], Any]) -> None:
        self._started.append(self._clock())
        try:
            value, error = fn(), None
        except BaseException as exc:  # noqa: B036 - handed to the caller's thread, never lost
            value, error = None, exc
        self._box.append((value, error, self._clock()))

    def started_at(self) -> Optional[float]:
        """The clock when the call began in its thread, None until then."""
        return self._started[0] if self._started else None

    def wait(self, timeout: Optional[float] = None) -> Call:
        """Wait at most ``timeout`` seconds (None: until it ends), then say how it ended."""
        self.thread.join(timeout)
        return self.result()

    def result(self) -> Call:
        """How the call stands now, without waiting; one still running is noted as a stray thread."""
        if not self._box:
            _note_stray(self.thread)
            return Call(started_at=self.started_at())
        value, error, ended = self._box[0]
        return Call(value=value, error=error, done=True, started_at=self.started_at(), ended_at=ended)


def start(fn: Callable[[], Any], *, name: str = "relaxrepro", clock: Callable[[], float] = time.monotonic
          ) -> Running:
    """Start ``fn()`` in a daemon thread called ``name`` now; ``clock`` times its start and end."""
    return Running(fn, name, clock)


def call(fn: Callable[[], Any], limit: float, *, name: str = "relaxrepro") -> Call:
    """``fn()`` in a daemon thread, waited for at most ``limit`` seconds."""
    return start(fn, name=name).wait(limit)


def call_all(
    fns: Sequence[Callable[[], Any]],
    deadline: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    grace: float = 0.0,
    each: Optional[float] = None,
    names: Optional[Sequence[str]] = None,
    name: str = "relaxrepro",
) -> List[Call]:
    """Run ``fns`` at once, one daemon thread each, all within one ``deadline`` (a ``clock`` time).

    Each is waited for in turn until ``deadline`` (or, with ``each``, until ``each`` seconds after its own
    start, whichever is first), plus ``grace`` from when its wait began. How they ended is read once
    every wait is over, in the order of ``fns``: one that returned meanwhile counts as done.
    """
    running = [Running(fn, names[i] if names else name, clock) for i, fn in enumerate(fns)]
    for r in running:
        first = clock()
        while r.thread.is_alive():
            end = deadline
            if each is not None:
                began = r.started_at()
                end = min(end, (began if began is not None else clock()) + each)
            left = max(end, first) + grace - clock()
            if left <= 0:
                break
            r.thread.join(min(left, _POLL_S) if each is not None else left)
    return [r.result() for r in running]


_strays: List[threading.Thread] = []
_strays_lock = threading.Lock()


def _note_stray(thread: threading.Thread) -> None:
    with _strays_lock:
        if thread not in _strays:
            _strays[:] = [t for t in _strays if t.is_alive()] + [thread]


def stray_threads() -> List[threading.Thread]:
    """Threads of calls whose callers stopped waiting and that are still running (the CLI exits hard if any)."""
    with _strays_lock:
        return [t for t in _strays if t.is_alive()]
