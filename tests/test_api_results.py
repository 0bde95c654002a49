"""The trainer's side of results: trace(), should_stop(), result(), recorded(metrics=, outputs=), and a quick
replay's stop, through real trainer processes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import relaxrepro
from relaxrepro import api
from tests.helpers.common import clean_env, run_cli, validate_manifest
from tests.helpers.recording import load, manifests

TRAINER = """
import json, os, sys
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
