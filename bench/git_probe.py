"""Wall time of the git probe on a big dirty repository, and on ten of them at once.

    python3 bench/git_probe.py [--files 40000] [--repos 10] [--runs 5] [--keep DIR]

Builds (once, in a temp dir or --keep DIR) a repository with ``--files`` tracked files, 20 modified
files and a 50 MB untracked file, then ``--repos`` clones of it, each dirtied the same way. Reports
the median and best of ``--runs`` probe runs for one repository and for all of them named at once
with ``--repo``-style options (targets: <= 300 ms, and <= 2x one repo). Git's own stat cache is warm
after the first run, as it is on a developer's machine; the first ("cold") run is reported too.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from relaxrepro.collect import interpreter  # noqa: E402
from relaxrepro.collect.context import Context  # noqa: E402
from relaxrepro.collect.probes import git as git_probe  # noqa: E402

ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@example.com", "GIT_CONFIG_NOSYSTEM": "1"}


def sh(*argv: str, cwd: str, check: bool = True) -> None:
    env = dict(os.environ, **ENV)
    subprocess.run(argv, cwd=cwd, env=env, check=check, stdout=subprocess.DEVNULL)


def build(root: str, files: int) -> str:
    repo = os.path.join(root, "big")
    if os.path.isdir(os.path.join(repo, ".git")):
        return repo  # reused from --keep
    os.makedirs(repo)
    sh("git", "init", "-q", cwd=repo)
    per_dir = 100
    for i in range(files):
        d = os.path.join(repo, "pkg%03d" % (i // per_dir))
        if i % per_dir == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "mod%03d.py" % (i % per_dir)), "w") as fh:
            fh.write("# module %d\nVALUE = %d\n" % (i, i))
    sh("git", "add", "-A", cwd=repo)
    sh("git", "commit", "-qm", "many files", cwd=repo)
    return repo


def dirty(repo: str) -> None:
    # Refresh the index's stat data first, as any git command of a developer would have: the probe
    # itself never writes the index (GIT_OPTIONAL_LOCKS=0), and a checkout written in the same second
    # as its index leaves "racily clean" entries git must re-read on every status.
    sh("git", "update-index", "-q", "--refresh", cwd=repo, check=False)  # exit 1: files modified
    for i in range(20):
        with open(os.path.join(repo, "pkg%03d" % i, "mod000.py"), "a") as fh:
            fh.write("CHANGED = True\n")
    big = os.path.join(repo, "checkpoint.pt")
    if not os.path.exists(big):
        with open(big, "wb") as fh:
            for _ in range(50):
                fh.write(os.urandom(1 << 20))


def clones(root: str, src: str, n: int) -> list:
    out = []
    for i in range(n):
        dst = os.path.join(root, "clone%02d" % i)
        if not os.path.isdir(dst):
            sh("git", "clone", "-q", src, dst, cwd=root)
        dirty(dst)
        out.append(dst)
    return out


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def probe_once(cwd: str, named: dict) -> tuple:
    env = {"PATH": os.environ["PATH"], "HOME": tempfile.gettempdir()}
    ctx = Context(env=env, cwd=cwd, options={"repos": named})
    ctx.memo("interpreter", lambda: interpreter.Interpreter(executable=sys.executable, sys_path=[]))
    ctx.begin_probe()
    t0, c0 = time.perf_counter(), _cpu()
    out = git_probe.collect(ctx)
    took, cpu = time.perf_counter() - t0, _cpu() - c0
    code = out.data.get("code", {})
    bad = [n for n, r in code.items() if r.get("dirty") is not True]
    if out.status != "ok" or bad or len(code) != max(len(named), 1):
        raise SystemExit("unexpected probe result: %s %s %s" % (out.status, out.warnings, bad))
    return took, cpu


def measure(label: str, cwd: str, named: dict, runs: int) -> float:
    cold, _ = probe_once(cwd, named)
    got = [probe_once(cwd, named) for _ in range(runs)]
    times = [t for t, _ in got]
    med = statistics.median(times)
    cpu = statistics.median([c for _, c in got])
    print("%-20s cold %5.0f ms  median %5.0f ms  best %5.0f ms  cpu (all processes) %5.0f ms  load %s"
          % (label, cold * 1e3, med * 1e3, min(times) * 1e3, cpu * 1e3, _load()))
    return med


def baseline(repo: str, runs: int) -> float:
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run(["git", "-C", repo, "status", "--porcelain=v2", "-z", "--untracked-files=all"], env=env,
                       stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def _load() -> str:
    try:
        return "%.1f" % os.getloadavg()[0]
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=40000)
    ap.add_argument("--repos", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", metavar="DIR", help="build in DIR and keep it (reused by the next run)")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="relaxrepro-bench-")
    os.makedirs(root, exist_ok=True)
    try:
        t0 = time.perf_counter()
        src = build(root, args.files)
        dirty(src)
        many = clones(root, src, args.repos)
        print("built in %.0f s: %d files, 20 modified, 50 MB untracked, %d clones; %d CPUs"
              % (time.perf_counter() - t0, args.files, args.repos, os.cpu_count() or 0))
        base = baseline(src, args.runs)
        print("%-20s median %5.0f ms  (plain git status -uall, same machine, same moment: the floor)"
              % ("git status alone", base * 1e3))
        one = measure("1 repo", src, {}, args.runs)
        ten = measure("%d repos at once" % args.repos, root, {"r%02d" % i: p for i, p in enumerate(many)}, args.runs)
        print("ratio %d repos / 1 repo: %.2f (target <= 2.0); 1 repo target <= 300 ms" % (args.repos, ten / one))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
