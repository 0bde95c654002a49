"""The benchmark scripts still import and build their inputs against the package as it is now.

They are run by hand (bench/run.py), not by CI: without this, a moved module breaks them unseen
(issue 15 moved collect_fragment; bench/merge.py failed only when the merge case ran).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.helpers.common import ROOT

SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_bench_script_compiles_and_imports(script):
    # imported as a module (its __main__ block does not run): every import at its top resolves
    res = subprocess.run([sys.executable, "-c", "import sys; sys.path[:0] = ['bench', '.']; import %s" % script[:-3]],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_merge_inputs_are_built(tmp_path: Path):
    sys.path[:0] = [str(ROOT / "bench")]
    try:
        import merge
    finally:
        del sys.path[0]
    frags = list(merge.make_fragments(str(tmp_path), 3))
    assert len(frags) == 3 and len({f["node"]["name"] for f in frags}) == 3


def test_run_lists_its_cases():
    res = subprocess.run([sys.executable, "bench/run.py", "--list"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert "merge" in res.stdout and "ls" in res.stdout


def _bench(name: str):
    sys.path[:0] = [str(ROOT / "bench")]
    try:
        return __import__(name)
    finally:
        del sys.path[0]


def test_a_budget_is_a_ratio_to_the_floor_of_the_same_round():
    run = _bench("run")
    # round 2 ran on a machine twice as loaded: both the case and its floor took twice as long
    results = {"diff": {"wall": [0.030, 0.060, 0.031]}, "floor-json": {"wall": [0.015, 0.030, 0.0155]}}
    assert run.pair_ratio(results, "diff", "floor-json") == 2.0
    row = run.budget_row("diff <= 2.5x its floor", run.pair_ratio(results, "diff", "floor-json"), 2.5, "x",
                         "floor-json")
    assert row == {"budget": "diff <= 2.5x its floor", "value": 2.0, "limit": 2.5, "unit": "x", "pass": True,
                   "floor": "floor-json"}
    assert run.budget_row("x", None, 1.0, "x")["pass"] is None  # not run: neither pass nor fail


def test_what_a_case_adds_is_measured_in_floors_of_the_same_round():
    run = _bench("run")
    results = {"patch-3.5mb": {"wall": [0.60, 1.20, 0.61]}, "patch-clean": {"wall": [0.40, 0.80, 0.40]},
               "floor-patch": {"wall": [0.08, 0.16, 0.07]}}
    assert abs(run.per_round_over(results, "patch-3.5mb", "patch-clean", "floor-patch") - 2.5) < 1e-9
    assert run.per_round_over(results, "patch-3.5mb", "patch-clean", "nothing") is None


def test_under_quick_a_case_names_the_size_it_measured():
    run = _bench("run")
    label = dict((cid, text) for cid, _, text in run.CASES)
    assert run.sized("idx-floor", label["idx-floor"], True) == (
        "walk + stat of the 2,000 manifests alone (every check's floor; bench/runindex.py)")
    assert run.sized("mlq-get-dirs", label["mlq-get-dirs"], True) == (
        "in process: relaxrepro.runs(TREE, check='dirs').get(ID), 1,000 runs")
    assert run.sized("bigrepo", label["bigrepo"], True) == "pyz generate, 2k-file repo + 50 MB untracked file"
    assert run.sized("idx-floor", label["idx-floor"], False) == label["idx-floor"]
    assert "100,000" in label["idx-floor"]


def test_a_slower_day_changes_no_verdict(tmp_path: Path):
    run = _bench("run")
    cases = [cid for cid, _, _ in run.CASES]

    def verdicts(scale: float) -> dict:
        results = {cid: {"wall": [scale * (0.05 + 0.001 * i)] * 3, "rss": [50.0] * 3, "cpu": [0.01] * 3}
                   for i, cid in enumerate(cases)}
        out = tmp_path / ("%g.json" % scale)
        args = types.SimpleNamespace(markdown=None, json=str(out))
        run.report(results, args, 3, 100.0, [], {}, sys.executable)
        return {b["budget"]: b["pass"] for b in json.loads(out.read_text())["budgets"]}

    normal, slow = verdicts(1.0), verdicts(3.0)
    assert normal == slow
    assert sum(v is not None for v in normal.values()) >= 20


def test_progress_speaks_on_a_terminal_only():
    setup = _bench("_setup")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet, tty = io.StringIO(), Tty()
    for stream in (quiet, tty):
        progress = setup.Progress(stream)
        assert progress.fixture("tree of 10", lambda: "built") == "built"
        progress.say("case diff")
    assert quiet.getvalue() == ""
    lines = tty.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].endswith("fixture tree of 10: 0.0 s") and lines[1].endswith("case diff")


def test_quick_fixtures_are_small():
    setup = _bench("_setup")
    assert set(setup.QUICK) == set(setup.FULL)
    assert all(setup.QUICK[k] * 5 <= setup.FULL[k] for k in setup.FULL)
