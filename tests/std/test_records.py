"""Records are declared once, as annotated fields; the base builds ``__init__`` from them (how records compare,
print, hash and freeze is tested on the real ones in tests/test_imports.py)."""

from __future__ import annotations

from typing import List, Optional

import pytest

from relaxrepro.std.records import Factory, Record


class Head(Record):
    sha: str
    branch: Optional[str] = None
    notes: List[str] = Factory(list)


class Tagged(Head):
    tag: str = "v1"


def test_fields_come_from_the_annotations_in_order_and_defaults_fill_the_rest():
    h = Head("abc")
    assert Head._fields == ("sha", "branch", "notes")
    assert (h.sha, h.branch, h.notes) == ("abc", None, [])
    assert repr(h) == "Head(sha='abc', branch=None, notes=[])"
    assert h.as_dict() == {"sha": "abc", "branch": None, "notes": []}
    assert Head("abc", branch="main") == Head(sha="abc", branch="main")
    assert Head("abc") != Head("abd")


def test_a_factory_default_is_new_for_every_record():
    a, b = Head("a"), Head("b")
    a.notes.append("x")
    assert b.notes == []
    assert "notes" not in vars(Head)


def test_a_subclass_adds_its_fields_after_the_base_ones():
    assert Tagged._fields == ("sha", "branch", "notes", "tag")
    assert Tagged("s").tag == "v1"


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, "Head missing required argument 'sha'"),
    (("a", None, [], "extra"), {}, "Head takes 3 positional arguments but 4 were given"),
    (("a",), {"sha": "b"}, "Head got multiple values for argument 'sha'"),
    (("a",), {"colour": 1}, "Head got an unexpected argument 'colour'"),
], ids=["missing", "too-many", "twice", "unknown"])
def test_wrong_arguments_raise_a_clear_type_error(args, kwargs, message):
    with pytest.raises(TypeError) as err:
        Head(*args, **kwargs)
    assert str(err.value) == message

