"""Whole-process benchmarks of relaxrepro against its peers and the floor: median/min/max wall time and
peak RSS, commands interleaved, ratios computed pair by pair.

Usage: python bench/run.py [--quick] [--json OUT] [--markdown OUT] [--only CASES] [--rounds N]

Each case is a fresh process (fork/exec + os.wait4 for per-child rusage), timed after one warm-up, every
case run once per round in turn, so a burst of load on a shared machine slows all of them alike. A budget
that compares two commands uses the median of the per-round ratios. CPU ms is user+sys of the process and its
children; peak RSS comes from GNU time. PYTHONDONTWRITEBYTECODE is removed (but for the case that sets it), the
package is byte-compiled first as pip would, and the .pyz cache is a fresh temp dir (its first run is
reported). Interpreters are the real binaries (os.path.realpath; a venv's bin/python is the venv's own
symlink), never pyenv shims; `python` in the recorded command resolves to that binary's directory.

Slow fixtures are built once and reused under bench/.cache (or $RELAXREPRO_BENCH_CACHE): the ML venv
(torch 2.13.0 CPU, numpy, scipy, pandas, transformers, datasets, accelerate, pyarrow, ray[default]), the
peers venv (wandb, mlflow), a 40k-file repo with a 50 MB untracked file, trees of 10,000, 1,000 and 100,000
manifests, a repo with 3.5 MB of uncommitted change, an MLflow SQLite store of the 10,000-run index tree
(bench/mlflow_query.py: its cases run relaxrepro and MLflow each in one warm process, call by call).
--quick runs 5 rounds over small fixtures (_setup.QUICK: a 2,000-file repo, trees of 1,000, 200 and 2,000
manifests), skips the cases that need a 1 GB file or a million-row trace, and skips the venv cases when their
venv is not built yet: ~2 minutes from an empty cache on 2 cores. On a terminal, stderr says each fixture built
and each case started.

Every budget is a ratio measured in the same rounds, never an absolute time (which fails on a slower day with
nothing changed): to a peer (collect_env, ls of the same tree) or to a named floor, the least a process doing
that job must cost -- `python -c pass` in the same venv, a bare json.load of the same files, a walk and stat of
the same tree, `git diff | sha256sum` of the same change. A limit that replaced an absolute one is that time
over its floor's median in the run that set it (bench/RESULTS.md says which).
The Ray cases start a one-node cluster in a loopback-only network namespace (needs root, unshare,
nsenter; RAY_USAGE_STATS_ENABLED=0) and always stop it, killing only processes in that namespace.

CASES for --only: comma-separated case ids or groups (see --list).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _setup  # noqa: E402

ROOT = _setup.ROOT

# id -> (groups, label). Order is the table's order.
_BASELINE_PAIRS = {"ml-generate": "base-ml-generate", "pkg-small": "base-pkg-small", "pyz-small": "base-pyz-small",
                   "check": "base-check", "diff": "base-diff", "pkg-version": "base-pkg-version",
                   "pyz-version": "base-pyz-version", "patch-clean": "base-patch-clean",
                   "patch-3.5mb": "base-patch-3.5mb"}
"""With --baseline: each case and the same case run from the baseline commit, in the same rounds."""

CASES = [
    ("floor-isS", "floor", "floor: python -I -S -c pass"),
    ("floor-c", "floor", "floor: python -c pass"),
    ("floor-ml", "floor ml", "floor: ML venv python -c pass (no system site-packages .pth)"),
    ("floor-clean", "floor read", "floor: clean venv python -c pass (same interpreter, no site-packages)"),
    ("pyz-version", "pyz", "pyz --version"),
    ("pkg-version", "pyz", "package --version"),
    ("pyz-cold", "pyz", "pyz generate, small repo, cold (first run: unpack + compile; 1 run)"),
    ("pyz-small", "pyz generate", "pyz generate, small repo"),
    ("pkg-small", "pyz generate check", "package generate, small repo"),
    ("pyz-nobytecode", "pyz", "pyz generate, small repo, PYTHONDONTWRITEBYTECODE=1 (as many images set)"),
    ("repos10", "generate", "pyz generate, 10 repos (--repo x9)"),
    ("bigrepo", "generate", "pyz generate, 40k-file repo + 50 MB untracked file"),
    ("ml-generate", "ml generate", "pyz generate in the ML venv"),
    ("ml-generate-first", "ml generate", "pyz generate in the ML venv, facts cache unusable (a node's first run)"),
    ("base-ml-generate", "baseline", "baseline pyz generate in the ML venv"),
    ("collect-env", "ml peers", "peer: python -m torch.utils.collect_env (ML venv)"),
    ("pip-freeze", "ml peers", "peer: pip freeze (ML venv)"),
    ("wandb", "peers", "peer: python -c 'import wandb'"),
    ("mlflow", "peers", "peer: python -c 'import mlflow'"),
    ("diff", "read", "package diff, two ~30 KB manifests (clean venv python)"),
    ("diff-sys", "read", "package diff, two ~30 KB manifests (system python: its site-packages runs a .pth)"),
    ("base-diff", "baseline", "baseline package diff (clean venv python)"),
    ("check", "read check", "package check, ~30 KB manifest, small repo"),
    ("base-pkg-small", "baseline", "baseline package generate, small repo"),
    ("base-check", "baseline", "baseline package check, ~30 KB manifest, small repo"),
    ("base-pkg-version", "baseline", "baseline package --version"),
    ("base-pyz-version", "baseline", "baseline pyz --version"),
    ("base-pyz-small", "baseline", "baseline pyz generate, small repo"),
    ("ls", "read", "package ls, 10,000 manifests"),
    ("merge", "read", "package merge, 1,000 fragments"),
    ("report", "read report", "package report, 1,000 manifests (runs, 50 sweeps, lineage; bench/report.py)"),
    ("attach", "trackers", "bench/trackers.py 5: W&B offline, write_manifest attached vs not (own share: its output)"),

    ("idx-cold", "index", "package index, 100,000 manifests, cold (empty cache)"),
    ("idx-ls", "index", "package ls, 100,000 manifests, warm index, nothing changed"),
    ("idx-scan", "index", "package ls --no-index, 100,000 manifests (today's full scan)"),
    ("idx-add100", "index", "package ls after adding 100 runs (the 100 written first, in the same process tree)"),
    ("idx-pkg", "index", "package ls --where pkg.torch==2.3.* (warm index)"),
    ("idx-lineage", "index", "package lineage of a 50-deep chain (warm index)"),
    ("idx-pkg-new", "index", "package ls --where pkg.torch==2.3.* --until <new each round> (no kept answer)"),
    ("idx-floor", "index", "walk + stat of the 100,000 manifests alone (every check's floor; bench/runindex.py)"),
    ("idx-reset", "index", "(not a measure) idx-add100's runs removed, `relaxrepro index`: the tree as before"),
    ("ray-generate", "ray", "pyz generate, live one-node Ray (ML venv)"),
    ("ray-status", "ray", "peer: ray status"),
    ("ray-list", "ray", "peer: ray list nodes"),
]
CASES += __import__("verify").CASES  # issue 18: bench/verify.py
CASES += __import__("runindex").CASES  # the index's queries and cold build, to their floors
CASES += __import__("patch").CASES
CASES += __import__("mlflow_query").CASES  # issue 32: in process against MLflow on SQLite
CASES += [
    ("floor-json", "floor read", "floor: clean venv python, json.load of the two ~30 KB manifests diff reads"),
    ("report-ls", "read report", "package ls of report's tree (report's peer, same rounds)"),
]
_QUICK_SKIPS = ("result-1g", "sha256sum-1g", "result-1g-cached", "verify-100k-names", "verify-1m-rows",
                "json-100k-names", "json-1m-rows", "trace-1m", "trace-0", "call-1m", "call-0", "attach") + tuple(
    cid for cid, _, _ in __import__("mlflow_query").CASES)
"""Not under --quick: cases whose fixture is large whatever the size (a 1 GB file, a trace of a million rows, a
million trace calls: ~4 s a round), the W&B one (~4 s a round, its import) and MLflow's queries (the peers venv
and a store of 10,000 runs: ~2 minutes to build once)."""
LABEL = {cid: label for cid, _, label in CASES}


TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
_RSS_FILE = os.path.join(tempfile.gettempdir(), "relaxrepro-bench-rss.%d" % os.getpid())


def measure(argv: List[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None):
    """(wall seconds, peak RSS MB, exit code) of one run.

    The peak RSS comes from GNU time (%M) when it is there: a child forked from this benchmark inherits
    its ~30 MB high-water mark across exec, so os.wait4's ru_maxrss would floor every case at our size;
    time's own child is forked from a small process. The extra fork/exec costs every case alike.
    """
    full = [TIME, "-f", "%M", "-o", _RSS_FILE] + list(argv) if TIME else list(argv)
    t0 = time.perf_counter()
    p = subprocess.Popen(full, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
    p.returncode = rc
    rss = usage.ru_maxrss / 1024.0
    if TIME:
        try:
            with open(_RSS_FILE) as fh:
                rss = int(fh.read().split()[-1]) / 1024.0  # "Command exited with non-zero status N" first
        except (OSError, ValueError, IndexError):
            rss = float("nan")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, rss, rc, cpu


def selected(only: Optional[str]) -> List[str]:
    if not only:
        return [cid for cid, _, _ in CASES]
    want = {w.strip() for w in only.split(",") if w.strip()}
    unknown = want - {cid for cid, _, _ in CASES} - {g for _, gs, _ in CASES for g in gs.split()}
    if unknown:
        raise SystemExit("unknown case or group: %s (see --list)" % ", ".join(sorted(unknown)))
    return [cid for cid, groups, _ in CASES if cid in want or want & set(groups.split())]


def run_rounds(cases: Dict[str, dict], rounds: int, results: Dict[str, dict],
               progress: Optional[_setup.Progress] = None) -> None:
    """One warm-up each, then ``rounds`` rounds with every case once per round, in turn."""
    progress = progress or _setup.Progress()
    for cid, c in cases.items():
        progress.say("case %s: %s" % (cid, LABEL.get(cid, "")))
        rc = measure(c["argv"], c.get("cwd"), c["env"])[2]
        if rc not in c.get("ok_rc", (0,)):
            print("warning: %s exited %s in the warm-up" % (cid, rc), file=sys.stderr)
    for r in range(rounds):
        for cid, c in cases.items():
            wall, rss, rc, cpu = measure(c["argv"], c.get("cwd"), c["env"])
            if rc not in c.get("ok_rc", (0,)):
                print("warning: %s exited %s" % (cid, rc), file=sys.stderr)
            res = results.setdefault(cid, {"wall": [], "rss": [], "cpu": []})
            res["wall"].append(wall)
            res["rss"].append(rss)
            res["cpu"].append(cpu)
        progress.say("round %d/%d done" % (r + 1, rounds))


def pair_ratio(results: Dict[str, dict], a: str, b) -> Optional[float]:
    """Median over rounds of a/b (b: one id, or a tuple of ids whose per-round minimum is taken)."""
    bs = (b,) if isinstance(b, str) else b
    if a not in results or any(x not in results for x in bs):
        return None
    walls = [results[x]["wall"] for x in bs]
    return statistics.median(w / min(o) for w, *o in zip(results[a]["wall"], *walls))


def per_round_over(results: Dict[str, dict], a: str, b: str, floor: str) -> Optional[float]:
    """Median over rounds of (a - b) / floor: what ``a`` adds to ``b``, in floors of the same round."""
    if a not in results or b not in results or floor not in results:
        return None
    return statistics.median((x - y) / f for x, y, f in zip(results[a]["wall"], results[b]["wall"],
                                                           results[floor]["wall"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="5 rounds over small fixtures (~2 minutes from an empty "
                    "cache); skip venv cases whose venv is not built")
    ap.add_argument("--rounds", type=int, help="rounds (default 15, --quick 5)")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    ap.add_argument("--markdown", metavar="OUT", help="also write the Markdown table to OUT")
    ap.add_argument("--only", metavar="CASES", help="comma-separated case ids or groups")
    ap.add_argument("--list", action="store_true", help="list the case ids and groups, then exit")
    ap.add_argument("--baseline", metavar="REF", help="also time this git commit's .pyz and package in the same "
                    "rounds (the baseline group): before/after of a change")
    args = ap.parse_args(argv)
    if args.list:
        for cid, groups, label in CASES:
            print("%-13s %-22s %s" % (cid, groups, label))
        return 0
    rounds = args.rounds or (5 if args.quick else 15)
    want = selected(args.only)
    notes: List[str] = []
    sizes = _setup.QUICK if args.quick else _setup.FULL
    if args.quick:
        skipped = [c for c in want if c in _QUICK_SKIPS]
        want = [c for c in want if c not in _QUICK_SKIPS]
        if skipped:
            notes.append("--quick: %s not run (a large fixture at any size, W&B's import, or MLflow's store and peers "
                         "venv)" % ", ".join(skipped))
        notes.append("--quick fixtures: %s" % ", ".join("%s %d" % kv for kv in sorted(sizes.items())))
    progress = _setup.Progress()
    if not args.baseline:
        want = [c for c in want if not c.startswith("base-")]
    elif args.only:
        want += [b for a, b in _BASELINE_PAIRS.items() if a in want and b not in want]
    versions: Dict[str, str] = {}

    py = _setup.real_binary(sys.executable)
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONPATH", "RANK", "SLURM_PROCID", "VIRTUAL_ENV", "RAY_ADDRESS",
                             "PYTHONDONTWRITEBYTECODE")}
    # The package as pip installs it: bytecode compiled up front (pip does so at install time), so the
    # source tree on PYTHONPATH imports from __pycache__ like site-packages would.
    progress.fixture("bytecode of the package", lambda: subprocess.run(
        [py, "-m", "compileall", "-q", os.path.join(ROOT, "relaxrepro")], check=True))
    # `python` in the recorded command resolves to the real binary's directory, not a pyenv shim.
    base_env["PATH"] = os.path.dirname(py) + os.pathsep + base_env.get("PATH", "")
    work = tempfile.mkdtemp(prefix="relaxrepro-bench-")
    pyz_cache = os.path.join(work, "pyzcache")
    env = dict(base_env, RELAXREPRO_CACHE_DIR=pyz_cache)
    env_pkg = dict(env, PYTHONPATH=ROOT)
    ray_cluster = None
    results: Dict[str, dict] = {}
    try:
        pyz = os.path.join(work, "relaxrepro.pyz")
        progress.fixture("the .pyz", lambda: subprocess.run(["bash", os.path.join(ROOT, "zipapp.sh"), pyz],
                                                            check=True, stdout=subprocess.DEVNULL))
        size_kb = os.path.getsize(pyz) / 1024.0
        out = os.path.join(work, "out")
        os.makedirs(out)
        repo = _setup.make_repo(os.path.join(work, "repo"))
        gen = ["generate", "--output-dir", out]
        train = ["--", "python", "train.py", "--lr", "3e-4"]

        need = set(want)
        ml = peers = None
        clean_py = None
        if need & {"floor-clean", "diff", "base-diff", "verify", "floor-json", "json-100k-names", "json-1m-rows"}:
            # The same interpreter without any site-packages: this machine's system site-packages has a
            # .pth that imports certifi at every start (~30 ms), which no user's laptop pays.
            subprocess.run([py, "-m", "venv", "--without-pip", os.path.join(work, "clean")], check=True)
            clean_py = os.path.join(work, "clean", "bin", "python")
        base_pyz = base_root = None
        if args.baseline:
            base_root = os.path.join(work, "baseline")
            os.makedirs(base_root)
            archive = subprocess.run(["git", "-C", ROOT, "archive", args.baseline], check=True,
                                     stdout=subprocess.PIPE).stdout
            subprocess.run(["tar", "-x", "-C", base_root], input=archive, check=True)
            base_pyz = os.path.join(work, "baseline.pyz")
            subprocess.run(["bash", os.path.join(base_root, "zipapp.sh"), base_pyz], check=True,
                           stdout=subprocess.DEVNULL, cwd=base_root)
            subprocess.run([py, "-m", "compileall", "-q", os.path.join(base_root, "relaxrepro")], check=True)
            versions["baseline"] = "%s (%s)" % (args.baseline, subprocess.run(
                ["git", "-C", ROOT, "rev-parse", "--short", args.baseline], capture_output=True,
                text=True).stdout.strip())
        env_base = dict(env, PYTHONPATH=base_root or "")
        if need & {"ml-generate", "collect-env", "pip-freeze", "ray-generate", "ray-status", "ray-list"}:
            ml = _setup.ensure_venv("mlvenv", _setup.ML_REQUIREMENTS, create=not args.quick)
            if ml is None:
                notes.append("ML venv not built yet (%s): its cases skipped under --quick; run without "
                             "--quick once to build it" % os.path.join(_setup.CACHE, "mlvenv"))
        mlq = need & {c for c, g, _ in CASES if g == "mlflowq"}
        if need & {"wandb", "mlflow"} or mlq:
            peers = _setup.ensure_venv("peersvenv", _setup.PEER_REQUIREMENTS, create=not args.quick)
            if peers is None:
                notes.append("peers venv not built yet: wandb/mlflow skipped under --quick")

        cases: Dict[str, dict] = {}

        def add(cid: str, argv_: List[str], env_: Dict[str, str], cwd: Optional[str] = None, **kw) -> None:
            if cid in need:
                cases[cid] = dict(argv=argv_, env=env_, cwd=cwd, **kw)

        add("floor-isS", [py, "-I", "-S", "-c", "pass"], env)
        add("floor-c", [py, "-c", "pass"], env)
        add("pyz-version", [py, pyz, "--version"], env)
        add("pkg-version", [py, "-m", "relaxrepro", "--version"], env_pkg)
        add("pyz-small", [py, pyz] + gen + train, env, repo)
        add("pkg-small", [py, "-m", "relaxrepro"] + gen + train, env_pkg, repo)
        add("base-pkg-small", [py, "-m", "relaxrepro"] + gen + train, env_base, repo)
        add("base-pkg-version", [py, "-m", "relaxrepro", "--version"], env_base)
        if base_pyz:
            add("base-pyz-version", [py, base_pyz, "--version"], env)
            add("base-pyz-small", [py, base_pyz] + gen + train, env, repo)
        if clean_py:
            add("floor-clean", [clean_py, "-c", "pass"], env)
        add("pyz-nobytecode", [py, pyz] + gen + train, dict(env, PYTHONDONTWRITEBYTECODE="1",
                                                             RELAXREPRO_CACHE_DIR=os.path.join(work, "nbcache")), repo)
        if "repos10" in need:
            extra = []
            for i in range(9):
                extra += ["--repo", "r%d=%s" % (i, _setup.make_repo(os.path.join(work, "repos", "r%d" % i)))]
            add("repos10", [py, pyz] + gen + extra + train, env, repo)
        if "bigrepo" in need:
            add("bigrepo", [py, pyz] + gen + train, env, progress.fixture(
                "repo of %d files" % sizes["bigrepo"], lambda: _setup.big_repo(sizes["bigrepo"])))
        if ml:
            mlpy = _setup.venv_python(ml)
            ml_env = dict(env, PATH="%s:%s" % (os.path.join(ml, "bin"), env.get("PATH", "")))
            add("floor-ml", [mlpy, "-c", "pass"], ml_env)
            add("ml-generate", [mlpy, pyz] + gen + train, ml_env, repo)
            # A facts-v1.json that is a directory: nothing remembered, every run asks the libraries (the
            # .pyz's own unpacked copy still works, as it would on a node that ran relaxrepro before).
            first = os.path.join(work, "firstcache")
            os.makedirs(os.path.join(first, "facts-v1.json"))
            add("ml-generate-first", [mlpy, pyz] + gen + train, dict(ml_env, RELAXREPRO_CACHE_DIR=first), repo)
            if base_pyz:
                add("base-ml-generate", [mlpy, base_pyz] + gen + train, ml_env, repo)
            add("collect-env", [mlpy, "-m", "torch.utils.collect_env"], ml_env)
            add("pip-freeze", [mlpy, "-m", "pip", "freeze"], ml_env)
            versions["ml_venv_distributions"] = str(_setup.count_distributions(ml))
        if peers:
            ppy = _setup.venv_python(peers)
            add("wandb", [ppy, "-c", "import wandb"], env)
            add("mlflow", [ppy, "-c", "import mlflow"], env)
        if need & {"diff", "diff-sys", "base-diff", "check", "floor-json"}:
            a, b = _setup.read_manifests(work)
            add("floor-json", [clean_py, "-c", "import json, sys\nfor p in sys.argv[1:]:\n    with open(p) as fh:"
                               " json.load(fh)", a, b], env)
            versions["diff_manifest_bytes"] = "%d, %d" % (os.path.getsize(a), os.path.getsize(b))
            add("diff", [clean_py, "-m", "relaxrepro", "diff", a, b], env_pkg, ok_rc=(0, 1))
            add("diff-sys", [py, "-m", "relaxrepro", "diff", a, b], env_pkg, ok_rc=(0, 1))
            add("base-diff", [clean_py, "-m", "relaxrepro", "diff", a, b], env_base, ok_rc=(0, 1))
            add("check", [py, "-m", "relaxrepro", "check", a], env_pkg, repo, ok_rc=(0, 1))
            add("base-check", [py, "-m", "relaxrepro", "check", a], env_base, repo, ok_rc=(0, 1))
        __import__("verify").add_cases(add, need, py, clean_py, env_pkg, work, _setup.read_manifests(work))
        if "ls" in need:
            add("ls", [py, "-m", "relaxrepro", "ls", progress.fixture(
                "ls tree of %d" % sizes["ls"], lambda: _setup.ls_tree(sizes["ls"]))], env_pkg)
        if need & {"report", "report-ls"}:
            rtree = progress.fixture("report tree of %d" % sizes["report"], lambda: _setup.ls_tree(sizes["report"]))
            add("report", [py, "-m", "relaxrepro", "report", rtree, "-o", os.path.join(work, "r.html")], env_pkg)
            add("report-ls", [py, "-m", "relaxrepro", "ls", rtree], env_pkg)
        if "merge" in need:
            mpath, frags = progress.fixture("%d node fragments" % sizes["merge"], lambda: _setup.merge_inputs(
                os.path.join(work, "merge"), sizes["merge"]))
            # merge never overwrites its output: a fresh name per process (runpy costs what -m does)
            add("merge", [py, "-c", "import os, runpy, sys; sys.argv = ['relaxrepro', 'merge', %r, %r, '-o', "
                          "'%s.%%d' %% os.getpid()]; runpy.run_module('relaxrepro', run_name='__main__')"
                          % (mpath, frags, os.path.join(work, "merged"))], env_pkg)

        __import__("patch").add_cases(add, need, py, env_pkg, gen + train, progress, env_base)
        add("attach", [_setup.venv_python(os.path.join(ROOT, ".venv")), os.path.join(ROOT, "bench", "trackers.py"),
                       "5"], env_pkg)  # the tests' venv (tests/requirements-ml.txt: wandb)

        if need & {c for c, g, _ in CASES if g == "index"}:
            import runindex as ri

            tree = progress.fixture("index tree of %d" % sizes["index"], lambda: ri.tree(sizes["index"]))
            idx_env = dict(env_pkg, RELAXREPRO_CACHE_DIR=os.path.join(work, "idx"))
            subprocess.run([py, "-m", "relaxrepro", "index", tree], env=idx_env, check=True)
            add("idx-cold", [py, os.path.join(_setup.HERE, "runindex.py"), "cold", tree, os.path.join(work, "cold")],
                env_pkg)
            for cid, extra in (("idx-ls", []), ("idx-scan", ["--no-index"]),
                               ("idx-pkg", ["--where", "pkg.torch==2.3.*"])):
                add(cid, [py, "-m", "relaxrepro", "ls", tree] + extra, idx_env)
            add("idx-lineage", [py, "-m", "relaxrepro", "lineage", ri.lineage_target(sizes["index"]), tree], idx_env)
            # add100 changes the tree; reset, last in each round, puts it back, so the rest see it unchanged
            for cid, step in (("idx-pkg-new", "query"), ("idx-floor", "floor"), ("idx-add100", "add100"),
                              ("idx-reset", "reset")):
                add(cid, [py, os.path.join(_setup.HERE, "runindex.py"), step, tree], idx_env)
            ri.add_cases(add, need, py, tree, idx_env, sizes["index"])
        if "pyz-cold" in need:  # before anything has unpacked this build
            cold_env = dict(env, RELAXREPRO_CACHE_DIR=os.path.join(work, "coldcache"))
            wall, rss, rc, cpu = measure([py, pyz] + gen + train, repo, cold_env)
            results["pyz-cold"] = {"wall": [wall], "rss": [rss], "cpu": [cpu]}
        mq = __import__("mlflow_query")
        if mlq and peers:
            import runindex as ri

            n = sizes["mlflowq"]
            mtree = progress.fixture("index tree of %d" % n, lambda: ri.tree(n))
            mstore = progress.fixture("MLflow store of %d runs" % n, lambda: mq.store(
                mtree, n, _setup.CACHE, _setup.venv_python(peers)))
            mq_env = dict(env_pkg, RELAXREPRO_CACHE_DIR=os.path.join(work, "mlqidx"))
            subprocess.run([py, "-m", "relaxrepro", "index", mtree], env=mq_env, check=True)
            mq.add_cases(add, need, py, _setup.venv_python(peers), mtree, mstore, ri.lineage_target(n), mq_env)
        if cases:
            run_rounds(cases, rounds, results, progress)
        if mlq and peers and mlq & set(mq.IN_PROCESS):
            answers = mq.in_process(rounds, py, _setup.venv_python(peers), mtree, mstore, ri.lineage_target(n),
                                    mq_env, results, progress)
            versions["mlflowq answers (result sizes per call)"] = json.dumps(answers, sort_keys=True)
            versions["mlflowq versions"] = mq.versions(_setup.venv_python(peers))
            versions["mlflowq: the default runs(TREE) (check='files') against MLflow"] = mq.default_ratios(
                results, pair_ratio)

        ray_ids = [c for c in ("ray-generate", "ray-status", "ray-list") if c in need]
        if ray_ids and ml:
            why = None if os.geteuid() == 0 else "needs root for a network namespace"
            for tool in ("unshare", "nsenter", "ip"):
                why = why or (None if shutil.which(tool) else "%s not found" % tool)
            if why:
                notes.append("Ray cases skipped: %s" % why)
            else:
                ray_cluster = _setup.NetnsRay(ml)
                ray_cluster.start()
                renv = ray_cluster.env(RAY_ADDRESS="127.0.0.1:6379", RELAXREPRO_CACHE_DIR=pyz_cache)
                mlpy = _setup.venv_python(ml)
                rcases = {
                    "ray-generate": dict(argv=ray_cluster.argv(mlpy, pyz, *gen, *train), env=renv, cwd=repo),
                    "ray-status": dict(argv=ray_cluster.argv("ray", "status"), env=renv),
                    "ray-list": dict(argv=ray_cluster.argv("ray", "list", "nodes"), env=renv),
                }
                rcases = {k: v for k, v in rcases.items() if k in ray_ids}
                if "ray-generate" in rcases:  # what generate saw of the cluster
                    shown = subprocess.run(ray_cluster.argv(mlpy, pyz, "generate", "--print", "--output-dir", out),
                                           env=renv, cwd=repo, capture_output=True, text=True, timeout=60)
                    try:
                        doc = json.JSONDecoder().raw_decode(shown.stdout)[0]  # the manifest, then its path
                        rp = doc["collection"]["probes"].get("ray", {})
                        rt = doc.get("runtime", {})
                        versions["ray_probe"] = "status %s, %.2f s, mode %s, %s node(s), version %s, source %s" % (
                            rp.get("status"), rp.get("seconds") or 0, rt.get("mode"), rt.get("node_count"),
                            rt.get("ray", {}).get("version"), rt.get("ray", {}).get("source"))
                    except (ValueError, KeyError, TypeError):
                        versions["ray_probe"] = "unreadable: %s" % shown.stderr[-300:]
                run_rounds(rcases, rounds, results, progress)
        elif ray_ids:
            notes.append("Ray cases skipped: no ML venv")
    finally:
        if ray_cluster is not None:
            ray_cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(_RSS_FILE):
            os.unlink(_RSS_FILE)

    return report(results, args, rounds, size_kb, notes, versions, py)


_SIZED = {"ls": "ls", "merge": "merge", "report": "report", "report-ls": "report", "bigrepo": "bigrepo"}
"""The fixture size a case's label names (besides the idx-* and mlflowq cases), by case id."""


def sized(cid: str, label: str, quick: bool) -> str:
    """``label`` with the size it names as the run measured it: under --quick, _setup.QUICK's, not FULL's."""
    key = "index" if cid.startswith("idx-") else "mlflowq" if cid.startswith(("mlq-", "mlf-")) else _SIZED.get(cid)
    if not quick or key is None:
        return label
    full, small = _setup.FULL[key], _setup.QUICK[key]
    if key == "bigrepo":
        return label.replace("%dk-file" % (full // 1000), "%dk-file" % (small // 1000))
    return label.replace(f"{full:,}", f"{small:,}")


def report(results, args, rounds, size_kb, notes, versions, py) -> int:
    med = {cid: statistics.median(r["wall"]) * 1000 for cid, r in results.items()}
    floors = (med.get("floor-isS"), med.get("floor-c"))
    table = []
    for cid, _, label in CASES:
        if cid not in results:
            continue
        r = results[cid]
        table.append({"id": cid, "case": sized(cid, label, getattr(args, "quick", False)), "runs": len(r["wall"]),
                      "median_ms": med[cid],
                      "min_ms": min(r["wall"]) * 1000, "max_ms": max(r["wall"]) * 1000, "peak_rss_mb": max(r["rss"]),
                      "cpu_ms": statistics.median(r["cpu"]) * 1000,
                      "over_isS_ms": None if floors[0] is None else med[cid] - floors[0],
                      "over_c_pass_ms": None if floors[1] is None else med[cid] - floors[1]})

    budgets = []

    def budget(label: str, value: Optional[float], limit: float, unit: str, floor: Optional[str] = None) -> None:
        budgets.append(budget_row(label, value, limit, unit, floor))

    budget("generate in the ML venv <= 8.5x its floor (ML venv python -c pass; was <= 120 ms)",
           pair_ratio(results, "ml-generate", "floor-ml"), 8.5, "x", "floor-ml")
    budget("generate in the ML venv <= 0.05x collect_env", pair_ratio(results, "ml-generate", "collect-env"),
           0.05, "x")
    budget("generate with live Ray <= 1.3x the faster of ray status / ray list nodes (per round)",
           pair_ratio(results, "ray-generate", ("ray-status", "ray-list")), 1.3, "x")
    budget("diff <= %gx its floor (json.load of the same two files; was <= 40 ms)" % DIFF_FLOOR_LIMIT,
           pair_ratio(results, "diff", "floor-json"), DIFF_FLOOR_LIMIT, "x", "floor-json")
    budget("report <= 3x ls of the same tree (was <= 2 s for 1,000 runs)", pair_ratio(results, "report", "report-ls"),
           3.0, "x", "report-ls")

    __import__("verify").add_budgets(results, budget, pair_ratio)
    __import__("patch").add_budgets(results, budget, per_round_over)
    __import__("runindex").add_budgets(results, budget, pair_ratio)
    __import__("mlflow_query").add_budgets(results, budget, pair_ratio)

    budget("cold index <= 2x a bare json.load of every file (was <= 60 s for 100,000)",
           pair_ratio(results, "idx-cold", "idx-json"), 2.0, "x", "idx-json")
    budget("cold index peak RSS <= 150 MB", max(results["idx-cold"]["rss"]) if "idx-cold" in results else None,
           150, "MB")
    budget("warm ls <= 0.05x ls --no-index (per round)", pair_ratio(results, "idx-ls", "idx-scan"), 0.05, "x")
    budget("ls after adding 100 runs <= 2.5x the walk-and-stat floor (was <= 1 s)",
           pair_ratio(results, "idx-add100", "idx-floor"), 2.5, "x", "idx-floor")
    budget("package query <= 1.5x the walk-and-stat floor (was <= 0.2 s)", pair_ratio(results, "idx-pkg", "idx-floor"),
           1.5, "x", "idx-floor")
    budget("lineage of a 50-deep chain <= 1.5x the walk-and-stat floor (was <= 0.1 s)",
           pair_ratio(results, "idx-lineage", "idx-floor"), 1.5, "x", "idx-floor")
    budget("check <= generate (same repo, package)", pair_ratio(results, "check", "pkg-small"), 1.0, "x")
    budget(".pyz start-up <= 1.2x package (--version)", pair_ratio(results, "pyz-version", "pkg-version"), 1.2, "x")
    budget(".pyz generate <= 1.2x package generate", pair_ratio(results, "pyz-small", "pkg-small"), 1.2, "x")
    for after, before in _BASELINE_PAIRS.items():
        ratio = pair_ratio(results, after, before)
        if ratio is not None:
            what = next(label for cid, _groups, label in CASES if cid == after)
            versions["after/before: " + what] = "%.2fx (median of per-round ratios; %.1f ms -> %.1f ms)" % (
                ratio, med[before], med[after])
            budget("after/before <= 1.05x: " + what, ratio, 1.05, "x")

    machine = "%s, %s CPUs, %s, Python %s (%s)" % (platform.platform(), os.cpu_count(), _cpu_model(),
                                                   platform.python_version(), py)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        load = "%.1f" % os.getloadavg()[0]
    except OSError:
        load = "?"
    lines = ["machine: %s; %s; %d rounds, interleaved; load average at the end %s; .pyz %.0f KB"
             % (machine, when, rounds, load, size_kb), ""]
    lines.append("| case | runs | median ms | min ms | max ms | CPU ms | peak RSS MB | over `-I -S` ms "
                 "| over `-c pass` ms |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in table:
        lines.append("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |" % (
            row["case"], row["runs"], row["median_ms"], row["min_ms"], row["max_ms"], row["cpu_ms"],
            row["peak_rss_mb"],
            _ms(row["over_isS_ms"]), _ms(row["over_c_pass_ms"])))
    lines.append("")
    lines.append("| budget | measured | floor / peer (median ms) | result |")
    lines.append("|---|---:|---|---|")
    for b in budgets:
        floor = b.get("floor")
        lines.append("| %s | %s | %s | %s |" % (b["budget"], "n/a" if b["value"] is None else "%g %s" % (
            b["value"], b["unit"]), "%s (%.1f)" % (floor, med[floor]) if floor in med else floor or "",
            "not run" if b["pass"] is None else ("PASS" if b["pass"] else "FAIL")))
    for k, v in sorted(versions.items()):
        lines.append("")
        lines.append("%s: %s" % (k, v))
    for n in notes:
        lines.append("")
        lines.append("note: %s" % n)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "date": when, "rounds": rounds, "pyz_kb": round(size_kb, 1),
                       "results": table, "budgets": budgets, "info": versions, "notes": notes,
                       "samples_ms": {cid: [round(w * 1000, 2) for w in r["wall"]] for cid, r in results.items()}},
                      fh, indent=1)
    return 0


DIFF_FLOOR_LIMIT = 2.75
"""diff over a json.load of its two manifests by a clean venv python: the old 40 ms over that floor on the
machine of bench/RESULTS.md's first table (12.7 ms to start, ~1.8 ms for the two loads)."""


def budget_row(label: str, value: Optional[float], limit: float, unit: str, floor: Optional[str] = None) -> dict:
    """One row of the budget table: ``value`` (None: a case not run) against ``limit``; ``floor``: the case the
    ratio is to, named in the table."""
    row = {"budget": label, "value": None if value is None else round(value, 3), "limit": limit, "unit": unit,
           "pass": None if value is None else value <= limit}
    if floor:
        row["floor"] = floor
    return row


def _ms(v: Optional[float]) -> str:
    return "" if v is None else "%+.1f" % v


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


if __name__ == "__main__":
    sys.exit(main())
