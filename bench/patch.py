"""Benchmark: what a big uncommitted change costs ``generate`` (target: a 3.5 MB patch adds <= 0.25 s).

    python bench/patch.py [--mb 3.5] [--repeat 9] [--keep DIR]

Builds two git repositories of the same modules of this interpreter's standard library, committed short: one
clean but for a one-line change, one with every module written out whole, ``--mb`` MB of uncommitted change
(real code: it holds the words redaction looks for -- tokens, keys, host, url, login, password -- as code does,
and no secret). Times the whole ``python -m relaxrepro generate`` in each, interleaved, and prints the medians
and their difference.
bench/run.py's ``patch`` group is the same pair in its rounds, with its floor: ``git diff | sha256sum`` in the
dirty repository (reading the change at disk speed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@example.com", "GIT_CONFIG_NOSYSTEM": "1"}

def _sh(*argv: str, cwd: str, check: bool = True) -> None:
    subprocess.run(argv, cwd=cwd, env=dict(os.environ, **ENV), check=check, stdout=subprocess.DEVNULL)


def _sources(mb: float) -> list:
    """(name, text) of about ``mb`` MB of this interpreter's standard library modules, in name order: real code,
    holding what redaction looks for as ordinary code does (tokenize's tokens, http's host and url, hashlib's
    keys, smtplib's login and password) and no secret."""
    lib = os.path.dirname(os.__file__)
    out, size = [], 0
    for name in sorted(os.listdir(lib)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(lib, name), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        out.append((name, text))
        size += len(text.encode())
        if size >= mb * 1e6:
            break
    return out


def make_pair(root: str, mb: float = 3.5) -> tuple:
    """(clean repo, dirty repo) under ``root``: the same modules committed, each as its first 20 lines; the first
    with a one-line change, the second with every module written out whole (a ``git diff`` of about ``mb`` MB)."""
    sources = _sources(mb)
    out = []
    for name in ("clean", "dirty"):
        repo = os.path.join(root, name)
        os.makedirs(repo)
        _sh("git", "init", "-q", cwd=repo)
        os.makedirs(os.path.join(repo, "lib"))  # not beside the cwd: they would shadow the standard library
        for fname, text in sources:
            with open(os.path.join(repo, "lib", fname), "w", encoding="utf-8") as fh:
                fh.write("".join(text.splitlines(True)[:20]))
        _sh("git", "add", "-A", cwd=repo)
        _sh("git", "commit", "-qm", "init", cwd=repo)
        with open(os.path.join(repo, "lib", sources[0][0]), "a", encoding="utf-8") as fh:
            fh.write("y = 1\n")
        out.append(repo)
    for fname, text in sources:
        with open(os.path.join(out[1], "lib", fname), "w", encoding="utf-8") as fh:
            fh.write(text)
    for repo in out:  # the index's stat data refreshed, as any git command of a developer would have
        _sh("git", "update-index", "-q", "--refresh", cwd=repo, check=False)
    return out[0], out[1]


CASES = [
    ("floor-patch", "floor patch", "floor: git diff | sha256sum, 3.5 MB of uncommitted change (bench/patch.py)"),
    ("patch-clean", "patch", "package generate, repo of bench/patch.py, one line changed"),
    ("patch-3.5mb", "patch", "package generate, repo of bench/patch.py, 3.5 MB of uncommitted change"),
    ("base-patch-clean", "baseline", "baseline package generate, repo of bench/patch.py, one line changed"),
    ("base-patch-3.5mb", "baseline", "baseline package generate, repo of bench/patch.py, 3.5 MB of change"),
]
PATCH_FLOOR_LIMIT = 3.25
"""What a 3.5 MB patch may add to generate, in floors: issue 32's 0.25 s over the 77 ms of ``git diff |
sha256sum`` it was measured beside."""


def pair(mb: float = 3.5) -> tuple:
    """(clean repo, dirty repo) of :func:`make_pair` under the bench cache, built once."""
    import _setup

    root = os.path.join(_setup.CACHE, "patch-%g" % mb)
    if not os.path.exists(os.path.join(root, ".bench-complete")):
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        make_pair(root, mb)
        open(os.path.join(root, ".bench-complete"), "w").close()
    return os.path.join(root, "clean"), os.path.join(root, "dirty")


def add_cases(add, need: set, py: str, env_pkg: dict, gen: list, progress, env_base: dict) -> None:
    """Register the cases above with bench/run.py's ``add`` (``env_base``: the baseline commit's package, with
    ``--baseline``)."""
    if not need & {cid for cid, _, _ in CASES}:
        return
    clean, dirty = progress.fixture("patch (3.5 MB of uncommitted change)", pair)
    add("floor-patch", ["sh", "-c", "git diff | sha256sum"], env_pkg, dirty)
    add("patch-clean", [py, "-m", "relaxrepro"] + gen, env_pkg, clean)
    add("patch-3.5mb", [py, "-m", "relaxrepro"] + gen, env_pkg, dirty)
    add("base-patch-clean", [py, "-m", "relaxrepro"] + gen, env_base, clean)
    add("base-patch-3.5mb", [py, "-m", "relaxrepro"] + gen, env_base, dirty)


def add_budgets(results: dict, budget, per_round_over) -> None:
    budget("a 3.5 MB patch adds <= %gx the floor to generate (per-round difference / git diff | sha256sum)"
           % PATCH_FLOOR_LIMIT, per_round_over(results, "patch-3.5mb", "patch-clean", "floor-patch"),
           PATCH_FLOOR_LIMIT, "x", floor="floor-patch")
    # With --baseline: the same ratio for the baseline commit, over the same floor in the same rounds (the floor
    # moves with the load more than a change moves the ratio; compare these two, not two runs).
    budget("(context) --baseline: what a 3.5 MB patch adds to the baseline's generate, in the same floors",
           per_round_over(results, "base-patch-3.5mb", "base-patch-clean", "floor-patch"),
           PATCH_FLOOR_LIMIT, "x", floor="floor-patch")


def diff_bytes(repo: str) -> int:
    return len(subprocess.run(["git", "diff"], cwd=repo, capture_output=True, check=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=3.5)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="relaxrepro-patch-")
    try:
        if not os.path.isdir(os.path.join(root, "dirty")):
            make_pair(root, args.mb)
        clean, dirty = os.path.join(root, "clean"), os.path.join(root, "dirty")
        out = os.path.join(root, "out")
        os.makedirs(out, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = ROOT
        argv = [sys.executable, "-m", "relaxrepro", "generate", "--output-dir", out, "--", "python", "train.py"]
        walls: dict = {"clean": [], "dirty": []}
        for r in range(args.repeat + 1):
            for name, repo in (("clean", clean), ("dirty", dirty)):
                t0 = time.perf_counter()
                subprocess.run(argv, cwd=repo, env=env, check=True, stdout=subprocess.DEVNULL)
                if r:  # the first round warms the caches
                    walls[name].append(time.perf_counter() - t0)
        a, b = statistics.median(walls["clean"]), statistics.median(walls["dirty"])
        print("diff %.2f MB; generate clean %.0f ms, with the patch %.0f ms: +%.0f ms (medians of %d)" % (
            diff_bytes(dirty) / 1e6, a * 1e3, b * 1e3, (b - a) * 1e3, args.repeat))
        biggest = max((os.path.join(out, n) for n in os.listdir(out) if n.endswith(".json")), key=os.path.getsize)
        print("largest manifest %d bytes" % os.path.getsize(biggest))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
