"""The replay engine's pure parts: where a replay goes, what it rewrites, how its outputs are compared, and the
command it records."""

from __future__ import annotations

import pytest

from relaxrepro.commands.rerun import Plan
from relaxrepro.record import guard, replay, workspace


def test_the_default_directory_is_a_fresh_sibling_or_inside_a_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    taken = {str(tmp_path / "runs/a.replay-1")}
    assert replay.replay_dir("runs/a/manifest_r1.json", None, taken.__contains__) == str(tmp_path / "runs/a.replay-2")
    # a manifest in the working directory: its sibling would leave the project
    assert replay.replay_dir("manifest_r1.json", None, lambda p: False) == str(tmp_path / "r1.replay-1")
    assert replay.replay_dir("runs/a/manifest_r1.json", "elsewhere", lambda p: True) == str(tmp_path / "elsewhere")


def test_redirect_rewrites_the_run_directory_and_named_outputs_only():
    p = Plan(argv=["python", "train.py", "--log-dir", "runs/a", "--save=/data/best.pt", "--data", "runs/a/in.csv"],
             env={"OUT": "/proj/runs/a", "OTHER": "runs"})
    outputs = {"/data/best.pt": "/data/best.pt", "/proj/runs/a/w.pt": "runs/a/w.pt"}
    moved, changes = replay.redirect(p, "/proj", "/proj/runs/a", "/proj/runs/a.replay-1", outputs)
    assert moved == {"/data/best.pt": "/proj/runs/a.replay-1/best.pt",
                     "/proj/runs/a/w.pt": "/proj/runs/a.replay-1/w.pt"}
    assert p.argv == ["python", "train.py", "--log-dir", "runs/a.replay-1", "--save=/proj/runs/a.replay-1/best.pt",
                      "--data", "runs/a/in.csv"]
    assert p.env == {"OUT": "/proj/runs/a.replay-1", "OTHER": "runs"}
    assert [c[0] for c in changes] == ["argv[3]", "argv[4]", "env OUT"]


def test_outputs_are_compared_by_their_place_in_the_run_directory():
    entry = {"kind": "file", "sha256": "a" * 64, "size": 1}
    old = {"run_id": "r1", "results": {"outputs": {"runs/a/w.pt": entry, "<HOME>/best.pt": entry}}}
    new = {"run_id": "r2", "results": {"outputs": {"runs/a.replay-1/w.pt": entry,
                                                   "/proj/runs/a.replay-1/best.pt": entry}}}
    moved = {"/proj/runs/a/w.pt": "/proj/runs/a.replay-1/w.pt", "/home/u/best.pt": "/proj/runs/a.replay-1/best.pt"}
    root = "/proj/runs/a.replay-1"
    assert replay.comparable(old, "/proj", "/home/u", root, moved)["results"]["outputs"] == {"w.pt": entry,
                                                                                           "best.pt": entry}
    assert replay.comparable(new, "/proj", "/home/u", root)["results"]["outputs"] == {"w.pt": entry, "best.pt": entry}
    assert replay.comparable({"run_id": "r3"}, "/proj", None, root) == {"run_id": "r3"}  # no results: none added


@pytest.mark.parametrize("recorded, argv, expected", [
    (["python", "t.py", "--out", "runs/a"], ["/venv/bin/python", "t.py", "--out", "runs/b"],
     ["python", "t.py", "--out", "runs/b"]),
    (["t.py", "--x"], ["/venv/bin/python", "t.py", "--x"], ["t.py", "--x"]),
    (["torchrun", "t.py"], ["/venv/bin/torchrun", "t.py"], ["torchrun", "t.py"]),
    (["./run.sh"], ["./run.sh"], ["./run.sh"]),
    (None, ["/venv/bin/python", "t.py"], ["/venv/bin/python", "t.py"]),
], ids=["python-as-typed", "bare-script", "venv-launcher", "unchanged", "none-recorded"])
def test_the_replay_records_the_command_as_the_original_typed_it(recorded, argv, expected):
    assert replay.as_typed(recorded, argv, "/venv/bin/python") == expected


def test_relocate_points_absolute_paths_inside_a_recorded_repo_into_the_workspace():
    p = Plan(argv=["/venv/bin/python", "/src/proj/train.py", "--cfg=/src/proj/c.yaml", "--data", "/data/x",
                   "runs/a.replay-1"], env={"CFG": "/src/proj/conf", "DATA": "/data"}, cwd="/src/proj/sub",
             interpreter="/venv/bin/python")
    changes = workspace.relocate(p, {"/src/proj": "/ws/proj"}, ["argv[4]"])
    assert p.argv == ["/venv/bin/python", "/ws/proj/train.py", "--cfg=/ws/proj/c.yaml", "--data", "/data/x",
                      "runs/a.replay-1"]
    assert p.env == {"CFG": "/ws/proj/conf", "DATA": "/data"} and p.cwd == "/ws/proj/sub"
    assert [c[0] for c in changes] == ["cwd", "argv[1]", "argv[2]", "env CFG"]
    assert workspace.inside("/src/project", {"/src/proj": "/ws/proj"}) is None  # a prefix of the name is not inside


def test_the_guard_names_what_a_replay_changed_added_or_removed(tmp_path):
    run_dir = tmp_path / "runs/a"
    run_dir.mkdir(parents=True)
    manifest = run_dir / "manifest_r1.json"
    manifest.write_text("{}")
    (run_dir / "w.pt").write_text("1")
    (run_dir / "log.txt").write_text("x")
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    outputs = [str(run_dir / "w.pt")]
    before = guard.snapshot({}, str(manifest), outputs, str(run_dir), env=env)
    assert guard.changes(before, {}, str(manifest), outputs, str(run_dir), env=env) == []
    (run_dir / "w.pt").write_text("2")
    (run_dir / "log.txt").unlink()
    (run_dir / "new.txt").write_text("n")
    assert guard.changes(before, {}, str(manifest), outputs, str(run_dir), env=env) == [
        str(run_dir / p) for p in ("log.txt", "new.txt", "w.pt")]
