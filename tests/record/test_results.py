"""results: metrics as written, outputs fingerprinted through the cache, a metrics file read or refused in one line."""

from __future__ import annotations

import hashlib
import os

import pytest

from relaxrepro.record import results
from relaxrepro.record.results import fingerprint_outputs, metric_value, metrics_section, read_metrics_file


@pytest.mark.parametrize("value, written", [
    (0.91, 0.91), (3, 3), (True, 1), (float("nan"), "NaN"), (float("inf"), "Infinity"),
    (float("-inf"), "-Infinity"), ("NaN", "NaN"), (-0.0, -0.0), ("0.5", 0.5), ("high", None), (None, None),
    ([1], None),
])
def test_metric_values(value, written):
    got = metric_value(value)
    assert got == written or (got != got and written != written)
    if isinstance(written, float):
        assert str(got) == str(written)  # -0.0 keeps its sign


def test_a_metric_that_is_no_number_is_left_out_with_a_warning():
    metrics, warnings = metrics_section({"auc": 0.9, "name": object()})
    assert metrics == {"auc": 0.9}
    assert warnings == ["metric name: object is not a number; left out"]
    assert metrics_section([1, 2]) == ({}, ["metrics: expected a mapping of name to number, got list"])


def test_numpy_and_torch_metrics():
    numpy = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    assert metric_value(numpy.float32(0.5)) == 0.5 and metric_value(torch.tensor(float("nan"))) == "NaN"


def test_read_metrics_file(tmp_path):
    good = tmp_path / "m.json"
    good.write_text('{"auc": 0.9, "loss": NaN, "note": "x"}')
    assert read_metrics_file(str(good)) == ({"auc": 0.9, "loss": "NaN"},
                                            "%s: metric note: str is not a number; left out" % good)
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert read_metrics_file(str(bad))[1].startswith("%s: not JSON (Expecting property name" % bad)
    arr = tmp_path / "arr.json"
    arr.write_text("[1]")
    assert read_metrics_file(str(arr)) == ({}, "%s: expected a JSON object of name to number, got list" % arr)
    nope = tmp_path / "nope.json"
    assert read_metrics_file(str(nope)) == ({}, "%s: no such file or directory" % nope)
    assert read_metrics_file(str(tmp_path)) == ({}, "%s: is a directory" % tmp_path)


def test_outputs_file_directory_and_missing(tmp_path):
    env = {"RELAXREPRO_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "a.pt").write_bytes(b"a" * 100)
    (tmp_path / "ckpt" / "b.pt").write_bytes(b"b" * 50)
    (tmp_path / "w.bin").write_bytes(b"")
    out, warnings = fingerprint_outputs(["ckpt", "w.bin", "gone", str(tmp_path / "ckpt" / "a.pt")],
                                        cwd=str(tmp_path), env=env)
    assert out["w.bin"] == {"kind": "file", "size": 0,
                            "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
    assert out["ckpt"]["kind"] == "directory" and out["ckpt"]["files"] == 2 and out["ckpt"]["size"] == 150
    assert len(out["ckpt"]["sha256"]) == 64
    # an absolute path below cwd is recorded relative
    assert out["ckpt/a.pt"]["sha256"] == hashlib.sha256(b"a" * 100).hexdigest()
    assert out["gone"] == {"kind": "missing", "error": "not found"}
    assert warnings == ["output gone: not found"]
    again, _ = fingerprint_outputs(["ckpt"], cwd=str(tmp_path), env=env)
    assert again == {"ckpt": out["ckpt"]}
    (tmp_path / "ckpt" / "b.pt").write_bytes(b"c" * 50)
    assert fingerprint_outputs(["ckpt"], cwd=str(tmp_path), env=env)[0]["ckpt"]["sha256"] != out["ckpt"]["sha256"]


def test_an_output_outside_the_working_directory_is_recorded_absolute(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere" / "x").write_bytes(b"x")
    out, _ = fingerprint_outputs(["../elsewhere/x"], cwd=str(tmp_path / "here"),
                                 env={"RELAXREPRO_CACHE_DIR": str(tmp_path / "c")})
    assert list(out) == [os.path.join(str(tmp_path), "elsewhere", "x")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_an_unreadable_file_in_an_output_directory_leaves_no_digest(tmp_path):
    (tmp_path / "ckpt").mkdir()
    secret = tmp_path / "ckpt" / "locked.pt"
    secret.write_bytes(b"x")
    secret.chmod(0)
    out, warnings = fingerprint_outputs(["ckpt"], cwd=str(tmp_path), env={"RELAXREPRO_CACHE_DIR": str(tmp_path / "c")})
    assert "sha256" not in out["ckpt"] and out["ckpt"]["error"] == "could not read 1 path(s): locked.pt"
    assert warnings == ["output ckpt: could not read 1 path(s): locked.pt"]


def test_merge_adds_by_name_and_keeps_what_was_there():
    doc = {"results": {"metrics": {"auc": 0.9}, "trace": {"steps": [0]}}}
    results.merge(doc, metrics={"loss": 0.1}, outputs={"w": {"kind": "file"}})
    assert doc["results"] == {"metrics": {"auc": 0.9, "loss": 0.1}, "outputs": {"w": {"kind": "file"}},
                              "trace": {"steps": [0]}}
