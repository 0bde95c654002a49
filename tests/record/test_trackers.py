"""Attaching the manifest to W&B, MLflow and TensorBoard runs: the pure parts here, the real libraries (W&B
offline, MLflow on SQLite, torch's SummaryWriter) in a trainer run as a child process."""

from __future__ import annotations

import json
import logging
import sys
import threading
import types
from pathlib import Path

import pytest

import relaxrepro
from relaxrepro import api
from relaxrepro.collect.context import policy_of
from relaxrepro.manifest import redact
from relaxrepro.record import trackers
from tests.helpers.common import make_repo, validate_manifest
from tests.helpers.recording import load
from tests.helpers.redact import fakes, leaked, password, wandb_legacy
from tests.helpers.trackers import run_trainer, tensorboard_texts, wandb_config

pytest.importorskip("wandb")
pytest.importorskip("mlflow")


def _policy() -> redact.Redactor:
    return policy_of({})


# -- pure parts ------------------------------------------------------------------------------------


def test_a_trackers_error_message_loses_the_credentials_of_the_urls_it_quotes():
    msg = "API request to https://bob:hunter2@mlflow.example.com/api/2.0/runs failed"
    assert trackers.scrub(msg) == "API request to https://mlflow.example.com/api/2.0/runs failed"


@pytest.mark.parametrize("flag, env, on", [
    (None, {}, True), (None, {"RELAXREPRO_INTEGRATIONS": "0"}, False),
    (None, {"RELAXREPRO_INTEGRATIONS": "off"}, False),
    (None, {"RELAXREPRO_INTEGRATIONS": "1"}, True), (False, {}, False), (True, {"RELAXREPRO_INTEGRATIONS": "0"}, True),
], ids=["default", "env-0", "env-off", "env-1", "argument-off", "argument-wins-over-env"])
def test_integrations_switch(flag, env, on):
    assert trackers.enabled(flag, env) is on


def test_nothing_is_found_in_a_process_without_trackers():
    assert trackers.find({"json": json}, sys._getframe(), None) == []


def test_a_writer_given_explicitly_is_the_one_attached(tmp_path):
    writer = SummaryWriter(str(tmp_path / "tb"))
    (found,) = trackers.find({}, sys._getframe(), writer)
    assert (found.tool, found.entry, found.handle) == (
        "tensorboard", {"tool": "tensorboard", "log_dir": str(tmp_path / "tb")}, writer)


def test_the_summary_and_mlflow_tags_of_a_manifest():
    doc = {"run_id": "20260101_000000_abcdef0", "code": {"megatron": {"commit": "a" * 40, "dirty": True},
                                                         "trainer": {"commit": "b" * 40, "dirty": False}},
           "environment": {"packages_digest": "sha256:" + "c" * 64},
           "hardware": {"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3", "cuda_version": "12.4",
                        "nccl_version": "2.21.5"},
           "seeds": {"bit_reproducible": False}, "outcome": {"status": "exit", "exit_code": 3}}
    info = trackers.summary(doc, _policy())
    assert info == {"run_id": "20260101_000000_abcdef0", "manifest": "manifest_20260101_000000_abcdef0.json",
                    "code": {"megatron": {"commit": "a" * 40, "dirty": True},
                             "trainer": {"commit": "b" * 40, "dirty": False}},
                    "packages_digest": "sha256:" + "c" * 64, "gpus": "8xH100-80GB-HBM3", "cuda": "12.4",
                    "nccl": "2.21.5", "bit_reproducible": False, "outcome": "exit 3"}
    tags = trackers.tags(info)
    assert tags["relaxrepro.commit.megatron"] == "a" * 40
    assert tags["relaxrepro.dirty"] == "true"  # several repos: any is dirty
    assert "relaxrepro.commit" not in tags
    assert tags["relaxrepro.manifest"] == "relaxrepro/manifest_20260101_000000_abcdef0.json"
    assert tags["relaxrepro.bit_reproducible"] == "false"
    one = trackers.tags(dict(info, code={"trainer": {"commit": "b" * 40, "dirty": False}}))
    assert (one["relaxrepro.commit"], one["relaxrepro.dirty"]) == ("b" * 40, "false")
    text = trackers.summary_text(dict(info, note="a | b"))
    assert "| code.megatron | %s (dirty) |" % ("a" * 40) in text
    assert "| note | a \\| b |" in text  # a cell cannot break the table


def test_noted_trackers_are_redacted_and_each_run_is_noted_once():
    doc = {"lineage": {"group": "g"}}
    token = fakes()["github-classic"]
    run = types.SimpleNamespace(info=types.SimpleNamespace(run_id="r1", experiment_id="7"))
    found = [trackers.mlflow_attachment(run, "https://ci:%s@mlflow.example.com" % token),
             trackers.Attachment("tensorboard", {"tool": "tensorboard", "log_dir": "/runs/tb?token=%s" % token}, None)]
    trackers.note(doc, found, _policy())
    trackers.note(doc, found, _policy())
    assert doc["lineage"]["group"] == "g"
    assert [t["tool"] for t in doc["lineage"]["trackers"]] == ["mlflow", "tensorboard"]
    assert doc["lineage"]["trackers"][0] == {"tool": "mlflow", "run_id": "r1", "experiment_id": "7",
                                             "tracking_uri": "https://mlflow.example.com"}
    assert token not in json.dumps(doc)
    assert found[0].handle == ("r1", "https://ci:%s@mlflow.example.com" % token)  # the client still logs in


class SummaryWriter:
    """Stands for torch's class: only the name and the type matter to the search."""

    def __init__(self, logdir: str) -> None:
        self.logdir = logdir


class Trainer:
    def __init__(self) -> None:
        self.writer = SummaryWriter("/runs/self")

    def fit(self, modules):
        return trackers.summary_writers(modules, sys._getframe())


def test_summary_writers_are_found_in_locals_self_and_globals():
    modules = {"tensorboardX": types.SimpleNamespace(SummaryWriter=SummaryWriter)}
    local = SummaryWriter("/runs/local")  # noqa: F841 - found through this frame
    assert [w.logdir for w in Trainer().fit(modules)] == ["/runs/self", "/runs/local"]
    globals()["GLOBAL_WRITER"] = SummaryWriter("/runs/global")
    try:
        assert "/runs/global" in [w.logdir for w in trackers.summary_writers(modules, sys._getframe())]
    finally:
        del globals()["GLOBAL_WRITER"]
    assert trackers.summary_writers({}, sys._getframe()) == []  # TensorBoard not imported: no search


def test_a_tracker_that_hangs_costs_the_trainer_one_warning_and_the_deadline(tmp_path, caplog, monkeypatch):
    # A stand-in: a real tracker that hangs needs a server that never answers, and SEND_S of waiting.
    release = threading.Event()
    run = types.SimpleNamespace(path="team/proj/hang", save=lambda *a, **k: release.wait(30),
                                config=types.SimpleNamespace(update=lambda *a, **k: None))
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(run=run))
    monkeypatch.setattr(trackers, "SEND_S", 0.2)
    monkeypatch.chdir(tmp_path)
    try:
        with relaxrepro.recorded(output_dir=tmp_path) as m:
            pass
    finally:
        release.set()
    warnings = [r.getMessage() for r in caplog.records if r.name == "relaxrepro" and r.levelno >= logging.WARNING]
    assert [w for w in warnings if "attach" in w] == [
        "relaxrepro: could not attach the manifest to W&B: no answer within 0.2 s; the trainer carries on"] * 2
    assert load(Path(m.path))["lineage"]["trackers"] == [{"tool": "wandb", "run": "team/proj/hang"}]
    assert load(Path(m.path))["outcome"]["status"] == "ok"


def test_a_tracker_error_is_a_warning_never_an_exception(tmp_path, caplog, monkeypatch):
    def fail(*a, **k):
        raise ConnectionError("https://u:pw@api.wandb.ai unreachable")

    run = types.SimpleNamespace(path="team/proj/x", save=fail, config=types.SimpleNamespace(update=fail))
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(run=run))
    monkeypatch.chdir(tmp_path)
    path = api.write_manifest(relaxrepro.collect_manifest(), tmp_path)
    assert path is not None
    warnings = [r.getMessage() for r in caplog.records if r.name == "relaxrepro" and "attach" in r.getMessage()]
    assert warnings == ["relaxrepro: could not attach the manifest to W&B: ConnectionError: "
                        "https://api.wandb.ai unreachable"]


# -- the real libraries, in a trainer run as a child process ---------------------------------------

@pytest.fixture(scope="module")
def planted() -> dict:
    f = fakes()
    argv = {"openai": f["openai-project"], "hf": f["huggingface"], "url": password("url"), "wandb": wandb_legacy()}
    env = {"HF_TOKEN": f["huggingface-org"], "WANDB_API_KEY": wandb_legacy(), "RAY_REDIS_PASSWORD": password("redis"),
           "NCCL_IB_TOKEN": f["github-classic"]}
    return {"argv": ["--api-key=" + argv["openai"], "--hf-token", argv["hf"],
                     "--data-url", "https://alice:%s@data.example.com/shards" % argv["url"],
                     "--wandb-key", argv["wandb"]],
            "env": env, "secrets": sorted(set(argv.values()) | set(env.values()))}


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory, planted) -> dict:
    tmp = tmp_path_factory.mktemp("wandb")
    info = run_trainer(tmp, "wandb", *planted["argv"], env=planted["env"])
    info["tmp"] = tmp
    return info


def test_wandb_run_holds_the_final_manifest_and_its_summary(wandb_run):
    doc = load(Path(wandb_run["path"]))
    validate_manifest(doc)
    assert doc["lineage"]["trackers"] == [{"tool": "wandb", "run": wandb_run["wandb_path"]}]
    copy = Path(wandb_run["wandb_dir"]) / "files" / ("manifest_%s.json" % wandb_run["run_id"])
    assert load(copy) == doc  # the copy made at exit: with the outcome
    assert load(copy)["outcome"]["status"] == "ok"
    config = wandb_config(wandb_run["wandb_dir"])
    assert config["lr"] == 0.1  # the trainer's own config is untouched
    summary = config["relaxrepro"]
    assert summary["run_id"] == wandb_run["run_id"]
    assert summary["outcome"] == "ok"
    assert summary["packages_digest"] == doc["environment"]["packages_digest"]
    assert set(summary) == {"run_id", "manifest", "code", "packages_digest", "gpus", "cuda", "nccl",
                            "bit_reproducible", "outcome"}
    assert "relaxrepro" not in wandb_run["stderr"]  # no warning


def test_nothing_planted_in_argv_or_environment_reaches_the_wandb_run_directory(wandb_run, planted):
    doc_text = Path(wandb_run["path"]).read_text()
    assert "<redacted>" in doc_text or "***" in doc_text  # the manifest saw them and masked them
    secrets = planted["secrets"]
    files = [p for p in (wandb_run["tmp"] / "wandb").rglob("*") if p.is_file()]
    assert any(p.name.startswith("manifest_") for p in files)  # the channel was used
    for p in files:
        text = p.read_bytes().decode("latin-1")
        for secret in secrets:
            assert leaked(secret, text) == [], "%s holds a piece of a planted secret" % p


def test_integrations_off_leaves_the_wandb_run_alone(tmp_path):
    for options, env in (({"integrations": False}, {}), ({}, {"RELAXREPRO_INTEGRATIONS": "0"})):
        run_dir = tmp_path / ("off-%d" % len(env))
        run_dir.mkdir()
        info = run_trainer(run_dir, "wandb", options=options, env=env)
        assert "trackers" not in load(Path(info["path"])).get("lineage", {})
        assert not list((Path(info["wandb_dir"]) / "files").glob("manifest_*.json"))
        assert "relaxrepro" not in wandb_config(info["wandb_dir"])


def test_mlflow_run_has_the_manifest_artifact_and_tags(tmp_path):
    from mlflow import MlflowClient

    make_repo(tmp_path, {"train.cfg": "lr: 0.1\n"})  # the trainer's own checkout: its commit becomes a tag
    info = run_trainer(tmp_path, "mlflow")
    doc = load(Path(info["path"]))
    validate_manifest(doc)
    assert len(doc["code"]) == 1
    (entry,) = doc["lineage"]["trackers"]
    assert entry == {"tool": "mlflow", "run_id": info["mlflow_run_id"], "experiment_id": entry["experiment_id"],
                     "tracking_uri": "sqlite:///%s" % (tmp_path / "mlflow.db")}
    client = MlflowClient(tracking_uri="sqlite:///%s" % (tmp_path / "mlflow.db"))
    tags = client.get_run(info["mlflow_run_id"]).data.tags
    assert tags["relaxrepro.run_id"] == info["run_id"]
    assert tags["relaxrepro.commit"] == next(iter(doc["code"].values()))["commit"]
    assert tags["relaxrepro.outcome"] == "ok"
    name = "relaxrepro/manifest_%s.json" % info["run_id"]
    assert [a.path for a in client.list_artifacts(info["mlflow_run_id"], "relaxrepro")] == [name]
    got = client.download_artifacts(info["mlflow_run_id"], name, str(tmp_path / "down"))
    assert load(Path(got)) == doc


def test_an_mlflow_failure_is_one_warning_and_the_trainer_finishes(tmp_path):
    (tmp_path / "a-file").write_text("not a directory\n")
    info = run_trainer(tmp_path, "mlflow", env={"TEST_MLFLOW_ARTIFACTS": str(tmp_path / "a-file" / "artifacts")})
    ours = [line for line in info["stderr"].splitlines() if "relaxrepro" in line]
    assert len(ours) == 2  # one at entry, one at exit
    assert all("could not attach the manifest to MLflow:" in line for line in ours)
    assert load(Path(info["path"]))["outcome"]["status"] == "ok"


def test_tensorboard_log_dir_holds_the_manifest_and_a_text_summary(tmp_path):
    info = run_trainer(tmp_path, "tensorboard")
    doc = load(Path(info["path"]))
    validate_manifest(doc)
    assert doc["lineage"]["trackers"] == [{"tool": "tensorboard", "log_dir": str(tmp_path / "tb")}]
    assert load(tmp_path / "tb" / ("manifest_%s.json" % info["run_id"])) == doc
    texts = tensorboard_texts(tmp_path / "tb")
    assert sorted(texts) == [0, 1]  # at entry, and the final one with the outcome
    assert "| run_id | %s |" % info["run_id"] in texts[1]
    assert "| outcome | ok |" in texts[1] and "outcome" not in texts[0]
