"""The guides' determinism table: examples/determinism.py run N times per mode through ``relaxrepro run
--group <mode>``, then per mode the validation AUC (mean, std), the share of runs whose trace is bit-identical
to the most common one, the weight-hash match rate, the throughput and what determinism costs.

    .venv/bin/python tools/determinism_table.py [--runs 10] [--steps 100] [--keep DIR]

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
MODES = ("unconstrained", "seed", "deterministic")


def run_once(directory: str, mode: str, steps: int) -> float:
    """One recorded run of the example; its training throughput (steps/s, as the trainer measured it)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYTHONHASHSEED", None)  # each mode decides it for itself
    argv = [sys.executable, "-m", "relaxrepro", "run", "-q", "--output-dir", directory, "--group", mode, "--",
            sys.executable, os.path.join(ROOT, "examples", "determinism.py"), "--mode", mode, "--steps", str(steps)]
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit("determinism_table: %s run failed:\n%s" % (mode, done.stderr[-2000:]))
    return float(re.search(r"([0-9.]+) steps/s", done.stdout).group(1))


def load(directory: str) -> dict:
    (name,) = [n for n in os.listdir(directory) if n.startswith("manifest_") and n.endswith(".json")]
    with open(os.path.join(directory, name)) as fh:
        return json.load(fh)


def share_of_most_common(values: list) -> float:
    return collections.Counter(values).most_common(1)[0][1] / len(values)


def row(mode: str, docs: list, speeds: list, baseline: float) -> str:
    aucs = [float(d["results"]["metrics"]["auc"]) for d in docs]
    traces = [json.dumps(d["results"].get("trace"), sort_keys=True) for d in docs]
    weights = [d["results"]["outputs"][next(iter(d["results"]["outputs"]))].get("sha256") for d in docs]
    speed = statistics.median(speeds)
    cost = "" if mode == "unconstrained" else "%+.0f%%" % (100.0 * (speed / baseline - 1.0))
    return "| %s | %d | %.4f | %.4f | %d%% | %d%% | %.0f (%.0f-%.0f) | %s |" % (
        mode, len(docs), statistics.mean(aucs), statistics.stdev(aucs) if len(aucs) > 1 else 0.0,
        round(100 * share_of_most_common(traces)), round(100 * share_of_most_common(weights)), speed,
        min(speeds), max(speeds), cost or "baseline")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--keep", metavar="DIR", help="keep the runs in DIR (new or empty); default: a temp dir")
    args = parser.parse_args()
    top = args.keep or tempfile.mkdtemp(prefix="determinism-table-")
    try:
        docs, speeds = {}, {}
        for i in range(args.runs):  # modes interleaved: a slow minute of the machine hits all three alike
            for mode in MODES:
                directory = os.path.join(top, "%s-%02d" % (mode, i))
                speeds.setdefault(mode, []).append(run_once(directory, mode, args.steps))
                docs.setdefault(mode, []).append(load(directory))
                print("%s run %d: %.0f steps/s" % (mode, i + 1, speeds[mode][-1]), file=sys.stderr)
        first = docs[MODES[0]][0]
        cpu = first.get("hardware", {}).get("cpu", {})
        packages = first.get("environment", {}).get("key_packages", {})
        print("Machine: %s, %s cores, torch %s, Python %s; %d runs per mode, %d steps each, load average %s "
              "at the end." % (cpu.get("model", "?"), cpu.get("cores", "?"), packages.get("torch", "?"),
                               first.get("environment", {}).get("python", {}).get("version", "?"), args.runs,
                               args.steps, "%.1f" % os.getloadavg()[0] if hasattr(os, "getloadavg") else "?"))
        print()
        print("| mode | runs | AUC mean | AUC std | bit-identical traces | weight-hash match "
              "| steps/s median (min-max) | throughput vs unconstrained |")
        print("|---|---|---|---|---|---|---|---|")
        baseline = statistics.median(speeds["unconstrained"])
        for mode in MODES:
            print(row(mode, docs[mode], speeds[mode], baseline))
    finally:
        if not args.keep:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
