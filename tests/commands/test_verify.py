"""``relaxrepro verify`` as users see it: exit codes, JSON, run ids, bad options, hostile strings."""

from __future__ import annotations

import json

import pytest

from relaxrepro import cli
from tests.helpers.common import run_cli
from tests.helpers.recording import put
from tests.helpers.results import pair


def _files(tmp_path, old, new):
    return str(put(tmp_path / "runs", old)), str(put(tmp_path / "runs", new))


def test_cli_exit_codes_and_json(tmp_path, capsys):
    a, b = _files(tmp_path, *pair(metrics={"auc": 0.5, "loss": 0.25}))
    assert cli.main(["verify", a, a]) == 0
    assert cli.main(["verify", a, b]) == 1
    capsys.readouterr()
    assert cli.main(["verify", a, b, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "diverged" and out["metrics"][0]["name"] == "auc"
    assert cli.main(["verify", a, b, "--rtol", "1"]) == 0


def test_cli_takes_run_ids_found_under_the_working_directory(tmp_path):
    _files(tmp_path, *pair())
    res = run_cli("verify", "old", "new", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("verify old -> new: reproduced (bit-exact)\n")
    res = run_cli("verify", "old", "nope", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro verify: error: nope: no such file, and no run id starts with it under . (name "
                          "where runs are with --runs DIR or $RELAXREPRO_RUNS)\n")


@pytest.mark.parametrize("argv, message", [
    (["--rtol", "-1"], "relaxrepro verify: error: --rtol -1.0: expected a finite number >= 0\n"),
    (["--atol", "nan"], "relaxrepro verify: error: --atol nan: expected a finite number >= 0\n"),
    (["--steps", "0"], "relaxrepro verify: error: --steps 0: expected a whole number >= 1\n"),
])
def test_cli_bad_options(tmp_path, capsys, argv, message):
    a, b = _files(tmp_path, *pair())
    assert cli.main(["verify", a, b] + argv) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", message)


def test_hostile_strings_are_escaped(tmp_path, capsys):
    evil = "ckpt\x1b[2J\nFORGED.pt"
    old, new = pair(outputs={evil: {"kind": "file", "sha256": "b\x1b]0;x\x07" + "b" * 60, "size": 1}},
                     metrics={"auc\x1b[31m": 0.5})
    old["results"]["outputs"] = {evil: {"kind": "file", "sha256": "a" * 64, "size": 1}}
    a, b = _files(tmp_path, old, new)
    assert cli.main(["verify", a, b]) == 1
    out, _ = capsys.readouterr()
    assert "\x1b" not in out and "\x07" not in out
    assert "ckpt\\x1b[2J\\nFORGED.pt" in out and not any(line.startswith("FORGED") for line in out.splitlines())
    assert cli.main(["verify", a, b, "--json"]) == 1
    assert "\x1b" not in capsys.readouterr().out
