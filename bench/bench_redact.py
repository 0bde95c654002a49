"""How long the redaction pass takes on a realistic ~30 KB manifest (target: < 5 ms per pass).

Usage: python3 bench/bench_redact.py [size_kb]
The document mixes what a real manifest holds: package versions, env, argv, a config file, a patch,
GPU and node records, with a few planted secrets and addresses so the slow paths run too.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from relaxrepro.manifest.redact import Redactor, redact_document  # noqa: E402


def make_doc(target_kb: int) -> dict:
    fake_token = "gh" + "p_" + "A1b2C3d4E5" * 3 + "f6G7h8"  # pragma: allowlist secret
    packages = {"pkg-%03d" % i: "%d.%d.%d" % (i % 7, i % 13, i % 29) for i in range(300)}
    env = {"VAR_%02d" % i: "/opt/tool%d/bin:/usr/local/cuda-12.4/lib64" % i for i in range(60)}
    env.update({"HF_TOKEN": "hf_" + "a" * 34, "MASTER_ADDR": "10.1.2.3", "HOME": "/home/alice",
                "SLURM_JOB_USER": "alice", "NCCL_DEBUG": "INFO"})
    config = "\n".join("layer_%d:\n  hidden_size: 4096\n  dropout: 0.1\n  name: block%d" % (i, i) for i in range(120))
    config += "\nwandb:\n  api_key: 0123456789abcdef0123456789abcdef01234567\n  project: demo\n"
    patch = "\n".join("+    x_%d = torch.zeros(%d, device='cuda')  # step %d" % (i, i, i) for i in range(80))
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%08x-1111-2222-3333-444455556666" % i,
             "memory_total_mib": 81559, "driver": "550.54.15"} for i in range(8)]
    doc = {
        "schema_version": "1.0", "run_id": "20260101_000000_abcdef0", "generated_at": "2026-01-01T00:00:00Z",
        "command": {"argv": ["python", "train.py", "--lr", "3e-4", "--hf-token", "x" * 20, "--notes",
                             "uses " + fake_token, "--max-new-tokens", "512"], "cwd": "/home/alice/proj"},
        "code": {"proj": {"commit": "a" * 40, "branch": "main", "patch": {"text": patch}}},
        "config": {"files": [{"path": "/home/alice/proj/conf.yaml", "content": config}]},
        "environment": {"packages": packages, "env": env, "python_version": "3.11.7",
                        "system": {"hostname": "gpu-node-17", "kernel": "6.8.0-45-generic"}},
        "hardware": {"gpus": gpus},
        "runtime": {"ray": {"nodes": [{"NodeManagerAddress": "10.0.0.%d" % i, "Resources": {"GPU": 8.0}}
                                      for i in range(8)]}},
        "training": {}, "collection": {"probes": {}},
    }
    size = len(json.dumps(doc))
    i = 0
    while size < target_kb * 1000:
        doc["environment"]["packages"]["extra-%04d" % i] = "1.%d.0" % i
        size += 25
        i += 1
    return doc


def main() -> None:
    kb = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    doc = make_doc(kb)
    size = len(json.dumps(doc))
    red = Redactor(home="/home/alice", hostname="gpu-node-17", user="alice")
    once = redact_document(doc, red)
    runs = []
    cpu = []
    for _ in range(30):
        r = Redactor(home="/home/alice", hostname="gpu-node-17", user="alice")
        t0, c0 = time.perf_counter(), time.process_time()
        redact_document(doc, r)
        runs.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    again = []
    for _ in range(30):
        t0 = time.perf_counter()
        redact_document(once, red)
        again.append(time.perf_counter() - t0)
    runs.sort()
    cpu.sort()
    again.sort()
    print("document %d bytes; first pass median %.2f ms wall, %.2f ms CPU (min %.2f); "
          "second pass (already redacted, same Redactor) median %.2f ms"
          % (size, runs[len(runs) // 2] * 1e3, cpu[len(cpu) // 2] * 1e3, runs[0] * 1e3, again[len(again) // 2] * 1e3))
    print("rules fired: %s" % json.dumps(once["collection"]["redactions"], sort_keys=True))


if __name__ == "__main__":
    main()
