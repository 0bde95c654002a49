"""The trainer API: recorded(), collect/update/write, and the promise: never raise, never block."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import relaxrepro
from relaxrepro import api
from relaxrepro.collect import registry as probes
from relaxrepro.collect import runner
from tests.helpers.common import ROOT, clean_env, fake_tool, validate_manifest
from tests.helpers.recording import load, manifests


def _relaxrepro_warnings(caplog) -> list:
    return [r for r in caplog.records if r.name == "relaxrepro" and r.levelno >= logging.WARNING]


def test_recorded_writes_at_entry_and_adds_the_outcome_at_exit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(lr=3e-4, steps=10)
    with relaxrepro.recorded(args, output_dir=tmp_path / "logs", group="lr-sweep", note="baseline") as m:
        assert m is not None
        first = load(Path(m.path))
        assert "outcome" not in first  # written before training starts: an OOM-killed run still has one
    doc = load(Path(m.path))
    validate_manifest(doc)
    assert doc["run_id"] == m.run_id == first["run_id"]
    assert doc["outcome"]["status"] == "ok"
    assert doc["outcome"]["exit_code"] == 0
    assert doc["outcome"]["duration_s"] >= 0
    assert doc["lineage"] == {"group": "lr-sweep", "note": "baseline"}
    assert manifests(tmp_path / "logs") == [Path(m.path)]
    assert not list((tmp_path / "logs").glob(".relaxrepro-*"))  # no temp file left behind


def test_recorded_passes_the_exception_through_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    boom = ValueError("diverged at step 7")
    with pytest.raises(ValueError) as info:
        with relaxrepro.recorded(output_dir=tmp_path) as m:
            raise boom
    assert info.value is boom
    doc = load(Path(m.path))
    validate_manifest(doc)
    assert doc["outcome"]["status"] == "exception"
    assert doc["outcome"]["exception_type"] == "ValueError"
    assert doc["outcome"]["exit_code"] is None
    assert "diverged" not in Path(m.path).read_text()  # the type only: messages can carry secrets


@pytest.mark.parametrize("code, status, exit_code", [(None, "ok", 0), (0, "ok", 0), (3, "exit", 3),
                                                     ("fatal: bad config", "exit", 1)],
                         ids=["exit-none", "exit-0", "exit-3", "exit-message"])
def test_recorded_records_sys_exit(tmp_path, monkeypatch, code, status, exit_code):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        with relaxrepro.recorded(output_dir=tmp_path) as m:
            sys.exit(code)
    assert info.value.code == code
    out = load(Path(m.path))["outcome"]
    assert (out["status"], out["exit_code"]) == (status, exit_code)


def test_recorded_as_a_decorator_records_each_call(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @relaxrepro.recorded(output_dir=tmp_path, group="g")
    def main(x: int) -> int:
        return x * 2

    assert main(2) == 4
    assert main(3) == 6
    docs = [load(p) for p in manifests(tmp_path)]
    assert len(docs) == 2
    assert {d["run_id"] for d in docs} and len({d["run_id"] for d in docs}) == 2
    assert all(d["outcome"]["status"] == "ok" for d in docs)


def test_recorded_on_a_rank_other_than_zero_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RANK", "3")
    with relaxrepro.recorded(output_dir=tmp_path) as m:
        pass
    assert m is None
    assert manifests(tmp_path) == []


def test_api_called_twice_gives_two_runs_and_writing_again_is_idempotent(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = relaxrepro.collect_manifest()
    b = relaxrepro.collect_manifest()
    assert a is not None and b is not None and a.run_id != b.run_id
    pa = relaxrepro.write_manifest(a, tmp_path)
    assert relaxrepro.write_manifest(a, tmp_path) == pa  # the same manifest is written once
    pb = relaxrepro.write_manifest(b, tmp_path)
    assert pa != pb
    assert len(manifests(tmp_path)) == 2


def test_api_from_several_threads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths, errors = [], []

    def worker(i: int) -> None:
        try:
            with relaxrepro.recorded({"worker": i}, output_dir=tmp_path) as m:
                paths.append(m.path)
        except BaseException as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(set(paths)) == 4
    for p in paths:
        doc = load(Path(p))
        validate_manifest(doc)
        assert doc["outcome"]["status"] == "ok"


def test_a_hanging_git_costs_at_most_the_deadline(repo, tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(repo)
    bindir = tmp_path / "bin"
    fake_tool(bindir, "git", "/bin/sleep 60\n")
    env = dict(clean_env(), PATH=str(bindir))
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="relaxrepro"):
        m = relaxrepro.collect_manifest(env=env, deadline_s=2.0)
    elapsed = time.monotonic() - t0
    assert elapsed < 2.0 + api._GRACE_S + 3  # generous upper bound: never the 60 s of the hang
    assert m is not None
    assert m["collection"]["probes"]["git"]["status"] in ("timeout", "failed")
    warnings = _relaxrepro_warnings(caplog)
    assert len(warnings) == 1
    assert "partial manifest: git" in warnings[0].getMessage()


def test_a_step_that_ignores_every_timeout_returns_none_within_the_deadline(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    release = threading.Event()

    def stuck(doc, ctx):  # a deriver in a call that never returns (a wedged NFS stat)
        release.wait(60)

    monkeypatch.setattr(probes, "DERIVERS", (runner.Deriver("stuck", stuck),))
    try:
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="relaxrepro"):
            m = relaxrepro.collect_manifest(deadline_s=1.0)
        elapsed = time.monotonic() - t0
    finally:
        release.set()
    assert m is None
    assert elapsed < 1.0 + api._GRACE_S + 3
    warnings = _relaxrepro_warnings(caplog)
    assert len(warnings) == 1
    assert "gave up waiting" in warnings[0].getMessage()


def test_recorded_survives_a_failed_collection(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def crash(*_a, **_kw):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("relaxrepro.collect.assemble.build", crash)
    with caplog.at_level(logging.WARNING, logger="relaxrepro"):
        with pytest.raises(KeyError):
            with relaxrepro.recorded(output_dir=tmp_path) as m:
                assert m is None
                raise KeyError("the trainer's own error")
    assert manifests(tmp_path) == []
    messages = [r.getMessage() for r in _relaxrepro_warnings(caplog)]
    assert messages == ["relaxrepro: could not collect a manifest: RuntimeError: disk on fire"]


def test_write_into_an_unwritable_place_returns_none_and_warns_once(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    m = relaxrepro.collect_manifest()
    with caplog.at_level(logging.WARNING, logger="relaxrepro"):
        assert relaxrepro.write_manifest(m, blocker / "logs") is None
    messages = [r.getMessage() for r in _relaxrepro_warnings(caplog)]
    assert len(messages) == 1 and "could not write" in messages[0]
    assert relaxrepro.write_manifest(None, tmp_path) is None


def test_a_warning_naming_a_hostile_path_reaches_the_log_escaped(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    m = relaxrepro.collect_manifest()
    with caplog.at_level(logging.WARNING, logger="relaxrepro"):
        assert relaxrepro.write_manifest(m, blocker / "logs\x1b]0;pwned\x07\n\x9bX") is None
    messages = [r.getMessage() for r in _relaxrepro_warnings(caplog)]
    assert len(messages) == 1 and "/file/logs\\x1b]0;pwned\\x07\\n\\x9bX" in messages[0], messages


def test_update_manifest_runs_the_registered_updaters(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(api, "_UPDATERS", [])
    release = threading.Event()

    def live(manifest, options):
        return runner.Outcome(data={"runtime": {"mode": "single_node_ray"}})

    def broken(manifest, options):
        raise ConnectionError("ray not initialised")

    def stuck(manifest, options):
        release.wait(60)

    api.register_updater("ray_live", live)
    api.register_updater("broken", broken)
    api.register_updater("stuck", stuck)
    m = relaxrepro.collect_manifest()
    try:
        with caplog.at_level(logging.WARNING, logger="relaxrepro"):
            assert relaxrepro.update_manifest(m, deadline_s=0.5) is m
    finally:
        release.set()
    probes_ = m["collection"]["probes"]
    assert m["runtime"]["mode"] == "single_node_ray"
    assert probes_["ray_live"]["status"] == "ok"
    assert probes_["broken"]["status"] == "failed"
    assert "ConnectionError: ray not initialised" in probes_["broken"]["warnings"][0]
    assert probes_["stuck"]["status"] == "timeout"
    assert len(_relaxrepro_warnings(caplog)) == 1
    assert relaxrepro.update_manifest(None) is None


def test_changes_made_inside_the_block_are_written_with_the_outcome(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(api, "_UPDATERS", [])
    with relaxrepro.recorded(output_dir=tmp_path) as m:
        # what update_manifest does after ray.init(), inside the block
        api.register_updater("ray_live", lambda mm, o: runner.Outcome(data={"runtime": {"mode": "multi_node_ray"}}))
        relaxrepro.update_manifest(m)
        assert load(Path(m.path))["runtime"]["mode"] == "local"  # on disk: what was seen at the start
    doc = load(Path(m.path))
    validate_manifest(doc)
    assert doc["runtime"]["mode"] == "multi_node_ray"
    assert doc["outcome"]["status"] == "ok"


def test_the_outcome_is_not_written_over_a_file_that_changed_hands(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="relaxrepro"):
        with relaxrepro.recorded(output_dir=tmp_path) as m:
            Path(m.path).write_text('{"run_id": "someone-else"}')
    assert load(Path(m.path)) == {"run_id": "someone-else"}
    messages = [r.getMessage() for r in _relaxrepro_warnings(caplog)]
    assert messages == ["relaxrepro: could not add the outcome to %s: it now holds run someone-else" % m.path]


def test_parent_can_be_a_manifest_object(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with relaxrepro.recorded(output_dir=tmp_path / "a") as first:
        pass
    with relaxrepro.recorded(output_dir=tmp_path / "b", parent=first) as second:
        pass
    doc = load(Path(second.path))
    validate_manifest(doc)
    assert doc["lineage"]["parent"]["run_id"] == first.run_id
    assert doc["lineage"]["parent"]["found"] is True
    assert doc["lineage"]["parent"]["reason"] == "explicit"


def test_importable_and_usable_from_the_pyz(tmp_path):
    pyz = tmp_path / "relaxrepro.pyz"
    subprocess.run([sys.executable, str(ROOT / "tools" / "build_pyz.py"), str(pyz)], check=True,
                   capture_output=True)
    code = ("import relaxrepro, sys\n"
            "with relaxrepro.recorded({'lr': 0.1}, output_dir=sys.argv[1], group='pyz') as m:\n"
            "    pass\n"
            "import relaxrepro.api\n"
            "print(relaxrepro.api.__file__)\n"
            "print(m.path)\n")
    env = dict(clean_env(), PYTHONPATH=str(pyz))
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    where, printed = res.stdout.split()
    assert where == str(pyz / "relaxrepro" / "api.py")  # from the single file, not a checkout
    path = Path(printed)
    assert path.parent == tmp_path / "out"
    doc = load(path)
    validate_manifest(doc)
    assert doc["outcome"]["status"] == "ok" and doc["lineage"]["group"] == "pyz"
    assert os.path.getsize(path) > 0


def test_a_parent_that_does_not_exist_is_one_warning_and_recorded_as_given(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="relaxrepro"):
        m = relaxrepro.collect_manifest(parent="20240101_000000_0000000")
    assert m["lineage"]["parent"] == {"given": "20240101_000000_0000000", "run_id": "20240101_000000_0000000",
                                      "reason": "explicit", "found": False}
    messages = [r.getMessage() for r in _relaxrepro_warnings(caplog)]
    assert messages == ["relaxrepro: partial manifest: parent 20240101_000000_0000000 not found; recorded as given"]


def test_ctrl_c_in_the_trainer_is_recorded_and_still_raised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with relaxrepro.recorded(output_dir=tmp_path) as m:
            raise KeyboardInterrupt
    out = load(Path(m.path))["outcome"]
    assert (out["status"], out["exception_type"]) == ("exception", "KeyboardInterrupt")


def test_a_run_id_clash_gives_a_fresh_id_that_the_manifest_follows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = relaxrepro.collect_manifest()
    taken = tmp_path / ("manifest_%s.json" % m.run_id)
    taken.write_text("someone else's")
    path = relaxrepro.write_manifest(m, tmp_path)
    assert path != str(taken) and taken.read_text() == "someone else's"
    assert Path(path).name == "manifest_%s.json" % m.run_id
    assert load(Path(path))["run_id"] == m.run_id


# A home outside /home/<user>: only the policy the manifest was collected with knows it is one.
_CAROL = "/data/users/carol"


def _carol_env(tmp_path):
    return dict(os.environ, HOME=_CAROL, RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))


def test_a_manifest_changed_after_collection_is_written_redacted_by_its_own_policy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = relaxrepro.collect_manifest(env=_carol_env(tmp_path))
    assert m.redacted_by is not None and m.redacted_by.home == _CAROL
    m["training"]["checkpoint_dir"] = _CAROL + "/ckpt"  # the trainer's own change, never redacted yet
    doc = load(Path(relaxrepro.write_manifest(m, tmp_path)))
    assert doc["training"]["checkpoint_dir"] == "<HOME>/ckpt"
    assert _CAROL not in json.dumps(doc)


def test_changes_inside_the_block_are_redacted_at_exit_by_the_manifests_own_policy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with relaxrepro.recorded(output_dir=tmp_path, env=_carol_env(tmp_path)) as m:
        m["training"]["checkpoint_dir"] = _CAROL + "/ckpt"
    doc = load(Path(m.path))
    assert doc["outcome"]["status"] == "ok"
    assert doc["training"]["checkpoint_dir"] == "<HOME>/ckpt"
    assert _CAROL not in json.dumps(doc)
