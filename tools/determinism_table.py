"""The guides' determinism table: examples/determinism.py run N times per mode through ``relaxrepro run
--group <mode>``, then per mode the validation AUC (mean, std), how many runs share a bit-identical trace and
weight hash (k of N: the largest group of runs that agree, 0 when no two do), the log completeness, the
throughput and what determinism costs.

    .venv/bin/python tools/determinism_table.py [--runs 10] [--steps 100] [--keep DIR]

Rows: the seed's three modes (free, seed only, fully deterministic), each with ``PYTHONHASHSEED`` fixed, and the
``PYTHONHASHSEED`` pitfall as a fourth row of its own: seed only, with the hash seed left random, so the
example's set-ordered columns change from process to process.

Needs torch and numpy (tests/requirements-ml.txt); relaxrepro itself never imports them. Prints Markdown.
"""

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from relaxrepro.manifest.trace import Trace  # noqa: E402 - the tree's own, beside this tool

ROWS = (
    # (label, the example's --mode, PYTHONHASHSEED)
    ("free", "unconstrained", "0"),
    ("seed only", "seed", "0"),
    ("fully deterministic", "deterministic", "0"),
    ("seed only, PYTHONHASHSEED unset", "seed", None),
)
RESULT_FIELDS = ("metrics.auc", "metrics.loss", "outputs")
"""What every run of the example records in ``results``, besides its trace."""


def run_once(directory: str, label: str, mode: str, hashseed, steps: int) -> float:
    """One recorded run of the example; its training throughput (steps/s, as the trainer measured it)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYTHONHASHSEED", None)
    if hashseed is not None:
        env["PYTHONHASHSEED"] = hashseed
    argv = [sys.executable, "-m", "relaxrepro", "run", "-q", "--output-dir", directory, "--group", mode, "--",
            sys.executable, os.path.join(ROOT, "examples", "determinism.py"), "--mode", mode, "--steps", str(steps)]
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit("determinism_table: %s run failed:\n%s" % (label, done.stderr[-2000:]))
    return float(re.search(r"([0-9.]+) steps/s", done.stdout).group(1))


def load(directory: str) -> dict:
    (name,) = [n for n in os.listdir(directory) if n.startswith("manifest_") and n.endswith(".json")]
    with open(os.path.join(directory, name)) as fh:
        return json.load(fh)


def agreeing(values: list) -> int:
    """How many runs agree: the size of the largest group of equal values, 0 when no two are equal (one run
    alone agrees with nobody). None values (not recorded) never agree."""
    counts = collections.Counter(v for v in values if v is not None)
    top = counts.most_common(1)[0][1] if counts else 0
    return top if top > 1 else 0


def k_of_n(k: int, n: int) -> str:
    """``3/10 (30%)``; ``0/10 (0%)`` when none agree."""
    return "%d/%d (%d%%)" % (k, n, round(100.0 * k / n) if n else 0)


def expected_rows(steps: int) -> int:
    """Rows a complete trace of ``steps`` steps keeps (the trace's own thinning, run on nothing but step numbers)."""
    trace = Trace()
    for step in range(1, steps + 1):
        trace.add(step, 0.0, {})
    return len(trace.section()["steps"])


def completeness(doc: dict, steps: int) -> float:
    """The share of what the run should have logged that its manifest holds: the trace's rows (every name's value
    present) and the result fields (:data:`RESULT_FIELDS`)."""
    results = doc.get("results") if isinstance(doc.get("results"), dict) else {}
    trace = results.get("trace") if isinstance(results.get("trace"), dict) else {}
    values = trace.get("values") if isinstance(trace.get("values"), list) else []
    rows = len(trace.get("steps") or [])
    present = sum(1 for j in range(rows) if values and all(isinstance(col, list) and j < len(col)
                                                            and col[j] is not None for col in values))
    fields = 0
    for field in RESULT_FIELDS:
        node = results
        for part in field.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        fields += node not in (None, {}, [])
    expected = expected_rows(steps)
    return (min(present, expected) + fields) / float(expected + len(RESULT_FIELDS))


def weight_hash(doc: dict):
    outputs = (doc.get("results") or {}).get("outputs") or {}
    first = next(iter(outputs.values()), None) if isinstance(outputs, dict) else None
    return first.get("sha256") if isinstance(first, dict) else None


def row(label: str, docs: list, speeds: list, baseline: float, steps: int) -> str:
    aucs = [float(d["results"]["metrics"]["auc"]) for d in docs if "auc" in (d.get("results") or {}).get("metrics", {})]
    traces = [json.dumps(d["results"]["trace"], sort_keys=True) if (d.get("results") or {}).get("trace") else None
              for d in docs]
    weights = [weight_hash(d) for d in docs]
    complete = statistics.mean(completeness(d, steps) for d in docs)
    speed = statistics.median(speeds)
    cost = "baseline" if label == ROWS[0][0] else "%+.0f%%" % (100.0 * (speed / baseline - 1.0))
    return "| %s | %d | %.4f | %.4f | %s | %s | %d%% | %.0f (%.0f-%.0f) | %s |" % (
        label, len(docs), statistics.mean(aucs) if aucs else float("nan"),
        statistics.stdev(aucs) if len(aucs) > 1 else 0.0, k_of_n(agreeing(traces), len(docs)),
        k_of_n(agreeing(weights), len(docs)), round(100 * complete), speed, min(speeds), max(speeds), cost)


HEADER = ("| mode | runs | AUC mean | AUC std | bit-identical traces | weight-hash match | log completeness "
          "| steps/s median (min-max) | throughput vs free |\n|---|---|---|---|---|---|---|---|---|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--keep", metavar="DIR", help="keep the runs in DIR (new or empty); default: a temp dir")
    args = parser.parse_args()
    top = args.keep or tempfile.mkdtemp(prefix="determinism-table-")
    try:
        docs, speeds = {}, {}
        for i in range(args.runs):  # modes interleaved: a slow minute of the machine hits all of them alike
            for n, (label, mode, hashseed) in enumerate(ROWS):
                directory = os.path.join(top, "%d-%s-%02d" % (n, mode, i))
                speeds.setdefault(label, []).append(run_once(directory, label, mode, hashseed, args.steps))
                docs.setdefault(label, []).append(load(directory))
                print("%s run %d: %.0f steps/s" % (label, i + 1, speeds[label][-1]), file=sys.stderr)
        first = docs[ROWS[0][0]][0]
        cpu = first.get("hardware", {}).get("cpu", {})
        packages = first.get("environment", {}).get("key_packages", {})
        print("Machine: %s, %s cores, torch %s, Python %s; %d runs per mode, %d steps each, load average %s "
              "at the end." % (cpu.get("model", "?"), cpu.get("cores", "?"), packages.get("torch", "?"),
                               first.get("environment", {}).get("python", {}).get("version", "?"), args.runs,
                               args.steps, "%.1f" % os.getloadavg()[0] if hasattr(os, "getloadavg") else "?"))
        print()
        print(HEADER)
        baseline = statistics.median(speeds[ROWS[0][0]])
        for label, _mode, _hashseed in ROWS:
            print(row(label, docs[label], speeds[label], baseline, args.steps))
    finally:
        if not args.keep:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
