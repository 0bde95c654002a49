"""Issue 18's bench cases, as processes bench/run.py times (``--only results``):

- ``trace-1m`` / ``trace-0``: a trainer calling ``relaxrepro.trace(step, loss=..., acc=...)`` 1,000,000 times
  inside ``recorded``'s manifest, and the same process making no call; the per-round difference is the cost of
  the calls, against that of as many calls of a no-op function (``call-1m`` / ``call-0``; budget <= 4.3x);
- ``verify``: ``relaxrepro verify`` of the two ~30 KB manifests ``diff`` reads, given results that part at a
  trace step, so the likely causes (the diff) are worked out too (budget <= 1.2x ``diff``, same rounds);
- ``verify-100k-names`` / ``verify-1m-rows``: the same manifests with a trace of 100,000 scalars at one step,
  and of 1,000,000 rows of a per-epoch step counter (the new run a row longer at its start, so rows are
  paired by step and rank, the slow way), parting at their last value (budgets: <= 10x and <= 16x a json.load
  of the same files, ``json-100k-names`` / ``json-1m-rows``, whole process);
- ``result-1g`` / ``sha256sum-1g``: ``relaxrepro.result(outputs=[a 1 GB checkpoint])`` with an empty cache
  against ``sha256sum`` of it (budget: throughput >= 0.9x, i.e. time <= 1.11x); ``result-1g-cached``: the
  same with the cache filled (budget: <= 2x ``trace-0``, the same process without it).

Run as a script it is one of those processes: ``verify.py trace N``, ``verify.py result PATH CACHE_DIR``.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from typing import Callable, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [
    ("trace-1m", "results", "relaxrepro.trace x 1,000,000 calls (Manifest in memory)"),
    ("trace-0", "results", "the same process, no trace call"),
    ("call-1m", "results", "floor: a no-op Python function called 1,000,000 times with trace's arguments"),
    ("call-0", "results", "the same process, no call"),
    ("verify", "results read", "package verify, two ~30 KB manifests with results (clean venv python)"),
    ("verify-100k-names", "results", "package verify, a trace of 100,000 scalars on each side"),
    ("verify-1m-rows", "results", "package verify, a trace of 1,000,000 rows (a per-epoch step counter)"),
    ("json-100k-names", "results", "floor: json.load of verify-100k-names' two manifests (clean venv python)"),
    ("json-1m-rows", "results", "floor: json.load of verify-1m-rows' two manifests (clean venv python)"),
    ("result-1g", "results", "relaxrepro.result(outputs=[1 GB file]), empty fingerprint cache"),
    ("sha256sum-1g", "results", "peer: sha256sum of the same 1 GB file"),
    ("result-1g-cached", "results", "relaxrepro.result(outputs=[1 GB file]), digest cached"),
]


def with_results(paths: List[str], work: str) -> List[str]:
    """Copies of ``paths`` with results that agree on outputs and part in the trace at step 30."""
    out = []
    for i, path in enumerate(paths):
        with open(path) as fh:
            doc = json.load(fh)
        steps = list(range(50)) + list(range(50, 1000, 20))
        loss = [(1.0 / (s + 1) + (1e-9 if i and s >= 30 else 0.0)).hex() for s in steps]
        doc["schema_version"] = "1.3"
        doc["results"] = {"metrics": {"auc": 0.91 + i * 1e-6, "loss": 0.25},
                          "outputs": {"ckpt/model.pt": {"kind": "file", "sha256": "a" * 64, "size": 1 << 30}},
                          "trace": {"first": 50, "every": 20, "calls": 1000, "last_step": 999, "steps": steps,
                                    "names": ["loss", "acc"], "values": [loss, copy.copy(loss)]}}
        target = os.path.join(work, "verify%d.json" % i)
        with open(target, "w") as fh:
            json.dump(doc, fh, indent=1)
        out.append(target)
    return out


def with_big_trace(paths: List[str], work: str, names: int, rows: int) -> List[str]:
    """Copies of ``paths`` whose trace has ``names`` scalars and ``rows`` rows (steps 0..999 again and again; the
    new run a row longer at its start), parting at the last value; written compactly to stay under the 10 MB cap."""
    out = []
    for i, path in enumerate(paths):
        with open(path) as fh:
            doc = json.load(fh)
        n = rows + i
        steps = [j % 1000 for j in range(-i, rows)]
        values = [[j % 7 for j in range(-i, rows)] for _ in range(names)]
        values[-1][-1] = 7 + i
        doc["schema_version"] = "1.3"
        doc["results"] = {"trace": {"first": 50, "every": 10, "calls": n, "last_step": steps[-1], "steps": steps,
                                    "names": ["s%d" % k for k in range(names)], "values": values}}
        target = os.path.join(work, "verify-%d-%d-%d.json" % (names, rows, i))
        with open(target, "w") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        out.append(target)
    return out


def big_file(work: str, size_mb: int = 1024) -> str:
    path = os.path.join(work, "checkpoint.bin")
    block = os.urandom(1 << 20)
    with open(path, "wb") as fh:
        for _ in range(size_mb):
            fh.write(block)
    return path


def add_cases(add: Callable[..., None], need: set, py: str, clean_py: str, env_pkg: Dict[str, str],
              work: str, diff_inputs: List[str]) -> None:
    """Register the cases above with bench/run.py's ``add``."""
    me = os.path.abspath(__file__)
    add("trace-1m", [py, me, "trace", "1000000"], env_pkg)
    add("trace-0", [py, me, "trace", "0"], env_pkg)
    add("call-1m", [py, me, "call", "1000000"], env_pkg)
    add("call-0", [py, me, "call", "0"], env_pkg)
    if "verify" in need:
        a, b = with_results(diff_inputs, work)
        add("verify", [clean_py, "-m", "relaxrepro", "verify", a, b], env_pkg, ok_rc=(1,))
    for cid, floor, names, rows in (("verify-100k-names", "json-100k-names", 100_000, 1),
                                    ("verify-1m-rows", "json-1m-rows", 1, 1_000_000)):
        if need & {cid, floor}:
            paths = with_big_trace(diff_inputs, work, names, rows)
            add(cid, [py, "-m", "relaxrepro", "verify"] + paths, env_pkg, ok_rc=(1,))
            load = "import json, sys\nfor p in sys.argv[1:]:\n    with open(p) as fh: json.load(fh)"
            add(floor, [clean_py, "-c", load] + paths, env_pkg)
    if need & {"result-1g", "sha256sum-1g", "result-1g-cached"}:
        path = big_file(work)
        add("result-1g", [py, me, "result", path, ""], env_pkg)
        add("sha256sum-1g", ["sha256sum", path], env_pkg)
        cached = os.path.join(work, "filled-cache")
        main(["result", path, cached])  # fills it once
        add("result-1g-cached", [py, me, "result", path, cached], env_pkg)


TRACE_CALL_LIMIT = 4.3
"""trace's cost per call over a no-op call's: the old 2 us over the 0.46 us of ``call-1m`` less ``call-0`` on the
machine of bench/RESULTS.md's issue 32 section (2026-12-04)."""


def add_budgets(results: Dict[str, dict], budget: Callable[..., None], pair_ratio: Callable[..., object]) -> None:
    """Issue 18's budgets, each a ratio measured in the same rounds (see the module docstring)."""
    import statistics

    def per_call(a: str, a0: str, b: str, b0: str):
        if any(c not in results for c in (a, a0, b, b0)):
            return None
        return statistics.median((x - x0) / (y - y0) for x, x0, y, y0 in zip(
            results[a]["wall"], results[a0]["wall"], results[b]["wall"], results[b0]["wall"]))

    budget("trace <= %gx a no-op call with its arguments (1,000,000 calls each, per-round differences; was <= 2 us)"
           % TRACE_CALL_LIMIT, per_call("trace-1m", "trace-0", "call-1m", "call-0"), TRACE_CALL_LIMIT, "x", "call-1m")
    budget("verify <= 1.2x diff", pair_ratio(results, "verify", "diff"), 1.2, "x")
    budget("verify of 100,000 traced names <= 10x json.load of its manifests (was <= 2 s)",
           pair_ratio(results, "verify-100k-names", "json-100k-names"), 10.0, "x", "json-100k-names")
    budget("verify of a 1,000,000-row trace <= 16x json.load of its manifests (was <= 10 s)",
           pair_ratio(results, "verify-1m-rows", "json-1m-rows"), 16.0, "x", "json-1m-rows")
    budget("result of a 1 GB file <= 1.11x sha256sum (>= 0.9x its throughput)",
           pair_ratio(results, "result-1g", "sha256sum-1g"), 1.11, "x", "sha256sum-1g")
    budget("result of a cached 1 GB file <= 2x the same process without it (was <= 50 ms over its ~49 ms)",
           pair_ratio(results, "result-1g-cached", "trace-0"), 2.0, "x", "trace-0")


def main(argv: List[str]) -> int:
    sys.path.insert(0, ROOT)
    if argv[0] == "trace":
        from relaxrepro import api
        from relaxrepro.manifest.model import Manifest

        api._last = Manifest(run_id="bench")  # what collect_manifest leaves for trace() to find
        trace = __import__("relaxrepro").trace
        for step in range(int(argv[1])):
            trace(step, loss=0.5, acc=0.25)
        return 0
    if argv[0] == "call":
        def call(step: int, **values: float) -> None:
            pass

        for step in range(int(argv[1])):
            call(step, loss=0.5, acc=0.25)
        return 0
    if argv[0] == "result":
        import tempfile

        from relaxrepro import api
        from relaxrepro.manifest.model import Manifest

        cache = argv[2] or tempfile.mkdtemp(prefix="rr-bench-cache-")  # empty: the file is read in full
        os.environ["RELAXREPRO_CACHE_DIR"] = cache
        section = api.result(outputs=[argv[1]], manifest=Manifest(run_id="bench"))
        if not argv[2]:
            import shutil

            shutil.rmtree(cache, ignore_errors=True)
        return 0 if section and section["outputs"] and "sha256" in next(iter(section["outputs"].values())) else 1
    raise SystemExit("usage: verify.py trace N | call N | result PATH CACHE_DIR")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
