"""The reader: every 1.x document, legacy forms normalised, every broken file one clear line."""

from __future__ import annotations

import json

import pytest

from relaxrepro.manifest.reader import ManifestError, load_manifest, parse_manifest
from tests.helpers.common import run_cli

MINIMAL = {
    "schema_version": "1.0", "run_id": "20260805_143025_9fc8093", "generated_at": "2026-08-05T14:30:25Z",
    "command": {"argv": ["python", "train.py"], "cwd": "."}, "code": {}, "config": {}, "environment": {},
    "hardware": {}, "runtime": {}, "training": {}, "collection": {},
}


def _doc(**changes):
    doc = json.loads(json.dumps(MINIMAL))
    doc.update(changes)
    return doc


def _bytes(doc) -> bytes:
    return json.dumps(doc).encode()


def test_reads_v1_and_keeps_unknown_fields():
    doc, warnings = parse_manifest(_bytes(_doc(future_section={"x": 1}, schema_version="1.7")))
    assert doc["future_section"] == {"x": 1} and warnings == []


def test_the_shape_users_already_know():
    known = {"schema_version": "1.0", "run_id": "20260805_143025_9fc8093", "generated_at": "2026-08-05T14:30:25Z",
             "command": {"argv": ["python", "relax/entrypoints/train.py", "--algorithm", "grpo"], "cwd": "."},
             "code": {"relax": {"commit": "1c8e2fb98b7af3e1e86263ccd1f375e4d833b217",
                                "branch": "Reproducibility-Bundle", "dirty": False}},
             "config": {"resolved_args": {"tensor_model_parallel_size": 1}}, "environment": {"python_version": "3.12.3",
             "packages": {"torch": "2.11.0+cu129"}}, "hardware": {"gpu_model": "NVIDIA A100-PCIE-40GB"},
             "runtime": {"mode": "single_node_ray", "node_count": 1, "nodes": [{"role": "head"}]},
             "training": {"algorithm": "grpo"}}
    doc, _ = parse_manifest(_bytes(known))
    assert doc["code"]["relax"]["branch"] == "Reproducibility-Bundle"


@pytest.mark.parametrize("raw, message", [
    (b"{not json", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    (b"[1, 2]", "not a manifest: the top level is array, expected an object"),
    (b"\xef\xbb\xbf{}", "file starts with a UTF-8 byte order mark (BOM); manifests are plain UTF-8"),
    (b'{"a": "\xff"}', "not UTF-8: invalid byte 0xff at offset 7"),
    (b"", "file is empty"),
    (b'{"schema_version": "1.0", "x": NaN}', "not valid JSON: NaN literal is not allowed (JSON has no NaN)"),
    (b'{"schema_version": "1.0", "x": -Infinity}',
     "not valid JSON: -Infinity literal is not allowed (JSON has no -Infinity)"),
    (b'{"schema_version": "2.0"}', "unsupported schema_version 2.0: this relaxrepro reads 1.x"),
    (b'{"schema_version": 1}', "Unexpected type int (expected string) in 'schema_version'"),
    (b'{"run_id": "x"}', "missing schema_version"),
    (b'{"schema_version": "one"}', "malformed schema_version 'one' (expected MAJOR.MINOR)"),
], ids=["not-json", "array", "bom", "non-utf8", "empty", "nan", "infinity", "v2", "version-int", "no-version",
        "version-garbage"])
def test_broken_files_one_clear_line(raw, message):
    with pytest.raises(ManifestError) as err:
        parse_manifest(raw)
    assert str(err.value) == message


@pytest.mark.parametrize("change, message", [
    ({"command": {"argv": ["python", 3]}}, "Unexpected type int (expected string) in 'command.argv[1]'"),
    ({"command": []}, "Unexpected type array (expected object) in 'command'"),
    ({"code": {"relax": {"commit": 12}}}, "Unexpected type int (expected string or null) in 'code.relax.commit'"),
    ({"code": {"relax": {"dirty": "no"}}}, "Unexpected type string (expected boolean or null) in 'code.relax.dirty'"),
    ({"runtime": {"nodes": {}}}, "Unexpected type object (expected array) in 'runtime.nodes'"),
    ({"run_id": None}, "Unexpected type null (expected string) in 'run_id'"),
])
def test_wrong_types_name_the_dotted_path(change, message):
    with pytest.raises(ManifestError) as err:
        parse_manifest(_bytes(_doc(**change)))
    assert str(err.value) == message
    assert err.value.field == message.split("'")[-2]


def test_nesting_deeper_than_any_manifest():
    deep: dict = {}
    node = deep
    for _ in range(100):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ManifestError, match=r"nesting is deeper than any manifest \(over 64 levels\)"):
        parse_manifest(_bytes(_doc(config=deep)))
    with pytest.raises(ManifestError, match="nesting is deeper"):
        parse_manifest(b"[" * 100000 + b"]" * 100000)


def test_over_10_mb(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b'{"pad": "' + b"x" * (10 * 1024 * 1024) + b'"}')
    with pytest.raises(ManifestError, match="over the 10 MB limit"):
        load_manifest(p)


def test_legacy_cli_args_become_command_argv():
    doc = _doc()
    del doc["command"]
    doc["cli_args"] = ["python", "train.py", "--lr", "3e-4"]
    out, warnings = parse_manifest(_bytes(doc))
    assert out["command"]["argv"] == ["python", "train.py", "--lr", "3e-4"] and "cli_args" not in out
    assert warnings == ["legacy field cli_args read as command.argv"]


def test_legacy_flat_tracker_record():
    flat = {"experiment_name": "grpo-qwen", "git_commit": "1c8e2fb98b7af3e1e86263ccd1f375e4d833b217",
            "has_uncommitted_changes": True, "python_version": "3.10.12", "hyperparams": {"lr": 0.001},
            "seed": 42, "metrics": {"loss": 0.5}, "cli_args": ["train.py"]}
    doc, warnings = parse_manifest(_bytes(flat))
    assert warnings == ["legacy flat record without schema_version read as a v1 manifest"]
    assert doc["schema_version"] == "1.0" and doc["run_id"].startswith("legacy_")
    assert doc["code"]["main"] == {"commit": flat["git_commit"], "dirty": True}
    assert doc["environment"]["python_version"] == "3.10.12"
    assert doc["config"]["resolved_args"] == {"lr": 0.001}
    assert doc["seeds"] == {"seed": 42} and doc["outcome"] == {"metrics": {"loss": 0.5}}
    assert doc["training"]["experiment_name"] == "grpo-qwen" and doc["command"]["argv"] == ["train.py"]


def test_unreadable_paths(tmp_path):
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.json")
    with pytest.raises(ManifestError, match="is a directory"):
        load_manifest(tmp_path)


def test_load_manifest_returns_manifest_with_path(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps(MINIMAL))
    m = load_manifest(p)
    assert m.run_id == "20260805_143025_9fc8093" and m.path == str(p)


def test_cli_never_shows_a_traceback_on_unknown_input():
    for argv in (["frobnicate"], ["generate", "--no-such-flag"], []):
        res = run_cli(*argv)
        assert res.returncode == 2, argv
        assert "Traceback" not in res.stderr and res.stderr.strip()
