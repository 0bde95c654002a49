"""tools/determinism_table.py's arithmetic on synthetic groups of runs: how many agree (k of N, 0 when no two do,
never 1/N), the log completeness, and the rows it prints (no torch needed: the runs are made up here)."""

from __future__ import annotations

import importlib.util

import pytest

from relaxrepro.manifest.trace import Trace
from tests.helpers.common import ROOT

_spec = importlib.util.spec_from_file_location("determinism_table", str(ROOT / "tools" / "determinism_table.py"))
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)


def _doc(losses, auc=0.9, weights="aa", metrics=True, outputs=True):
    trace = Trace()
    for step, loss in enumerate(losses, start=1):
        trace.add(step, loss, {})
    results = {"trace": trace.section()}
    if metrics:
        results["metrics"] = {"auc": auc, "loss": losses[-1]}
    if outputs:
        results["outputs"] = {"weights.pt": {"sha256": weights}}
    return {"results": results}


@pytest.mark.parametrize("values,k", [
    (["a", "b", "c"], 0),            # no two agree: 0, not 1 of 3
    (["a"], 0),                       # one run agrees with nobody
    (["a", "a", "b"], 2),
    (["a", "a", "a"], 3),
    (["a", "a", "b", "b", "b"], 3),   # the largest group
    ([None, None, "a"], 0),           # not recorded never agrees
    ([], 0),
], ids=["all-differ", "single", "two-of-three", "all", "largest-group", "unrecorded", "none"])
def test_agreeing_runs_are_the_largest_group_of_two_or_more(values, k):
    assert table.agreeing(values) == k


@pytest.mark.parametrize("k,n,shown", [(0, 3, "0/3 (0%)"), (0, 10, "0/10 (0%)"), (2, 3, "2/3 (67%)"),
                                       (10, 10, "10/10 (100%)"), (0, 0, "0/0 (0%)")])
def test_k_of_n_shows_zero_as_zero_percent(k, n, shown):
    assert table.k_of_n(k, n) == shown


def test_a_mode_where_no_two_runs_agree_shows_zero_and_one_where_all_agree_shows_all():
    free = [_doc([0.5 + i / 100, 0.4], weights="w%d" % i) for i in range(3)]
    same = [_doc([0.5, 0.4]) for _ in range(3)]
    free_row = table.row("free", free, [10.0, 11.0, 12.0], 11.0, 2)
    same_row = table.row("fully deterministic", same, [5.5, 5.5, 5.5], 11.0, 2)
    assert free_row == "| free | 3 | 0.9000 | 0.0000 | 0/3 (0%) | 0/3 (0%) | 100% | 11 (10-12) | baseline |"
    assert same_row == ("| fully deterministic | 3 | 0.9000 | 0.0000 | 3/3 (100%) | 3/3 (100%) | 100% "
                        "| 6 (6-6) | -50% |")
    assert table.HEADER.count("|---") == free_row.count(" | ") + 1


def test_log_completeness_counts_the_trace_rows_and_result_fields_present():
    steps = 100
    rows = table.expected_rows(steps)
    assert rows == len(_doc([0.1] * steps)["results"]["trace"]["steps"]) and 50 < rows < steps  # thinned after 50
    assert table.completeness(_doc([0.1] * steps), steps) == 1.0
    half = _doc([0.1] * 50)  # a run that stopped halfway: its first 50 rows, every result field
    assert table.completeness(half, steps) == pytest.approx((50 + 3) / (rows + 3))
    no_results = _doc([0.1] * steps, metrics=False, outputs=False)
    assert table.completeness(no_results, steps) == pytest.approx(rows / (rows + 3))
    assert table.completeness({}, steps) == 0.0
