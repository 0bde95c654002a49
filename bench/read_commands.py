#!/usr/bin/env python3
"""Timings of the reading commands: ``diff`` on two ~30 KB manifests, and ``check`` against ``generate``.

    python3 bench/read_commands.py [--runs N] [--python PYTHON]

Prints medians (and min) of whole-process wall times, next to the floor of starting Python at all,
plus ``diff``'s in-process cost (read both files, compare, render). Targets (issue 8): diff <= 40 ms
whole process on an idle machine; check no slower than generate (it runs the same probes once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def manifest(seed: int) -> dict:
    """A realistic ~30 KB manifest: 900 packages, args, env, GPUs, a small inline patch."""
    pkgs = {"pkg-%03d" % i: "1.%d.%d" % (i % 7, (i + seed) % 3 if i % 50 == 0 else 0) for i in range(900)}
    pkgs.update({"torch": "2.3.%d+cu121" % seed, "ray": "2.9.3", "vllm": "0.5.0"})
    return {
        "schema_version": "1.0", "run_id": "20260101_00000%d_abcdef0" % seed,
        "generated_at": "2026-01-01T00:00:0%dZ" % seed,
        "command": {"argv": ["python", "train.py", "--lr", "3e-%d" % (4 + seed)], "cwd": "/work", "source": "cli"},
        "code": {"proj": {"path": "/work", "commit": "%040x" % (seed + 1), "dirty": True,
                          "patch": {"sha256": "%064x" % seed, "files": ["train.py"], "text": "x" * 2000}}},
        "config": {"resolved_args": {"arg_%d" % i: i * (1 + (seed if i == 3 else 0)) for i in range(120)},
                   "selected_env": {"NCCL_%d" % i: str(i) for i in range(40)}},
        "environment": {"python": {"version": "3.11.7"}, "packages": pkgs},
        "hardware": {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                     "gpus": [{"index": i, "uuid": "GPU-%d" % i, "memory_gb": 80} for i in range(8)]},
        "runtime": {}, "training": {}, "collection": {"seconds": 0.1 * (seed + 1)},
    }


def timed(argv, runs, **kw):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        res = subprocess.run(argv, capture_output=True, **kw)
        times.append(time.perf_counter() - t0)
        if res.returncode not in (0, 1):
            sys.exit("%s failed (%d): %s" % (argv, res.returncode, res.stderr.decode()[-500:]))
    return statistics.median(times) * 1000, min(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.json", Path(tmp) / "b.json"
        a.write_text(json.dumps(manifest(0), indent=1))
        b.write_text(json.dumps(manifest(1), indent=1))
        print("manifest sizes: %d and %d bytes; %d runs each; %s" % (
            a.stat().st_size, b.stat().st_size, args.runs, args.python))
        rows = [
            ("python -c pass (floor)", [args.python, "-c", "pass"]),
            ("python -I -S -c pass", [args.python, "-I", "-S", "-c", "pass"]),
            ("relaxrepro --version", [args.python, "-m", "relaxrepro", "--version"]),
            ("relaxrepro diff", [args.python, "-m", "relaxrepro", "diff", str(a), str(b)]),
            ("relaxrepro diff --json", [args.python, "-m", "relaxrepro", "diff", "--json", str(a), str(b)]),
        ]
        times = {label: [] for label, _ in rows}
        for _ in range(args.runs):  # interleaved, as below
            for label, argv in rows:
                times[label].append(timed(argv, 1, env=env)[0])
        for label, _ in rows:
            print("%-28s median %7.1f ms   min %7.1f ms" % (label, statistics.median(times[label]),
                                                             min(times[label])))
        # What diff adds to the interpreter's own start: imports + read + compare + render, in a fresh process.
        code = ("import io, sys, time; t = time.perf_counter(); from relaxrepro.cli import main; "
                "sys.stdout = io.StringIO(); main(['diff', %r, %r]); sys.stdout = sys.__stdout__; "
                "print((time.perf_counter() - t) * 1000)" % (str(a), str(b)))
        fresh = [float(subprocess.run([args.python, "-c", code], capture_output=True, env=env, text=True
                                      ).stdout) for _ in range(args.runs)]
        print("%-28s median %7.1f ms   min %7.1f ms  (imports + read + compare + render)" % (
            "diff above the floor", statistics.median(fresh), min(fresh)))
        sys.path.insert(0, str(ROOT))
        import io

        from relaxrepro.commands import diff

        t0 = time.perf_counter()
        n = 50
        for _ in range(n):
            diff.run_cli(str(a), str(b), stdout=io.StringIO(), stderr=io.StringIO(), env={})
        print("%-28s %7.2f ms per call (read both, compare, render)" % ("diff in-process", (time.perf_counter()
                                                                                              - t0) * 1000 / n))

        repo = Path(tmp) / "repo"
        repo.mkdir()
        git_env = dict(env, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
                       GIT_COMMITTER_EMAIL="b@x")
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "i", "--allow-empty"]):
            subprocess.run(cmd, cwd=repo, env=git_env, check=True)
        out = Path(tmp) / "out"
        out.mkdir()
        m = Path(tmp) / "m.json"
        subprocess.run([args.python, "-m", "relaxrepro", "generate", "--output", str(m), "--", "python", "t.py"],
                       cwd=repo, env=env, check=True, capture_output=True)
        # Interleaved, so a burst of load on a shared machine hits both alike.
        gen_t, chk_t = [], []
        for _ in range(args.runs):
            gen_t.append(timed([args.python, "-m", "relaxrepro", "generate", "--output-dir", str(out), "--",
                                "python", "t.py"], 1, env=env, cwd=repo)[0])
            chk_t.append(timed([args.python, "-m", "relaxrepro", "check", str(m)], 1, env=env, cwd=tmp)[0])
        gen = statistics.median(gen_t), min(gen_t)
        chk = statistics.median(chk_t), min(chk_t)
        print("%-28s median %7.1f ms   min %7.1f ms" % ("relaxrepro generate", *gen))
        print("%-28s median %7.1f ms   min %7.1f ms  (from outside the repo)" % ("relaxrepro check", *chk))
    return 0


if __name__ == "__main__":
    sys.exit(main())
