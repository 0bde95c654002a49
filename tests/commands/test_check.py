"""``relaxrepro check``: judge what matters, not what merely differs.

The pure judgement is tested on hand-built documents (every rule of issue 8); the collection on
real repositories through the CLI, including the four ways an earlier implementation failed: FAIL on
a new SLURM job id, on a new untracked file, outside the repo, and PASS after a second edit to an
already-dirty file.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from relaxrepro.analyze import check as rules
from relaxrepro.collect import here
from relaxrepro.commands import check
from tests.helpers.common import clean_env, git, make_repo, run_cli
from tests.helpers.git import conflicting, git_with_slow_diff
from tests.helpers.gpu import driverless_linux
from tests.helpers.read import SHA_B, base_manifest, head, modified, write_json


def _verdicts(rec, here, hints=None):
    return {i.item: i.verdict for i in rules.compare_documents(rec, here, hints)}


def _one(rec, here, item):
    return next(i for i in rules.compare_documents(rec, here) if i.item == item)


def test_identical_environment_passes():
    rec = base_manifest()
    verdicts = _verdicts(rec, copy.deepcopy(rec))
    assert rules.FAIL not in verdicts.values() and rules.WARN not in verdicts.values()
    for item in ("code proj commit", "code proj changes", "python", "package torch", "package ray",
                 "package flash-attn", "cuda", "gpu model", "gpu count", "driver", "nccl", "cudnn", "arch",
                 "switch CUBLAS_WORKSPACE_CONFIG", "seed seed", "selected env", "config conf/a.yaml",
                 "data /data/train.jsonl"):
        assert verdicts[item] == rules.PASS, item
    for item in ("run id", "hostname", "slurm job", "bit reproducible"):
        assert verdicts[item] == rules.INFO, item


@pytest.mark.parametrize("field,value,item,verdict", [
    ("environment.python.version", "3.11.9", "python", "PASS"),
    ("environment.python.version", "3.12.1", "python", "WARN"),
    ("environment.python.version", "4.0.0", "python", "FAIL"),
    ("hardware.cuda_version", "12.4.1", "cuda", "PASS"),
    ("hardware.cuda_version", "12.1", "cuda", "WARN"),
    ("hardware.cuda_version", "11.8", "cuda", "FAIL"),
    ("hardware.gpu_model", "NVIDIA A100-SXM4-80GB", "gpu model", "FAIL"),
    ("hardware.gpu_model", "nvidia h100 80gb hbm3", "gpu model", "PASS"),
    ("hardware.gpu_count", 4, "gpu count", "WARN"),
    ("hardware.driver_version", "535.104.05", "driver", "WARN"),
    ("hardware.nccl_version", "2.20.3", "nccl", "WARN"),
    ("hardware.nccl_version", "2.18.1", "nccl", "WARN"),
    ("hardware.nccl_version", "3.0.0", "nccl", "FAIL"),
    ("hardware.cudnn_version", "9.1.0", "cudnn", "FAIL"),
    ("hardware.cudnn_version", "8.9.2", "cudnn", "WARN"),
    ("environment.packages.torch", "2.3.0+cu118", "package torch", "WARN"),
    ("environment.packages.torch", "2.3.1+cu121", "package torch", "WARN"),
    ("environment.packages.torch", "2.4.0+cu121", "package torch", "FAIL"),
    ("environment.packages.ray", "3.0.0", "package ray", "FAIL"),
    ("environment.packages.flash_attn", ..., "package flash-attn", "FAIL"),
    ("environment.packages.vllm", "0.5.0", "package vllm", "WARN"),
    ("environment.packages.numpy", "2.0.0", "other packages", "INFO"),
    ("seeds.seed", 7, "seed seed", "WARN"),
    ("seeds.switches", {}, "switch CUBLAS_WORKSPACE_CONFIG", "WARN"),
    ("config.selected_env.NCCL_ALGO", "Tree", "env NCCL_ALGO", "WARN"),
    ("config.selected_env.NCCL_P2P_DISABLE", "1", "env NCCL_P2P_DISABLE", "WARN"),
    ("config.selected_env.SLURM_JOB_ID", "2002", "env SLURM_JOB_ID", "INFO"),
    ("config.selected_env.WANDB_PROJECT", "other", "env WANDB_PROJECT", "INFO"),
    ("config.selected_env.SLURM_NNODES", "2", "env SLURM_NNODES", "WARN"),
    ("config.files", {"conf/a.yaml": "sha256:" + "0" * 64}, "config conf/a.yaml", "WARN"),
    ("data.inputs", [{"path": "/data/train.jsonl", "quick": {"sha256": "0" * 64}}], "data /data/train.jsonl",
     "WARN"),
    ("scheduler.slurm.job_id", "2002", "slurm job", "INFO"),
    ("environment.system.hostname", "gpu-node-18", "hostname", "INFO"),
    ("environment.system.kernel", "6.1.0", "kernel", "INFO"),
    ("environment.system.arch", "aarch64", "arch", "WARN"),
    ("code.proj.commit", SHA_B, "code proj commit", "FAIL"),
    ("runtime.node_count", 2, "nodes", "WARN"),
])
def test_rules(field, value, item, verdict):
    rec = base_manifest()
    here = modified(rec, field, value)
    assert _one(rec, here, item).verdict == verdict


def test_new_job_id_run_id_hostname_and_time_are_information_not_failure():
    rec = base_manifest()
    here = modified(rec, "scheduler.slurm.job_id", "9999")
    here = modified(here, "environment.system.hostname", "other-node")
    here = modified(here, "config.selected_env.SLURM_JOB_ID", "9999")
    here = modified(here, "run_id", "x")
    here = modified(here, "generated_at", "2027-01-01T00:00:00Z")
    report = rules.Report(items=rules.compare_documents(rec, here))
    assert report.verdict == rules.PASS and check.exit_code(report, strict=True) == 0


def test_absent_items_are_not_recorded_never_pass():
    rec = {"schema_version": "1.0", "run_id": "r", "generated_at": "2026-01-01T00:00:00Z", "command": {},
           "code": {}, "config": {}, "environment": {}, "hardware": {}, "runtime": {}, "training": {},
           "collection": {}}
    items = rules.compare_documents(rec, base_manifest())
    assert {i.verdict for i in items} <= {rules.NOT_RECORDED, rules.INFO}
    shown = {i.item: i for i in items}
    for item in ("code", "python", "packages", "cuda", "gpu model", "driver", "nccl", "cudnn", "seeds",
                 "selected env"):
        assert shown[item].verdict == rules.NOT_RECORDED, item
    report = rules.Report(items=items)
    assert check.render_table(report).splitlines()[-1] == (  # never "PASS (compatible)": nothing was shown to match
        "nothing to compare: the manifest records none of the items check judges (11 not recorded)")
    assert (report.verdict, check.exit_code(report)) == ("NOTHING", 1)


def test_missing_here_is_a_warning_not_a_pass():
    rec = base_manifest()
    here = modified(rec, "hardware", {})
    here = modified(here, "environment.packages", ...)
    here = modified(here, "seeds", ...)
    here = modified(here, "config", {})
    v = _verdicts(rec, here)
    assert v["cuda"] == v["gpu model"] == v["driver"] == v["nccl"] == rules.WARN
    assert v["packages"] == v["seeds"] == v["selected env"] == v["config conf/a.yaml"] == rules.WARN
    assert _verdicts(rec, modified(here, "hardware", {"gpu_count": 0}))["gpu model"] == rules.FAIL


def test_recorded_gpus_and_none_here_fails_naming_what_was_recorded():
    rec = modified(base_manifest(), "hardware", {"gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_count": 4})
    here = modified(rec, "hardware", {"gpu_count": 0, "gpus": [], "gpu_evidence": {"found": []}})
    item = _one(rec, here, "gpu model")
    assert (item.recorded, item.here, item.verdict) == ("NVIDIA A100-SXM4-80GB", "none", rules.FAIL)
    assert item.note == "recorded 4 x NVIDIA A100-SXM4-80GB, no GPU here"
    # A driver but no tool to ask (a container with /dev/nvidia* and no nvidia-smi): unknown, not none.
    here = modified(rec, "hardware", {"gpu_evidence": {"found": ["/dev/nvidiactl", "/dev/nvidia0"]}})
    item = _one(rec, here, "gpu model")
    assert (item.here, item.verdict, item.note) == ("-", rules.WARN, "not found here")


@pytest.mark.skipif(not driverless_linux(), reason="this machine has a GPU driver, or is not Linux")
def test_check_of_a_gpu_run_on_a_machine_without_gpus_fails(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    rec = modified(base_manifest(), "hardware", {"gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_count": 4})
    m = write_json(tmp_path / "m.json", rec)
    res = run_cli("check", str(m), env=clean_env(PATH=str(bindir)))
    assert res.returncode == 1, res.stdout + res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("gpu model"))
    assert line.split()[2:5] == ["NVIDIA", "A100-SXM4-80GB", "none"], line
    assert line.endswith("FAIL  (recorded 4 x NVIDIA A100-SXM4-80GB, no GPU here)"), line


def test_odd_types_never_crash():
    rec = base_manifest()
    rec["hardware"] = {"gpu_model": ["x"], "gpu_count": {"a": 1}, "nccl_version": 2.18}
    rec["seeds"] = {"seed": [1], "switches": "on"}
    rec["config"] = {"selected_env": ["A=1"], "files": [3, {"path": None}]}
    rec["data"] = {"inputs": "x"}
    rec["code"] = {"proj": "not a dict", "other": {"commit": 5, "patch": [], "submodules": "x",
                                                    "untracked": {"count": "3"}}}
    here = base_manifest(code={"other": {"commit": None, "patch": {"sha256": 1}}})
    items = rules.compare_documents(rec, here)
    assert items and all(i.verdict in rules.VERDICTS for i in items)
    assert check.render_table(rules.Report(items=items))


# -- uncommitted changes: the patch digest -----------------------------------------------------

def _repo(rec_patch=None, here_patch=None, rec_dirty=True, here_dirty=True):
    rec = base_manifest()
    rec["code"]["proj"].update(dirty=rec_dirty)
    if rec_patch:
        rec["code"]["proj"]["patch"] = {"sha256": rec_patch, "files": ["a.py"]}
    here = copy.deepcopy(rec)
    here["code"]["proj"]["dirty"] = here_dirty
    here["code"]["proj"].pop("patch", None)
    if here_patch:
        here["code"]["proj"]["patch"] = {"sha256": here_patch, "files": ["a.py", "b.py"]}
    return _one(rec, here, "code proj changes")


def test_patch_digest_rules():
    assert _repo("1" * 64, "1" * 64).verdict == rules.PASS
    second_edit = _repo("1" * 64, "2" * 64)
    assert second_edit.verdict == rules.WARN and second_edit.note == "uncommitted changes differ: +b.py"
    assert _repo("1" * 64, None, here_dirty=False).verdict == rules.WARN  # changes not here
    assert _repo("1" * 64, None).verdict == rules.WARN  # digest not computable here
    assert _repo(None, None).verdict == rules.WARN  # dirty run without a patch: cannot verify
    assert _repo(None, None, rec_dirty=False, here_dirty=True).verdict == rules.WARN
    assert _repo(None, None, rec_dirty=False, here_dirty=False).verdict == rules.PASS
    assert _repo(None, "3" * 64, rec_dirty=False, here_dirty=False).verdict == rules.INFO  # untracked only


def test_an_incomplete_patch_has_no_digest_to_compare():
    rec = base_manifest()
    rec["code"]["proj"].update(dirty=True, patch={"stored_sha256": "1" * 64, "files": ["a.py"], "incomplete":
                                                  "git diff did not finish in time", "incomplete_reason": "timeout"})
    here = copy.deepcopy(rec)
    item = _one(rec, here, "code proj changes")
    assert (item.verdict, item.recorded, item.here) == (rules.WARN, "patch incomplete", "patch incomplete")
    assert item.note == ("uncommitted changes not fully recorded (timeout: git diff did not finish in time): "
                         "cannot verify")
    # before the marker had a reason, the patch kept the digest of what was read (an empty diff): not comparable
    old = modified(rec, "code.proj.patch", {"sha256": "1" * 64, "files": ["a.py"],
                                            "incomplete": "git diff output over the capture limit"})
    item = _one(old, copy.deepcopy(old), "code proj changes")
    assert (item.verdict, item.note) == (rules.WARN, "uncommitted changes not fully recorded (git diff output "
                                                           "over the capture limit): cannot verify")
    item = _one(modified(rec, "code.proj.patch", {"sha256": "2" * 64}), here, "code proj changes")
    assert (item.verdict, item.here) == (rules.WARN, "patch incomplete")
    assert item.note == ("uncommitted changes here not fully read (timeout: git diff did not finish in time): "
                         "cannot compare")


def test_an_operation_in_progress_is_a_warning():
    rec = base_manifest()
    assert "code proj operation" not in _verdicts(rec, copy.deepcopy(rec))
    mid = modified(rec, "code.proj.operation", "rebase")
    item = _one(mid, rec, "code proj operation")
    assert (item.verdict, item.recorded, item.here, item.note) == (
        rules.WARN, "rebase", "-", "the run started in the middle of a git rebase")
    item = _one(rec, modified(rec, "code.proj.operation", "bisect"), "code proj operation")
    assert (item.verdict, item.recorded, item.here, item.note) == (
        rules.WARN, "-", "bisect", "this repo is in the middle of a git bisect here")


def test_submodules_compared_at_their_checked_out_sha():
    rec = base_manifest()
    rec["code"]["proj"]["submodules"] = [{"path": "third_party/m", "recorded_sha": SHA_B, "checked_out_sha": SHA_B}]
    assert _one(rec, copy.deepcopy(rec), "code proj submodule third_party/m").verdict == rules.PASS
    here = modified(rec, "code.proj.submodules", [{"path": "third_party/m", "checked_out_sha": "c" * 40}])
    assert _one(rec, here, "code proj submodule third_party/m").verdict == rules.FAIL
    here = modified(rec, "code.proj.submodules", [])
    assert _one(rec, here, "code proj submodule third_party/m").verdict == rules.FAIL


def test_untracked_files_are_information():
    rec = base_manifest()
    rec["code"]["proj"]["untracked"] = {"count": 0, "files": []}
    here = modified(rec, "code.proj.untracked", {"count": 1, "files": ["notes.txt"]})
    item = _one(rec, here, "code proj untracked")
    assert (item.verdict, item.note) == (rules.INFO, "new: notes.txt")


def test_gone_interpreter_names_the_closest_match():
    rec = base_manifest()
    hints = {"interpreter": {"exists": False, "closest": "/usr/bin/python3.11"}}
    items = rules.compare_documents(rec, rec, hints)
    item = next(i for i in items if i.item == "python interpreter")
    assert (item.verdict, item.note) == (rules.WARN, "closest match: /usr/bin/python3.11")


def test_closest_interpreter_prefers_the_same_minor(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("python3", "python3.11"):
        (bindir / name).write_text("#!/bin/sh\n")
        (bindir / name).chmod(0o755)
    found = here.closest_interpreter("/gone/venv/bin/python", "3.11.7", {"PATH": str(bindir)})
    assert found == str(bindir / "python3.11")
    assert here.closest_interpreter("/gone/python", "3.11.7", {"PATH": str(tmp_path / "none")}) is None
    mine = tmp_path / "home" / "venv" / "bin" / "python"
    mine.parent.mkdir(parents=True)
    mine.write_text("#!/bin/sh\n")
    mine.chmod(0o755)
    found = here.closest_interpreter("<HOME>/venv/bin/python", "3.11.7", {"PATH": str(bindir), "HOME": str(
        tmp_path / "home")})
    assert found == str(mine)  # a recorded home is this home


def test_env_info_list():
    assert rules.is_info_env("SLURM_JOB_ID") and rules.is_info_env("WANDB_RUN_ID")
    assert rules.is_info_env("HF_HOME")
    assert not rules.is_info_env("SLURM_NNODES") and not rules.is_info_env("NCCL_ALGO")
    assert not rules.is_info_env("CUDA_VISIBLE_DEVICES")


# -- the command, on real repositories ------------------------------------------------------------

def _generate(tmp_path, repo, name="m.json", env=None, command=("python", "train.py")):
    out = tmp_path / name
    res = run_cli("generate", "--output", str(out), "--", *command, cwd=repo, env=env)
    assert res.returncode == 0, res.stderr
    return out


def _check(manifest, *args, cwd=None, env=None):
    res = run_cli("check", str(manifest), "--json", *args, cwd=cwd, env=env)
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    return res.returncode, {i["item"]: i for i in doc["items"]}, doc


def test_check_from_another_directory_passes(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    m = _generate(tmp_path, repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rc, items, doc = _check(m, cwd=elsewhere)
    assert rc == 0, doc
    assert items["code repo commit"]["verdict"] == "PASS"
    assert items["code repo changes"]["verdict"] == "PASS"
    assert items["python"]["verdict"] == "PASS"
    res = run_cli("check", str(m), cwd=elsewhere)
    assert res.returncode == 0
    assert res.stdout.splitlines()[0].split() == ["ITEM", "RECORDED", "HERE", "VERDICT"]
    assert res.stdout.splitlines()[-1].startswith("PASS (compatible): 0 FAIL, 0 WARN, ")


def test_new_untracked_file_and_new_slurm_job_do_not_fail(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    m = _generate(tmp_path, repo, env=clean_env(SLURM_JOB_ID="1001", SLURM_PROCID="0"))
    (repo / "notes.txt").write_text("new\n")
    rc, items, doc = _check(m, env=clean_env(SLURM_JOB_ID="2002", SLURM_PROCID="0"))
    assert rc == 0, doc
    assert not [i for i in items.values() if i["verdict"] == "FAIL"]


def test_new_commit_fails(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    m = _generate(tmp_path, repo)
    (repo / "train.py").write_text("print(2)\n")
    git(repo, "commit", "-qam", "second")
    rc, items, doc = _check(m)
    assert rc == 1
    assert items["code repo commit"]["verdict"] == "FAIL"
    assert items["code repo commit"]["here"] == head(repo)[:12]


def test_second_edit_to_an_already_dirty_file_does_not_pass(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    (repo / "train.py").write_text("print(2)\n")
    m = _generate(tmp_path, repo)
    recorded = json.loads(m.read_text())["code"]["repo"]
    rc, items, _ = _check(m)
    if isinstance(recorded.get("patch"), dict):  # the git probe records the patch digest
        assert items["code repo changes"]["verdict"] == "PASS"
    else:  # a dirty run without a digest can never be verified, so never PASS
        assert items["code repo changes"]["verdict"] == "WARN"
    (repo / "train.py").write_text("print(3)\n")
    rc, items, _ = _check(m)
    assert items["code repo changes"]["verdict"] == "WARN"
    assert rc == 0
    assert run_cli("check", str(m), "--strict").returncode == 1


def test_a_diff_that_timed_out_twice_is_not_the_same_change(tmp_path):
    """git diff of a huge file times out when the run is recorded and again when it is checked: two
    empty diffs, which must not read as "same uncommitted changes"."""
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    (repo / "train.py").write_text("print(2)\n")
    env = clean_env(PATH=git_with_slow_diff(tmp_path / "bin"))
    m = _generate(tmp_path, repo, env=env)
    (repo / "train.py").write_text("print(3)\n")
    rc, items, _ = _check(m, env=env)
    item = items["code repo changes"]
    assert (item["verdict"], item["recorded"], item["here"]) == ("WARN", "patch incomplete", "patch incomplete")
    assert item["note"].startswith("uncommitted changes not fully recorded (timeout: git diff")
    patch = json.loads(m.read_text())["code"]["repo"]["patch"]
    assert patch["incomplete_reason"] == "timeout" and "sha256" not in patch


def test_a_run_started_mid_merge_is_a_warning(tmp_path):
    repo = conflicting(tmp_path / "repo", "train.py")
    with pytest.raises(subprocess.CalledProcessError):
        git(repo, "merge", "side")  # stops on the conflict
    m = _generate(tmp_path, repo)
    rc, items, _ = _check(m)
    item = items["code repo operation"]
    assert (item["verdict"], item["recorded"], item["here"]) == ("WARN", "merge", "merge")
    assert item["note"] == "the run started in the middle of a git merge (as this repo is here)"
    assert rc == 0


def test_recorded_home_path_resolves_against_this_home(tmp_path):
    home = tmp_path / "home"
    repo = make_repo(home / "proj", {"train.py": "print(1)\n"})
    doc = base_manifest()
    doc["code"] = {"proj": {"path": "<HOME>/proj", "commit": head(repo), "dirty": False}}
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m, env=clean_env(HOME=str(home)))
    assert items["code proj commit"]["verdict"] == "PASS"


def test_repo_option_points_at_a_moved_repo(tmp_path):
    repo = make_repo(tmp_path / "moved", {"train.py": "print(1)\n"})
    doc = base_manifest()
    doc["code"] = {"proj": {"path": "/nonexistent/proj", "commit": head(repo), "dirty": False}}
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m)
    assert rc == 1
    assert items["code proj commit"]["verdict"] == "FAIL"
    assert items["code proj commit"]["note"] == "no git repository at /nonexistent/proj; give --repo proj=PATH"
    rc, items, _ = _check(m, "--repo", "proj=%s" % repo)
    assert items["code proj commit"]["verdict"] == "PASS"
    res = run_cli("check", str(m), "--repo", "nope=/x")
    assert "--repo nope: the manifest records no repo of that name (it has: proj)" in res.stderr
    res = run_cli("check", str(m), "--repo", "novalue")
    assert res.returncode == 2 and "--repo 'novalue': expected NAME=VALUE" in res.stderr


def test_two_recorded_repos_are_both_checked(tmp_path):
    a = make_repo(tmp_path / "a", {"train.py": "print(1)\n"})
    b = make_repo(tmp_path / "b", {"lib.py": "x = 1\n"})
    doc = base_manifest()
    doc["command"]["cwd"] = str(a)
    doc["code"] = {"a": {"path": str(a), "commit": head(a), "dirty": False},
                   "megatron": {"path": str(b), "commit": head(b), "dirty": False}}
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m)
    assert items["code a commit"]["verdict"] == "PASS"
    assert items["code megatron commit"]["verdict"] == "PASS"


def test_gone_interpreter_is_reported_by_the_command(tmp_path):
    doc = base_manifest()
    doc["environment"]["python"]["executable"] = "/nonexistent/venv/bin/python"
    doc["environment"]["python"]["version"] = "%d.%d.0" % sys.version_info[:2]
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m, env=clean_env(PATH=os.path.dirname(sys.executable)))
    item = items["python interpreter"]
    assert item["verdict"] == "WARN" and item["here"] == "gone"
    assert item["note"].startswith("closest match: " + os.path.dirname(sys.executable))


def test_terminal_escape_in_a_recorded_value_is_escaped_in_the_table(tmp_path):
    doc = base_manifest()
    doc["hardware"]["gpu_model"] = "H100\x1b]0;owned\x07\x1b[2J"
    m = write_json(tmp_path / "m.json", doc)
    res = run_cli("check", str(m))
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout
    assert "H100\\x1b]0;owned\\x07" in res.stdout


def test_repo_matched_by_path_even_when_redaction_hid_another_users_home(tmp_path):
    found = {"proj": {"path": "<HOME>/work/proj", "commit": SHA_B}, "other": {"path": str(tmp_path)}}
    assert here.match_repo("proj", "/home/alice/work/proj", found, "/root") == found["proj"]
    assert here.match_repo("proj", "/home/alice/elsewhere", found, "/root") is None
    assert here.match_repo("x", str(tmp_path), found, "/root") == found["other"]
