"""A row read the fast way (sections shared between runs, values derived from them remembered, a C encoder made
once) is the row read the plain way: the whole text parsed by the reader, nothing shared, ``json``'s encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relaxrepro.manifest import runrow, sections
from relaxrepro.manifest.runrow import STORED, read_row
from relaxrepro.manifest.summary import ls_cells
from relaxrepro.std.text import safe_text
from tests.helpers.recording import make_doc, put
from tests.manifest.test_runindex import _tree

_HW = {"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3", "driver_version": "550.54", "cuda_version": "12.4",
       "gpus": [{"model": "H100", "name": "gpu0", "uuid": "u"}, "not a dict"], "cpu": {"cores": 64}}
_ENV = {"packages": {"torch": "2.3.0", "numpy": "1.26.4", "Flash_Attn": "2.5"}, "key_packages": {"torch": "2.3.0"},
        "packages_digest": "sha256:" + "e" * 64}


def _odd(directory: Path) -> None:
    """Runs that share big sections (so the second of each reads them shared) beside every odd shape."""
    shapes = {
        "plain": {},
        "no-sections": {"code": None, "hardware": None, "environment": None, "config": None},
        "lists": {"code": [1, 2], "hardware": ["gpu"], "lineage": ["g"], "outcome": [0], "training": ["x"],
                  "results": {"metrics": [0.5]}, "config": {"resolved_args": [1]}, "data": {"inputs": {"a": 1}}},
        "wrong-types": {"lineage": {"group": 7, "parent": {"run_id": 12}, "note": ["n"]},
                        "outcome": {"status": "signal", "signal": 9, "exit_code": -9},
                        "hardware": {"gpu": {"count": "2", "model": "A100"}}, "training": {"algo": 3},
                        "results": {"metrics": {"auc": True, "loss": "NaN", "x": "Infinity", "y": "-1e999",
                                                "z": None, "w": 10 ** 30, "v": "abc"}}},
        "non-ascii": {"lineage": {"group": "gr\u00fcn\u2028\u202e", "note": "\u00e9t\u00e9 \U0001f600"},
                      "code": {"r\u00e9po": {"commit": "\u00e9" * 40, "dirty": True, "patch": {"sha256": "p" * 64}}},
                      "training": {"algorithm": "ppo\tv2"}},
        "dirty-incomplete": {"code": {"a": {"commit": "a" * 40, "dirty": True, "patch": {"sha256": "p" * 64,
                                                                                     "truncated": True}},
                                      "b": {"commit": "b" * 40, "dirty": False}}},
        "args": {"config": {"hash": "sha256:" + "c" * 64, "resolved_args": {
            "lr": 3e-4, "opt": {"name": "adam", "betas": [0.9, 0.99]}, "flag": True, "none": None, "n": "12",
            "big": 10 ** 400, "text": "\u00fc"}}},
        "relax": {"relax": {"driver_version": "550", "gpus": 4}, "hardware": {"gpu_count": 4}},
    }
    for name, extra in shapes.items():
        for copy in ("a", "b"):
            doc = make_doc("%s-%s" % (name, copy), hardware=dict(_HW), environment=dict(_ENV),
                           code={"repo": {"commit": "0" * 40, "dirty": False}}, lineage={"group": name},
                           outcome={"status": "ok", "exit_code": 0}, results={"metrics": {"auc": 0.9}})
            doc.update(extra)
            put(directory / name, {k: v for k, v in doc.items() if v is not None})
    bare = directory / "bare"
    bare.mkdir()
    (bare / "manifest_nan.json").write_text('{"schema_version": "1.0", "run_id": "nan", "results": '
                                            '{"metrics": {"auc": NaN}}}')
    (bare / "manifest_flat.json").write_text(json.dumps(make_doc("flat", hardware=_HW, environment=_ENV)))
    (bare / "manifest_trailing.json").write_bytes(put(bare, make_doc("t", hardware=_HW)).read_bytes()
                                                  .replace(b"\n}\n", b",\n}\n"))
    (bare / "manifest_twice.json").write_bytes(put(bare, make_doc("tw", hardware=_HW)).read_bytes()
                                               .replace(b'{\n "', b'{\n "run_id": "x",\n "', 1))
    (bare / "manifest_not_json.json").write_bytes(b'{\n "run_id": "r",\n "schema_version": \n}\n')
    (bare / "manifest_latin1.json").write_bytes(b'{\n "run_id": "\xe9",\n "schema_version": "1.0"\n}\n')


def _fields(row_pkgs) -> tuple:
    row, pkgs = row_pkgs
    return tuple(getattr(row, k) for k in STORED) + (row.cacheable, row.terms, pkgs)


def _plain(monkeypatch, path: str) -> tuple:
    """``read_row`` with the text parsed whole, no section shared, the plain encoder, each cell through
    ``safe_text`` (what it gives of a printable text is that text)."""
    with monkeypatch.context() as m:
        m.setattr(sections, "_by_section", lambda raw: None)
        m.setattr(runrow, "shared", lambda value: False)
        m.setattr(runrow, "ls_cells", lambda doc, run_id, gpu=None: [safe_text(c) for c in ls_cells(doc, run_id)])
        m.setattr(runrow, "_ENCODE", json.JSONEncoder(separators=(",", ":")).encode)
        for cache in ("_SETS", "_BY_SECTION", "_BY_PART", "_BY_MACHINE"):
            m.setattr(runrow, cache, {})
        return _fields(read_row(path, facts=True))


@pytest.fixture
def paths(tmp_path) -> list:
    _odd(tmp_path / "odd")
    found = sorted(str(p) for p in _tree(tmp_path).rglob("*.json")) + sorted(
        str(p) for p in (tmp_path / "odd").rglob("*.json"))
    assert len(found) == 30
    return found


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN, and of the same types and key order all the way down."""
    return repr(a) == repr(b)


def test_rows_read_with_shared_sections_are_the_rows_read_whole(paths, monkeypatch):
    want = [_plain(monkeypatch, p) for p in paths]
    for _ in range(3):  # cold, then with every big section seen twice (shared), then again
        got = [_fields(read_row(p, facts=True)) for p in paths]
        bad = [p for p, a, b in zip(paths, got, want) if not _same(a, b)]
        assert bad == []
    assert any(r[-2] is not None for r in want) and any(r[5] is not None for r in want)  # facts, and errors


def test_the_encoder_writes_what_json_writes():
    plain = json.JSONEncoder(separators=(",", ":")).encode
    for value in ({"a": [1.5, float("nan"), float("-inf"), 10 ** 30, True, None]}, ["\u00e9\u2028\ud800", {}],
                  {"k": {"x": "y\n"}}, [], 0.1 + 0.2):
        assert runrow._ENCODE(value) == plain(value)
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        runrow._ENCODE({"a": {1}})


def test_a_member_without_its_comma_or_a_comma_after_the_last_is_parsed_whole():
    good = b'{\n "a": {\n  "x": 1\n },\n "b": 2\n}\n'
    assert type(sections.parse_manifest_text(good)) is sections.Sectioned
    for bad in (good.replace(b" },", b" }"), good.replace(b"2\n}", b"2,\n}")):
        assert sections._by_section(bad) is None
