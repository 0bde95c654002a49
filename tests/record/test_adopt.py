"""``relaxrepro run -- python train.py`` where train.py records itself: one run, one manifest."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import List

import pytest

from relaxrepro.manifest.model import CAP_BYTES
from relaxrepro.record import adopt
from tests.helpers.common import ROOT, clean_env, run_cli, validate_manifest
from tests.helpers.recording import load, make_doc, manifests, put

EXAMPLE = ROOT / "examples" / "train.py"

RECORDED = """
import argparse, logging, os, signal
import relaxrepro
logging.basicConfig(format="%(name)s: %(levelname)s: %(message)s")
p = argparse.ArgumentParser()
p.add_argument("--log-dir", default="logs")
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--late-secret", action="store_true")
p.add_argument("--kill", action="store_true")
p.add_argument("--huge", action="store_true")
args = p.parse_args()
with relaxrepro.recorded(args, output_dir=args.log_dir) as m:
    print("trainer", m.run_id, m.path)
    m["config"]["resolved_args"]["steps_done"] = 3  # known only at exit
    if args.late_secret:  # built here, so it is in no command line: only redaction can hide it
        m["config"]["resolved_args"]["wandb_api_key"] = "hunter" + "2-late"
    if args.huge:  # a vocabulary pasted into the arguments
        m["config"]["resolved_args"]["vocab"] = ["tok%d" % i for i in range(30000)]
if args.kill:  # the recorded block ended fine, then the process died
    os.kill(os.getpid(), signal.SIGKILL)
"""

API = """
import logging, os, sys
import relaxrepro
logging.basicConfig(format="%(name)s: %(levelname)s: %(message)s")
mode = sys.argv[1]
m = relaxrepro.collect_manifest({"lr": 0.5}, group="explicit" if mode == "group" else None)
if mode == "vanish":
    os.unlink(os.environ["RELAXREPRO_MANIFEST"])
first = relaxrepro.write_manifest(m, "elsewhere")
m["config"]["resolved_args"]["epochs_done"] = 2
second = relaxrepro.write_manifest(m, "elsewhere")
print("trainer", m.run_id, first, second)
"""


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def _run_manifest(stderr: str) -> Path:
    """The manifest ``relaxrepro run`` announced."""
    found = re.findall(r"^relaxrepro: manifest (\S+)$", stderr, re.M)
    assert len(found) == 1, stderr
    return Path(found[0])


def _all_manifests(root: Path) -> List[Path]:
    return sorted(root.rglob("manifest_*.json"))


def _api_warnings(stderr: str) -> List[str]:
    return [line for line in stderr.splitlines() if line.startswith("relaxrepro: WARNING:")]


def test_the_example_trainer_under_run_leaves_one_manifest(tmp_path):
    res = run_cli("run", "--output-dir", "runs", "--group", "lr", "--", sys.executable, str(EXAMPLE),
                  "--log-dir", "logs", "--lr", "0.5", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    announced = tmp_path / _run_manifest(res.stderr)
    assert _all_manifests(tmp_path) == [announced]  # none in logs/ (the trainer's output_dir), none in cwd
    assert (tmp_path / "logs" / "ckpt" / "model.txt").is_file()  # the trainer did run
    assert "(manifest %s)" % announced in res.stdout  # the trainer's manifest.path is run's file
    doc = load(announced)
    validate_manifest(doc)
    assert announced.name == "manifest_%s.json" % doc["run_id"]
    assert doc["config"]["resolved_args"] == {"fail": False, "group": None, "load": None, "log_dir": "logs",
                                              "lr": 0.5, "steps": 3}
    assert doc["config"]["resolved_args_source"] == "api"  # the trainer's args object, not argv parsing
    assert doc["command"]["source"] == "cli"  # the command run launched
    assert doc["command"]["argv"][2:] == ["--log-dir", "logs", "--lr", "0.5"]  # paths under $HOME are redacted
    assert doc["command"]["argv"][1].endswith("examples/train.py")
    assert doc["lineage"]["group"] == "lr"  # run's --group, the trainer gave none
    assert doc["collection"]["probes"]["command"]["status"] == "ok"  # run's own collection
    assert doc["collection"]["api"]["probes"]["config"]["status"] == "ok"  # the API's, inside the process
    assert (doc["outcome"]["status"], doc["outcome"]["exit_code"]) == ("ok", 0)
    assert not list((tmp_path / "runs").glob(".relaxrepro-*"))  # no temp file left behind


def test_a_trainer_that_raises_under_run(tmp_path):
    res = run_cli("run", "--output-dir", "runs", "--", sys.executable, str(EXAMPLE), "--log-dir", "logs",
                  "--fail", cwd=tmp_path)
    assert res.returncode == 1
    assert "RuntimeError: loss diverged" in res.stderr  # the trainer's traceback, untouched
    announced = tmp_path / _run_manifest(res.stderr)
    assert _all_manifests(tmp_path) == [announced]
    doc = load(announced)
    validate_manifest(doc)
    # run's exit status is final; recorded() adds what only it saw: the exception's type.
    assert doc["outcome"] == dict(doc["outcome"], status="exit", exit_code=1, exception_type="RuntimeError")
    assert "loss diverged" not in str(doc["outcome"])


def test_changes_made_inside_the_block_survive_runs_outcome_and_are_redacted(tmp_path):
    trainer = _script(tmp_path, "train.py", RECORDED)
    res = run_cli("run", "--output-dir", "runs", "--", sys.executable, str(trainer), "--late-secret", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    announced = tmp_path / _run_manifest(res.stderr)
    said = res.stdout.split()
    assert said[:3] == ["trainer", announced.name[len("manifest_"):-len(".json")], str(announced.resolve())]
    assert _all_manifests(tmp_path) == [announced]
    doc = load(announced)
    validate_manifest(doc)
    # Written by the trainer at its exit, before run added the outcome: run read the file again.
    assert doc["config"]["resolved_args"]["steps_done"] == 3
    assert doc["outcome"]["status"] == "ok"
    assert doc["config"]["resolved_args"]["wandb_api_key"] != "hunter2-late"
    assert "hunter2-late" not in announced.read_text()


def test_the_folded_manifest_stays_under_the_cap(tmp_path):
    trainer = _script(tmp_path, "train.py", RECORDED)
    res = run_cli("run", "--output-dir", "runs", "--", sys.executable, str(trainer), "--huge", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    announced = tmp_path / _run_manifest(res.stderr)
    assert announced.stat().st_size <= CAP_BYTES
    doc = load(announced)
    validate_manifest(doc)
    assert any("config.resolved_args.vocab" in line for line in doc["collection"]["truncated"])
    assert doc["config"]["resolved_args"]["steps_done"] == 3 and doc["outcome"]["status"] == "ok"


def test_runs_signal_is_final_over_the_ok_of_recorded(tmp_path):
    trainer = _script(tmp_path, "train.py", RECORDED)
    res = run_cli("run", "--output-dir", "runs", "--", sys.executable, str(trainer), "--kill", cwd=tmp_path)
    assert res.returncode == 128 + 9
    doc = load(tmp_path / _run_manifest(res.stderr))
    validate_manifest(doc)
    assert doc["outcome"] == dict(doc["outcome"], status="signal", exit_code=137, signal_name="SIGKILL")
    assert "exception_type" not in doc["outcome"]
    assert doc["config"]["resolved_args"]["steps_done"] == 3  # recorded()'s exit write happened first


def test_write_manifest_to_another_directory_still_updates_runs_manifest(tmp_path):
    trainer = _script(tmp_path, "train_api.py", API)
    res = run_cli("run", "--output-dir", "runs", "--group", "outer", "--note", "from run", "--",
                  sys.executable, str(trainer), "group", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    announced = (tmp_path / _run_manifest(res.stderr)).resolve()
    assert res.stdout.split()[2:] == [str(announced), str(announced)]  # every write returns run's file
    assert _all_manifests(tmp_path) == [announced]
    assert not (tmp_path / "elsewhere").exists()
    doc = load(announced)
    validate_manifest(doc)
    assert res.stdout.split()[1] == doc["run_id"]
    assert doc["config"]["resolved_args"] == {"epochs_done": 2, "lr": 0.5}  # each write folds again
    assert doc["lineage"] == {"group": "explicit", "note": "from run"}  # the trainer's explicit group wins
    assert doc["outcome"]["status"] == "ok"
    assert _api_warnings(res.stderr) == []


def test_a_second_recording_in_the_same_run_writes_its_own_manifest(tmp_path):
    trainer = _script(tmp_path, "train.py", RECORDED)
    twice = "%s %s --log-dir first && %s %s --log-dir second" % ((sys.executable, trainer) * 2)
    res = run_cli("run", "--output-dir", "runs", "--", "sh", "-c", twice, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    announced = tmp_path / _run_manifest(res.stderr)
    run_id = load(announced)["run_id"]
    # The pipeline's first trainer recorded into run's manifest; eval or a second trainer after it
    # is a run of its own, and says nothing about it.
    assert manifests(tmp_path / "first") == []
    second = manifests(tmp_path / "second")
    assert len(second) == 1 and load(second[0])["run_id"] != run_id
    assert "api" in load(announced)["collection"]
    assert _api_warnings(res.stderr) == []


def test_a_second_recorded_block_in_the_same_process_is_its_own_run(tmp_path):
    body = RECORDED + "\nwith relaxrepro.recorded(args, output_dir='again') as m2:\n    print('again', m2.run_id)\n"
    trainer = _script(tmp_path, "train.py", body)
    res = run_cli("run", "--output-dir", "runs", "--", sys.executable, str(trainer), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    announced = tmp_path / _run_manifest(res.stderr)
    again = manifests(tmp_path / "again")
    assert len(again) == 1 and load(again[0])["run_id"] != load(announced)["run_id"]
    assert manifests(tmp_path / "logs") == []


# -- the environment names a manifest that cannot be adopted: the trainer records alone, warns once --

def _outer(tmp_path: Path) -> Path:
    return put(tmp_path / "runs", make_doc("run-a"))


@pytest.mark.parametrize("case, warning", [
    ("mismatch", "RELAXREPRO_MANIFEST={path} holds run run-a, not RELAXREPRO_RUN_ID=run-b; "
                 "this process writes a manifest of its own"),
    ("missing", "RELAXREPRO_MANIFEST={path}: cannot read it (No such file or directory); "
                "this process writes a manifest of its own"),
    ("not-json", "RELAXREPRO_MANIFEST={path}: not a manifest (not JSON: Expecting value at line 1 column 1); "
                 "this process writes a manifest of its own"),
    ("no-run-id", "RELAXREPRO_MANIFEST={path}: not a manifest (no run_id); "
                  "this process writes a manifest of its own"),
    ("fifo", "RELAXREPRO_MANIFEST={path}: not a regular file; this process writes a manifest of its own"),
    ("run-id-unset", "RELAXREPRO_MANIFEST={path} holds run run-a, not RELAXREPRO_RUN_ID=(unset); "
                     "this process writes a manifest of its own"),
], ids=["mismatch", "missing", "not-json", "no-run-id", "fifo", "run-id-unset"])
def test_a_manifest_that_cannot_be_adopted_is_left_alone(tmp_path, case, warning):
    outer = _outer(tmp_path)
    run_id = "run-b" if case == "mismatch" else "run-a"
    if case == "missing":
        outer.unlink()
    elif case == "not-json":
        outer.write_text("not json\n")
    elif case == "no-run-id":
        outer.write_text("[1, 2]\n")
    elif case == "fifo":
        outer.unlink()
        os.mkfifo(str(outer))  # open() on it would wait for a writer forever
    before = outer.read_bytes() if outer.is_file() else None
    env = clean_env(RELAXREPRO_MANIFEST=str(outer), RELAXREPRO_RUN_ID=run_id)
    if case == "run-id-unset":
        del env["RELAXREPRO_RUN_ID"]
    t0 = time.monotonic()
    res = _python(tmp_path, RECORDED, env)
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - t0 < 60
    assert _api_warnings(res.stderr) == ["relaxrepro: WARNING: relaxrepro: " + warning.format(path=outer)]
    own = manifests(tmp_path / "logs")
    assert len(own) == 1
    doc = load(own[0])
    validate_manifest(doc)
    assert doc["run_id"] not in ("run-a", "run-b")
    assert "api" not in doc["collection"]
    assert (outer.read_bytes() if outer.is_file() else None) == before


def test_only_a_run_id_in_the_environment_changes_nothing(tmp_path):
    # An sbatch script exports RELAXREPRO_RUN_ID for generate --node-report; the API never took it.
    res = _python(tmp_path, RECORDED, clean_env(RELAXREPRO_RUN_ID="job77"))
    assert res.returncode == 0, res.stderr
    assert _api_warnings(res.stderr) == []
    own = manifests(tmp_path / "logs")
    assert len(own) == 1 and load(own[0])["run_id"] != "job77"


def test_other_ranks_do_not_adopt(tmp_path):
    outer = _outer(tmp_path)
    before = outer.read_bytes()
    body = RECORDED.replace("recorded(args, ", "recorded(args, all_ranks=True, ")
    res = _python(tmp_path, body, clean_env(RELAXREPRO_MANIFEST=str(outer), RELAXREPRO_RUN_ID="run-a", RANK="1"))
    assert res.returncode == 0, res.stderr
    assert _api_warnings(res.stderr) == []
    assert len(manifests(tmp_path / "logs")) == 1
    assert outer.read_bytes() == before


def test_a_manifest_gone_before_the_write_leaves_the_trainer_its_own(tmp_path):
    outer = _outer(tmp_path)
    res = _python(tmp_path, API, clean_env(RELAXREPRO_MANIFEST=str(outer), RELAXREPRO_RUN_ID="run-a"), "vanish")
    assert res.returncode == 0, res.stderr
    assert _api_warnings(res.stderr) == [
        "relaxrepro: WARNING: relaxrepro: could not record into %s: cannot read it (No such file or directory); "
        "writing a manifest of its own" % outer]
    own = manifests(tmp_path / "elsewhere")
    assert len(own) == 1
    doc = load(own[0])
    validate_manifest(doc)
    assert doc["run_id"] != "run-a"  # run's id stays with run's (lost) file
    assert res.stdout.split()[1:] == [doc["run_id"], "elsewhere/" + own[0].name, "elsewhere/" + own[0].name]


def test_a_hand_made_run_manifest_is_adopted_outside_run(tmp_path):
    outer = _outer(tmp_path)
    res = _python(tmp_path, RECORDED, clean_env(RELAXREPRO_MANIFEST=str(outer), RELAXREPRO_RUN_ID="run-a"))
    assert res.returncode == 0, res.stderr
    assert manifests(tmp_path / "logs") == []
    doc = load(outer)
    validate_manifest(doc)
    assert doc["run_id"] == "run-a"
    assert doc["command"] == make_doc("x")["command"]  # the outer's command line
    assert doc["outcome"]["status"] == "ok"  # recorded()'s outcome: no run to lay its own over it
    assert doc["config"]["resolved_args"]["steps_done"] == 3


def _python(tmp_path: Path, body: str, env: dict, *args: str):
    import subprocess

    script = _script(tmp_path, "train_%d.py" % len(list(tmp_path.glob("train_*.py"))), body)
    return subprocess.run([sys.executable, str(script), *args], env=env, cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=60)


# -- the fold itself: which side wins --

def test_fold_keeps_runs_command_and_collection_and_the_trainers_process_view():
    outer = make_doc(
        "r1", command={"argv": ["torchrun", "train.py"], "cwd": "/w", "source": "cli"},
        code={"proj": {"commit": "a"}, "megatron": {"commit": "m"}},  # --repo megatron=... given to run only
        config={"resolved_args": {"lr": "3e-4"}, "resolved_args_source": "argv",
                "files": {"c.yaml": "sha256:" + "c" * 64}},
        runtime={"ray": {"version": "2.9"}, "dead_nodes": [{"node_id": "x"}]},
        hardware={"gpus": [{"name": "H100"}]},
        collection={"probes": {"git": {"status": "ok"}},
                    "truncated": ["config.file_contents.c.yaml dropped (9000 characters)"],
                    "tool": {"name": "relaxrepro"}})
    inner = make_doc(
        "r1", generated_at="2026-01-01T01:00:00Z",
        command={"argv": ["python", "train.py"], "cwd": "/w", "source": "api"},
        code={"proj": {"commit": "a", "dirty": True}},
        config={"resolved_args": {"lr": 0.0003, "steps": 10}, "resolved_args_source": "api"},
        runtime={"ray": {"version": "2.9", "address_source": "live"}},
        hardware={},
        seeds={"seed": 7},
        collection={"probes": {"ray_live": {"status": "ok"}}, "seconds": 0.2, "tool": {"name": "relaxrepro"}})
    doc = adopt.fold(outer, inner)
    assert doc["generated_at"] == outer["generated_at"]
    assert doc["command"] == outer["command"]
    assert doc["code"] == {"proj": {"commit": "a", "dirty": True}, "megatron": {"commit": "m"}}
    assert doc["config"] == {"resolved_args": {"lr": 0.0003, "steps": 10}, "resolved_args_source": "api",
                             "files": {"c.yaml": "sha256:" + "c" * 64}}
    assert doc["runtime"] == inner["runtime"]  # whole: run's stale dead_nodes do not come back
    assert doc["hardware"] == outer["hardware"]  # an empty section of the trainer's erases nothing
    assert doc["seeds"] == {"seed": 7}
    assert doc["collection"] == {"probes": {"git": {"status": "ok"}}, "tool": {"name": "relaxrepro"},
                                 "api": {"probes": {"ray_live": {"status": "ok"}}, "seconds": 0.2}}


def test_the_fold_is_redacted_with_the_policy_the_trainers_manifest_was_collected_with(tmp_path):
    from relaxrepro.manifest.model import Manifest
    from relaxrepro.manifest.redact import Redactor

    outer = make_doc("r1")
    path = put(tmp_path, outer)
    # A home outside /home/<user>, changed by the trainer after collection: only its own policy knows it.
    inner = Manifest(make_doc("r1", training={"checkpoint_dir": "/data/users/carol/ckpt"}))
    inner.redacted_by = Redactor(home="/data/users/carol")
    assert adopt.write(adopt.Outer(str(path), "r1", outer), inner, first=True) == (str(path), None)
    assert load(path)["training"]["checkpoint_dir"] == "<HOME>/ckpt"
