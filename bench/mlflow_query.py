"""relaxrepro's run index against MLflow 3 on SQLite, in process (issue 32): a fetch by run id and a metric
query with no match over the same 10,000 runs, each tool in one warm process, call by call in turn.

    python bench/mlflow_query.py store TREE DIR          (peers venv) DIR/mlflow.db: TREE's runs in MLflow, once
    python bench/mlflow_query.py serve-ours TREE ID      answer lines on stdin: get, where, floor, quit
    python bench/mlflow_query.py serve-mlflow DIR ID     the same for MLflow (peers venv; ID: our run id)
    python bench/mlflow_query.py once-mlflow DIR get|where ID   one call in a fresh process (peers venv)
    python bench/mlflow_query.py parts TREE ID           where our calls spend their time (warm index)
    python bench/mlflow_query.py compare N [ROUNDS]      the in-process shapes alone at N runs (built if need be)

The tree is bench/runindex.py's (its manifests have run ids, groups, parents, metrics, arguments, packages);
the store holds each of its runs as an MLflow run: the arguments as params, the metrics, and tags for the run
id, group, parent, note and status (built once through ``MlflowClient.create_run`` + ``log_batch``, ~10 ms a
run: ~2 minutes for 10,000, cached under the bench cache by the tree's size).

In process, per call: ours is ``relaxrepro.runs(TREE)`` (one object kept across calls, as a notebook or a
service would hold a client) asked ``.get(ID)`` (the run's document and facts, decoded) and
``.where("metric.auc>2")`` (no run matches); every call walks the tree and stats each manifest, as the index
always does, so the walk and stat alone (``floor``) is measured in the same process too. The same calls of a
``relaxrepro.runs(TREE, check="dirs")`` object stat each directory instead, and list again only one that
changed (its manifests rewritten in place aside): that object is the one held against MLflow. MLflow's is one
``MlflowClient`` asked ``get_run(its id)`` and ``search_runs([experiment], "metrics.auc > 2")``. Imports, the
first open and three warm-up calls of each are left out; each round makes ``CALLS`` calls of each shape,
interleaved across the two processes, and keeps their median; ratios are per round, then the median.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CALLS = 7
"""Calls of each shape per round, per process (the round keeps their median)."""
WARM = 3
"""Calls of each shape before the first round (first open, caches, SQLAlchemy's compiled statements)."""
METRIC = ("metric.auc>2", "metrics.auc > 2")
"""The metric query with no match (the tree's auc is 0.8 to 0.899), ours and MLflow's spelling."""
MLFLOW_ENV = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
"""Nothing reaches out: MLflow 3 sends usage telemetry unless told not to."""

CASES = [
    ("mlq-get", "mlflowq", "in process: relaxrepro.runs(TREE).get(ID), 10,000 runs (median of %d calls a round)"
     % CALLS),
    ("mlf-get", "mlflowq", "in process: MlflowClient.get_run(ID), SQLite, the same 10,000 runs"),
    ("mlq-where", "mlflowq", "in process: relaxrepro.runs(TREE).where('%s') (no match)" % METRIC[0]),
    ("mlf-where", "mlflowq", "in process: MlflowClient.search_runs([exp], '%s') (no match)" % METRIC[1]),
    ("mlq-floor", "mlflowq", "in process: the walk and stat of the 10,000 manifests alone (every call's floor)"),
    ("mlq-get-dirs", "mlflowq", "in process: relaxrepro.runs(TREE, check='dirs').get(ID), 10,000 runs"),
    ("mlq-where-dirs", "mlflowq", "in process: relaxrepro.runs(TREE, check='dirs').where('%s') (no match)"
     % METRIC[0]),
    ("mlq-get-proc", "mlflowq", "process: package ls --where run=ID, 10,000 manifests (warm index)"),
    ("mlf-get-proc", "mlflowq", "process: MLflow client get_run(ID), SQLite (import, open, one call)"),
    ("mlq-where-proc", "mlflowq", "process: package ls --where %s (warm index; no match)" % METRIC[0]),
    ("mlf-where-proc", "mlflowq", "process: MLflow client search_runs '%s' (import, open, one call)" % METRIC[1]),
]
IN_PROCESS = ("mlq-get", "mlf-get", "mlq-where", "mlf-where", "mlq-floor", "mlq-get-dirs", "mlq-where-dirs")


# -- the MLflow store -------------------------------------------------------------------------------------

def manifests(tree: str) -> list:
    """The manifests of ``tree``, in a stable order."""
    found = []
    for d, dirs, names in os.walk(tree):
        dirs.sort()
        found.extend(os.path.join(d, n) for n in sorted(names) if n.startswith("manifest_") and n.endswith(".json"))
    return found


def mirrored(doc: dict) -> dict:
    """What MLflow holds of one manifest: its start time (ms), tags, metrics and params (the resolved arguments,
    flattened with dots as ``arg.NAME`` names them)."""
    import calendar

    lineage = doc.get("lineage") or {}
    parent = (lineage.get("parent") or {}).get("run_id")
    tags = {"relaxrepro.run_id": doc["run_id"], "group": lineage.get("group"), "note": lineage.get("note"),
            "parent": parent, "status": (doc.get("outcome") or {}).get("status")}
    params = {}

    def flat(prefix: str, node: dict) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                flat(prefix + k + ".", v)
            else:
                params[prefix + k] = json.dumps(v) if not isinstance(v, str) else v
    flat("", (doc.get("config") or {}).get("resolved_args") or {})
    start = calendar.timegm(time.strptime(doc["generated_at"], "%Y-%m-%dT%H:%M:%SZ")) * 1000
    return {"start": start, "tags": {k: v for k, v in tags.items() if v is not None},
            "metrics": dict((doc.get("results") or {}).get("metrics") or {}), "params": params}


def build_store(tree: str, out: str) -> None:
    """``out``/mlflow.db (and ids.json: our run id -> MLflow's) holding every run of ``tree``. Runs in the peers
    venv. The build alone turns off SQLite's fsync per commit (a cache, rebuilt if lost); the timed processes
    open the store with MLflow's own settings."""
    os.environ.update(MLFLOW_ENV)
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _no_fsync(dbapi_conn, _record) -> None:
        dbapi_conn.execute("PRAGMA synchronous = OFF")

    os.makedirs(out, exist_ok=True)
    client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(out, "mlflow.db"))
    exp = client.create_experiment("relaxrepro-bench", artifact_location="file://" + os.path.join(out, "artifacts"))
    ids = {}
    paths = manifests(tree)
    t0 = time.monotonic()
    for i, path in enumerate(paths):
        with open(path) as fh:
            doc = json.load(fh)
        m = mirrored(doc)
        run = client.create_run(exp, start_time=m["start"], tags=m["tags"], run_name=doc["run_id"])
        client.log_batch(run.info.run_id, metrics=[Metric(k, float(v), m["start"], 0) for k, v in m["metrics"].items()],
                         params=[Param(k, v) for k, v in m["params"].items()])
        ids[doc["run_id"]] = run.info.run_id
        if (i + 1) % 1000 == 0:
            print("%d/%d runs in MLflow, %.0f s" % (i + 1, len(paths), time.monotonic() - t0), file=sys.stderr)
    with open(os.path.join(out, "ids.json"), "w") as fh:
        json.dump({"experiment": exp, "ids": ids}, fh)


def store(tree: str, n: int, cache: str, peers_python: str) -> str:
    """``cache``/mlflow-<n>: the MLflow store of ``tree`` (``n`` runs), built once by the peers venv."""
    out = os.path.join(cache, "mlflow-%d" % n)
    done = os.path.join(out, ".bench-complete")
    if not os.path.exists(done):
        subprocess.run(["rm", "-rf", out], check=True)
        subprocess.run([peers_python, os.path.abspath(__file__), "store", tree, out], check=True,
                       env=dict(os.environ, **MLFLOW_ENV), cwd=cache)
        open(done, "w").close()
    return out


# -- the two warm processes -------------------------------------------------------------------------------

def _serve(calls: dict) -> int:
    """Answer each line of stdin (a name in ``calls``) with the call's seconds and its result's size, as JSON;
    ``quit``: the process's peak RSS and CPU seconds."""
    for fn in calls.values():
        for _ in range(WARM):
            fn()
    out = sys.stdout
    for line in sys.stdin:
        name = line.strip()
        if name == "quit":
            import resource

            ru = resource.getrusage(resource.RUSAGE_SELF)
            out.write(json.dumps({"rss_mb": ru.ru_maxrss / 1024.0, "cpu": ru.ru_utime + ru.ru_stime}) + "\n")
            out.flush()
            return 0
        fn = calls[name]
        c0 = time.process_time()
        t0 = time.perf_counter()
        got = fn()
        wall = time.perf_counter() - t0
        out.write(json.dumps({"s": wall, "cpu": time.process_time() - c0, "n": got}) + "\n")
        out.flush()
    return 0


def serve_ours(tree: str, run_id: str) -> int:
    import relaxrepro
    from relaxrepro.manifest import treesig
    from relaxrepro.manifest.scan import Walk

    runs, dirs = relaxrepro.runs(tree), relaxrepro.runs(tree, check="dirs")

    def get(of) -> int:
        run = of.get(run_id)
        return len(run.doc) + len(run.facts) if run is not None else -1

    return _serve({"get": lambda: get(runs), "where": lambda: len(runs.where(METRIC[0])),
                   "floor": lambda: len(treesig.walk(tree, Walk.of([tree]))),
                   "get-dirs": lambda: get(dirs), "where-dirs": lambda: len(dirs.where(METRIC[0]))})


def parts(tree: str, run_id: str, calls: int = 40) -> int:
    """Where a call of ours spends its time (medians over ``calls`` calls of each shape, warm, in process): the
    walk and stat, the database's check (connect, the stored digest against the walk's), the query and its rows
    (SQL, Row objects, walk order), the decoding of the document and facts a fetch returns."""
    import relaxrepro
    from relaxrepro.manifest import runindex

    spent: dict = {}

    def timed(name: str, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        return wrapper

    runindex.walk = timed("walk and stat", runindex.walk)
    runindex.connect = timed("connect", runindex.connect)
    runindex._refresh = timed("check (digest, state)", runindex._refresh)
    runs = relaxrepro.runs(tree)
    shapes = {"get": lambda: runs.get(run_id), "where": lambda: runs.where(METRIC[0])}
    for fn in shapes.values():
        for _ in range(WARM):
            fn()
    for shape, fn in shapes.items():
        rows: dict = {}
        for _ in range(calls):
            spent.clear()
            t0 = time.perf_counter()
            got = fn()
            t1 = time.perf_counter()
            if shape == "get":
                _ = (got.doc, got.facts)  # the decoding a caller's first look costs
            t2 = time.perf_counter()
            rest = (t1 - t0) - sum(spent.values())
            for name, value in list(spent.items()) + [("query and rows (SQL, Row, order)", rest),
                                                      ("decode doc + facts", t2 - t1), ("total", t2 - t0)]:
                rows.setdefault(name, []).append(value)
        total = statistics.median(rows["total"])
        for name, values in rows.items():
            if shape == "where" and name.startswith("decode"):
                continue
            ms = statistics.median(values) * 1000
            print("%-6s %-34s %8.2f ms  %5.1f%%" % (shape, name, ms, 100.0 * ms / 1000 / total))
    return 0


def serve_mlflow(out: str, run_id: str) -> int:
    os.environ.update(MLFLOW_ENV)
    from mlflow.tracking import MlflowClient

    with open(os.path.join(out, "ids.json")) as fh:
        known = json.load(fh)
    client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(out, "mlflow.db"))
    theirs = known["ids"][run_id]

    def get() -> int:
        run = client.get_run(theirs)
        return len(run.data.metrics) + len(run.data.params) + len(run.data.tags)

    return _serve({"get": get, "where": lambda: len(client.search_runs([known["experiment"]], METRIC[1]))})


def once_mlflow(out: str, what: str, run_id: str) -> int:
    os.environ.update(MLFLOW_ENV)
    from mlflow.tracking import MlflowClient

    with open(os.path.join(out, "ids.json")) as fh:
        known = json.load(fh)
    client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(out, "mlflow.db"))
    if what == "get":
        client.get_run(known["ids"][run_id])
    else:
        client.search_runs([known["experiment"]], METRIC[1])
    return 0


class _Worker:
    def __init__(self, argv: list, env: dict) -> None:
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1)

    def ask(self, name: str) -> dict:
        self.p.stdin.write(name + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("bench worker %s ended (exit %s)" % (self.p.args[2:4], self.p.wait()))
        return json.loads(line)

    def close(self) -> dict:
        try:
            return self.ask("quit")
        finally:
            self.p.stdin.close()
            self.p.wait(timeout=60)


def in_process(rounds: int, py: str, peers_python: str, tree: str, out: str, run_id: str, env: dict,
               results: dict, progress=None) -> dict:
    """Run the in-process shapes for ``rounds`` rounds into ``results`` (bench/run.py's: per case, the per-round
    medians as ``wall``); returns what each call answered (sizes), to check both found the same."""
    me = os.path.abspath(__file__)
    ours = _Worker([py, me, "serve-ours", tree, run_id], env)
    theirs = _Worker([peers_python, me, "serve-mlflow", out, run_id], dict(env, **MLFLOW_ENV))
    order = [("mlq-get", ours, "get"), ("mlf-get", theirs, "get"), ("mlq-where", ours, "where"),
             ("mlf-where", theirs, "where"), ("mlq-floor", ours, "floor"), ("mlq-get-dirs", ours, "get-dirs"),
             ("mlq-where-dirs", ours, "where-dirs")]
    answers: dict = {}
    try:
        for r in range(rounds):
            got: dict = {cid: [] for cid, _, _ in order}
            cpu: dict = {cid: [] for cid, _, _ in order}
            for _ in range(CALLS):
                for cid, worker, name in order:
                    reply = worker.ask(name)
                    got[cid].append(reply["s"])
                    cpu[cid].append(reply["cpu"])
                    answers.setdefault(cid, set()).add(reply["n"])
            for cid in got:
                res = results.setdefault(cid, {"wall": [], "rss": [], "cpu": []})
                res["wall"].append(statistics.median(got[cid]))
                res["cpu"].append(statistics.median(cpu[cid]))
            if progress is not None:
                progress.say("in-process round %d/%d done" % (r + 1, rounds))
    finally:
        rss = {ours: ours.close()["rss_mb"], theirs: theirs.close()["rss_mb"]}
    for cid, worker, _ in order:
        results[cid]["rss"] = [rss[worker]] * len(results[cid]["wall"])
    return {cid: sorted(v) for cid, v in answers.items()}


# -- bench/run.py's hooks ---------------------------------------------------------------------------------

def versions(peers_python: str) -> str:
    """MLflow's, SQLAlchemy's and its SQLite's versions, as the peers venv has them."""
    return subprocess.run([peers_python, "-c", "import mlflow, sqlalchemy, sqlite3; print('mlflow %s, sqlalchemy %s, "
                           "sqlite %s' % (mlflow.__version__, sqlalchemy.__version__, sqlite3.sqlite_version))"],
                          capture_output=True, text=True, env=dict(os.environ, **MLFLOW_ENV)).stdout.strip()


def add_cases(add, need: set, py: str, peers_python: str, tree: str, out: str, run_id: str, idx_env: dict) -> None:
    """Register the whole-process shapes (for context) with bench/run.py's ``add``."""
    me = os.path.abspath(__file__)
    menv = dict(idx_env, **MLFLOW_ENV)
    add("mlq-get-proc", [py, "-m", "relaxrepro", "ls", tree, "--where", "run=" + run_id], idx_env)
    add("mlf-get-proc", [peers_python, me, "once-mlflow", out, "get", run_id], menv)
    add("mlq-where-proc", [py, "-m", "relaxrepro", "ls", tree, "--where", METRIC[0]], idx_env)
    add("mlf-where-proc", [peers_python, me, "once-mlflow", out, "where", run_id], menv)


def add_budgets(results: dict, budget, pair_ratio) -> None:
    budget("in process, fetch by run id <= 2x MLflow's get_run (runs(check='dirs'); 10,000 runs, SQLite)",
           pair_ratio(results, "mlq-get-dirs", "mlf-get"), 2.0, "x", "mlf-get")
    budget("in process, metric query with no match <= 2x MLflow's search_runs (runs(check='dirs'); 10,000 runs, "
           "SQLite)", pair_ratio(results, "mlq-where-dirs", "mlf-where"), 2.0, "x", "mlf-where")
    for cid, what in (("mlq-get", "fetch by run id"), ("mlq-where", "metric query with no match")):
        budget("(context) in process, check='files' (the default), %s over its walk-and-stat floor" % what,
               pair_ratio(results, cid, "mlq-floor"), 1.5, "x", "mlq-floor")


def default_ratios(results: dict, pair_ratio) -> str:
    """The default object's (check='files': every manifest stat'ed) calls against MLflow's, for the record."""
    got = [pair_ratio(results, a, b) for a, b in (("mlq-get", "mlf-get"), ("mlq-where", "mlf-where"))]
    if None in got:
        return "not run"
    return "fetch by id %.2fx, metric query with no match %.2fx (median of per-round ratios)" % tuple(got)


def compare(n: int, rounds: int) -> int:
    """The in-process shapes alone at ``n`` runs (tree, store and index built as bench/run.py builds them, the
    index in a temporary cache): each case's median and the ratios, per round."""
    import shutil
    import tempfile

    import _setup
    import runindex as ri

    peers = _setup.venv_python(_setup.ensure_venv("peersvenv", _setup.PEER_REQUIREMENTS))
    tree = ri.tree(n)
    out = store(tree, n, _setup.CACHE, peers)
    work = tempfile.mkdtemp(prefix="relaxrepro-bench-mlq-")
    try:
        env = dict(os.environ, PYTHONPATH=ROOT, RELAXREPRO_CACHE_DIR=work)
        subprocess.run([sys.executable, "-m", "relaxrepro", "index", tree], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        results: dict = {}
        in_process(rounds, sys.executable, peers, tree, out, ri.lineage_target(n), env, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for cid in IN_PROCESS:
        print("%-10s %8.2f ms" % (cid, statistics.median(results[cid]["wall"]) * 1000))
    for a, b in (("mlq-get", "mlf-get"), ("mlq-where", "mlf-where"), ("mlq-get", "mlq-floor"),
                 ("mlq-where", "mlq-floor"), ("mlq-get-dirs", "mlf-get"), ("mlq-where-dirs", "mlf-where")):
        print("%s / %s: %.2fx (median of per-round ratios)" % (a, b, statistics.median(
            x / y for x, y in zip(results[a]["wall"], results[b]["wall"]))))
    return 0


def main(argv: list) -> int:
    what = argv[0]
    if what == "store":
        build_store(argv[1], argv[2])
        return 0
    if what == "serve-ours":
        return serve_ours(argv[1], argv[2])
    if what == "serve-mlflow":
        return serve_mlflow(argv[1], argv[2])
    if what == "once-mlflow":
        return once_mlflow(argv[1], argv[2], argv[3])
    if what == "parts":
        return parts(argv[1], argv[2])
    if what == "compare":
        return compare(int(argv[1]), int(argv[2]) if len(argv) > 2 else 10)
    raise SystemExit("unknown step %r" % what)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
