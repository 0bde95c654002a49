"""Benchmark fixtures and wrappers for the run index (issue 19): a tree of 100,000 manifests and the
per-round steps that a case needs before it runs.

    python bench/runindex.py tree [N]            build (once) CACHE/runindex-<N>, print its path
    python bench/runindex.py cold TREE DB_DIR    remove DB_DIR, then exec `relaxrepro index TREE` into it
    python bench/runindex.py add100 TREE         replace the 100 runs added last round, then exec `relaxrepro ls TREE`
    python bench/runindex.py query TREE          exec `relaxrepro ls TREE --where pkg.torch==2.3.* --until X`, X new
                                                 each round (always true): a query with no answer kept for it
    python bench/runindex.py floor TREE          the walk and stat every indexed command starts with, alone
    python bench/runindex.py reset TREE          remove add100's runs, then exec `relaxrepro index TREE`
    python bench/runindex.py jsonload TREE       a bare json.load of every manifest (the cold build's floor)

The tree is made from a real manifest (this machine's `relaxrepro generate` in a scratch repo): run ids,
commits (two repos), package sets (30 of them: torch/numpy/transformers versions vary), groups, notes,
metrics, data digests and parents vary; each group of 100 runs is one chain (run k's parent is run k-1),
so the 50th run of a group has a 50-deep ancestry. Layout runs/<user>/<sweep>/manifest_<id>.json:
50 users x 20 sweeps x 100 runs, what `relaxrepro run --output-dir runs/<user>/<sweep>` writes.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CACHE = os.environ.get("RELAXREPRO_BENCH_CACHE") or os.path.join(HERE, ".cache")
PER_GROUP = 100
OLD = time.time() - 86400  # every file older than the index's racy window


def real_manifest() -> dict:
    """A manifest of this machine, generated in a scratch git repo."""
    import json

    work = tempfile.mkdtemp(prefix="relaxrepro-bench-idx-")
    try:
        repo = os.path.join(work, "repo")
        os.makedirs(repo)
        env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
                   GIT_COMMITTER_EMAIL="b@x", PYTHONPATH=ROOT, RELAXREPRO_CACHE_DIR=os.path.join(work, "c"))
        for argv in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "i"]):
            subprocess.run(argv, cwd=repo, env=env, check=True)
        out = subprocess.run([sys.executable, "-m", "relaxrepro", "generate", "--print", "--output-dir", work, "--",
                              "python", "train.py", "--lr", "3e-4"], cwd=repo, env=env, check=True,
                             capture_output=True, text=True).stdout
        return json.JSONDecoder().raw_decode(out)[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_id(i: int) -> str:
    return "2026%02d%02d_%06d_%07x" % (1 + i // 9000 % 12, 1 + i // 300 % 28, i % 1000000, (i * 2654435761) % 2**28)


def make_doc(base: dict, i: int, group_index: int, k: int) -> dict:
    doc = copy.deepcopy(base)
    rid = run_id(i)
    doc["run_id"] = rid
    doc["generated_at"] = "2026-%02d-%02dT%02d:%02d:%02dZ" % (1 + i // 9000 % 12, 1 + i // 300 % 28, i // 3600 % 24,
                                                              i // 60 % 60, i % 60)
    code = doc.setdefault("code", {})
    name = next(iter(code), "train")
    code[name] = dict(code.get(name) or {}, commit="%040x" % (i * 7919 % 2**40), dirty=i % 5 == 0)
    if i % 5 == 0:
        code[name]["patch"] = {"sha256": "%064x" % (i % 97), "bytes": 120}
    code["megatron"] = {"commit": "%040x" % (group_index % 40 + 1), "dirty": False}
    s = i % 300
    pkgs = dict(doc.get("environment", {}).get("packages") or {})
    pkgs.update(torch="2.%d.%d" % (s % 6, s % 3), numpy="1.26.%d" % (s % 5), transformers="4.%d.0" % (40 + s % 10))
    doc.setdefault("environment", {})["packages"] = pkgs
    doc["environment"]["packages_digest"] = "sha256:%064x" % s
    doc.setdefault("config", {})["hash"] = "sha256:%064x" % (i % 1000)
    doc["config"]["resolved_args"] = {"lr": 1e-4 * (1 + k % 10), "seed": k}
    doc["data"] = {"inputs": [{"source": "option", "kind": "tree", "path": "<HOME>/data/d%d" % (i % 20),
                               "quick": {"sha256": "sha256:%064x" % (i % 20), "complete": True}}]}
    lineage = {"group": "sweep-%04d" % group_index, "note": "lr sweep, try %d" % k}
    if k:
        lineage["parent"] = {"run_id": run_id(i - 1), "reason": "load", "found": True}
    doc["lineage"] = lineage
    doc["outcome"] = {"status": "ok" if i % 17 else "exit", "exit_code": 0 if i % 17 else 1}
    doc["results"] = {"metrics": {"auc": round(0.8 + (i % 100) / 1000, 4), "loss": round(1.0 / (1 + k), 4)}}
    return doc


def build(base_dir: str, n: int) -> None:
    from relaxrepro.manifest import writer

    base = real_manifest()
    for i in range(n):
        g, k = divmod(i, PER_GROUP)
        d = os.path.join(base_dir, "user%02d" % (g % 50), "sweep-%04d" % g)
        if k == 0:
            os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "manifest_%s.json" % run_id(i))
        with open(path, "wb") as fh:
            fh.write(writer.serialize(make_doc(base, i, g, k)))
        os.utime(path, (OLD, OLD))


def tree(n: int = 100000) -> str:
    """``CACHE/runindex-<n>``, built once."""
    path = os.path.join(CACHE, "runindex-%d" % n)
    done = os.path.join(path, ".bench-complete")
    if not os.path.exists(done):
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        t0 = time.monotonic()
        build(path, n)
        open(done, "w").close()
        print("built %d manifests in %.0f s" % (n, time.monotonic() - t0), file=sys.stderr)
    return path


def lineage_target(n: int = 100000) -> str:
    """A run with a 50-deep ancestry (the 50th of its group's chain)."""
    return run_id((n // PER_GROUP // 2) * PER_GROUP + 49)


def main(argv: list) -> int:
    what = argv[0]
    if what == "tree":
        print(tree(int(argv[1]) if len(argv) > 1 else 100000))
        return 0
    py = [sys.executable, "-m", "relaxrepro"]
    if what == "cold":
        shutil.rmtree(argv[2], ignore_errors=True)
        os.environ["RELAXREPRO_CACHE_DIR"] = argv[2]
        os.execv(sys.executable, py + ["index", argv[1]])
    if what == "query":
        until = "2099-01-01T%02d:%02d:%02d" % (time.time() // 3600 % 24, time.time() // 60 % 60, time.time() % 60)
        os.execv(sys.executable, py + ["ls", argv[1], "--where", "pkg.torch==2.3.*", "--until", until])
    if what == "floor":
        from relaxrepro.manifest import treesig

        treesig.walk(argv[1], set())
        return 0
    if what == "jsonload":
        import json

        for d, _, names in os.walk(argv[1]):
            for name in names:
                if name.startswith("manifest_") and name.endswith(".json"):
                    with open(os.path.join(d, name), "rb") as fh:
                        json.load(fh)
        return 0
    if what == "reset":
        shutil.rmtree(os.path.join(argv[1], "user-new"), ignore_errors=True)
        os.execv(sys.executable, py + ["index", argv[1]])
    if what == "add100":
        from relaxrepro.manifest import writer

        extra = os.path.join(argv[1], "user-new", "sweep-new")
        shutil.rmtree(extra, ignore_errors=True)
        os.makedirs(extra)
        seed = int(time.time() * 1000) % 10**6
        base = _sample(argv[1])
        for j in range(100):
            i = 10**7 + seed * 100 + j
            with open(os.path.join(extra, "manifest_%s.json" % run_id(i)), "wb") as fh:
                fh.write(writer.serialize(make_doc(base, i, 99999, j)))
        os.execv(sys.executable, py + ["ls", argv[1]])
    raise SystemExit("unknown step %r" % what)


CASES = [
    ("idx-json", "index", "a bare json.load of each of the 100,000 manifests (the cold build's floor)"),
    ("idx-metric", "index", "package ls --where metric.auc>0.9 (warm index; no run matches)"),
    ("idx-run", "index", "package ls --where run=ID (warm index)"),
    ("idx-arg", "index", "package ls --where arg.seed=49 (warm index)"),
]
"""The run index's queries and cold build against their floors: bench/run.py registers these beside its
own index cases (same tree, same warm index, same rounds)."""


def add_cases(add, need: set, py: str, tree: str, idx_env: dict, n: int = 100000) -> None:
    """Register :data:`CASES` with bench/run.py's ``add`` (``tree``, of ``n`` runs, indexed already under
    ``idx_env``)."""
    me = os.path.abspath(__file__)
    add("idx-json", [py, me, "jsonload", tree], idx_env)
    for cid, where in (("idx-metric", "metric.auc>0.9"), ("idx-run", "run=" + lineage_target(n)),
                       ("idx-arg", "arg.seed=49")):
        add(cid, [py, "-m", "relaxrepro", "ls", tree, "--where", where], idx_env)


def add_budgets(results: dict, budget, pair_ratio) -> None:
    """Each query a ratio to the walk-and-stat floor, from the same rounds (bench/run.py has the cold build's,
    the package query's and lineage's)."""
    for cid, what in (("idx-ls", "warm ls"), ("idx-metric", "ls --where metric.auc>0.9"),
                      ("idx-run", "ls --where run=ID"), ("idx-arg", "ls --where arg.seed=49")):
        budget("%s <= 1.5x the walk-and-stat floor" % what, pair_ratio(results, cid, "idx-floor"), 1.5, "x",
               "idx-floor")


def _sample(tree_dir: str) -> dict:
    """One manifest of the tree, as a template (no generate in the timed step)."""
    import json

    d = os.path.join(tree_dir, "user00", "sweep-0000")
    with open(os.path.join(d, sorted(os.listdir(d))[0])) as fh:
        return json.load(fh)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
