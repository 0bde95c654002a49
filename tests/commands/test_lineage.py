"""Lineage: explicit and derived parents, groups, and the ``lineage`` command's ancestry chain."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import lineage
from relaxrepro.manifest import writer
from tests.helpers.common import ROOT, clean_env, run_cli, validate_manifest
from tests.helpers.recording import load, make_doc, manifests, put


def _derive(doc, tmp_path, **options):
    ctx = Context(env={"PATH": "/usr/bin"}, cwd=str(tmp_path), options=options)
    return lineage.derive(doc, ctx)


# -- the deriver, on hand-made documents ------------------------------------------------------------

def test_nothing_to_say_means_no_section(tmp_path):
    assert _derive(make_doc("r1"), tmp_path) is None


def test_a_replay_records_the_run_it_replays(tmp_path):
    out = _derive(make_doc("r2"), tmp_path, replay_of="r1")
    assert out.data == {"lineage": {"replay_of": "r1"}}


def test_a_checkpoint_argument_into_another_runs_directory_is_a_derived_parent(tmp_path):
    prev = put(tmp_path / "runs" / "base", make_doc("20260101_000000_aaaaaaa"))
    ckpt = tmp_path / "runs" / "base" / "ckpt" / "iter_0000100"
    ckpt.mkdir(parents=True)
    doc = make_doc("20260102_000000_bbbbbbb",
                   config={"resolved_args": {"lr": 0.1, "load": str(ckpt.parent), "save": "elsewhere"}})
    out = _derive(doc, tmp_path / "work")
    section = out.data["lineage"]
    assert section["parent"] == {"run_id": "20260101_000000_aaaaaaa", "path": str(prev), "reason": "load",
                                 "found": True}
    assert section["derived"] == [{"run_id": "20260101_000000_aaaaaaa", "path": str(prev), "reason": "load",
                                   "found": True}]
    assert out.status == "ok"


def test_derived_edges_use_the_argument_name_and_nested_names(tmp_path):
    put(tmp_path / "a", make_doc("A"))
    put(tmp_path / "b", make_doc("B"))
    (tmp_path / "b" / "model.pt").write_text("weights")
    args = {"resume_from_checkpoint": str(tmp_path / "a"), "model": {"pretrained_checkpoint": str(tmp_path / "b"
                                                                                                     / "model.pt")},
            "load_format": "auto", "no_load_optim": True, "save": str(tmp_path / "a")}
    edges = lineage.derived_edges(args, cwd=str(tmp_path / "elsewhere"))
    assert [(e["run_id"], e["reason"]) for e in edges] == [("B", "model.pretrained_checkpoint"),
                                                          ("A", "resume_from_checkpoint")]


def test_a_checkpoint_in_the_working_directory_is_not_a_parent(tmp_path):
    # Manifests written to "." by earlier runs would otherwise parent every relative checkpoint path.
    put(tmp_path, make_doc("earlier-run-in-cwd"))
    (tmp_path / "base_model").mkdir()
    assert lineage.derived_edges({"load": "base_model"}, cwd=str(tmp_path)) == []


def test_an_explicit_parent_wins_and_the_derived_edge_is_kept(tmp_path):
    put(tmp_path / "runs" / "a", make_doc("A"))
    put(tmp_path / "runs" / "b", make_doc("B"))
    doc = make_doc("C", config={"resolved_args": {"ckpt": str(tmp_path / "runs" / "a")}})
    section = _derive(doc, tmp_path, parent="B", output_dir=str(tmp_path / "runs" / "c"))
    section = section.data["lineage"]
    assert section["parent"]["run_id"] == "B"
    assert section["parent"]["reason"] == "explicit"
    assert section["parent"]["found"] is True
    assert section["parent"]["path"] == str(tmp_path / "runs" / "b" / "manifest_B.json")
    assert [d["run_id"] for d in section["derived"]] == ["A"]


def test_a_parent_that_does_not_exist_is_recorded_as_given_and_flagged(tmp_path):
    out = _derive(make_doc("C"), tmp_path, parent="20250101_000000_deadbee")
    assert out.data["lineage"]["parent"] == {"given": "20250101_000000_deadbee", "run_id": "20250101_000000_deadbee",
                                             "reason": "explicit", "found": False}
    assert out.status == "partial"
    assert out.warnings[0].startswith("parent 20250101_000000_deadbee not found (looked in ")


def test_a_missing_manifest_path_as_parent_keeps_the_path(tmp_path):
    given = str(tmp_path / "gone" / "manifest_20250101_000000_0000000.json")
    parent = _derive(make_doc("C"), tmp_path, parent=given).data["lineage"]["parent"]
    assert parent == {"given": given, "run_id": "20250101_000000_0000000", "path": given, "reason": "explicit",
                      "found": False}


def test_parent_by_manifest_path_and_by_run_directory(tmp_path):
    path = put(tmp_path / "runs" / "a", make_doc("A"))
    by_path = _derive(make_doc("C"), tmp_path, parent=str(path)).data["lineage"]["parent"]
    by_dir = _derive(make_doc("C"), tmp_path, parent=str(path.parent)).data["lineage"]["parent"]
    assert (by_path["run_id"], by_path["found"]) == ("A", True)
    assert (by_dir["run_id"], by_dir["path"], by_dir["found"]) == ("A", str(path), True)


def test_group_and_parent_from_the_environment(tmp_path):
    put(tmp_path, make_doc("A"))
    ctx = Context(env={"RELAXREPRO_PARENT": "A", "RELAXREPRO_GROUP": "sweep-1"}, cwd=str(tmp_path),
                  options={"note": "try warmup"})
    section = lineage.derive(make_doc("B"), ctx).data["lineage"]
    assert section["group"] == "sweep-1"
    assert section["note"] == "try warmup"
    assert (section["parent"]["run_id"], section["parent"]["found"]) == ("A", True)
    ctx = Context(env={"RELAXREPRO_GROUP": "from-env"}, cwd=str(tmp_path), options={"group": "from-flag"})
    assert lineage.derive(make_doc("B"), ctx).data["lineage"]["group"] == "from-flag"


# -- end to end: generate / API record lineage -----------------------------------------------------

def test_generate_with_a_missing_parent_warns_and_still_writes(tmp_path):
    res = run_cli("generate", "--output-dir", str(tmp_path), "--parent", "nope-123", "--group", "g",
                  "--note", "rerun with the fix", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "relaxrepro: warning: parent nope-123 not found; recorded as given" in res.stderr
    doc = load(Path(res.stdout.strip()))
    validate_manifest(doc)
    assert doc["lineage"] == {"parent": {"given": "nope-123", "run_id": "nope-123", "reason": "explicit",
                                         "found": False},
                              "group": "g", "note": "rerun with the fix"}
    assert doc["collection"]["probes"]["lineage"]["status"] == "partial"


def test_run_derives_the_parent_from_the_commands_load_flag(tmp_path):
    (tmp_path / "runs").mkdir()
    first = run_cli("run", "--output-dir", str(tmp_path / "runs" / "a"), "--", "mkdir", "-p",
                    str(tmp_path / "runs" / "a" / "ckpt"), cwd=tmp_path / "runs")
    assert first.returncode == 0, first.stderr
    parent = load(manifests(tmp_path / "runs" / "a")[0])
    res = run_cli("run", "--output-dir", str(tmp_path / "runs" / "b"), "--", "true", "--load=a/ckpt",
                  cwd=tmp_path / "runs")
    assert res.returncode == 0, res.stderr
    doc = load(manifests(tmp_path / "runs" / "b")[0])
    validate_manifest(doc)
    assert doc["lineage"]["parent"]["run_id"] == parent["run_id"]
    assert doc["lineage"]["parent"]["reason"] == "load"


def test_the_example_trainer_records_its_run_and_its_parent(tmp_path):
    env = clean_env()
    example = str(ROOT / "examples" / "train.py")
    import subprocess

    a = subprocess.run([sys.executable, example, "--log-dir", "runs/a", "--group", "demo"], env=env,
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert a.returncode == 0, a.stderr
    assert a.stdout.startswith("final loss 0.7290 (manifest runs/a/manifest_")
    b = subprocess.run([sys.executable, example, "--log-dir", "runs/b", "--lr", "0.2", "--load", "runs/a/ckpt",
                        "--fail"], env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert b.returncode == 1
    assert b.stderr.rstrip().endswith("RuntimeError: loss diverged")  # the trainer's traceback, unchanged
    first, second = load(manifests(tmp_path / "runs" / "a")[0]), load(manifests(tmp_path / "runs" / "b")[0])
    validate_manifest(first)
    validate_manifest(second)
    assert first["outcome"]["status"] == "ok" and first["lineage"]["group"] == "demo"
    assert second["outcome"]["status"] == "exception"
    assert second["outcome"]["exception_type"] == "RuntimeError"
    assert second["lineage"]["parent"]["run_id"] == first["run_id"]
    assert second["lineage"]["parent"]["reason"] == "load"


def test_api_args_namespace_feeds_derived_edges(tmp_path, monkeypatch):
    import relaxrepro

    put(tmp_path / "runs" / "a", make_doc("A"))
    monkeypatch.chdir(tmp_path / "runs")
    m = relaxrepro.collect_manifest(argparse.Namespace(resume_from="a", lr=1))
    assert m["lineage"]["parent"]["run_id"] == "A"
    assert m["lineage"]["parent"]["reason"] == "resume_from"


# -- the lineage command -------------------------------------------------------------------------------

def _chain(tmp_path):
    a = make_doc("A", generated_at="2026-01-01T00:00:00Z",
                 code={"repo": {"commit": "1" * 40, "dirty": False}},
                 config={"resolved_args": {"lr": 0.1, "steps": 10}})
    b = make_doc("B", generated_at="2026-01-02T00:00:00Z",
                 code={"repo": {"commit": "2" * 40, "dirty": True}},
                 config={"resolved_args": {"lr": 0.2, "steps": 10}},
                 lineage={"parent": {"run_id": "A", "reason": "explicit", "found": True}})
    c = make_doc("C", generated_at="2026-01-03T00:00:00Z",
                 code={"repo": {"commit": "2" * 40, "dirty": True}},
                 config={"resolved_args": {"lr": 0.2, "steps": 10}},
                 lineage={"parent": {"run_id": "B", "reason": "load", "found": True}})
    for d in (a, b, c):
        validate_manifest(d)
        put(tmp_path / "runs" / d["run_id"], d)


def test_lineage_shows_the_chain_oldest_first_with_what_changed(tmp_path):
    _chain(tmp_path)
    res = run_cli("lineage", "C", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "A  2026-01-01 00:00  runs/A/manifest_A.json",
        "  | explicit: code: repo 1111111 -> 2222222*; args: lr 0.1 -> 0.2",
        "B  2026-01-02 00:00  runs/B/manifest_B.json",
        "  | load: no change in code, args, env, packages or GPUs",
        "C  2026-01-03 00:00  runs/C/manifest_C.json",
    ]
    js = json.loads(run_cli("lineage", "C", "runs", "--json", cwd=tmp_path).stdout)
    assert [c["run_id"] for c in js["chain"]] == ["A", "B", "C"]
    assert js["cycle"] is None and js["missing"] is None


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs, /dev/zero")
def test_lineage_names_what_it_could_not_read_and_goes_on(tmp_path):
    # A FIFO used to hang the scan, a link to /dev/zero to read until memory ran out; a 5,000-digit
    # integer in a manifest of the chain ended it with "internal error: ValueError".
    _chain(tmp_path)
    bad = tmp_path / "runs" / "bad"
    bad.mkdir()
    os.mkfifo(str(bad / "manifest_x.json"))
    os.symlink("/dev/zero", str(bad / "manifest_z.json"))
    d = make_doc("D", training={"seed": 1}, lineage={"parent": {"run_id": "C", "reason": "load", "found": True}})
    (tmp_path / "runs" / "manifest_D.json").write_bytes(
        writer.serialize(d).replace(b'"seed": 1', b'"seed": ' + b"7" * 5000))
    warnings = ["relaxrepro lineage: warning: unreadable: runs/bad/manifest_x.json: not a regular file",
                "relaxrepro lineage: warning: unreadable: runs/bad/manifest_z.json: not a regular file"]
    res = run_cli("lineage", "C", "runs", cwd=tmp_path)  # run_cli's timeout is the hang guard
    assert res.returncode == 0, res.stderr
    assert [line.split()[0] for line in res.stdout.splitlines() if not line.startswith(" ")] == ["A", "B", "C"]
    assert res.stderr.splitlines() == warnings
    res = run_cli("lineage", "D", "runs", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.splitlines() == warnings + [
        "relaxrepro lineage: error: runs/manifest_D.json: integer of 5000 digits is longer than the 4300 allowed in "
        "'training.seed'"]
    res = run_cli("lineage", "runs/bad/manifest_x.json", "runs", cwd=tmp_path)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("relaxrepro lineage: runs/bad/manifest_x.json: runs/bad/manifest_x.json is not a regular "
                          "file\n")


def test_lineage_flags_a_missing_parent(tmp_path):
    put(tmp_path / "runs", make_doc("B", lineage={"parent": {"given": "A", "run_id": "A", "reason": "explicit",
                                                             "found": False}}))
    res = run_cli("lineage", "B", "runs", cwd=tmp_path)
    assert res.returncode == 0
    assert res.stdout.splitlines()[:2] == ["A  (missing: recorded as parent, no manifest found)",
                                          "  | explicit: parent missing, nothing to compare"]
    assert "relaxrepro lineage: warning: parent A not found under runs; the chain stops there" in res.stderr


def test_lineage_detects_a_cycle(tmp_path):
    for run_id, parent in (("A", "B"), ("B", "A")):
        put(tmp_path / "runs", make_doc(run_id, lineage={"parent": {"run_id": parent, "reason": "explicit",
                                                                    "found": True}}))
    res = run_cli("lineage", "A", "runs", cwd=tmp_path)
    assert res.returncode == 1
    assert "relaxrepro lineage: error: cycle in lineage: A -> B -> A" in res.stderr
    assert "parent A is also its descendant: cycle" in res.stdout


def test_lineage_of_an_unknown_run(tmp_path):
    (tmp_path / "runs").mkdir()
    res = run_cli("lineage", "Z", "runs", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro lineage: error: Z: no such file, and no run id starts with it under runs (name "
                          "where runs are with --runs DIR or $RELAXREPRO_RUNS)\n")
    res = run_cli("lineage", "Z", "nowhere", cwd=tmp_path)
    assert (res.returncode, res.stderr) == (1, "relaxrepro lineage: error: nowhere: no such file or directory\n")


def test_a_lookup_on_a_hung_filesystem_is_abandoned(tmp_path, monkeypatch):
    release = threading.Event()

    def hang(directory):  # an NFS directory that never answers
        release.wait(30)

    put(tmp_path / "a", make_doc("A"))
    monkeypatch.setattr(lineage, "newest_manifest", hang)
    monkeypatch.setattr(lineage, "_LOOKUP_S", 0.3)
    doc = make_doc("C", config={"resolved_args": {"load": str(tmp_path / "a")}})
    try:
        t0 = time.monotonic()
        out = _derive(doc, tmp_path / "work", parent=str(tmp_path / "a"), group="g")
        elapsed = time.monotonic() - t0
    finally:
        release.set()
    assert elapsed < 5
    assert out.data["lineage"] == {"parent": {"given": str(tmp_path / "a"), "run_id": None, "reason": "explicit",
                                              "found": False}, "group": "g"}
    assert out.warnings == [
        "looking for parent %s took over 0.3 s (a slow filesystem?); recorded as given" % (tmp_path / "a"),
        "looking for runs behind checkpoint arguments took over 0.3 s; none recorded"]


def _two_dirty(tmp_path, patch_b, patch_c):
    b = make_doc("B", generated_at="2026-01-02T00:00:00Z",
                 code={"repo": {"commit": "2" * 40, "dirty": True, "patch": patch_b}})
    c = make_doc("C", generated_at="2026-01-03T00:00:00Z",
                 code={"repo": {"commit": "2" * 40, "dirty": True, "patch": patch_c}},
                 lineage={"parent": {"run_id": "B", "reason": "explicit", "found": True}})
    for d in (b, c):
        put(tmp_path / "runs" / d["run_id"], d)
    res = run_cli("lineage", "C", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()[1]


def test_lineage_names_a_step_whose_uncommitted_changes_differ(tmp_path):
    assert _two_dirty(tmp_path, {"sha256": "a" * 64}, {"sha256": "b" * 64}) == (
        "  | explicit: code: repo uncommitted changes differ")


def test_lineage_never_calls_patches_not_taken_in_full_unchanged(tmp_path):
    cut = {"stored_sha256": "a" * 64, "incomplete": "git diff did not finish in 4 s", "incomplete_reason": "timeout"}
    assert _two_dirty(tmp_path, cut, dict(cut)) == "  | explicit: code: repo uncommitted changes not fully recorded"
