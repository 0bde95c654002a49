"""Helpers for the reading commands' tests (check, diff, rerun, restore): hand-built manifests and
real dirty repositories with their ``git diff --binary`` patches."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

from tests.helpers.common import git

SHA_A = "a" * 40
SHA_B = "b" * 40


def base_manifest(**sections: Any) -> Dict[str, Any]:
    """A complete, plausible v1 manifest written by hand (every section the probes will fill)."""
    doc: Dict[str, Any] = {
        "schema_version": "1.0",
        "run_id": "20260101_000000_abcdef0",
        "generated_at": "2026-01-01T00:00:00Z",
        "command": {"argv": ["python", "train.py", "--lr", "3e-4"], "cwd": "/work/proj", "source": "cli"},
        "code": {"proj": {"path": "/work/proj", "commit": SHA_A, "branch": "main", "dirty": False}},
        "config": {
            "resolved_args": {"lr": "3e-4", "seed": 1234},
            "selected_env": {"NCCL_ALGO": "Ring", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_JOB_ID": "1001"},
            "files": {"conf/a.yaml": "sha256:" + "c" * 64},
            "file_details": {"conf/a.yaml": {"size": 10}},
            "hash": "d" * 64,
        },
        "environment": {
            "python_version": "3.11.7",
            "python": {"version": "3.11.7", "implementation": "CPython", "executable": "/usr/bin/python3"},
            "packages": {"torch": "2.3.0+cu121", "ray": "2.9.3", "numpy": "1.26.4", "flash_attn": "2.5.8"},
            "packages_digest": "e" * 64,
            "system": {"os": "Linux", "kernel": "5.15.0", "arch": "x86_64", "hostname": "gpu-node-17"},
        },
        "hardware": {
            "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "visible_gpu_count": 4, "gpu_memory_gb": 80,
            "driver_version": "550.54.15", "cuda_version": "12.4", "cuda_driver_version": "12.4",
            "nccl_version": "2.20.5", "cudnn_version": "8.9.7",
        },
        "runtime": {"mode": "ray-single-node", "node_count": 1},
        "training": {"algorithm": "grpo", "parallel_topology": {"tensor": 2, "pipeline": 1, "data": 2},
                     "global_batch_size": 256, "micro_batch_size": 4, "world_size": 4},
        "scheduler": {"slurm": {"job_id": "1001"}},
        "seeds": {"seed": 1234, "pythonhashseed": "0", "switches": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
                  "bit_reproducible": False, "missing": ["torch.use_deterministic_algorithms"]},
        "data": {"inputs": [{"path": "/data/train.jsonl", "kind": "file", "quick": {"sha256": "f" * 64}}]},
        "collection": {"probes": {"git": {"status": "ok", "seconds": 0.01, "warnings": []}}, "seconds": 0.2},
    }
    doc.update(sections)
    return doc


def modified(doc: Dict[str, Any], dotted: str, value: Any) -> Dict[str, Any]:
    """A deep copy of ``doc`` with ``dotted`` set (``...`` as value deletes it)."""
    out = copy.deepcopy(doc)
    node = out
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if value is ...:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return out


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=1))
    return path


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def binary_patch(repo: Path) -> bytes:
    """The working tree's change against HEAD as ``git diff --binary`` bytes, untracked files included.

    Untracked files are added with ``--intent-to-add`` (as issue 3's probe embeds them), then the
    index is put back, so the repo's state is what it was.
    """
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(repo), "PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1"}
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "-z"], cwd=repo, env=env,
                               capture_output=True, check=True).stdout.split(b"\0")
    untracked = [u.decode() for u in untracked if u]
    if untracked:
        subprocess.run(["git", "add", "-N", "--"] + untracked, cwd=repo, env=env, check=True)
    try:
        out = subprocess.run(["git", "diff", "--binary", "HEAD"], cwd=repo, env=env, capture_output=True,
                             check=True).stdout
    finally:
        if untracked:
            subprocess.run(["git", "reset", "-q", "--"] + untracked, cwd=repo, env=env, check=True)
    return out


def patch_record(body: bytes, files: Optional[list] = None, *, inline: bool = True,
                 sidecar: Optional[str] = None) -> Dict[str, Any]:
    digest = hashlib.sha256(body).hexdigest()
    rec: Dict[str, Any] = {"sha256": digest, "stored_sha256": digest, "size": len(body), "files": files or [],
                           "inline": inline, "redacted_lines": [], "restores_exactly": True}
    if inline:
        rec["text"] = body.decode("utf-8", "surrogateescape")
    else:
        rec["sidecar"] = sidecar
    return rec


def tree_bytes(root: Path) -> Dict[str, bytes]:
    """Every file under ``root`` (``.git`` dirs and files excluded) with its bytes and exec bit."""
    out: Dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            if f == ".git":
                continue
            p = Path(dirpath) / f
            rel = str(p.relative_to(root))
            mode = b"x" if os.access(p, os.X_OK) else b"-"
            out[rel] = mode + (os.readlink(p).encode() if p.is_symlink() else p.read_bytes())
    return out
