"""Every broken manifest from the reader's list, through every reading command: one clear line on
stderr naming the problem, exit 2, nothing on stdout, nothing created."""

from __future__ import annotations

import json
import os

import pytest

from relaxrepro import cli
from tests.helpers.common import pyenv_python, run_cli
from tests.helpers.read import base_manifest

_GOOD = json.dumps(base_manifest()).encode()

BROKEN = {
    "not-json": (b"{not json", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    "not-an-object": (b"[1, 2]", "not a manifest: the top level is array, expected an object"),
    "non-utf8": (b'{"schema_version": "1.0", "x": "\xff"}', "not UTF-8: invalid byte 0xff at offset 32"),
    "utf8-bom": (b"\xef\xbb\xbf" + _GOOD,
                 "file starts with a UTF-8 byte order mark (BOM); manifests are plain UTF-8"),
    "utf16": (b"\xff\xfe{\x00}\x00", "file is UTF-16 (it starts with a byte order mark); manifests are UTF-8"),
    "nan": (b'{"schema_version": "1.0", "x": NaN}',
            "not valid JSON: NaN literal is not allowed (JSON has no NaN) in 'x'"),
    "infinity": (b'{"schema_version": "1.0", "x": -Infinity}',
                 "not valid JSON: -Infinity literal is not allowed (JSON has no -Infinity) in 'x'"),
    "nan-in-a-metric": (_GOOD.replace(b'"training": {', b'"training": {"loss": NaN, '),
                        "not valid JSON: NaN literal is not allowed (JSON has no NaN) in 'training.loss'"),
    "float-overflow": (_GOOD.replace(b'"lr": "3e-4"', b'"lr": 1e999'),
                       "number 1e999 is out of range (it would read as Infinity) in 'config.resolved_args.lr'"),
    # Python 3.11+ raised ValueError from json.loads (exit 1, "internal error"); 3.8-3.10 took it.
    "huge-int": (_GOOD.replace(b'"seed": 1234, "pythonhashseed"', b'"seed": ' + b"7" * 5000 + b', "pythonhashseed"'),
                 "integer of 5000 digits is longer than the 4300 allowed in 'seeds.seed'"),
    "wrong-type": (_GOOD.replace(b'"argv": ["python", "train.py", "--lr", "3e-4"]', b'"argv": "python train.py"'),
                   "Unexpected type string (expected array) in 'command.argv'"),
    "wrong-type-code": (_GOOD.replace(b'"dirty": false', b'"dirty": "no"'),
                        "Unexpected type string (expected boolean or null) in 'code.proj.dirty'"),
    "too-deep": (b'{"schema_version": "1.0", "a": ' + b"[" * 100 + b"]" * 100 + b"}",
                 "nesting is deeper than any manifest (over 64 levels)"),
    "empty": (b"  \n", "file is empty"),
    "major-2": (_GOOD.replace(b'"schema_version": "1.0"', b'"schema_version": "2.0"'),
                "unsupported schema_version 2.0: this relaxrepro reads 1.x"),
    "no-version": (b'{"foo": 1}', "missing schema_version"),
    "version-number": (b'{"schema_version": 1.0}', "Unexpected type float (expected string) in 'schema_version'"),
}

COMMANDS = {
    "check": lambda p, tmp: ["check", p],
    "check-json": lambda p, tmp: ["check", p, "--json"],
    "diff-old": lambda p, tmp: ["diff", p, str(tmp / "good.json")],
    "diff-new": lambda p, tmp: ["diff", str(tmp / "good.json"), p],
    "verify-old": lambda p, tmp: ["verify", p, str(tmp / "good.json")],
    "verify-new": lambda p, tmp: ["verify", str(tmp / "good.json"), p],
    "rerun-dry-run": lambda p, tmp: ["rerun", p, "--dry-run"],
    "rerun-confirm": lambda p, tmp: ["rerun", p, "--confirm"],
    "rerun-quick": lambda p, tmp: ["rerun", p, "--confirm", "--quick", "5"],
    "rerun-full": lambda p, tmp: ["rerun", p, "--confirm", "--full"],
    "restore": lambda p, tmp: ["restore", p, "--into", str(tmp / "out")],
    "report": lambda p, tmp: ["report", p, "-o", str(tmp / "out")],
    "report-against": lambda p, tmp: ["report", str(tmp / "good.json"), "--against", p, "-o", str(tmp / "out")],
    "attach": lambda p, tmp: ["attach", p, "--tensorboard", str(tmp)],
    "env": lambda p, tmp: ["env", p, "-o", str(tmp / "out")],
    "env-conda": lambda p, tmp: ["env", p, "--format", "conda"],
    "env-check": lambda p, tmp: ["env", p, "--check"],
}


def _prefix(argv):
    return "relaxrepro %s: " % argv[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_manifest(tmp_path, capsys, case, command):
    content, message = BROKEN[case]
    (tmp_path / "good.json").write_bytes(_GOOD)
    bad = tmp_path / ("%s.json" % case)
    bad.write_bytes(content)
    argv = COMMANDS[command](str(bad), tmp_path)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(_prefix(argv) + "%s: %s" % (bad, message)), err
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_missing_file_directory_and_huge_file(tmp_path, capsys, command):
    (tmp_path / "good.json").write_bytes(_GOOD)
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (10 * 1024 * 1024 + 1))
    cases = [(str(tmp_path / "nope.json"), "cannot read %s: No such file or directory" % (tmp_path / "nope.json")),
             (str(tmp_path), "%s is a directory, not a manifest file" % tmp_path),
             (str(huge), "file is 10485761 bytes, over the 10 MB limit for a manifest")]
    for path, message in cases:
        if command == "report" and path == str(tmp_path):
            continue  # report takes a directory: every run below it
        argv = COMMANDS[command](path, tmp_path)
        assert cli.main(argv) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", _prefix(argv) + "%s: %s\n" % (path, message))


def test_no_traceback_through_the_real_entry_point(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xef\xbb\xbf{")
    for argv in (["check", str(bad)], ["diff", str(bad), str(bad)], ["rerun", str(bad), "--dry-run"],
                 ["restore", str(bad), "--into", str(tmp_path / "out")]):
        res = run_cli(*argv)
        assert res.returncode == 2 and res.stdout == ""
        assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1


def test_escape_sequence_in_the_file_name_is_not_echoed_raw(tmp_path, capsys):
    bad = tmp_path / "evil\x1b[2J.json"
    assert cli.main(["diff", str(bad), str(bad)]) == 2
    _, err = capsys.readouterr()
    assert "\x1b" not in err and "evil\\x1b[2J.json" in err


# -- a FIFO or a device where a manifest belongs: refused at once, never waited on or read -----------
# Each runs as a child process: run_cli's timeout (60 s) is the hang guard, not an assertion on time.

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _not_regular(tmp_path, kind):
    (tmp_path / "good.json").write_bytes(_GOOD)
    path = tmp_path / "manifest_x.json"
    if kind == "fifo":
        os.mkfifo(str(path))
    else:
        path.symlink_to("/dev/zero")
    return path


@needs_fifo
@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero"])
@pytest.mark.parametrize("command", sorted(COMMANDS) + ["lineage"])
def test_a_fifo_or_device_is_refused_at_once(tmp_path, command, kind):
    path = _not_regular(tmp_path, kind)
    argv = ["lineage", str(path), str(tmp_path)] if command == "lineage" else COMMANDS[command](str(path), tmp_path)
    res = run_cli(*argv, cwd=tmp_path)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == _prefix(argv) + "%s: %s is not a regular file\n" % (path, path)
    assert not (tmp_path / "out").exists()


@needs_fifo
@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero"])
def test_merge_refuses_a_fifo_or_device_as_manifest_or_fragment(tmp_path, kind):
    path = _not_regular(tmp_path, kind)
    good = str(tmp_path / "good.json")
    res = run_cli("merge", str(path), good, cwd=tmp_path)
    assert (res.returncode, res.stderr) == (2, "relaxrepro merge: error: %s: %s is not a regular file\n" % (path, path))
    res = run_cli("merge", good, str(path), cwd=tmp_path)
    assert (res.returncode, res.stderr) == (2, "relaxrepro merge: error: %s: not a regular file\n" % path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json", "manifest_x.json"]


@pytest.mark.parametrize("minor", ["3.8", "3.10", "3.13"])
def test_a_huge_integer_is_refused_alike_on_every_python(tmp_path, minor):
    # 3.8-3.10 have no digit limit, 3.11+ have Python's own: the rule and the line are ours on each.
    bad = tmp_path / "bad.json"
    bad.write_bytes(BROKEN["huge-int"][0])
    res = run_cli("check", str(bad), python=pyenv_python(minor))
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == "relaxrepro check: %s: %s\n" % (bad, BROKEN["huge-int"][1])
