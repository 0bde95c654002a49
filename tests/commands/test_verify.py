"""``relaxrepro verify`` as users see it: exit codes, JSON, run ids, bad options, hostile strings."""

from __future__ import annotations

import json
import sys

import pytest

from relaxrepro import cli
from tests.helpers.common import make_repo, run_cli
from tests.helpers.recording import load, manifests, put
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


# A trainer whose step counter starts again each epoch (5 epochs of 10 steps); --shift X adds X to the loss from
# the third epoch on, so two runs agree on their first 20 rows and part on the 30 after.
EPOCHS_TRAINER = """\
import sys
import relaxrepro

shift = float(sys.argv[sys.argv.index("--shift") + 1]) if "--shift" in sys.argv else 0.0
with relaxrepro.recorded():
    for epoch in range(5):
        for step in range(10):
            relaxrepro.trace(step, loss=1.0 / (step + 1) + (shift if epoch >= 2 else 0.0), epoch=epoch)
"""


def _recorded(project, run_dir, *args):
    res = run_cli("run", "--output-dir", run_dir, "--", sys.executable, "train.py", *args, cwd=project)
    assert res.returncode == 0, res.stderr
    found = manifests(project / run_dir)
    assert len(found) == 1, found
    return str(found[0])


def test_a_step_counter_that_starts_again_each_epoch_compares_every_row(tmp_path):
    project = make_repo(tmp_path / "proj", {"train.py": EPOCHS_TRAINER})
    a = _recorded(project, "runs/a")
    b = _recorded(project, "runs/b", "--shift", "0.5")
    c = _recorded(project, "runs/c")
    trace = load(a)["results"]["trace"]
    assert trace["steps"] == list(range(10)) * 5 and trace["values"][1] == [e for e in range(5) for _ in range(10)]
    res = run_cli("verify", a, b, cwd=project)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "diverged (bit-exact)" in res.stdout.splitlines()[0]
    assert "trace: differs, 50 rows compared, 30 differ" in res.stdout.splitlines()
    assert "  first parts at step 0 (3rd occurrence), loss: 1.0 -> 1.5 (0x1.0000000000000p+0 -> 0x1.8000000000000p+0)" \
        in res.stdout.splitlines()
    res = run_cli("verify", a, c, cwd=project)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "trace: same, 50 rows compared" in res.stdout.splitlines()


# --lr sets the result; --log-dir is where the run writes its weights (each run its own directory)
LR_TRAINER = """\
import argparse, os
import relaxrepro

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--log-dir")
args = p.parse_args()
with relaxrepro.recorded(output_dir=args.log_dir):
    w = 1.0
    for step in range(5):
        w -= args.lr * w
        relaxrepro.trace(step, loss=w)
    os.makedirs(args.log_dir, exist_ok=True)
    weights = os.path.join(args.log_dir, "weights.txt")
    with open(weights, "w") as fh:
        fh.write(repr(w))
    relaxrepro.result(metrics={"loss": w}, outputs=[weights])
"""


def test_likely_causes_name_the_changed_argument_first_and_each_runs_own_directory_last(tmp_path):
    project = make_repo(tmp_path / "proj", {"train.py": LR_TRAINER})
    a = _recorded(project, "runs/a", "--lr", "0.1", "--log-dir", "runs/a")
    b = _recorded(project, "runs/b", "--lr", "0.2", "--log-dir", "runs/b")
    res = run_cli("verify", a, b, cwd=project)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    causes = lines[lines.index("likely causes:") + 1:]
    assert causes[0] == "  - other arguments or environment: config.resolved_args.lr 0.1 -> 0.2", res.stdout
    assert causes[-1].startswith("  - paths into each run's own directory: config.resolved_args.log_dir "
                                 '"runs/a" -> "runs/b", code.proj.'), res.stdout
    assert not any("code" in line for line in causes[:-1]), res.stdout  # the runs' own files are no other code
    assert not any('["python"' in line for line in causes), res.stdout  # argv: where it differs, not a prefix
