"""The data section and ``relaxrepro fingerprint``, as a user runs them."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from relaxrepro.api import collect_manifest
from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import data
from tests.helpers.common import clean_env, generate, run_cli, validate_manifest
from tests.helpers.config import run_unprivileged


def _tree(root: Path) -> Path:
    (root / "shard").mkdir(parents=True)
    (root / "shard" / "b.bin").write_bytes(b"b" * 10_000)
    (root / "a.txt").write_text("hello\n")
    return root


def _env(tmp_path: Path, **extra: str) -> dict:
    return clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"), **extra)


def test_generate_data_records_counts_and_quick_digest_then_full_once_cached(tmp_path):
    _tree(tmp_path / "corpus")
    (tmp_path / "model.bin").write_bytes(b"m" * 5000)
    env = _env(tmp_path)
    doc = generate(tmp_path, "--data", "corpus", "--data", "model.bin", env=env)
    corpus, model = doc["data"]["inputs"]
    assert {k: corpus[k] for k in ("path", "kind", "files", "bytes", "full_status", "source")} == \
        {"path": "corpus", "kind": "tree", "files": 2, "bytes": 10_006, "full_status": "uncached", "source": "option"}
    assert corpus["quick"]["complete"] is True and "full" not in corpus
    assert (model["kind"], model["files"], model["bytes"]) == ("file", 1, 5000)

    res = run_cli("fingerprint", "corpus", "model.bin", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    model_sha = hashlib.sha256(b"m" * 5000).hexdigest()
    lines = res.stdout.splitlines()
    assert lines[1] == "sha256:%s  1 files  5000 bytes  model.bin" % model_sha
    corpus_sha = lines[0].split()[0]

    doc = generate(tmp_path, "--data", "corpus", "--data", "model.bin", env=env)
    corpus2, model2 = doc["data"]["inputs"]
    assert corpus2["full"] == {"sha256": corpus_sha} and corpus2["full_status"] == "fresh"
    assert model2["full"] == {"sha256": "sha256:" + model_sha}
    assert corpus2["quick"] == corpus["quick"]

    (tmp_path / "model.bin").write_bytes(b"n" * 5000)
    doc = generate(tmp_path, "--data", "model.bin", env=env)
    assert doc["data"]["inputs"][0]["full_status"] == "stale" and "full" not in doc["data"]["inputs"][0]


def test_inputs_named_in_the_args_are_found(tmp_path, monkeypatch):
    ckpt = _tree(tmp_path / "ckpt")
    monkeypatch.chdir(tmp_path)
    args = {
        "hf_checkpoint": "Qwen/Qwen2.5-7B-Instruct", "revision": "a1b2c3",
        "tokenizer_path": "meta-llama/Llama-3.1-8B@v1.0",
        "load": str(ckpt), "data_path": ["0.7", str(ckpt), "0.3", "s3://bucket/shards/"],
        "prompt_data": str(tmp_path / "gone.jsonl"), "lr": 1e-5, "save": str(tmp_path / "out"),
    }
    m = collect_manifest(args, argv=["python", "train.py"], env={"HOME": str(tmp_path / "home"),
                                                                 "XDG_CACHE_HOME": str(tmp_path / "cache")})
    validate_manifest(m)
    by_source = {}
    for rec in m["data"]["inputs"]:
        by_source.setdefault(rec["source"], []).append(rec)
    assert by_source["args:hf_checkpoint"] == [{"source": "args:hf_checkpoint", "kind": "hub",
                                                "id": "Qwen/Qwen2.5-7B-Instruct", "revision": "a1b2c3"}]
    assert by_source["args:tokenizer_path"] == [{"source": "args:tokenizer_path", "kind": "hub",
                                                 "id": "meta-llama/Llama-3.1-8B", "revision": "v1.0"}]
    assert by_source["args:load"][0]["kind"] == "tree" and by_source["args:load"][0]["files"] == 2
    # the same checkpoint under --data-path is fingerprinted once, under its first name
    assert [r["kind"] for r in by_source["args:data_path"]] == ["url"]
    assert by_source["args:data_path"][0]["id"] == "s3://bucket/shards/"
    assert by_source["args:prompt_data"] == [{"source": "args:prompt_data", "kind": "missing",
                                              "path": str(tmp_path / "gone.jsonl"), "error": "not found"}]
    assert "args:save" not in by_source
    entry = m["collection"]["probes"]["data"]
    assert entry["status"] == "partial"
    assert entry["warnings"] == ["args:prompt_data %s: not found" % (tmp_path / "gone.jsonl")]


def test_api_data_option_takes_a_single_path(tmp_path, monkeypatch):
    (tmp_path / "x.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    m = collect_manifest(None, argv=["python", "train.py"], env={"HOME": str(tmp_path)}, data=tmp_path / "x.jsonl")
    assert m["data"]["inputs"][0]["kind"] == "file"


def test_nothing_named_no_data_section(tmp_path):
    doc = generate(tmp_path, env=_env(tmp_path), command=["python", "train.py", "--lr", "1"])
    assert "data" not in doc
    assert doc["collection"]["probes"]["data"]["status"] == "absent"


def test_local_looking_relative_path_is_not_a_hub_id(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("{}\n")
    ctx = Context(env={}, cwd=str(tmp_path), argv=["python", "train.py", "--train-data", "data/train.jsonl",
                                                   "--dataset", "data/valid.jsonl"], argv_source="cli")
    out = data.collect(ctx)
    kinds = [(r["source"], r["kind"]) for r in out.data["data"]["inputs"]]
    # "data/valid.jsonl" does not exist and has the shape of an org/name id: it is recorded as one,
    # which is the honest reading of an ambiguous string; the existing path is a file.
    assert kinds == [("args:train_data", "file"), ("args:dataset", "hub")]


def test_symlink_loop_given_as_data_is_reported_and_the_manifest_written(tmp_path):
    (tmp_path / "loop").symlink_to("loop")
    res = run_cli("generate", "--output", str(tmp_path / "m.json"), "--data", "loop", env=_env(tmp_path),
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "m.json").read_text())
    validate_manifest(doc)
    assert doc["data"]["inputs"] == [{"source": "option", "kind": "missing", "path": "loop",
                                      "error": "symlink loop"}]
    assert doc["collection"]["probes"]["data"]["warnings"] == ["option loop: symlink loop"]


def test_corrupt_cache_at_launch_is_a_warning(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    db = tmp_path / "cache" / "relaxrepro" / "fingerprints.sqlite"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"garbage" * 100)
    doc = generate(tmp_path, "--data", "f.txt", env=_env(tmp_path))
    assert doc["data"]["inputs"][0]["full_status"] == "no-cache"
    assert doc["collection"]["probes"]["data"]["warnings"] == [
        "fingerprint cache %s is unreadable (file is not a database); full digests not recorded" % db]
    assert db.read_bytes() == b"garbage" * 100  # launch never rewrites the cache


def test_unreadable_files_are_listed_not_fatal(shared_tmp):
    root = _tree(shared_tmp / "corpus")
    (root / "secret.bin").write_bytes(b"s")
    (root / "secret.bin").chmod(0o000)
    (root / "locked").mkdir()
    (root / "locked").chmod(0o000)
    env = {"XDG_CACHE_HOME": str(shared_tmp / "cache"), "HOME": str(shared_tmp)}
    for p in (root, root / "shard", root / "shard" / "b.bin", root / "a.txt"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    out = shared_tmp / "m.json"
    res = run_unprivileged("generate", "--output", str(out), "--data", "corpus", cwd=shared_tmp, env=env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    validate_manifest(doc)
    rec = doc["data"]["inputs"][0]
    assert rec["unreadable"] == ["locked/", "secret.bin"]
    assert rec["quick"]["complete"] is False and rec["full_status"] == "incomplete"
    assert "option corpus: some files unreadable or vanished during the scan" in \
        doc["collection"]["probes"]["data"]["warnings"]

    res = run_unprivileged("fingerprint", "corpus", cwd=shared_tmp, env=env)
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == "relaxrepro fingerprint: corpus: could not read 2 path(s): locked/, secret.bin\n"


# -- relaxrepro fingerprint ------------------------------------------------------------------------

def test_fingerprint_json_and_reuse(tmp_path):
    _tree(tmp_path / "corpus")
    env = _env(tmp_path)
    first = run_cli("fingerprint", "--json", "corpus", env=env, cwd=tmp_path)
    second = run_cli("fingerprint", "--json", "corpus", env=env, cwd=tmp_path)
    assert first.returncode == second.returncode == 0
    a, b = json.loads(first.stdout)[0], json.loads(second.stdout)[0]
    assert (a["hashed"], a["reused"], b["hashed"], b["reused"]) == (2, 0, 0, 2)
    assert a["sha256"] == b["sha256"] and a["files"] == 2 and a["bytes"] == 10_006


def test_fingerprint_missing_path_fails_but_does_the_others(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    res = run_cli("fingerprint", "nope", "f.txt", env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr == "relaxrepro fingerprint: nope: not found\n"
    assert res.stdout == "sha256:%s  1 files  1 bytes  f.txt\n" % hashlib.sha256(b"x").hexdigest()


def test_fingerprint_without_paths_is_a_usage_error(tmp_path):
    res = run_cli("fingerprint", env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 2
    assert "the following arguments are required: PATH" in res.stderr


def test_fingerprint_rebuilds_a_corrupt_cache(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    db = tmp_path / "cache" / "relaxrepro" / "fingerprints.sqlite"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"garbage" * 100)
    res = run_cli("fingerprint", "f.txt", env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 0
    assert res.stderr == ("relaxrepro fingerprint: warning: fingerprint cache was corrupt (file is not a database): "
                          "moved to %s.corrupt and rebuilt\n" % db)
    doc = generate(tmp_path, "--data", "f.txt", env=_env(tmp_path))
    assert doc["data"]["inputs"][0]["full_status"] == "fresh"


def test_fingerprint_without_home_still_prints_digests(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    env = {k: v for k, v in clean_env().items() if k != "HOME"}
    res = run_cli("fingerprint", "f.txt", env=env, cwd=tmp_path)
    assert res.returncode == 0
    assert "digests are not cached" in res.stderr
    assert res.stdout.startswith("sha256:" + hashlib.sha256(b"x").hexdigest())
    assert not os.path.exists(tmp_path / ".cache")


def test_tilde_path_is_expanded_with_the_runs_home(tmp_path):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "x.jsonl").write_text("{}\n")
    ctx = Context(env={"HOME": str(home)}, cwd=str(tmp_path), argv=["python", "train.py"], argv_source="cli",
                  options={"data": ["~/data/x.jsonl"]})
    rec = data.collect(ctx).data["data"]["inputs"][0]
    assert (rec["path"], rec["kind"], rec["files"]) == ("~/data/x.jsonl", "file", 1)


def test_api_data_with_odd_items_never_crashes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = collect_manifest(None, argv=["python", "train.py"], env={"HOME": str(tmp_path)}, data=[7, "", None])
    validate_manifest(m)
    assert m["data"]["inputs"] == [{"source": "option", "kind": "missing", "path": "7", "error": "not found"}]


def test_out_of_budget_fingerprint_is_partial_with_a_warning(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(300):
        (root / ("f%03d" % i)).write_text("x")
    ctx = Context(env={}, cwd=str(tmp_path), argv=[], argv_source="none", options={"data": ["many"]},
                  deadline_s=0.0)  # the deadline has passed before the probe starts
    out = data.collect(ctx)
    rec = out.data["data"]["inputs"][0]
    assert rec["quick"]["complete"] is False
    assert out.warnings == ["option many: fingerprinted only in part within the launch budget"]
