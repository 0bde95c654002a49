"""The one rule for numbers read from a manifest, whatever the field and whatever the command.

A JSON integer may be larger than a float (``10**400``: a trainer's metric, written as it was given) and a
string field may hold a digit run longer than any real number (a 5,000-digit version). Python turns neither
into a float (``OverflowError``) and, from 3.11, refuses ``int()`` of more than 4,300 digits. So:

- an integer beyond a float's range is read as a :class:`BigInt` (the reader's decoder, and the run index's
  copies, through :func:`read_int`): exact where Python compares integers, ±infinity where a float is wanted;
- a digit string is ordered by :func:`digits_key` (exactly, at any length, without ``int()``) and turned into
  an ``int`` only through :func:`small_int` (at most :data:`SMALL_DIGITS` digits, else None);
- :func:`shorten` is how a long text is shown, :func:`shown` a number in a cell.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Optional, Tuple

FLOAT_DIGITS = 308
"""An integer of at most this many digits is below 10**308, inside a float's range (about 1.8e308)."""

SMALL_DIGITS = 18
"""The longest digit string :func:`small_int` converts: a schema major, a node count, a step number."""

_INF = float("inf")


class BigInt(int):
    """An integer too large for a float, read exactly.

    It compares, hashes and is written by ``json`` as the integer it is (``10**400 != 10**400 + 1``), and
    ``float()`` of it -- ``math.isfinite``, a SQLite REAL, a statistic -- is ``inf`` or ``-inf`` instead of an
    ``OverflowError``: every reader that wants a float sees a number it already handles as non-finite.
    """

    __slots__ = ()

    def __float__(self) -> float:
        return _INF if self > 0 else -_INF


def read_int(text: str) -> int:
    """The integer a JSON number without a fraction spells: a plain ``int``, or a :class:`BigInt` when a float
    cannot hold it. ``text`` is at most the reader's ``MAX_INT_DIGITS`` long (it refuses longer ones)."""
    value = int(text)
    return value if len(text) - (text[:1] == "-") <= FLOAT_DIGITS else wide(value)


def wide(value: int) -> int:
    """``value`` as a :class:`BigInt` when a float cannot hold it, else as it is (:func:`read_int` calls it
    for integers of more than :data:`FLOAT_DIGITS` digits only)."""
    try:
        float(value)
    except OverflowError:
        return BigInt(value)
    return value


def digits_key(digits: str) -> Tuple[int, str]:
    """An ASCII digit string's order as a number, exact at any length and without ``int()``: (how many
    digits it has without its leading zeros, those digits). ``"0010"`` and ``"10"`` have the same key."""
    stripped = digits.lstrip("0") or "0"
    return len(stripped), stripped


ZERO_KEY = digits_key("0")


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits (``str.isdigit`` also says yes to ``"²"``, which ``int``
    refuses)."""
    return text.isascii() and text.isdigit()


def small_int(text: str) -> Optional[int]:
    """``int(text)`` for ASCII digits of at most :data:`SMALL_DIGITS` (leading zeros aside); None for anything
    else, however long: never an ``int()`` that Python refuses or that takes quadratic time."""
    if not is_digits(text):
        return None
    stripped = text.lstrip("0") or "0"
    return int(stripped) if len(stripped) <= SMALL_DIGITS else None


def shorten(text: str, width: int = 40) -> str:
    """``text`` for a message or a cell: as it is up to ``width`` characters, else its head and tail and how
    long it was (``12345678901234...8901234567890 (5002 characters)``)."""
    if len(text) <= width:
        return text
    half = max((width - 3) // 2, 1)
    return "%s...%s (%d characters)" % (text[:half], text[-half:], len(text))


SHOWN_DIGITS = 20
"""An integer longer than this is shown as ``1.000e+400`` in a table cell (:func:`shown`)."""


def shown(value: object) -> str:
    """A recorded value for a cell: ``str(value)``, but an integer of more than :data:`SHOWN_DIGITS` digits in
    scientific form from its digits (``-1.234e+400``), which no float could give."""
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(abs(value))
        if len(digits) > SHOWN_DIGITS:
            return "%s%s.%se+%d" % ("-" if value < 0 else "", digits[0], digits[1:4], len(digits) - 1)
    return str(value)
