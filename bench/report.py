"""Benchmark: ``relaxrepro report DIR`` over 1,000 runs (target: <= 3x ``ls`` of the same tree, in the same
rounds), the first page of a tree (cold: a fresh run index, its rows and cards made), a page with ``--no-index``
and the next pages (warm: the cards kept in the index), each against ``ls`` of the same tree.

    python bench/report.py [--runs 1000] [--kb 50] [--repeat 5] [--tree DIR] [--baseline SRC]

The tree is bench/ls.py's (runs/<group>/<run>/manifest_<id>.json, ~50 KB each, 50 groups of 20; ``--tree``: one
built already, such as bench/run.py's ``$RELAXREPRO_BENCH_CACHE/ls-1000``): the page holds the runs table, a
sweep per group (``compare``'s table), the lineage graph and a card per run. Whole command, interpreter start
included; wall and CPU time (medians of interleaved rounds), the per-round ratio to ``ls``, page size, peak RSS.
``--baseline SRC``: also the report (warm and cold) of the relaxrepro package in SRC (``git archive COMMIT
relaxrepro | tar -x -C SRC``), in the same rounds.
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ls  # noqa: E402


def timed(argv, env, cwd=None):
    """(wall s, CPU s, peak RSS MB) of one command (the RSS: the largest child's so far, so the cases with the
    largest come last in a round)."""
    t0 = time.monotonic()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(argv, env=env, capture_output=True, cwd=cwd)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert res.returncode == 0, res.stderr
    return time.monotonic() - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, r1.ru_maxrss / 1024



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--kb", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tree", metavar="DIR", help="a tree built already (bench/ls.py's layout)")
    ap.add_argument("--baseline", metavar="SRC", help="a directory holding another relaxrepro package to compare")
    opts = ap.parse_args()
    base = tempfile.mkdtemp(prefix="relaxrepro-bench-report-")
    try:
        tree = os.path.abspath(opts.tree) if opts.tree else os.path.join(base, "runs")
        if not opts.tree:
            ls.build_tree(tree, opts.runs, opts.kb)
        out = os.path.join(base, "report.html")
        env = dict(os.environ, PYTHONPATH=ROOT, RELAXREPRO_CACHE_DIR=os.path.join(base, "cache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        report = [sys.executable, "-m", "relaxrepro", "report", tree, "-o", out]
        cases = {"ls": [sys.executable, "-m", "relaxrepro", "ls", tree], "report": report,
                 "report --no-index": report + ["--no-index"], "report, cold index": report}
        if opts.baseline:
            cases["baseline report"] = report
            cases["baseline report, cold index"] = report
        for argv in (report, cases["ls"]):  # warm-up: the index and its cards
            subprocess.run(argv, env=env, capture_output=True, check=True, cwd=base)
        got: dict = {name: [] for name in cases}
        for i in range(opts.repeat):  # interleaved: a burst of load slows every case alike
            for name, argv in cases.items():
                run_env = env
                if name.endswith("cold index"):
                    run_env = dict(env, RELAXREPRO_CACHE_DIR=os.path.join(base, "cold%d%s" % (i, name[0])))
                if name.startswith("baseline"):
                    run_env = dict(run_env, PYTHONPATH=os.path.abspath(opts.baseline))
                got[name].append(timed(argv, run_env, base))  # not here: `-m` would import ./relaxrepro
        print("%d runs, %d rounds, %s" % (opts.runs, opts.repeat, tree))
        print("| case | median s | CPU s | x ls (median of per-round ratios) |")
        print("|---|---:|---:|---:|")
        for name, rows in got.items():
            ratio = statistics.median(a[0] / b[0] for a, b in zip(rows, got["ls"]))
            print("| %s | %.3f | %.3f | %.2f |" % (name, statistics.median(r[0] for r in rows),
                                                 statistics.median(r[1] for r in rows), ratio))
        print("page: %d KB; peak RSS of all: %.0f MB; load average %.1f on %d CPUs" % (
            os.path.getsize(out) // 1024, max(r[2] for rows in got.values() for r in rows), os.getloadavg()[0],
            os.cpu_count() or 1))
        warm = statistics.median(a[0] / b[0] for a, b in zip(got["report"], got["ls"]))
        return 0 if warm <= 3.0 else 1
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
