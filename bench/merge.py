"""Merging node fragments: ``relaxrepro merge MANIFEST DIR`` over N fragment files (budget: 1,000 in <= 2 s).

Usage: python bench/merge.py [N] [ROUNDS]
The fragments are copies of one real fragment (an 4x A100 capture through a fake nvidia-smi), two
of them with another driver; the whole command is timed as a user runs it (new process, read N
files, merge, redact, fit, write), and the in-process merge alone.
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from relaxrepro.collect.context import Context  # noqa: E402
from relaxrepro.collect.node import collect_fragment  # noqa: E402
from relaxrepro.manifest import nodes as node  # noqa: E402

XML = os.path.join(ROOT, "tests", "fixtures", "nvidia", "xml", "telegraf__a100-sxm4-v12.xml")


def make_fragments(tmp: str, n: int):
    smi = os.path.join(tmp, "nvidia-smi")
    with open(smi, "w") as fh:
        fh.write('#!/bin/sh\ncase "$*" in\n  "-q -x") /bin/cat %s ;;\n  *) exit 2 ;;\nesac\n' % XML)
    os.chmod(smi, 0o755)
    base = collect_fragment(Context(env={"PATH": tmp}, root=tmp, options={"run_id": "bench"}))
    frags = []
    for i in range(n):
        f = copy.deepcopy(base)
        f["node"]["name"] = node.node_name("bench", "host-%05d" % i)
        if i in (7, 500):
            f["hardware"]["driver_version"] = "550.90.07"
        frags.append(f)
    return frags


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with tempfile.TemporaryDirectory() as tmp:
        frags = make_fragments(tmp, n)
        d = os.path.join(tmp, "nodes")
        os.mkdir(d)
        for f in frags:
            with open(os.path.join(d, node.fragment_filename(f)), "w") as fh:
                json.dump(f, fh, indent=1)
        manifest = {"schema_version": "1.0", "run_id": "bench", "generated_at": "2026-12-02T00:00:00Z",
                    **{s: {} for s in ("command", "code", "config", "environment", "hardware", "runtime",
                                       "training", "collection")}}
        mpath = os.path.join(tmp, "manifest_bench.json")
        with open(mpath, "w") as fh:
            json.dump(manifest, fh)
        size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
        walls = []
        env = dict(os.environ, PYTHONPATH=ROOT)
        for r in range(rounds):
            out = os.path.join(tmp, "out_%d.json" % r)
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "relaxrepro", "merge", mpath, d, "-o", out], env=env,
                                 capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            assert res.returncode == 0, res.stderr
        inproc = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            node.merge_fragments(manifest, frags)
            inproc.append(time.perf_counter() - t0)
        written = json.load(open(out))
        print("%d fragments (%.1f MB on disk), %d rounds" % (n, size / 1e6, rounds))
        print("relaxrepro merge (new process, read+merge+write): median %.3f s, max %.3f s"
              % (statistics.median(walls), max(walls)))
        print("merge_fragments in process: median %.3f s" % statistics.median(inproc))
        print("written: %d bytes; heterogeneity: %s" % (os.path.getsize(out),
                                                        node.summarize_heterogeneity(written)[:1]))
        print("truncated: %s" % (written["collection"].get("truncated") or "nothing")[:3])


if __name__ == "__main__":
    main()
