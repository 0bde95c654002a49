"""A manifest parsed section by section (the run index's cold build) is parse_json's document or error, for
every text: in our writer's layout or not, with a section seen before or not, valid or not."""

import json

import pytest

from relaxrepro.manifest import sections
from relaxrepro.manifest.reader import ManifestError, parse_json
from relaxrepro.manifest.writer import serialize

BIG = {"packages": {"pkg%03d" % i: "1.%d.0" % i for i in range(40)}, "python": "3.11.7"}
"""A section past sections.SMALL: kept by its bytes, shared by the documents after."""


def _doc(i):
    return {"schema_version": "1.3", "run_id": "run%02d" % i, "environment": BIG,
            "code": {"repo": {"commit": "%040x" % i, "dirty": False}}, "results": {"metrics": {"auc": 0.5 + i / 100}}}


def _same(raw):
    """parse_manifest_text(raw) and parse_json of its text: the same document, or the same error."""
    try:
        want = ("doc", parse_json(raw.decode("utf-8")))
    except ManifestError as exc:
        want = ("error", str(exc))
    except UnicodeDecodeError:
        want = ("error", "utf-8")
    try:
        got = ("doc", sections.parse_manifest_text(raw))
    except ManifestError as exc:
        got = ("error", str(exc))
    except UnicodeDecodeError:
        got = ("error", "utf-8")
    assert got == want
    if got[0] == "doc":  # the same types too: json's 1 == 1.0 == True would hide a wrong value
        assert json.dumps(got[1], sort_keys=True) == json.dumps(want[1], sort_keys=True)
    return got


def test_our_layout_parses_as_a_whole_parse_and_shares_a_section_seen_before():
    docs = [_same(serialize(_doc(i)))[1] for i in range(4)]
    assert [d["run_id"] for d in docs] == ["run00", "run01", "run02", "run03"]
    assert docs[3]["environment"] == BIG
    assert docs[3]["environment"] is docs[2]["environment"]  # seen twice: parsed once after


SHAPES = {
    "compact": b'{"schema_version":"1.3","run_id":"a"}\n',
    "repeated-key": b'{\n "a": 1,\n "a": 2\n}\n',
    "repeated-big-key": b'{\n "a": %s,\n "a": %s\n}\n' % (json.dumps(BIG).encode(), json.dumps(BIG).encode()),
    "two-members-a-line": b'{\n "a": 1, "b": 2,\n "c": 3\n}\n',
    "two-members-a-line-and-repeated": b'{\n "a": 1, "b": 2,\n "b": 3\n}\n',
    "no-comma": b'{\n "a": 1\n "b": 2\n}\n',
    "trailing-comma": b'{\n "a": 1,\n "b": 2,\n}\n',
    "nested-one-space": b'{\n "a": {\n "b": 1\n },\n "c": 2\n}\n',
    "array-one-space": b'{\n "a": [\n "x",\n "y"\n ]\n}\n',
    "nan": b'{\n "a": NaN,\n "b": 2\n}\n',
    "huge-float": b'{\n "a": 1e999\n}\n',
    "long-int": b'{\n "a": ' + b"9" * 5000 + b"\n}\n",
    "bigint": b'{\n "a": ' + b"9" * 400 + b"\n}\n",
    "escaped-key": b'{\n "a\\": 1, \\"b": 2\n}\n',
    "escaped-quote-key": b'{\n "a\\"b": 1\n}\n',
    "key-with-colon": b'{\n "a": {"b": 1},\n "c": 2\n}\n',
    "space-before-colon": b'{\n "a" : 1,\n "b": 2\n}\n',
    "control-char-key": b'{\n "a\x01": 1\n}\n',
    "not-utf8": b'{\n "a": "\xff"\n}\n',
    "empty-object": b"{\n}\n",
    "not-an-object": b'{\n "a": 1\n]\n',
    "deep": b'{\n "a": ' + b"[" * 3000 + b"]" * 3000 + b"\n}\n",
    "key-only": b'{\n "a"\n}\n',
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_any_text_parses_or_fails_as_a_whole_parse(name):
    _same(SHAPES[name])
    _same(SHAPES[name])  # a second time: its sections may now be known


def test_a_section_seen_before_in_a_text_that_is_not_json_is_not_taken_for_it():
    good = serialize(_doc(1))
    _same(good)
    _same(good)
    big = json.dumps(BIG, indent=1, sort_keys=True).replace("\n", "\n ").encode()
    for bad in (b'{\n "environment": ' + big + b'\n "run_id": "x"\n}\n',  # no comma after the known section
                b'{\n "environment": ' + big + b',\n "environment": 1\n}\n',  # repeated: the last one wins
                b'{\n "environment" : ' + big + b'\n}\n'):
        _same(bad)


def test_the_caches_stay_bounded(monkeypatch):
    monkeypatch.setattr(sections, "SEEN_MAX", 8)
    monkeypatch.setattr(sections, "HOT_MAX", 4)
    for i in range(50):
        big = {"n%03d" % j: "v%d" % i for j in range(20)}
        for _ in range(2):
            assert sections.parse_manifest_text(serialize({"run_id": "r", "big": big}))["big"] == big
    assert len(sections._seen) <= 8 and len(sections._hot) <= 4
