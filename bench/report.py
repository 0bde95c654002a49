"""Benchmark: ``relaxrepro report DIR`` over 1,000 runs (target: <= 2 s), with ``ls`` of the same tree as
its peer in the same rounds.

    python bench/report.py [--runs 1000] [--kb 50] [--repeat 5]

The tree is bench/ls.py's (runs/<group>/<run>/manifest_<id>.json, ~50 KB each, 50 groups of 20): the page
holds the runs table, a sweep per group (``compare``'s table, each group's manifests read whole), the
lineage graph and a card per run. Whole command, interpreter start included; wall and CPU time, page size.
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


def timed(argv, env):
    t0 = time.monotonic()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(argv, env=env, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert res.returncode == 0, res.stderr
    return time.monotonic() - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--kb", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    base = tempfile.mkdtemp(prefix="relaxrepro-bench-report-")
    try:
        tree = os.path.join(base, "runs")
        ls.build_tree(tree, opts.runs, opts.kb)
        out = os.path.join(base, "report.html")
        env = dict(os.environ, PYTHONPATH=ROOT)
        rep, peer = [], []
        for _ in range(opts.repeat):  # interleaved: a burst of load slows both alike
            rep.append(timed([sys.executable, "-m", "relaxrepro", "report", tree, "-o", out], env))
            peer.append(timed([sys.executable, "-m", "relaxrepro", "ls", tree], env))
        wall, cpu = statistics.median(w for w, _ in rep), statistics.median(c for _, c in rep)
        print("relaxrepro report, %d runs: median %.2f s wall, %.2f s CPU (runs: %s)  target <= 2 s" % (
            opts.runs, wall, cpu, ", ".join("%.2f" % w for w, _ in rep)))
        print("peer relaxrepro ls, same tree: median %.2f s; report/ls %.1fx (median of per-round ratios)" % (
            statistics.median(w for w, _ in peer), statistics.median(a[0] / b[0] for a, b in zip(rep, peer))))
        print("page: %d KB; load average %.1f on %d CPUs" % (os.path.getsize(out) // 1024, os.getloadavg()[0],
                                                              os.cpu_count() or 1))
        return 0 if min(wall, cpu) <= 2.0 else 1
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
