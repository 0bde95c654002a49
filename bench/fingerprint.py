"""Benchmark the data fingerprints against their targets.

1. Full digest throughput of one file against ``sha256sum`` on the same bytes (target >= 0.9x).
2. Cached re-fingerprint of a many-file tree: the launch path (scan + cache lookup + Merkle, no
   reads) and ``relaxrepro fingerprint`` run again (target <= 1 s for 100k files).

Test data is generated under a temp dir and deleted afterwards (``--keep`` keeps it).
Usage: python3 bench/fingerprint.py [--size-mb 1024] [--files 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from relaxrepro.collect import fingerprint  # noqa: E402


def _best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def bench_file(workdir: str, size_mb: int, repeat: int) -> dict:
    path = os.path.join(workdir, "big.bin")
    block = os.urandom(1 << 20)
    with open(path, "wb") as fh:
        for i in range(size_mb):
            fh.write(block[i % 251:] + block[: i % 251])  # every MB different, cheap to make
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # both read from the page cache
    ours_s, ours = _best(lambda: fingerprint.file_sha256(path), repeat)
    theirs_s, out = _best(lambda: subprocess.run(["sha256sum", path], capture_output=True, text=True,
                                                 check=True).stdout.split()[0], repeat)
    assert ours == out, "digests differ: %s vs %s" % (ours, out)
    mb = size_mb
    return {"bytes": size_mb << 20, "relaxrepro_s": round(ours_s, 3), "sha256sum_s": round(theirs_s, 3),
            "relaxrepro_MBps": round(mb / ours_s), "sha256sum_MBps": round(mb / theirs_s),
            "ratio": round(theirs_s / ours_s, 3), "target": ">= 0.9"}


def _lstat_walk(root: str) -> int:
    """The floor: the same directory listing and lstat calls with no bookkeeping at all."""
    n = 0
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for d in it:
                if d.is_dir(follow_symlinks=False):
                    stack.append(d.path)
                else:
                    d.stat(follow_symlinks=False)
                    n += 1
    return n


def bench_tree(workdir: str, files: int, repeat: int) -> dict:
    root = os.path.join(workdir, "tree")
    per_dir = 1000
    t0 = time.perf_counter()
    for i in range(files):
        d = os.path.join(root, "d%04d" % (i // per_dir))
        if i % per_dir == 0:
            os.makedirs(d)
        with open(os.path.join(d, "f%06d.jsonl" % i), "wb") as fh:
            fh.write(b'{"text": "sample %d"}\n' % i)
    made_s = time.perf_counter() - t0
    cache_path = os.path.join(workdir, "cache", "fingerprints.sqlite")

    rw = fingerprint.Cache(cache_path, readonly=False)
    t0 = time.perf_counter()
    first = fingerprint.full_digest(fingerprint.scan(root), rw, hash_missing=True, settle=True)  # as the command
    fill_s = time.perf_counter() - t0
    rw.close()
    assert first.status == "fresh" and first.hashed == files

    def launch():
        ro = fingerprint.Cache(cache_path, readonly=True)
        try:
            return fingerprint.full_digest(fingerprint.scan(root), ro, hash_missing=False)
        finally:
            ro.close()

    def rerun():
        c = fingerprint.Cache(cache_path, readonly=False)
        try:
            return fingerprint.full_digest(fingerprint.scan(root), c, hash_missing=True)
        finally:
            c.close()

    launch_s, launched = _best(launch, repeat)
    assert launched.sha256 == first.sha256 and launched.reused == files
    rerun_s, again = _best(rerun, repeat)
    assert again.sha256 == first.sha256 and again.hashed == 0
    scan_s, s = _best(lambda: fingerprint.scan(root), repeat)
    floor_s, _ = _best(lambda: _lstat_walk(root), repeat)
    quick_s, _ = _best(lambda: fingerprint.quick_digest(s), 1)
    return {"files": files, "create_s": round(made_s, 2), "first_fingerprint_s": round(fill_s, 2),
            "cached_launch_s": round(launch_s, 3), "cached_fingerprint_cmd_s": round(rerun_s, 3),
            "scan_only_s": round(scan_s, 3),
            "bare_scandir_lstat_walk_s": round(floor_s, 3),
            "quick_digest_reads_s": round(quick_s, 3), "target": "<= 1.0 s"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to make the test data (default: a temp dir in /tmp)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="relaxrepro-bench-", dir=a.dir)
    try:
        report = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "load_average": os.getloadavg()}
        if a.size_mb:
            report["full_digest_vs_sha256sum"] = bench_file(workdir, a.size_mb, a.repeat)
        if a.files:
            report["cached_tree"] = bench_tree(workdir, a.files, a.repeat)
        print(json.dumps(report, indent=1))
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
