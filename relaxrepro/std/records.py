"""``Record``: the plain base of relaxrepro's small result types, in place of ``dataclasses``.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``) and builds every class's
methods with ``exec`` at import: ~8 ms plus ~0.3 ms per class on every ``generate``, for a dozen records.
A record writes its own ``__init__`` (the defaults in plain sight) and names its fields in ``_fields``;
this base gives it the ``repr``, ``==`` and ``as_dict`` a dataclass would have, by those fields.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs ~3 ms at import; PEP 563 keeps annotations as strings
    from typing import Any, Dict, Tuple


class Record:
    """Fields listed in ``_fields``: a dataclass-like ``repr``, ``==`` (same class, equal fields) and ``as_dict``."""

    _fields: Tuple[str, ...] = ()

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (f, getattr(self, f)) for f in self._fields))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]  # mutable and compared by value, like a dataclass

    def as_dict(self) -> Dict[str, Any]:
        """The fields as a new dict, in ``_fields`` order (a shallow ``dataclasses.asdict``)."""
        return {f: getattr(self, f) for f in self._fields}


class FrozenRecord(Record):
    """A record whose fields are set once in ``__init__`` (with ``_set``): hashable, and assignment raises."""

    def _set(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("cannot assign to field %r of a frozen %s" % (name, type(self).__name__))

    def __delattr__(self, name: str) -> None:
        raise AttributeError("cannot delete field %r of a frozen %s" % (name, type(self).__name__))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(getattr(self, f) for f in self._fields))
