"""How much the Ray probe costs when no cluster is in sight (the common case: it must be ~free).

Usage: python3 bench/ray_probe.py [runs]   (prints median/max of detect() over the real /proc)
Against a live cluster, run `relaxrepro generate --print` and read collection.probes.ray.seconds.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from relaxrepro.collect.context import Context  # noqa: E402
from relaxrepro.collect.probes import ray  # noqa: E402


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    ctx = Context()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        hints = ray.detect(ctx)
        times.append(time.perf_counter() - t0)
    procs = sum(1 for n in os.listdir("/proc") if n.isdigit())
    print("detect(): median %.2f ms, max %.2f ms over %d runs, %d processes in /proc, hints: %s" % (
        statistics.median(times) * 1000, max(times) * 1000, runs, procs, sorted(hints) or "none"))


if __name__ == "__main__":
    main()
