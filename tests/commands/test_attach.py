"""``relaxrepro attach``: a manifest attached after the fact to a W&B (offline), MLflow (SQLite) or TensorBoard run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers.common import MARKER_VAR, clean_env, pyenv_python, run_cli, survivors, validate_manifest
from tests.helpers.recording import load, make_doc, put
from tests.helpers.redact import fakes, leaked, password
from tests.helpers.trackers import run_trainer, tensorboard_texts, wandb_config

pytest.importorskip("wandb")
pytest.importorskip("mlflow")

RUN = "20260101_000000_abcdef0"


@pytest.fixture
def manifest(tmp_path) -> Path:
    doc = make_doc(RUN, code={"trainer": {"commit": "a" * 40, "dirty": False}},
                   environment={"packages_digest": "sha256:" + "b" * 64}, lineage={"group": "g"})
    validate_manifest(doc)
    return put(tmp_path / "runs", doc)


@pytest.fixture
def mlflow_run(tmp_path) -> dict:
    from mlflow import MlflowClient

    uri = "sqlite:///%s" % (tmp_path / "mlflow.db")
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("exp", artifact_location=str(tmp_path / "artifacts"))
    return {"uri": uri, "client": client, "run_id": client.create_run(exp).info.run_id}


def test_attach_to_an_mlflow_run(tmp_path, manifest, mlflow_run):
    res = run_cli("attach", str(manifest), "--mlflow", mlflow_run["run_id"], "--tracking-uri", mlflow_run["uri"])
    assert res.returncode == 0, res.stderr
    assert res.stdout == "relaxrepro attach: manifest_%s.json attached to MLflow run %s\n" % (RUN, mlflow_run["run_id"])
    doc = load(manifest)
    validate_manifest(doc)
    assert doc["lineage"]["group"] == "g"
    assert doc["lineage"]["trackers"] == [{"tool": "mlflow", "run_id": mlflow_run["run_id"], "experiment_id": "1",
                                           "tracking_uri": mlflow_run["uri"]}]
    client = mlflow_run["client"]
    tags = client.get_run(mlflow_run["run_id"]).data.tags
    assert (tags["relaxrepro.run_id"], tags["relaxrepro.commit"], tags["relaxrepro.dirty"]) == (RUN, "a" * 40, "false")
    got = client.download_artifacts(mlflow_run["run_id"], "relaxrepro/manifest_%s.json" % RUN, str(tmp_path / "d"))
    assert load(Path(got)) == doc


def test_attach_to_a_wandb_run_offline(tmp_path, manifest):
    marker = uuid.uuid4().hex
    env = clean_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true",
                    WANDB_CONFIG_DIR=str(tmp_path / "cfg"), WANDB_CACHE_DIR=str(tmp_path / "cache"),
                    WANDB_DATA_DIR=str(tmp_path / "data"), **{MARKER_VAR: marker})
    res = run_cli("attach", str(manifest), "--wandb", "team/proj/abc123", env=env, timeout=120)
    assert survivors(marker) == []  # W&B's service process ended with the command
    assert res.returncode == 0, res.stderr
    assert res.stdout.endswith("attached to W&B run team/proj/abc123\n")
    doc = load(manifest)
    assert doc["lineage"]["trackers"] == [{"tool": "wandb", "run": "team/proj/abc123"}]
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*-abc123")
    assert load(run_dir / "files" / ("manifest_%s.json" % RUN)) == doc
    assert wandb_config(str(run_dir))["relaxrepro"]["run_id"] == RUN
    # W&B cannot resume an offline run: attach says where the manifest went, as a second run of that id
    assert res.stderr.splitlines()[-1] == (
        "relaxrepro attach: note: W&B cannot resume an offline run: the manifest went into a new offline run "
        "directory with the run's id, %s (an earlier directory of the run is left as it was); upload it with "
        "`wandb sync %s`" % (run_dir, run_dir))


def test_attach_to_an_offline_run_the_api_recorded_says_it_is_a_second_directory(tmp_path):
    info = run_trainer(tmp_path, "wandb")
    first = Path(info["wandb_dir"])  # wandb/offline-run-<second>-<id>
    time.sleep(1.1)  # wandb names the directory by the second: an attach after the run is in a later one
    before = sorted(p.relative_to(first) for p in first.rglob("*"))
    env = clean_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true",
                    WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"), WANDB_CACHE_DIR=str(tmp_path / "wandb-cache"),
                    WANDB_DATA_DIR=str(tmp_path / "wandb-data"))
    res = run_cli("attach", info["path"], "--wandb", info["wandb_path"], env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    dirs = sorted(first.parent.glob("offline-run-*-%s" % info["wandb_path"].split("/")[-1]))
    assert len(dirs) == 2 and first in dirs  # W&B offline: a second directory, the first as it was
    (second,) = [d for d in dirs if d != first]
    assert sorted(p.relative_to(first) for p in first.rglob("*")) == before
    assert "went into a new offline run directory with the run's id, %s" % second in res.stderr


def test_the_wandb_path_an_offline_run_records_is_taken_back_by_attach(tmp_path, manifest):
    # Offline, with no entity, W&B's run.path (what the API records under lineage.trackers) is PROJECT/RUN_ID.
    env = clean_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true",
                    WANDB_CONFIG_DIR=str(tmp_path / "cfg"), WANDB_CACHE_DIR=str(tmp_path / "cache"),
                    WANDB_DATA_DIR=str(tmp_path / "data"))
    res = run_cli("attach", str(manifest), "--wandb", "proj/abc123", env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.endswith("attached to W&B run proj/abc123\n")
    assert load(manifest)["lineage"]["trackers"] == [{"tool": "wandb", "run": "proj/abc123"}]


def _merged(*argv: str, env: dict) -> str:
    """stdout and stderr in the order the user's terminal shows them."""
    res = subprocess.run([sys.executable, "-m", "relaxrepro", *argv], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120)
    assert res.returncode == 0, res.stdout
    return res.stdout


def test_attach_says_which_run_it_opens_before_the_slow_part(tmp_path, manifest, mlflow_run):
    out = _merged("attach", str(manifest), "--mlflow", mlflow_run["run_id"], env=clean_env(
        MLFLOW_TRACKING_URI=mlflow_run["uri"]))
    assert out.splitlines() == [
        "relaxrepro attach: opening MLflow run %s at %s" % (mlflow_run["run_id"], mlflow_run["uri"]),
        "relaxrepro attach: manifest_%s.json attached to MLflow run %s" % (RUN, mlflow_run["run_id"])]
    env = clean_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true",
                    WANDB_CONFIG_DIR=str(tmp_path / "cfg"), WANDB_CACHE_DIR=str(tmp_path / "cache"),
                    WANDB_DATA_DIR=str(tmp_path / "data"))
    lines = _merged("attach", str(manifest), "--wandb", "proj/abc123", env=env).splitlines()
    assert lines[0] == "relaxrepro attach: opening W&B run proj/abc123 (offline)"
    assert lines[-1] == "relaxrepro attach: manifest_%s.json attached to W&B run proj/abc123" % RUN


def test_attach_to_a_tensorboard_log_dir(tmp_path, manifest):
    pytest.importorskip("torch")
    logs = tmp_path / "tb"
    logs.mkdir()
    res = run_cli("attach", str(manifest), "--tensorboard", str(logs), timeout=120)
    assert res.returncode == 0, res.stderr
    doc = load(manifest)
    assert doc["lineage"]["trackers"] == [{"tool": "tensorboard", "log_dir": str(logs)}]
    assert load(logs / ("manifest_%s.json" % RUN)) == doc
    assert "| run_id | %s |" % RUN in tensorboard_texts(logs)[1]


@pytest.mark.parametrize("args, message", [
    (["--wandb", "a/team/proj/x"],
     "relaxrepro attach: error: --wandb 'a/team/proj/x': expected [ENTITY/]PROJECT/RUN_ID"),
    (["--wandb", "team//abc"], "relaxrepro attach: error: --wandb 'team//abc': expected [ENTITY/]PROJECT/RUN_ID"),
    (["--tensorboard", "nowhere"], "relaxrepro attach: error: --tensorboard nowhere: no such directory"),
    (["--tensorboard", ".", "--tracking-uri", "sqlite:///x.db"],
     "relaxrepro attach: error: --tracking-uri goes with --mlflow"),
    (["--mlflow", " "], "relaxrepro attach: error: --mlflow: expected a run id"),
], ids=["wandb-four-parts", "wandb-empty-part", "missing-log-dir", "tracking-uri-without-mlflow", "mlflow-blank"])
def test_bad_options_are_one_line_and_exit_2(tmp_path, manifest, args, message):
    before = manifest.read_bytes()
    res = run_cli("attach", str(manifest), *args, cwd=tmp_path)
    assert (res.returncode, res.stderr, res.stdout) == (2, message + "\n", "")
    assert manifest.read_bytes() == before


def test_no_target_is_a_usage_error(manifest):
    res = run_cli("attach", str(manifest))
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1] == \
        "relaxrepro attach: error: one of the arguments --wandb --mlflow --tensorboard is required"


@pytest.mark.parametrize("content, reason", [(None, "no such file"), ("{not json", "")], ids=["missing", "not-json"])
def test_an_unreadable_manifest_is_exit_2(tmp_path, content, reason):
    path = tmp_path / "manifest_x.json"
    if content is not None:
        path.write_text(content)
    res = run_cli("attach", str(path), "--tensorboard", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.startswith("relaxrepro attach: %s: " % path) and reason in res.stderr.lower()
    assert len(res.stderr.splitlines()) == 1
    assert not list(tmp_path.glob("events.*"))  # nothing opened


def test_an_unknown_mlflow_run_is_exit_2_and_the_manifest_unchanged(tmp_path, manifest, mlflow_run):
    before = manifest.read_bytes()
    res = run_cli("attach", str(manifest), "--mlflow", "0" * 32, "--tracking-uri", mlflow_run["uri"])
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1].startswith("relaxrepro attach: error: could not open the MLflow run: ")
    assert "not found" in res.stderr
    assert manifest.read_bytes() == before


def test_a_failed_upload_leaves_the_manifest_as_it_was_exit_1(tmp_path, manifest):
    from mlflow import MlflowClient

    (tmp_path / "a-file").write_text("not a directory\n")
    uri = "sqlite:///%s" % (tmp_path / "mlflow.db")
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("x", artifact_location=str(tmp_path / "a-file" / "a"))
    run_id = client.create_run(exp).info.run_id
    before = manifest.read_bytes()
    res = run_cli("attach", str(manifest), "--mlflow", run_id, "--tracking-uri", uri)
    assert res.returncode == 1
    last = res.stderr.splitlines()[-1]
    assert last.startswith("relaxrepro attach: error: MLflow: ") and last.endswith("%s left as it was" % manifest)
    assert manifest.read_bytes() == before


def test_a_tool_that_is_not_installed_is_exit_2(tmp_path, manifest):
    python = pyenv_python("3.8")  # no wandb, mlflow or torch there
    res = run_cli("attach", str(manifest), "--wandb", "team/proj/abc", python=python)
    assert (res.returncode, res.stderr) == (
        2, "relaxrepro attach: error: --wandb needs the wandb package, which is not installed here\n")
    res = run_cli("attach", str(manifest), "--tensorboard", str(tmp_path), python=python)
    assert res.stderr == ("relaxrepro attach: error: --tensorboard needs the tensorboard (with torch) or tensorboardX "
                          "package, which is not installed here\n")
    assert json.loads(manifest.read_text())["lineage"] == {"group": "g"}


# -- what a tracker is given and what attach prints: redacted again, whatever the file on disk holds --------------

def _raw_manifest(tmp_path: Path) -> tuple:
    """A manifest written by hand (or by an old version) that still holds secrets in argv, env and a patch."""
    fake = fakes()
    planted = [fake["huggingface"], fake["github-classic"], password("attach/argv"), password("attach/env"),
               password("attach/patch")]
    doc = make_doc(RUN, command={"argv": ["python", "train.py", "--hf-token", planted[0], "--password", planted[2]],
                                 "cwd": "/work", "source": "cli"},
                   code={"trainer": {"commit": "a" * 40, "dirty": True, "patch": {
                       "text": "diff --git a/.env b/.env\n--- a/.env\n+++ b/.env\n@@ -0,0 +1 @@\n+DB_PASSWORD=%s\n"
                               % planted[4]}}},
                   config={"selected_env": {"GH_TOKEN": planted[1], "RAY_REDIS_PASSWORD": planted[3]}},
                   lineage={"group": "g"})
    return put(tmp_path / "runs", doc), planted


def _none_planted(text: str, planted: list) -> None:
    for secret in planted:
        assert not leaked(secret, text, window=6), secret[:4]


def test_mlflow_gets_the_manifest_redacted_again(tmp_path, mlflow_run):
    manifest, planted = _raw_manifest(tmp_path)
    res = run_cli("attach", str(manifest), "--mlflow", mlflow_run["run_id"], "--tracking-uri", mlflow_run["uri"])
    assert res.returncode == 0, res.stderr
    got = mlflow_run["client"].download_artifacts(mlflow_run["run_id"], "relaxrepro/manifest_%s.json" % RUN,
                                                  str(tmp_path / "d"))
    _none_planted(Path(got).read_text(), planted)
    _none_planted(manifest.read_text(), planted)
    doc = load(Path(got))
    assert doc["command"]["argv"] == ["python", "train.py", "--hf-token", "<redacted>", "--password", "<redacted>"]
    assert doc["code"]["trainer"]["commit"] == "a" * 40


def test_wandb_gets_the_manifest_redacted_again(tmp_path):
    manifest, planted = _raw_manifest(tmp_path)
    env = clean_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true",
                    WANDB_CONFIG_DIR=str(tmp_path / "cfg"), WANDB_CACHE_DIR=str(tmp_path / "cache"),
                    WANDB_DATA_DIR=str(tmp_path / "data"))
    res = run_cli("attach", str(manifest), "--wandb", "team/proj/abc123", env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*-abc123")
    for path in run_dir.rglob("*"):
        if path.is_file():
            _none_planted(path.read_bytes().decode("utf-8", "replace"), planted)


def test_tensorboard_gets_the_manifest_redacted_again(tmp_path):
    pytest.importorskip("torch")
    manifest, planted = _raw_manifest(tmp_path)
    logs = tmp_path / "tb"
    logs.mkdir()
    res = run_cli("attach", str(manifest), "--tensorboard", str(logs), timeout=120)
    assert res.returncode == 0, res.stderr
    for path in logs.rglob("*"):
        if path.is_file():
            _none_planted(path.read_bytes().decode("utf-8", "replace"), planted)
    assert load(logs / ("manifest_%s.json" % RUN)) == load(manifest)


def test_a_tracking_uris_credentials_are_never_printed(tmp_path, manifest):
    with socket.socket() as s:  # a port nothing listens on: MLflow's request fails and quotes its URL
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token, key, pw = password("uri/token"), password("uri/key"), password("uri/pw")
    uri = "http://ci:%s@127.0.0.1:%d/mlflow?token=%s&api_key=%s" % (pw, port, token, key)
    before = manifest.read_bytes()
    res = run_cli("attach", str(manifest), "--mlflow", "0" * 32, "--tracking-uri", uri, timeout=120,
                  env=clean_env(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5"))
    assert res.returncode == 2
    _none_planted(res.stdout + res.stderr, [token, key, pw])
    opening, error = res.stderr.splitlines()
    assert opening == "relaxrepro attach: opening MLflow run %s at http://127.0.0.1:%d/mlflow" % ("0" * 32, port)
    assert error.startswith("relaxrepro attach: error: could not open the MLflow run: ")
    assert "http://127.0.0.1:%d/mlflow" % port in res.stderr
    assert manifest.read_bytes() == before
