#!/usr/bin/env python3
"""Import cost of ``generate``, ``diff`` and ``check``, from ``python -X importtime``.

    python3 bench/imports.py [--runs N] [--python PYTHON] [--json] [--tree]

For each command: the median over N runs (default 5) of the sum of the top-level cumulative column of
``-X importtime`` (everything the process imported, interpreter start-up included), the same for
``python -c pass`` (the floor), their difference (what running relaxrepro adds), and the heavy stdlib
modules the command still imports (each one pulls a chain: ``dataclasses`` brings ``inspect``/``ast``/``dis``,
``secrets`` brings ``hmac``/``hashlib``/OpenSSL, ``socket`` brings ``selectors``/``select``...).
``generate`` runs in a small git repo (one commit, one file) with the recorded command ``python train.py``;
``diff`` compares two manifests ``generate`` wrote; ``check`` checks one of them against this machine.
The default interpreter is a clean venv (no site-packages) of the one running this script.
Timings vary with load: compare medians taken on the same machine in the same minute.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Modules (and their packages) whose import is slow or drags in a chain; a fast reading command has none.
HEAVY = ("dataclasses", "inspect", "ast", "dis", "tokenize", "copy", "socket", "selectors", "hashlib", "hmac",
         "secrets", "random", "base64", "xml.etree", "urllib.parse", "ipaddress", "platform", "traceback",
         "shutil", "bz2", "lzma", "tempfile", "csv", "getpass", "termios", "subprocess", "threading",
         "concurrent.futures", "logging", "email", "zipfile", "datetime", "typing")

GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.invalid", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def parse_importtime(stderr: str) -> Tuple[float, List[str]]:
    """(sum of top-level cumulative ms, every module name imported) from ``-X importtime`` output."""
    total_us = 0
    names = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue  # the header line
        raw = parts[2].rstrip()
        name = raw.strip()
        names.append(name)
        if raw.startswith(" ") and not raw.startswith("  "):  # nesting indents by two more spaces
            total_us += int(parts[1])
    return total_us / 1000.0, names


def heavy_in(names: List[str]) -> List[str]:
    """The HEAVY modules among ``names`` (a submodule counts for its package: ``xml.etree.ElementTree``)."""
    seen = set(names)
    found = []
    for h in HEAVY:
        if h in seen or any(n.startswith(h + ".") for n in seen):
            found.append(h)
    return found


def importtime(argv: List[str], cwd: str, env: Dict[str, str]) -> Tuple[float, List[str], str]:
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if res.returncode not in (0, 1):
        sys.exit("%s failed (rc %d): %s" % (" ".join(argv), res.returncode, res.stderr[-800:]))
    ms, names = parse_importtime(res.stderr)
    return ms, names, res.stdout


def small_repo(base: str) -> str:
    repo = os.path.join(base, "repo")
    os.makedirs(repo)
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("print('training')\n")
    env = dict(os.environ, **GIT_ENV)
    for argv in (["git", "init", "-q"], ["git", "add", "train.py"], ["git", "commit", "-q", "-m", "init"]):
        subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True)
    return repo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default=None,
                    help="interpreter to measure as is (default: a clean venv of this one, so that site-packages "
                         ".pth files such as certifi's do not count)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()
    tmp_venv = None
    if args.python:
        py = args.python
    else:
        tmp_venv = tempfile.TemporaryDirectory(prefix="relaxrepro-bench-venv-")
        base = os.path.realpath(sys.executable)  # a pyenv shim is a bash script: never time through it
        subprocess.run([base, "-m", "venv", "--without-pip", tmp_venv.name], check=True)
        py = os.path.join(tmp_venv.name, "bin", "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAXREPRO_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what an installed package costs: byte-compiled
    env["PYTHONPATH"] = ROOT
    subprocess.run([py, "-m", "compileall", "-q", os.path.join(ROOT, "relaxrepro")], capture_output=True)

    with tempfile.TemporaryDirectory(prefix="relaxrepro-bench-imports-") as tmp:
        repo = small_repo(tmp)
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        paths = []
        for _ in range(2):
            res = subprocess.run([py, "-m", "relaxrepro", "generate", "--output-dir", out, "--", "python",
                                  "train.py"], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                sys.exit("generate failed: %s" % res.stderr[-800:])
            paths.append(res.stdout.strip().splitlines()[-1])
        gen_out = os.path.join(tmp, "gen")
        os.makedirs(gen_out)
        cases = {
            "floor": [py, "-X", "importtime", "-c", "pass"],
            "generate": [py, "-X", "importtime", "-m", "relaxrepro", "generate", "--output-dir", gen_out, "--",
                         "python", "train.py"],
            "diff": [py, "-X", "importtime", "-m", "relaxrepro", "diff", paths[0], paths[1]],
            "check": [py, "-X", "importtime", "-m", "relaxrepro", "check", paths[0]],
        }
        times: Dict[str, List[float]] = {k: [] for k in cases}
        names: Dict[str, List[str]] = {}
        for _ in range(args.runs):  # interleaved, so a burst of load slows every case alike
            for case, argv in cases.items():
                ms, mods, _stdout = importtime(argv, repo, env)
                times[case].append(ms)
                names[case] = mods

    if tmp_venv is not None:
        tmp_venv.cleanup()
    floor = statistics.median(times["floor"])
    result = {"python": py, "runs": args.runs, "floor_ms": round(floor, 1), "commands": {}}
    for case in ("generate", "diff", "check"):
        med = statistics.median(times[case])
        result["commands"][case] = {
            "import_ms": round(med, 1), "over_floor_ms": round(med - floor, 1),
            "relaxrepro_modules": sum(1 for n in names[case] if n.split(".")[0] == "relaxrepro"),
            "heavy": heavy_in(names[case]),
        }
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
        return 0
    print("import time, median of %d (-X importtime, sum of top-level cumulative); floor `-c pass` %.1f ms"
          % (args.runs, floor))
    for case, r in result["commands"].items():
        print("%-9s %6.1f ms  (+%.1f over floor, %d relaxrepro modules)" % (case, r["import_ms"], r["over_floor_ms"],
                                                                          r["relaxrepro_modules"]))
        print("          heavy: %s" % (", ".join(r["heavy"]) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
