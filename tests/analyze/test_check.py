"""The judgement of ``relaxrepro check`` on hand-built documents: every rule, what is information rather than
failure, what was not recorded, and the uncommitted changes compared by their patch digest."""

from __future__ import annotations

import copy

import pytest

from relaxrepro.analyze import check as rules
from tests.helpers.read import SHA_B, base_manifest, modified


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


def test_env_info_list():
    assert rules.is_info_env("SLURM_JOB_ID") and rules.is_info_env("WANDB_RUN_ID")
    assert rules.is_info_env("HF_HOME")
    assert not rules.is_info_env("SLURM_NNODES") and not rules.is_info_env("NCCL_ALGO")
    assert not rules.is_info_env("CUDA_VISIBLE_DEVICES")
