"""The determinism trace: a run's scalars at chosen steps, kept exactly, in memory until the run ends.

``results.trace`` is columnar (see the schema)::

    {"first": 50, "every": 20, "calls": 1000, "last_step": 999,
     "steps": [0, 1, ..., 49, 60, 80, ...], "names": ["loss", "acc"],
     "values": [["0x1.62e42fefa39efp-1", ...], [...]]}      # values[i][j]: names[i] at steps[j]

A row is what the calls for one step gave, in the order given; a step that comes again later (a
per-epoch step counter: 0..99, 0..99, ...) starts a row of its own, never adds to an earlier one. The first
``first`` rows are kept, then every ``every``-th row (counted from the first row, whatever its step); when
``KEEP`` such later rows are held, ``every`` doubles and the rows off the new stride go, so a run of a
million steps still covers its whole length in a few KB and two runs of the same length keep the same
rows. A float is kept as ``float.hex`` (lossless: ``-0.0`` and ``0.0`` stay apart, ``nan``/``inf``
stay strings JSON can hold), an integer as itself; anything else (a tensor, a numpy scalar) through
``float()`` first. Nothing here does I/O: :meth:`Trace.section` is written with the outcome.
"""

from __future__ import annotations

import operator

from ..std.sha import oversized_int

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

FIRST = 50
"""Rows kept from the start: what a quick replay compares."""
EVERY = 10
"""The stride after those, before any doubling."""
KEEP = 50
"""Later rows held at most; past this the stride doubles."""
MAX_NAMES = 8
"""Scalars kept per step at most; others are counted in ``dropped_names``, not stored."""

MAX_STEPS_ENV = "RELAXREPRO_MAX_STEPS"
"""Set by a quick replay: the trainer stops cleanly once it reaches this step."""

_NEVER = float("inf")


def checked_int(value: int) -> Any:
    """``value``, or, past what JSON holds (:func:`~relaxrepro.std.sha.oversized_int`), its stand-in text and a
    warning: one such value never costs the run its outcome and results."""
    text = oversized_int(value)
    if text is None:
        return value
    import logging  # lazy: ~4 ms, only for a value no trainer should trace

    logging.getLogger("relaxrepro").warning("relaxrepro: trace: an integer too large to write as a number "
                                            "is recorded as %s", text)
    return text


def exact(value: Any) -> Any:
    """``value`` without loss: an int as itself, a float as ``float.hex``, else via ``__index__``/``float()``;
    what none of those takes, its ``repr`` (64 characters at most)."""
    if type(value) is float:
        return value.hex()
    if type(value) is int:
        return value if value.bit_length() < 64 else checked_int(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return float.hex(value)
    try:
        return checked_int(operator.index(value))  # numpy integers, integer tensors: exact even past 2**53
    except TypeError:
        pass
    try:
        return float(value).hex()  # float tensors of one element, numpy floats (float32 widens exactly)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return repr(value)[:64]


def max_steps(env: Mapping[str, str]) -> Optional[int]:
    """``$RELAXREPRO_MAX_STEPS`` as a non-negative int; None when unset or not a number."""
    raw = env.get(MAX_STEPS_ENV)
    if raw is None:
        return None
    raw = raw.strip()
    return int(raw) if raw.isdigit() else None


class Trace:
    """Collects ``(step, scalars)`` rows; :meth:`add` is the per-step call and stays cheap."""

    __slots__ = ("first", "every", "keep", "stop", "head", "tail", "calls", "rows", "last_step", "row_step", "row",
                 "stop_row", "names", "dropped", "stopped_at", "errors")

    def __init__(self, *, first: int = FIRST, every: int = EVERY, keep: int = KEEP,
                 stop: Optional[int] = None) -> None:
        self.first = first
        self.every = every
        self.keep = keep
        self.stop: Any = _NEVER if stop is None else stop
        self.head: List[Tuple[int, Any, Dict[str, Any]]] = []  # (row number, step, {name: value})
        self.tail: List[Tuple[int, Any, Dict[str, Any]]] = []
        self.calls = 0
        self.rows = 0
        self.last_step: Any = None
        self.row_step: Any = None  # no step equals it: a None step never gets this far
        self.row: Optional[Dict[str, Any]] = None  # the current row's values; None when it is not kept
        self.stop_row = -1
        self.names: List[str] = []
        self.dropped = 0
        self.stopped_at: Any = None
        self.errors = 0

    def add(self, step: Any, loss: Any, scalars: Dict[str, Any]) -> bool:
        """Record one call; True when ``step`` reached the stop step (the caller ends the run)."""
        self.calls += 1
        self.last_step = step
        try:
            stopping = step >= self.stop
            if stopping:
                self.stopped_at = step
            if step == self.row_step:  # a second call for the step of the row before adds its scalars to it
                values = self.row
            else:
                n = self.rows
                self.rows = n + 1
                self.row_step = step
                if n < self.first:
                    values = self.row = self._new(self.head, n, step)
                elif stopping or not n % self.every:
                    values = self.row = self._new(self.tail, n, step)
                    if stopping:
                        self.stop_row = n
                else:
                    values = self.row = None
            if values is None:
                return False
            if loss is not None:
                self._put(values, "loss", loss)
            for name, value in scalars.items():
                self._put(values, name, value)
            if len(self.tail) > self.keep:
                self._thin()
        except Exception:  # a step that does not compare (None, a string): counted, never raised
            self.errors += 1
        return self.stopped_at is not None

    @staticmethod
    def _new(rows: List[Tuple[int, Any, Dict[str, Any]]], n: int, step: Any) -> Dict[str, Any]:
        values: Dict[str, Any] = {}
        rows.append((n, step, values))
        return values

    def _put(self, values: Dict[str, Any], name: str, value: Any) -> None:
        if name not in self.names:
            if len(self.names) >= MAX_NAMES:
                self.dropped += 1
                return
            self.names.append(name)
        values[name] = exact(value)

    def _thin(self) -> None:
        for _ in range(64):  # row numbers are distinct: each doubling drops about half of them
            if len(self.tail) <= self.keep:
                return
            self.every *= 2
            self.tail = [row for row in self.tail if not row[0] % self.every or row[0] == self.stop_row]

    def section(self) -> Dict[str, Any]:
        """``results.trace`` as written (see the module docstring)."""
        rows = self.head + self.tail
        names = sorted(self.names, key=lambda n: (n != "loss", self.names.index(n)))
        out: Dict[str, Any] = {
            "first": self.first, "every": self.every, "calls": self.calls, "last_step": self.last_step,
            "steps": [r[1] for r in rows], "names": names,
            "values": [[r[2].get(n) for r in rows] for n in names],
        }
        if self.stopped_at is not None:
            out["stopped_at"] = self.stopped_at
            out["max_steps"] = self.stop
        if self.dropped:
            out["dropped_names"] = self.dropped
        if self.errors:
            out["errors"] = self.errors
        return out
