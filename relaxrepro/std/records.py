"""``Record``: the plain base of relaxrepro's small result types, in place of ``dataclasses``.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``) and builds every class's
methods with ``exec`` at import: ~8 ms plus ~0.3 ms per class on every ``generate``, for a dozen records.
A record is declared once, as annotated class attributes; the base reads them when the class is made and
gives it the ``__init__``, ``repr``, ``==`` and ``as_dict`` a dataclass would have::

    class Head(Record):
        sha: str                         # required (positional or keyword)
        branch: Optional[str] = None     # a default
        notes: List[str] = Factory(list)  # a fresh value per instance

Fields are the annotated names not starting with ``_``, in declaration order, after a base record's own.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs ~3 ms at import; PEP 563 keeps annotations as strings
    from typing import Any, Callable, Dict, Tuple

_REQUIRED = object()


class Factory:
    """A default made anew for each record, like ``dataclasses.field(default_factory=...)``."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class Record:
    """Fields declared as annotations: a dataclass-like ``__init__``, ``repr``, ``==`` and ``as_dict``."""

    _fields: Tuple[str, ...] = ()
    _defaults: Dict[str, Any] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = list(cls._fields)
        defaults = dict(cls._defaults)
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if name.startswith("_") or str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                continue
            if name not in fields:
                fields.append(name)
            if name in cls.__dict__:
                defaults[name] = cls.__dict__[name]
                if isinstance(defaults[name], Factory):
                    delattr(cls, name)  # the instance always has its own value
            elif name in defaults:
                del defaults[name]  # redeclared without a default: required again
        cls._fields = tuple(fields)
        cls._defaults = defaults

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError("%s takes %d positional arguments but %d were given"
                            % (type(self).__name__, len(fields), len(args)))
        values = dict(zip(fields, args))
        for name, value in kwargs.items():
            if name in values or name not in fields:
                raise TypeError("%s got %s argument %r" % (
                    type(self).__name__, "multiple values for" if name in values else "an unexpected", name))
            values[name] = value
        put = object.__setattr__
        for name in fields:
            if name in values:
                value = values[name]
            else:
                value = self._defaults.get(name, _REQUIRED)
                if value is _REQUIRED:
                    raise TypeError("%s missing required argument %r" % (type(self).__name__, name))
                if isinstance(value, Factory):
                    value = value.make()
            put(self, name, value)

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
    """A record whose fields are set once, by ``__init__``: hashable, and assignment raises."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("cannot assign to field %r of a frozen %s" % (name, type(self).__name__))

    def __delattr__(self, name: str) -> None:
        raise AttributeError("cannot delete field %r of a frozen %s" % (name, type(self).__name__))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(getattr(self, f) for f in self._fields))
