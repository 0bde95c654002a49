"""The reader: every 1.x document, legacy forms normalised, every broken file one clear line."""

from __future__ import annotations

import errno
import json
import os
import threading

import pytest

from relaxrepro.manifest.reader import (
    ManifestError,
    ReadError,
    load_manifest,
    parse_json,
    parse_manifest,
    read_bytes,
    read_ends,
)
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
    (b'{"schema_version": "1.0", "x": NaN}', "not valid JSON: NaN literal is not allowed (JSON has no NaN) in 'x'"),
    (b'{"schema_version": "1.0", "x": -Infinity}',
     "not valid JSON: -Infinity literal is not allowed (JSON has no -Infinity) in 'x'"),
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


BIG = "7" * 5000


@pytest.mark.parametrize("text, message", [
    ('{"training": {"seed": %s}}' % BIG, "integer of 5000 digits is longer than the 4300 allowed in 'training.seed'"),
    ('{"a": [1, {"b": -%s}]}' % BIG, "integer of 5000 digits is longer than the 4300 allowed in 'a[1].b'"),
    ("[%s]" % ("9" * 4301), "integer of 4301 digits is longer than the 4300 allowed in '[0]'"),
    ('{"outcome": {"metrics": {"loss": NaN}}}',
     "not valid JSON: NaN literal is not allowed (JSON has no NaN) in 'outcome.metrics.loss'"),
    ('{"x": [Infinity]}', "not valid JSON: Infinity literal is not allowed (JSON has no Infinity) in 'x[0]'"),
    ("-Infinity", "not valid JSON: -Infinity literal is not allowed (JSON has no -Infinity)"),
    ('{"lr": 1e999}', "number 1e999 is out of range (it would read as Infinity) in 'lr'"),
    ('{"lr": -%s.5e400}' % ("1" * 30), "number -111111111...1111.5e400 is out of range (it would read as "
                                        "-Infinity) in 'lr'"),
    ('{"a": 1, "b": NaN, "c": %s}' % BIG, "not valid JSON: NaN literal is not allowed (JSON has no NaN) in 'b'"),
    ('{"a": NaN', "not JSON: Expecting ',' delimiter at line 1 column 10"),
], ids=["huge-int", "huge-negative-nested", "4301-digits", "nan", "infinity", "top-level", "float-overflow",
        "float-overflow-long", "first-in-document-order", "syntax-error-wins"])
def test_parse_json_refuses_what_no_reader_can_hold_naming_where(text, message):
    # The same on every Python: 3.8-3.10 have no int digit limit, 3.11+ raise ValueError without our hook.
    with pytest.raises(ManifestError) as err:
        parse_json(text)
    assert str(err.value) == message


def test_parse_json_takes_the_longest_integer_allowed_and_what_a_later_key_replaced():
    assert parse_json("[%s, -%s]" % ("9" * 4300, "9" * 4300)) == [10 ** 4300 - 1, 1 - 10 ** 4300]
    assert parse_json('{"a": NaN, "a": 1.5}') == {"a": 1.5}  # the document holds no NaN


def test_a_huge_integer_in_a_manifest_names_its_path():
    raw = _bytes(_doc()).replace(b'"training": {}', b'"training": {"seed": ' + BIG.encode() + b"}")
    with pytest.raises(ManifestError) as err:
        parse_manifest(raw)
    assert (str(err.value), err.value.field) == (
        "integer of 5000 digits is longer than the 4300 allowed in 'training.seed'", "training.seed")


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


def test_config_files_list_of_1_1_is_read_as_path_keyed_maps():
    # 1.0 and 1.1 wrote a list; 1.2 writes what Relax's reader requires (an object: path -> digest).
    doc = _doc(schema_version="1.1", config={"hash": "sha256:" + "0" * 64, "files": [
        {"path": "conf.yaml", "size": 6, "sha256": "ab" * 32, "content": "lr: 1\n"},
        {"path": "weights.bin", "size": 3, "sha256": "cd" * 32, "binary": True},
        {"path": "gone.yaml", "error": "no such file or directory"},
        {"size": 1}]})  # no path: no key to go under
    out, warnings = parse_manifest(_bytes(doc))
    assert out["config"] == {
        "hash": "sha256:" + "0" * 64,
        "files": {"conf.yaml": "sha256:" + "ab" * 32, "weights.bin": "sha256:" + "cd" * 32},
        "file_details": {"conf.yaml": {"size": 6}, "weights.bin": {"size": 3, "binary": True},
                         "gone.yaml": {"error": "no such file or directory"}},
        "file_contents": {"conf.yaml": "lr: 1\n"},
    }
    assert warnings == []  # our own earlier minor, not a legacy form worth a word


@pytest.mark.parametrize("files, expected", [
    ([], {}),
    ({"configs/env.yaml": "sha256:" + "ab" * 32}, {"configs/env.yaml": "sha256:" + "ab" * 32}),  # Relax's, 1.2's
    ("odd", "odd"),  # kept as found: not a form we know
], ids=["empty-list", "object", "string"])
def test_config_files_in_other_forms(files, expected):
    out, _ = parse_manifest(_bytes(_doc(config={"files": files})))
    assert out["config"] == {"files": expected}


def test_unreadable_paths(tmp_path):
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.json")
    with pytest.raises(ManifestError, match="is a directory"):
        load_manifest(tmp_path)


# -- the door: read_bytes / read_ends ---------------------------------------------------------------

def test_the_door_returns_a_file_of_exactly_the_limit_and_refuses_one_byte_more(tmp_path):
    p = tmp_path / "m.json"
    p.write_bytes(b"x" * 1000)
    assert read_bytes(p, 1000) == b"x" * 1000
    with pytest.raises(ReadError) as info:
        read_bytes(p, 999)
    assert str(info.value) == "file is 1000 bytes, over the 999-byte limit for a manifest"
    assert (info.value.reason, info.value.size, info.value.os_error) == ("too_large", 1000, None)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_the_door_reads_at_most_limit_plus_one_byte_where_stat_knows_no_size():
    # A /proc file is a regular file whose stat size is 0: only the bounded read stops it.
    with pytest.raises(ReadError) as info:
        read_bytes("/proc/self/status", 100)
    assert str(info.value) == "file is over the 100-byte limit for a manifest"
    assert (info.value.reason, info.value.size) == ("too_large", None)
    # Read past the size stat gave (none), up to the limit: the whole of it.
    assert read_bytes("/proc/self/status", 10**6).startswith(b"Name:")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_the_door_refuses_a_symlink_to_a_device_unread(tmp_path):
    # /dev/zero's stat size is 0 and it never ends: it is refused for what it is, before any read.
    link = tmp_path / "manifest_z.json"
    link.symlink_to("/dev/zero")
    for read in (lambda: read_bytes(link, 1000), lambda: read_ends(link, 1000, 10, 10)):
        with pytest.raises(ReadError) as info:
            read()
        assert str(info.value) == "%s is not a regular file" % link
        assert (info.value.reason, info.value.os_error) == ("not_regular", None)


def test_the_door_refuses_a_directory(tmp_path):
    with pytest.raises(ReadError) as info:
        read_bytes(tmp_path, 1000)
    assert str(info.value) == "%s is a directory, not a manifest file" % tmp_path
    assert info.value.reason == "os" and isinstance(info.value.os_error, IsADirectoryError)


def test_the_door_names_a_missing_file(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(ReadError) as info:
        read_bytes(missing, 1000)
    assert str(info.value) == "cannot read %s: No such file or directory" % missing
    assert info.value.reason == "os" and info.value.os_error.errno == errno.ENOENT
    assert isinstance(info.value, ManifestError)


def _feed_fifo(path) -> threading.Thread:
    def write() -> None:
        with open(path, "wb"):
            pass
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_the_door_refuses_a_fifo_without_blocking(tmp_path):
    # `relaxrepro check <(cat m.json)` or a FIFO named manifest_x.json: refused, never waited on.
    fifo = tmp_path / "m.json"
    os.mkfifo(fifo)
    box = {}

    def read() -> None:
        try:
            read_bytes(fifo, 1000)
        except ReadError as exc:
            box["error"] = exc

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # it blocked in open(): let it go before failing
        _feed_fifo(fifo).join(5)
    assert not t.is_alive(), "open() blocked on a FIFO nobody writes to"
    assert str(box["error"]) == "%s is not a regular file" % fifo
    assert (box["error"].reason, box["error"].os_error) == ("not_regular", None)


def test_read_ends_reads_a_small_file_whole_and_a_large_one_at_its_ends(tmp_path):
    p = tmp_path / "m.json"
    p.write_bytes(b"abcdefgh")
    assert read_ends(p, 1000, 4, 4) == (b"abcdefgh", None)
    assert read_ends(p, 1000, 2, 3) == (b"ab", b"fgh")
    with pytest.raises(ReadError, match="over the 7-byte limit"):
        read_ends(p, 7, 2, 3)


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
