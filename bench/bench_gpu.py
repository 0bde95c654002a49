#!/usr/bin/env python3
"""How long the gpu probe takes: parsing every nvidia capture, and collecting through a fake
nvidia-smi (so the time is ours plus process start-up, not the driver's).

Usage: python3 bench/bench_gpu.py [ROUNDS]   (prints one line per measurement)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from relaxrepro.collect.context import Context  # noqa: E402
from relaxrepro.collect.probes import nvidia, nvidia_parse  # noqa: E402
from tests.helpers import nvidia_q  # noqa: E402  (-q: the tests' third witness, not the product's)

FX = os.path.join(ROOT, "tests", "fixtures", "nvidia")
PARSERS = {"xml": nvidia_parse.parse_smi_xml, "csv": lambda t: nvidia_parse.parse_query_csv(t, None),
           "list": nvidia_parse.parse_list, "table": nvidia_parse.parse_table, "query_q": nvidia_q.parse_q,
           "topo": nvidia_parse.parse_topo}


def _texts(category: str):
    d = os.path.join(FX, category)
    for name in sorted(os.listdir(d)):
        if not name.endswith((".json", ".md")):
            with open(os.path.join(d, name), encoding="utf-8", errors="replace") as fh:
                yield fh.read()


def bench_parsers(rounds: int) -> None:
    for category, parse in PARSERS.items():
        texts = list(_texts(category))
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for text in texts:
                parse(text)
            times.append((time.perf_counter() - t0) / len(texts))
        print("parse %-8s %3d captures: median %.3f ms per capture" % (category, len(texts),
                                                                        statistics.median(times) * 1000))


def bench_collect(rounds: int) -> None:
    xml = os.path.join(FX, "xml", "telegraf__a100-sxm4-v12.xml")
    topo = os.path.join(FX, "topo", "ThunderKittens-issue167__8xH100_NV18_spaces_TRUNCATED_legend.txt")
    with tempfile.TemporaryDirectory() as tmp:
        smi = os.path.join(tmp, "nvidia-smi")
        with open(smi, "w") as fh:
            fh.write('#!/bin/sh\ncase "$*" in\n  "-q -x") /bin/cat %s ;;\n  "topo -m") /bin/cat %s ;;\n'
                     '  *) exit 2 ;;\nesac\n' % (xml, topo))
        os.chmod(smi, 0o755)
        times = []
        for _ in range(rounds):
            ctx = Context(env={"PATH": tmp}, root=tmp)
            t0 = time.perf_counter()
            out = nvidia.collect(ctx)
            times.append(time.perf_counter() - t0)
            assert out.data["hardware"]["gpu_source"] == "nvidia-smi -q -x"
        print("collect with fake nvidia-smi (3 concurrent calls): median %.1f ms, max %.1f ms"
              % (statistics.median(times) * 1000, max(times) * 1000))


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    bench_parsers(n)
    bench_collect(n)
