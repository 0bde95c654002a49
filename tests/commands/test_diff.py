"""``relaxrepro diff``: most important first, volatile hidden, exact JSON, safe on a terminal."""

from __future__ import annotations

import io
import json
import sys

from relaxrepro.commands import diff
from tests.helpers.common import make_repo, run_cli
from tests.helpers.read import SHA_B, base_manifest, modified, write_json


def _run(tmp_path, old, new, *args, env=None):
    a = write_json(tmp_path / "old.json", old)
    b = write_json(tmp_path / "new.json", new)
    out, err = io.StringIO(), io.StringIO()
    rc = diff.run_cli(str(a), str(b), as_json="--json" in args, include_volatile="--all" in args, env=env or {},
                  stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def test_identical_manifests_exit_0(tmp_path):
    rc, out, err = _run(tmp_path, base_manifest(), base_manifest())
    assert (rc, out, err) == (0, "identical\n", "")


def test_volatile_fields_are_hidden_unless_all(tmp_path):
    old = base_manifest()
    new = modified(old, "run_id", "20260102_000000_1234567")
    new = modified(new, "generated_at", "2026-01-02T00:00:00Z")
    new = modified(new, "collection.seconds", 0.9)
    new = modified(new, "scheduler.slurm.job_id", "2002")
    new = modified(new, "environment.system.hostname", "gpu-node-18")
    new["config"]["selected_env"]["SLURM_JOB_ID"] = "2002"
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 0
    assert out == "identical (6 volatile fields hidden; --all shows them)\n"
    rc, out, _ = _run(tmp_path, old, new, "--all")
    assert rc == 1
    assert "volatile (shown with --all)" in out
    for needle in ("run_id", "generated_at", "scheduler.slurm.job_id", "environment.system.hostname",
                   "config.selected_env.SLURM_JOB_ID", "collection.seconds"):
        assert needle in out


def test_most_important_first(tmp_path):
    old = base_manifest()
    new = modified(old, "data.inputs", [{"path": "/data/train.jsonl", "kind": "file",
                                         "quick": {"sha256": "0" * 64}}])
    new = modified(new, "seeds.seed", 7)
    new = modified(new, "hardware.gpu_model", "NVIDIA A100-SXM4-80GB")
    new = modified(new, "runtime.node_count", 2)
    new = modified(new, "environment.packages", {"torch": "2.4.0", "ray": "2.9.3", "numpy": "1.26.4",
                                                 "flash_attn": "2.5.8"})
    new = modified(new, "config.selected_env", {"NCCL_ALGO": "Tree", "CUDA_VISIBLE_DEVICES": "0,1,2,3",
                                                "SLURM_JOB_ID": "1001"})
    new = modified(new, "config.resolved_args", {"lr": "1e-4", "seed": 1234})
    new = modified(new, "training.parallel_topology", {"tensor": 4, "pipeline": 1, "data": 1})
    new = modified(new, "code.proj.commit", SHA_B)
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1
    titles = [line for line in out.splitlines() if line and not line.startswith(" ")][:-1]
    assert titles == ["code", "training", "config", "selected env", "packages", "hardware", "runtime", "data",
                      "seeds"]
    assert "  ~ proj.commit  aaaaaaaaaaaa -> bbbbbbbbbbbb" in out
    assert "  ^ torch  2.3.0+cu121 -> 2.4.0" in out
    assert "  ~ NCCL_ALGO  Ring -> Tree" in out
    assert "  ~ training.parallel_topology.tensor  2 -> 4" in out
    assert "data.inputs[path=/data/train.jsonl].quick.sha256" in out
    assert out.splitlines()[-1] == ("10 differences: code 1, training 2, config 1, selected env 1, packages 1, "
                                    "hardware 1, runtime 1, data 1, seeds 1")


def test_packages_added_removed_upgraded_downgraded(tmp_path):
    old = base_manifest()
    new = modified(old, "environment.packages", {"torch": "2.4.0", "ray": "2.9.0", "vllm": "0.5.0",
                                                 "flash-attn": "2.5.8"})
    rc, out, _ = _run(tmp_path, old, new)
    lines = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert lines == ["+ vllm  0.5.0", "- numpy  1.26.4", "^ torch  2.3.0+cu121 -> 2.4.0", "v ray  2.9.3 -> 2.9.0"]
    rc, out, _ = _run(tmp_path, old, new, "--json")
    kinds = {c["path"]: c["kind"] for c in json.loads(out)["changes"]}
    assert kinds == {"environment.packages.vllm": "added", "environment.packages.numpy": "removed",
                     "environment.packages.torch": "upgraded", "environment.packages.ray": "downgraded"}


def test_patch_change_names_its_files(tmp_path):
    old = base_manifest()
    old["code"]["proj"].update(dirty=True, patch={"sha256": "1" * 64, "files": ["a.py", "b.py"], "text": "x"})
    new = modified(old, "code.proj.patch", {"sha256": "2" * 64, "files": ["b.py", "c.py"], "text": "y"})
    new["code"]["proj"]["untracked"] = {"count": 1, "files": ["notes.txt"]}
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1
    assert "  ~ proj.patch  uncommitted changes differ: -a.py, b.py, +c.py" in out
    assert "proj.untracked  (absent) -> 1 untracked files: +notes.txt" in out
    assert "patch.text" not in out  # the body is summarised, never dumped
    changes = json.loads(_run(tmp_path, old, new, "--json")[1])["changes"]
    patch = next(c for c in changes if c["path"] == "code.proj.patch")
    assert patch == {"category": "code", "kind": "changed", "path": "code.proj.patch", "old": "1" * 64,
                     "new": "2" * 64, "files": ["a.py", "b.py", "c.py"], "files_added": ["c.py"],
                     "files_removed": ["a.py"]}


def test_two_incomplete_patches_with_the_same_stored_part_are_never_identical(tmp_path):
    # git diff timed out in both runs: what was kept is the same, the changes themselves may not be
    patch = {"stored_sha256": "3" * 64, "files": ["big.bin"], "incomplete": "git diff did not finish in 4 s",
             "incomplete_reason": "timeout"}
    old = base_manifest()
    old["code"]["proj"].update(dirty=True, patch=dict(patch))
    new = modified(old, "code.proj.patch", dict(patch))
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1
    assert ("  ~ proj.patch  uncommitted changes not fully recorded (timeout: git diff did not finish in 4 s),"
            " cannot tell whether they differ: big.bin") in out
    assert "identical" not in out
    doc = json.loads(_run(tmp_path, old, new, "--json")[1])
    assert doc["identical"] is False
    assert doc["changes"][0]["incomplete"] == "timeout: git diff did not finish in 4 s"


def test_json_is_exact(tmp_path):
    old = base_manifest()
    new = modified(old, "code.proj.commit", SHA_B)
    new = modified(new, "config.resolved_args", {"lr": 0.0001, "seed": 1234, "layers": [1, 2]})
    rc, out, _ = _run(tmp_path, old, new, "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["identical"] is False
    by_path = {c["path"]: c for c in doc["changes"]}
    assert by_path["code.proj.commit"]["new"] == SHA_B  # full SHA, not the short display
    assert by_path["config.resolved_args.lr"]["old"] == "3e-4"
    assert by_path["config.resolved_args.lr"]["new"] == 0.0001
    assert by_path["config.resolved_args.layers"] == {"category": "config", "kind": "added",
                                                      "path": "config.resolved_args.layers", "new": [1, 2]}


def test_terminal_escape_in_a_recorded_value_never_reaches_the_terminal(tmp_path):
    old = base_manifest()
    evil = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\nnext\u202e"
    new = modified(old, "command.argv", ["python", evil])
    new["config"]["selected_env"]["NCCL_\x1b[2JX"] = "1"
    for args in ((), ("--json",), ("--all",)):
        rc, out, err = _run(tmp_path, old, new, *args)
        assert rc == 1
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\n" not in out.replace(
            "\n", "") and "\r" not in out, args
    rc, out, _ = _run(tmp_path, old, new)
    # a list is shown as JSON, whose escapes are just as inert
    assert '"\\u001b]0;owned\\u0007\\u001b[2J\\u001b[31mred\\nnext\\u202e"' in out
    assert "+ NCCL_\\x1b[2JX  1" in out


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_color_on_a_tty_unless_no_color(tmp_path):
    a = write_json(tmp_path / "a.json", base_manifest())
    b = write_json(tmp_path / "b.json", modified(base_manifest(), "code.proj.commit", SHA_B))
    out = _Tty()
    assert diff.run_cli(str(a), str(b), env={}, stdout=out, stderr=io.StringIO()) == 1
    assert "\x1b[1mcode\x1b[0m" in out.getvalue()
    out = _Tty()
    diff.run_cli(str(a), str(b), env={"NO_COLOR": "1"}, stdout=out, stderr=io.StringIO())
    assert "\x1b" not in out.getvalue()


def test_legacy_record_and_newer_minor_compare(tmp_path):
    legacy = {"experiment_name": "x", "git_commit": "a" * 40, "python_version": "3.10.12",
              "hyperparams": {"lr": 0.1}, "seed": 1}
    new = base_manifest(schema_version="1.4", lineage={"parent": "r0"})
    rc, out, err = _run(tmp_path, legacy, new)
    assert rc == 1
    assert "legacy flat record without schema_version read as a v1 manifest" in err
    assert "lineage.parent  r0" in out
    assert "config.resolved_args.lr  0.1 -> (absent)" not in out  # removed values show their old value
    assert "config.resolved_args.lr  0.1" in out


def test_two_major_versions_are_refused_with_exit_2(tmp_path):
    rc, out, err = _run(tmp_path, base_manifest(), base_manifest(schema_version="2.0"))
    assert (rc, out) == (2, "")
    assert err == "relaxrepro diff: %s: unsupported schema_version 2.0: this relaxrepro reads 1.x\n" % (
        tmp_path / "new.json")


def test_odd_types_inside_sections_never_crash(tmp_path):
    old = base_manifest()
    new = modified(old, "environment.key_packages", ["torch==2.3.0"])
    new = modified(new, "hardware", {"gpus": [1, {"index": 0}], "cpu": None})
    new = modified(new, "code.proj.patch", "not a dict")
    new = modified(new, "code.proj.untracked", 3)
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1 and out.endswith("\n")


def test_cli_diff_of_two_generated_manifests(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    assert run_cli("generate", "--output", str(a), "--", "python", "train.py", cwd=repo).returncode == 0
    (repo / "train.py").write_text("print(2)\n")
    assert run_cli("generate", "--output", str(b), "--", "python", "train.py", "--lr", "1", cwd=repo
                   ).returncode == 0
    res = run_cli("diff", str(a), str(b))
    assert res.returncode == 1, res.stderr
    assert res.stdout.startswith("code\n  ~ repo.dirty  false -> true\n")
    assert "  ~ command.argv" in res.stdout
    assert run_cli("diff", str(a), str(a)).returncode == 0


def test_diff_imports_no_probe(tmp_path):
    a = write_json(tmp_path / "a.json", base_manifest())
    code = ("import sys; from relaxrepro.cli import main; rc = main(['diff', %r, %r]); "
            "bad = sorted(m for m in sys.modules if m.startswith('relaxrepro.collect.probes') or m in "
            "('relaxrepro.collect.assemble', 'relaxrepro.collect.runner', 'subprocess')); "
            "print(rc, bad, file=sys.stderr)" % (str(a), str(a)))
    import subprocess

    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": "."})
    assert res.stderr.strip() == "0 []"
