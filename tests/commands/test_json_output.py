"""``--json`` on the commands that write or do something (generate, index, merge, restore, report, attach, rerun):
one JSON document on stdout, of the shape the guide documents, where a person gets a path or a sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.common import clean_env, git, make_repo, run_cli


def _project(tmp_path: Path) -> Path:
    """A real repo whose trainer writes its final metrics into m.json."""
    return make_repo(tmp_path / "p", {"t.py": 'import json\njson.dump({"auc": 0.9}, open("m.json", "w"))\n'})


def _generate(tmp_path: Path, *args: str, env=None) -> dict:
    repo = tmp_path / "p" if (tmp_path / "p").is_dir() else _project(tmp_path)
    res = run_cli("generate", "-q", "--json", "--output-dir", str(tmp_path / "runs"), *args, cwd=repo, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_generate_json_says_what_was_written_and_how_each_probe_fared(tmp_path):
    (tmp_path / "runs").mkdir()
    out = _generate(tmp_path, "--run-id", "r1")
    assert out["written"] is True and out["run_id"] == "r1" and out["skipped"] is None
    assert Path(out["path"]).resolve() == (tmp_path / "runs" / "manifest_r1.json").resolve()
    written = json.loads((tmp_path / "runs" / "manifest_r1.json").read_text())
    assert out["probes"] == {k: v["status"] for k, v in written["collection"]["probes"].items()}
    assert out["probes"]["git"] == "ok" and out["failed"] == []
    res = run_cli("generate", "--json", "--print", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == "" and "--json and --print" in res.stderr


def test_generate_json_on_a_rank_that_does_not_write(tmp_path):
    out = json.loads(run_cli("generate", "--json", cwd=tmp_path, env=clean_env(RANK="3")).stdout)
    assert out == {"path": None, "written": False, "run_id": None, "skipped": "another rank writes", "probes": {},
                   "failed": []}


def test_index_json_counts_each_directory(tmp_path):
    (tmp_path / "runs").mkdir()
    _generate(tmp_path, "--run-id", "r1")
    (tmp_path / "runs" / "manifest_bad.json").write_text("{")
    res = run_cli("index", "runs", "--json", cwd=tmp_path, env=clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "c")))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [{"dir": "runs", "manifests": 2, "unreadable": 1, "not_stored": []}]
    assert res.stderr == ""


def test_merge_json_names_the_merged_manifest(tmp_path):
    (tmp_path / "runs").mkdir()
    node = _generate(tmp_path, "--run-id", "r1", "--node-report")
    _generate(tmp_path, "--run-id", "r1")
    res = run_cli("merge", "r1", node["path"], "--json", "--runs", str(tmp_path / "runs"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["run_id"] == "r1" and out["fragments"] == 1 and out["nodes"] == 1 and out["heterogeneity"] == []
    assert Path(out["path"]).name == "manifest_r1.merged.json" and Path(out["path"]).is_file()


def test_restore_json_lists_each_repo_restored(tmp_path):
    (tmp_path / "runs").mkdir()
    repo = _project(tmp_path)
    (repo / "t.py").write_text("print(2)\n")
    _generate(tmp_path, "--run-id", "r1")
    res = run_cli("restore", "r1", "--into", "back", "--json", "--runs", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["into"] == "back" and out["run_id"] == "r1"
    # (PYTHONPATH names this checkout: its repo is recorded, and restored, too)
    assert {"name": "p", "path": "back/p", "commit": git(repo, "rev-parse", "HEAD").strip()} in out["repos"]
    assert [r["path"] for r in out["repos"]] == ["back/" + r["name"] for r in out["repos"]]
    assert (tmp_path / "back" / "p" / "t.py").read_text() == "print(2)\n"


def test_report_json_says_what_page_was_written(tmp_path):
    (tmp_path / "runs").mkdir()
    _generate(tmp_path, "--run-id", "r1")
    _generate(tmp_path, "--run-id", "r2")
    for args, kind, runs in ((["r1"], "run", ["r1"]), (["r1", "r2"], "diff", ["r1", "r2"]),
                             (["runs"], "runs", ["r1", "r2"])):
        res = run_cli("report", *args, "--json", "--runs", "runs", "-o", "out", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert (out["kind"], sorted(out["runs"])) == (kind, runs)
        assert out["bytes"] == (tmp_path / out["path"]).stat().st_size


def test_attach_json_gives_the_tracker_entry_recorded(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    (tmp_path / "runs").mkdir()
    _generate(tmp_path, "--run-id", "r1")
    uri = "sqlite:///%s" % (tmp_path / "mlflow.db")
    client = MlflowClient(tracking_uri=uri)
    run_id = client.create_run(client.create_experiment("e", artifact_location=str(tmp_path / "a"))).info.run_id
    res = run_cli("attach", "r1", "--mlflow", run_id, "--tracking-uri", uri, "--json", "--runs", "runs", cwd=tmp_path,
                  timeout=180)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["tool"] == "mlflow" and out["tracker"]["run_id"] == run_id
    recorded = json.loads((tmp_path / "runs" / "manifest_r1.json").read_text())
    assert recorded["lineage"]["trackers"] == [out["tracker"]]


def test_rerun_json_gives_the_script_or_the_replay_and_its_verdict(tmp_path):
    repo = _project(tmp_path)
    res = run_cli("run", "-q", "--run-id", "r1", "--output-dir", str(tmp_path / "runs"), "--metrics", "m.json", "--",
                  "python3", "t.py", cwd=repo)
    assert res.returncode == 0, res.stderr
    dry = json.loads(run_cli("rerun", "r1", "--dry-run", "--json", "--runs", "runs", cwd=tmp_path).stdout)
    assert dry["run_id"] == "r1" and dry["script"].startswith("#!/bin/sh\n")
    res = run_cli("rerun", "r1", "--confirm", "--in-place", "--json", "--runs", "runs", cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["run_id"], out["status"], out["exit_code"], out["changed"]) == ("r1", 0, 0, [])
    assert out["verdict"]["verdict"] == "reproduced" and Path(out["manifest"]).is_file()
