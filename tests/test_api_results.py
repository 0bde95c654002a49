"""The trainer's side of results: trace(), should_stop(), result(), recorded(metrics=, outputs=), and a quick
replay's stop, through real trainer processes."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import relaxrepro
from relaxrepro import api
from tests.helpers.common import clean_env, run_cli, validate_manifest
from tests.helpers.recording import load, manifests

TRAINER = """
import json, os, sys
import pytest

import relaxrepro

metrics = {}
with relaxrepro.recorded({"seed": 1}, output_dir="runs", metrics=metrics, outputs=["ckpt"]) as m:
    os.makedirs("ckpt", exist_ok=True)
    for step in range(120):
        relaxrepro.trace(step, loss=1.0 / (step + 1), lr=3e-4)
    with open("ckpt/w.bin", "wb") as fh:
        fh.write(b"weights")
    metrics["auc"] = 0.875
    metrics["ppl"] = float("inf")
print("finished")
"""


def _trainer(tmp_path: Path, body: str = TRAINER, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, "train.py"], cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=120, env=clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"), **env))


def test_recorded_writes_metrics_outputs_and_trace_with_the_outcome(tmp_path):
    res = _trainer(tmp_path)
    assert res.returncode == 0 and res.stdout == "finished\n", res.stderr
    (path,) = manifests(tmp_path / "runs")
    doc = load(path)
    validate_manifest(doc)
    results = doc["results"]
    assert results["metrics"] == {"auc": 0.875, "ppl": "Infinity"}
    assert results["outputs"]["ckpt"]["kind"] == "directory" and results["outputs"]["ckpt"]["files"] == 1
    trace = results["trace"]
    assert trace["names"] == ["loss", "lr"] and trace["calls"] == 120 and trace["last_step"] == 119
    assert trace["steps"] == list(range(50)) + list(range(50, 120, 10))
    assert float.fromhex(trace["values"][0][3]) == 1.0 / 4
    assert doc["outcome"]["status"] == "ok"


def test_max_steps_ends_the_run_cleanly_after_that_step(tmp_path):
    res = _trainer(tmp_path, RELAXREPRO_MAX_STEPS="5")
    assert res.returncode == 0 and res.stdout == ""  # nothing after the loop ran
    assert "relaxrepro: stopping after step 5 (RELAXREPRO_MAX_STEPS=5)" in res.stderr
    doc = load(manifests(tmp_path / "runs")[0])
    assert doc["outcome"]["status"] == "ok" and doc["outcome"]["exit_code"] == 0
    trace = doc["results"]["trace"]
    assert trace["steps"] == [0, 1, 2, 3, 4, 5] and trace["stopped_at"] == 5 and trace["max_steps"] == 5


def test_every_rank_stops_even_where_no_manifest_is_recorded(tmp_path):
    res = _trainer(tmp_path, RELAXREPRO_MAX_STEPS="3", RANK="1")
    assert res.returncode == 0 and res.stdout == ""
    assert not (tmp_path / "runs").exists()


def test_should_stop_lets_the_trainer_leave_the_loop_itself(tmp_path):
    body = """
    import relaxrepro
    with relaxrepro.recorded({}, output_dir="runs") as m:
        step = 0
        while not m.should_stop(step) and not relaxrepro.should_stop(step):
            relaxrepro.trace(step, loss=float(step))
            step += 1
    print("left at", step)
    """
    res = _trainer(tmp_path, body, RELAXREPRO_MAX_STEPS="4")
    assert res.returncode == 0 and res.stdout == "left at 4\n", res.stderr
    assert load(manifests(tmp_path / "runs")[0])["results"]["trace"]["steps"] == [0, 1, 2, 3]


def test_without_recorded_the_last_collected_manifest_gets_them_at_exit(tmp_path):
    body = """
    import relaxrepro
    m = relaxrepro.collect_manifest({"seed": 3})
    relaxrepro.write_manifest(m, "runs")
    for step in range(3):
        relaxrepro.trace(step, loss=0.5)
    relaxrepro.result(metrics={"auc": 0.5})
    """
    res = _trainer(tmp_path, body)
    assert res.returncode == 0, res.stderr
    doc = load(manifests(tmp_path / "runs")[0])
    assert doc["results"]["metrics"] == {"auc": 0.5} and doc["results"]["trace"]["steps"] == [0, 1, 2]
    assert "outcome" not in doc


def test_run_outputs_and_metrics_join_the_trainers_own_results(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAINER) + textwrap.dedent("""
    json.dump({"val_auc": 0.8, "val_loss": float("nan")}, open("metrics.json", "w"))
    """))
    env = clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))
    res = run_cli("run", "-q", "--output-dir", "runs", "--outputs", "ckpt/w.bin", "--metrics", "metrics.json",
                  "--", sys.executable, "train.py", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    (path,) = manifests(tmp_path / "runs")  # one run, one manifest
    results = load(path)["results"]
    assert results["metrics"] == {"auc": 0.875, "ppl": "Infinity", "val_auc": 0.8, "val_loss": "NaN"}
    assert set(results["outputs"]) == {"ckpt", "ckpt/w.bin"} and results["trace"]["calls"] == 120


def test_run_with_a_bad_metrics_file_warns_once_and_keeps_the_commands_status(tmp_path):
    (tmp_path / "m.json").write_text("{broken")
    res = run_cli("run", "-q", "--output-dir", "runs", "--metrics", "m.json", "--outputs", "none",
                  "--", sys.executable, "-c", "raise SystemExit(3)", cwd=tmp_path,
                  env=clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache")))
    assert res.returncode == 3
    lines = [line for line in res.stderr.splitlines() if "warning" in line]
    assert lines == ["relaxrepro run: warning: --metrics m.json: not JSON (Expecting property name enclosed in "
                     "double quotes: line 1 column 2 (char 1))",
                     "relaxrepro run: warning: output none: not found"]
    doc = load(manifests(tmp_path / "runs")[0])
    assert doc["results"] == {"outputs": {"none": {"kind": "missing", "error": "not found"}}}
    assert doc["outcome"]["exit_code"] == 3


def test_output_paths_are_redacted(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "ckpt").mkdir(parents=True)
    (home / "ckpt" / "w").write_bytes(b"w")
    work.mkdir()
    env = clean_env(HOME=str(home), RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))
    res = run_cli("run", "-q", "--output-dir", "runs", "--outputs", str(home / "ckpt"), "--", sys.executable,
                  "-c", "pass", cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    assert list(load(manifests(work / "runs")[0])["results"]["outputs"]) == ["<HOME>/ckpt"]


def test_without_a_manifest_trace_and_result_do_nothing(monkeypatch):
    monkeypatch.delenv("RELAXREPRO_MAX_STEPS", raising=False)
    monkeypatch.setattr(api, "_last", None)
    relaxrepro.trace(0, loss=1.0)
    assert relaxrepro.result(metrics={"auc": 1.0}) is None
    assert relaxrepro.should_stop(10 ** 9) is False


def test_result_into_a_given_manifest_returns_the_section(tmp_path, monkeypatch):
    from relaxrepro.manifest.model import Manifest

    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w").write_bytes(b"w")
    m = Manifest(run_id="x")
    section = relaxrepro.result(metrics={"auc": float("nan")}, outputs="w", manifest=m)
    assert section == m["results"] == {"metrics": {"auc": "NaN"}, "outputs": {"w": {
        "kind": "file", "size": 1, "sha256": hashlib.sha256(b"w").hexdigest()}}}


FORKING = """
import multiprocessing, os, sys, time
from relaxrepro import api
import relaxrepro

def worker():
    time.sleep(1)  # the parent has written its outcome by now: whatever the child writes would stay
    relaxrepro.trace(0, loss=999.0)  # into a copy of the parent's manifest: never written
    relaxrepro.result({"child": 1})
    relaxrepro.write_manifest(api.current_manifest())

with relaxrepro.recorded({"seed": 1}, output_dir="runs", metrics={"parent": 2}):
    relaxrepro.trace(0, loss=0.5)
    if "{how}" == "fork":
        pid = os.fork()
        if pid == 0:
            worker()
            sys.exit(7)  # leaves the block in the child: its exit, not the run's
    else:
        multiprocessing.get_context("fork").Process(target=worker).start()  # joined at exit
    relaxrepro.trace(1, loss=0.25)
print("finished")
"""


@pytest.mark.parametrize("how", ["fork", "multiprocessing"])
def test_a_process_forked_inside_recorded_does_not_write_the_run(tmp_path, how):
    res = _trainer(tmp_path, FORKING.replace("{how}", how))  # returns once the child has closed its stdout
    assert res.returncode == 0 and res.stdout == "finished\n", res.stderr
    assert "Traceback" not in res.stderr
    (path,) = manifests(tmp_path / "runs")
    doc = load(path)
    validate_manifest(doc)
    assert doc["outcome"]["status"] == "ok"
    assert doc["results"]["metrics"] == {"parent": 2}
    trace = doc["results"]["trace"]
    assert (trace["steps"], trace["calls"]) == ([0, 1], 2)
    assert [float.fromhex(v) for v in trace["values"][0]] == [0.5, 0.25]


HUGE = """
import relaxrepro

with relaxrepro.recorded({"seed": 1}, output_dir="runs", metrics={"m": 10**5000, "ok": 1}):
    relaxrepro.trace(0, loss=0.5)
    relaxrepro.trace(1, loss=-10**5000)
print("finished")
"""


def test_an_integer_too_large_for_json_costs_the_run_nothing_but_a_warning(tmp_path):
    res = _trainer(tmp_path, HUGE)
    assert res.returncode == 0 and res.stdout == "finished\n", res.stderr
    (path,) = manifests(tmp_path / "runs")
    doc = load(path)
    validate_manifest(doc)
    assert doc["outcome"]["status"] == "ok"
    big = "<int of 16610 bits, sha256 %s>" % hashlib.sha256((10**5000).to_bytes(2077, "big")).hexdigest()[:16]
    assert doc["results"]["metrics"] == {"m": big, "ok": 1}
    assert doc["results"]["trace"]["values"] == [["0x1.0000000000000p-1", "<-" + big[1:]]]
    assert "relaxrepro: trace: an integer too large to write as a number is recorded as <-int of 16610 bits" \
        in res.stderr
    assert "metric m: an integer too large to write as a number is recorded as <int of 16610 bits" in res.stderr


BIG_OUTPUT = """
import os
import relaxrepro

with open("big.bin", "wb") as fh:
    fh.truncate(8 << 30)  # 8 GiB, sparse: seconds of sha256, no disk
with relaxrepro.recorded({"seed": 1}, output_dir="runs", outputs=["big.bin"], metrics={"auc": 0.5}):
    relaxrepro.trace(0, loss=0.5)
    open("ended", "w").close()
"""


def test_sigterm_while_the_outputs_are_hashed_keeps_the_outcome_and_trace(tmp_path):
    (tmp_path / "train.py").write_text(BIG_OUTPUT)
    child = subprocess.Popen([sys.executable, "train.py"], cwd=str(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache")))
    deadline = time.monotonic() + 60
    while not (tmp_path / "ended").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # hashing the 8 GiB now
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM
    doc = load(manifests(tmp_path / "runs")[0])
    validate_manifest(doc)
    assert doc["outcome"]["status"] == "ok"
    assert doc["results"]["trace"]["steps"] == [0] and doc["results"]["metrics"] == {"auc": 0.5}
    assert doc["results"]["outputs"] == {
        "big.bin": {"kind": "file", "error": "not hashed: relaxrepro ended before the digest was taken"}}


def test_trace_and_result_outside_recorded_warn_once(tmp_path):
    body = """
    import relaxrepro
    for step in range(3):
        relaxrepro.trace(step, loss=1.0)
    print(relaxrepro.result(metrics={"auc": 0.5}))
    """
    res = _trainer(tmp_path, body)
    assert res.returncode == 0 and res.stdout == "None\n", res.stderr
    assert res.stderr == ("relaxrepro: trace() called outside recorded(): nothing is recorded (open a "
                          "`with relaxrepro.recorded(...)` block, or call collect_manifest first)\n")
    assert not (tmp_path / "runs").exists()
    quiet = _trainer(tmp_path, body, RANK="1")  # a rank that records nothing expects nothing
    assert quiet.returncode == 0 and quiet.stderr == ""
