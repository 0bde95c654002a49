"""Whole-process benchmarks of relaxrepro: median/min/max wall time and peak RSS, commands interleaved.

Usage: python bench/run.py [--quick] [--json OUT]
Timings come from fork/exec + os.wait4 (per-child rusage), after a warm-up, with every case run in
turn in each round so a noisy machine slows all of them alike. Budgets are checked here, never in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def real_python() -> str:
    """The interpreter binary itself: a pyenv shim adds ~130 ms of bash per start."""
    return os.path.realpath(sys.executable)


def measure(argv, cwd=None, env=None):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
    return wall, usage.ru_maxrss / 1024.0, p.returncode


def make_repo(path):
    os.makedirs(path)
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@example.com")
    subprocess.run(["git", "init", "-q", path], check=True, env=env)
    for i in range(20):
        with open(os.path.join(path, "f%d.py" % i), "w") as fh:
            fh.write("x = %d\n" % i)
    subprocess.run(["git", "-C", path, "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", path, "commit", "-qm", "init"], check=True, env=env)
    with open(os.path.join(path, "f0.py"), "a") as fh:
        fh.write("y = 1\n")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = ap.parse_args(argv)
    rounds = 7 if args.quick else 21

    work = tempfile.mkdtemp(prefix="relaxrepro-bench-")
    try:
        pyz = os.path.join(work, "relaxrepro.pyz")
        subprocess.run(["bash", os.path.join(ROOT, "zipapp.sh"), pyz], check=True, stdout=subprocess.DEVNULL)
        repo = make_repo(os.path.join(work, "repo"))
        outdir = os.path.join(work, "out")
        os.makedirs(outdir)
        py = real_python()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RANK", "SLURM_PROCID")}
        cases = {
            "floor: python -I -S -c pass": ([py, "-I", "-S", "-c", "pass"], None),
            "pyz --version": ([py, pyz, "--version"], None),
            "pyz generate (git repo)": ([py, pyz, "generate", "--output-dir", outdir, "--", "python", "train.py"],
                                        repo),
            "package generate (git repo)": ([py, "-m", "relaxrepro", "generate", "--output-dir", outdir], repo),
        }
        env_pkg = dict(env, PYTHONPATH=ROOT)
        results = {name: {"wall": [], "rss": []} for name in cases}
        for name, (cmd, cwd) in cases.items():  # warm-up
            measure(cmd, cwd=cwd, env=env_pkg if name.startswith("package") else env)
        for _ in range(rounds):
            for name, (cmd, cwd) in cases.items():
                wall, rss, rc = measure(cmd, cwd=cwd, env=env_pkg if name.startswith("package") else env)
                if rc != 0:
                    print("warning: %s exited %s" % (name, rc), file=sys.stderr)
                results[name]["wall"].append(wall)
                results[name]["rss"].append(rss)
        size_kb = os.path.getsize(pyz) / 1024.0
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = []
    for name, r in results.items():
        table.append({"case": name, "median_ms": statistics.median(r["wall"]) * 1000, "min_ms": min(r["wall"]) * 1000,
                      "max_ms": max(r["wall"]) * 1000, "peak_rss_mb": max(r["rss"])})
    by = {row["case"]: row for row in table}
    budgets = [
        ("generate <= 150 ms", by["pyz generate (git repo)"]["median_ms"] <= 150),
        ("--version <= 40 ms", by["pyz --version"]["median_ms"] <= 40),
        ("peak RSS <= 30 MB", by["pyz generate (git repo)"]["peak_rss_mb"] <= 30),
        (".pyz <= 150 KB (%.0f KB)" % size_kb, size_kb <= 150),
        (".pyz start-up <= 1.2x package (%.2fx)" % (by["pyz generate (git repo)"]["median_ms"]
                                                      / by["package generate (git repo)"]["median_ms"]),
         by["pyz generate (git repo)"]["median_ms"] <= 1.2 * by["package generate (git repo)"]["median_ms"]),
    ]
    machine = "%s, %s CPUs, Python %s" % (platform.platform(), os.cpu_count(), platform.python_version())
    print("machine: %s; %d rounds\n" % (machine, rounds))
    print("| case | median ms | min ms | max ms | peak RSS MB |")
    print("|---|---:|---:|---:|---:|")
    for row in table:
        print("| %s | %.1f | %.1f | %.1f | %.1f |" % (row["case"], row["median_ms"], row["min_ms"], row["max_ms"],
                                                   row["peak_rss_mb"]))
    print()
    for label, ok in budgets:
        print("%s %s" % ("PASS" if ok else "FAIL", label))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "rounds": rounds, "results": table,
                       "budgets": [{"budget": b, "pass": ok} for b, ok in budgets]}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
