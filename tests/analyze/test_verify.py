"""The verdict of ``relaxrepro verify`` on hand-made pairs of results: each rule pinned."""

from __future__ import annotations

import copy

import pytest

from relaxrepro.analyze.verify import render, same_value, verify
from relaxrepro.commands._common import verify_exit
from tests.helpers.recording import make_doc
from tests.helpers.results import BASE, H, pair, trace


def test_identical_results_reproduce():
    old, new = pair()
    result = verify(old, new)
    assert result["verdict"] == "reproduced" and verify_exit(result) == 0
    assert [r["status"] for r in result["outputs"] + result["metrics"]] == ["same", "same", "same"]
    assert result["trace"]["status"] == "same" and result["trace"]["compared"] == 5
    assert render(result).splitlines()[0] == "verify old -> new: reproduced (bit-exact)"


def test_a_changed_output_is_named_with_both_digests():
    old, new = pair(outputs={"ckpt/model.pt": {"kind": "file", "sha256": "b" * 64, "size": 10}})
    result = verify(old, new)
    assert result["verdict"] == "diverged" and verify_exit(result) == 1
    assert result["outputs"] == [{"path": "ckpt/model.pt", "status": "differs", "old": "a" * 64, "new": "b" * 64}]
    assert "  differs    ckpt/model.pt  sha256 aaaaaaaaaaaa -> bbbbbbbbbbbb" in render(result).splitlines()


def test_outputs_each_run_wrote_into_its_own_directory_are_compared_by_file_name():
    # relaxrepro run --output-dir runs/a, then runs/b: the same weights.pt under another directory.
    old, new = pair(outputs={"runs/b/ckpt/model.pt": {"kind": "file", "sha256": "a" * 64, "size": 10},
                              "runs/b/extra.log": {"kind": "file", "sha256": "c" * 64, "size": 1}})
    old["results"]["outputs"] = {"runs/a/ckpt/model.pt": {"kind": "file", "sha256": "a" * 64, "size": 10}}
    result = verify(old, new)
    assert result["outputs"][0] == {"path": "runs/b/ckpt/model.pt", "old_path": "runs/a/ckpt/model.pt",
                                    "status": "same", "old": "a" * 64, "new": "a" * 64}
    assert result["outputs"][1]["status"] == "missing" and result["outputs"][1]["missing_in"] == "old"
    assert "  same       runs/a/ckpt/model.pt -> runs/b/ckpt/model.pt  sha256 aaaaaaaaaaaa" in render(result)
    new["results"]["outputs"]["runs/b/ckpt/model.pt"]["sha256"] = "b" * 64
    del new["results"]["outputs"]["runs/b/extra.log"]
    assert [(r["status"], r.get("old_path")) for r in verify(old, new)["outputs"]] == [
        ("differs", "runs/a/ckpt/model.pt")]


def test_an_output_missing_in_the_new_run_diverges_and_missing_in_both_proves_nothing():
    old, new = pair(outputs={"ckpt/model.pt": {"kind": "missing", "error": "not found"}})
    result = verify(old, new)
    assert result["verdict"] == "diverged"
    assert result["outputs"][0]["status"] == "missing" and result["outputs"][0]["missing_in"] == "new"
    old["results"]["outputs"] = copy.deepcopy(new["results"]["outputs"])
    result = verify(old, new)
    assert result["verdict"] == "nothing to verify" and verify_exit(result) == 2
    assert result["outputs"][0] == {"path": "ckpt/model.pt", "status": "incomplete", "why": "missing in both",
                                    "old": None, "new": None}


def test_a_digest_not_taken_in_full_is_never_called_the_same():
    old, new = pair(outputs={"ckpt/model.pt": {"kind": "directory", "size": 10, "error": "could not read 1 path"}})
    old["results"]["outputs"] = copy.deepcopy(new["results"]["outputs"])
    result = verify(old, new)
    assert result["verdict"] == "nothing to verify"
    assert result["why"].startswith("nothing differs, but not everything was recorded in full")


def test_nan_against_nan_is_the_same_in_metrics_and_trace():
    old, new = pair(metrics={"auc": 0.91, "loss": "NaN"},
                     trace=trace(range(2), loss=[H(float("nan")), H(1.0)]))
    old["results"]["metrics"]["loss"] = "NaN"
    old["results"]["trace"] = trace(range(2), loss=["nan", H(1.0)])
    result = verify(old, new)
    assert result["verdict"] == "reproduced", render(result)


def test_nan_against_a_number_differs_even_with_a_tolerance():
    old, new = pair(metrics={"auc": 0.91, "loss": "NaN"})
    result = verify(old, new, rtol=1.0, atol=1.0)
    assert result["verdict"] == "diverged"
    assert result["metrics"][1]["status"] == "differs" and result["metrics"][1]["rel_diff"] is None


def test_minus_zero_against_zero_differs_bit_exact_and_says_it_is_the_sign():
    old, new = pair(trace=trace(range(2), loss=[H(1.0), H(0.0)]))
    old["results"]["trace"] = trace(range(2), loss=[H(1.0), H(-0.0)])
    result = verify(old, new)
    assert result["verdict"] == "diverged"
    first = result["trace"]["first"]
    assert (first["step"], first["scalar"], first["old"], first["new"]) == (1, "loss", "-0x0.0p+0", "0x0.0p+0")
    assert "-0.0 against 0.0" in first["note"]
    text = render(result)
    assert "  first parts at step 1, loss: -0.0 -> 0.0 (-0x0.0p+0 -> 0x0.0p+0)" in text.splitlines()
    assert verify(old, new, atol=1e-12)["verdict"] == "reproduced"  # with a tolerance: the same value


def test_minus_zero_metric_differs_bit_exact_only():
    old, new = pair(metrics={"auc": 0.91, "loss": 0.0})
    old["results"]["metrics"]["loss"] = -0.0
    assert verify(old, new)["metrics"][1]["status"] == "differs"
    assert verify(old, new, rtol=1e-9)["metrics"][1]["status"] == "same"


@pytest.mark.parametrize("a, b, rtol, atol, same", [
    (1.5, 1.0, 0.0, 0.5, True),        # |a-b| == atol: inclusive
    (1.5000001, 1.0, 0.0, 0.5, False),
    (1.1, 1.0, 0.1, 0.0, False),       # 1.1-1.0 is 0.10000000000000009 > 0.1 in binary: as numpy.isclose says
    (1.25, 1.0, 0.25, 0.0, True),      # exact in binary: |a-b| == rtol*|b|
    (2.0, 1.0, 0.5, 0.5, True),        # atol + rtol*|b|
    (1.0, 2.0, 0.5, 0.0, True),        # rtol scales B's value: |1-2| <= 0.5*2
    (2.0, 1.0, 0.5, 0.0, False),       # ...and so is not symmetric, like numpy.isclose
    (float("inf"), float("inf"), 0.1, 0.0, True),
    (float("inf"), 1e308, 1.0, 0.0, False),
    (3, 3.0, 0.0, 0.0, True),          # an int and the same float
])
def test_tolerance_edges(a, b, rtol, atol, same):
    assert same_value(H(a) if isinstance(a, float) else a, H(b), rtol, atol) is same


def test_a_metric_beyond_the_tolerance_shows_both_values_and_the_relative_difference():
    old, new = pair(metrics={"auc": 0.92, "loss": 0.25})
    result = verify(old, new)
    row = result["metrics"][0]
    assert (row["old"], row["new"], row["status"]) == (0.91, 0.92, "differs")
    assert row["rel_diff"] == pytest.approx(0.01 / 0.92)
    assert "  differs    auc  0.91 -> 0.92 (relative difference 0.0109)" in render(result).splitlines()
    assert verify(old, new, rtol=0.011)["verdict"] == "reproduced"


def test_the_first_diverging_step_is_named_with_both_values():
    losses = [H(1.0 / (i + 1)) for i in range(5)]
    changed = losses[:3] + [H(0.3), H(0.21)]
    old, new = pair(trace=trace(range(5), loss=changed))
    result = verify(old, new)
    t = result["trace"]
    assert t["status"] == "differs" and t["differing"] == 2 and t["compared"] == 5
    assert t["first"] == {"step": 3, "scalar": "loss", "old": H(0.25), "new": H(0.3)}
    assert "trace: differs, 5 rows compared, 2 differ" in render(result)


def test_a_scalar_present_on_one_side_only_differs():
    old, new = pair(trace=trace(range(5), loss=BASE["trace"]["values"][0], acc=[H(0.5)] * 5))
    result = verify(old, new)
    assert result["trace"]["first"] == {"step": 0, "scalar": "acc", "old": None, "new": H(0.5)}


def test_runs_of_another_length_differ_unless_only_the_first_steps_are_asked():
    long = trace(range(8), loss=[H(1.0 / (i + 1)) for i in range(8)])
    old, new = pair()
    old["results"]["trace"] = long
    result = verify(old, new)
    assert result["verdict"] == "diverged"
    assert "old ran to step 7, new to step 4" in result["trace"]["notes"]
    quick = verify(old, new, steps=3)
    assert quick["verdict"] == "reproduced" and quick["trace"]["compared"] == 3
    assert quick["outputs"] == [] and quick["metrics"] == []  # --steps: the trace alone


def test_steps_ignores_outputs_and_metrics():
    old, new = pair(outputs={"ckpt/model.pt": {"kind": "file", "sha256": "b" * 64, "size": 10}},
                     metrics={"auc": 0.5})
    assert verify(old, new, steps=5)["verdict"] == "reproduced"
    assert "first 5 trace steps" in render(verify(old, new, steps=5)).splitlines()[0]


def test_steps_without_a_trace_on_one_side_is_nothing_to_verify():
    old, new = pair(trace=None)
    result = verify(old, new, steps=5)
    assert result["verdict"] == "nothing to verify"
    assert result["why"] == "--steps compares the trace, and new run recorded none"


def test_a_trace_cut_by_the_size_cap_is_compared_on_what_is_left():
    old, new = pair()
    cut = copy.deepcopy(BASE["trace"])
    cut["steps"] = cut["steps"][:3]
    cut["steps_truncated"] = {"count": 5}
    new["results"]["trace"] = cut
    result = verify(old, new)
    assert result["verdict"] == "reproduced"
    assert result["trace"]["compared"] == 3
    assert "the new trace was cut by the size cap: compared on the rows it kept" in result["trace"]["notes"]


@pytest.mark.parametrize("section", ["metrics", "outputs", "trace"])
def test_a_section_recorded_on_one_side_only_diverges(section):
    old, new = pair(**{section: None})
    result = verify(old, new)
    assert result["verdict"] == "diverged", render(result)


def test_a_manifest_without_results_has_nothing_to_verify():
    old = make_doc("old")  # 1.0: before results existed
    _, new = pair()
    result = verify(old, new)
    assert result["verdict"] == "nothing to verify" and verify_exit(result) == 2
    assert result["why"].startswith("no results recorded in old run")
    assert verify(old, copy.deepcopy(old))["why"].startswith("no results recorded in either run")


def test_likely_causes_come_from_the_seeds_verdict_and_the_diff():
    old, new = pair(metrics={"auc": 0.5, "loss": 0.25})
    old["seeds"] = {"values": {"seed": 1}, "bit_reproducible": True, "missing": []}
    new["seeds"] = {"values": {"seed": 2}, "bit_reproducible": False,
                    "missing": ["PYTHONHASHSEED is not set: str hashes differ", "deterministic algorithms not enabled",
                                "x", "y"]}
    old["hardware"] = {"gpu": {"model": "NVIDIA H100 80GB HBM3", "driver_version": "550.54"}}
    new["hardware"] = {"gpu": {"model": "NVIDIA A100-SXM4-80GB", "driver_version": "550.54"}}
    old["environment"] = {"packages": {"torch": "2.4.0"}}
    new["environment"] = {"packages": {"torch": "2.5.1"}}
    causes = verify(old, new)["causes"]
    # ranked by how likely each is to change the numbers: packages, then seeds, then hardware
    assert [c.split(":")[0] for c in causes] == ["other packages", "determinism switches off in the new run",
                                                 "another seed", "other determinism settings", "another GPU model"]
    assert "torch" in causes[0] and causes[2].startswith("another seed: seeds.values.seed 1 -> 2")
    assert causes[1] == ("determinism switches off in the new run: PYTHONHASHSEED is not set; "
                         "deterministic algorithms not enabled; x (+1 more)")
    old["seeds"] = dict(new["seeds"], values={"seed": 1})
    assert verify(old, new)["causes"][-1] == ("determinism switches off in both runs: PYTHONHASHSEED is not set; "
                                              "deterministic algorithms not enabled; x (+1 more)")
    assert verify(old, old)["causes"] == []


def test_a_seed_argument_and_the_seed_it_recorded_are_one_cause():
    old, new = pair(metrics={"auc": 0.5, "loss": 0.25})
    old["command"] = {"argv": ["python", "train.py", "--seed", "1", "--lr", "0.1"]}
    new["command"] = {"argv": ["python", "train.py", "--seed", "2", "--lr", "0.1"]}
    old["config"] = {"resolved_args": {"seed": 1, "lr": 0.1}}
    new["config"] = {"resolved_args": {"seed": 2, "lr": 0.1}}
    old["seeds"] = {"values": {"seed": 1}}
    new["seeds"] = {"values": {"seed": 2}}
    assert verify(old, new)["causes"] == ["another seed: seeds.values.seed 1 -> 2"]


def test_likely_causes_show_argv_where_it_differs_and_rank_paths_by_whose_they_are():
    old, new = pair(metrics={"auc": 0.5, "loss": 0.25})
    old["command"] = {"argv": ["python", "train.py", "--data", "data/v1", "--out", "runs/a", "--fast"]}
    new["command"] = {"argv": ["python", "train.py", "--data", "data/v2", "--out", "runs/b", "--epochs", "3",
                               "--fast"]}
    old["config"] = {"resolved_args": {"data": "data/v1", "out": "runs/a"}}
    new["config"] = {"resolved_args": {"data": "data/v2", "out": "runs/b", "epochs": 3}}
    old["results"]["outputs"] = {"runs/a/model.pt": {"kind": "file", "sha256": "a" * 64, "size": 10}}
    new["results"]["outputs"] = {"runs/b/model.pt": {"kind": "file", "sha256": "a" * 64, "size": 10}}
    assert verify(old, new)["causes"] == [
        'other arguments or environment: command.argv[6:6] [] -> ["--epochs", "3"], '
        'config.resolved_args.epochs absent -> 3',
        'other data: config.resolved_args.data "data/v1" -> "data/v2"',
        'paths into each run\'s own directory: config.resolved_args.out "runs/a" -> "runs/b"']


def test_a_step_that_comes_again_is_compared_row_by_row_in_order():
    # a per-epoch counter: steps 0, 1, 0, 1; the new run parts at the second row of step 0
    old, new = pair(trace=trace([0, 1, 0, 1], loss=[H(1.0), H(0.5), H(1.0), H(0.5)]))
    old["results"]["trace"] = trace([0, 1, 0, 1], loss=[H(1.0), H(0.5), H(0.75), H(0.25)])
    result = verify(old, new)
    t = result["trace"]
    assert (result["verdict"], t["compared"], t["differing"]) == ("diverged", 4, 2)
    assert t["first"] == {"step": 0, "occurrence": 2, "scalar": "loss", "old": H(0.75), "new": H(1.0)}
    assert "  first parts at step 0 (2nd occurrence), loss: 0.75 -> 1.0 (0x1.8000000000000p-1 -> " \
           "0x1.0000000000000p+0)" in render(result).splitlines()


def test_rows_of_a_repeated_step_kept_on_one_side_only_differ():
    old, new = pair(trace=trace([0, 1, 0, 1, 0], loss=[H(1.0)] * 5))
    old["results"]["trace"] = trace([0, 1, 0, 1], loss=[H(1.0)] * 4)
    old["results"]["trace"]["last_step"] = 0
    t = verify(old, new)["trace"]
    assert (t["status"], t["compared"]) == ("differs", 4)
    assert "rows recorded on one side only: 0 in old, 1 in new" in t["notes"]


def test_runs_that_end_on_the_same_step_after_another_number_of_calls_differ():
    # a per-epoch counter ends on its last step whatever the number of epochs; the rows kept may agree
    old, new = pair()
    new["results"]["trace"]["calls"] = 50
    result = verify(old, new)
    assert result["verdict"] == "diverged"
    assert result["trace"]["notes"] == ["old called trace 5 times, new 50"]


def test_a_trace_of_many_names_is_compared_in_full():
    names = {"s%d" % i: [H(0.5)] for i in range(20_000)}
    old, new = pair(trace=trace([0], **names))
    old["results"]["trace"] = trace([0], **dict(names, s19999=[H(0.25)]))
    t = verify(old, new)["trace"]
    assert (t["status"], t["differing"], t["first"]["scalar"]) == ("differs", 1, "s19999")


def test_the_same_rows_in_another_order_differ():
    old, new = pair(trace=trace([1, 0], loss=[H(0.5), H(1.0)]))
    old["results"]["trace"] = trace([0, 1], loss=[H(1.0), H(0.5)])
    new["results"]["trace"]["last_step"] = 1
    result = verify(old, new)
    assert result["verdict"] == "diverged"
    assert result["trace"]["notes"] == ["the rows come in another order"]


def test_generators_that_started_in_another_state_are_a_cause_of_their_own():
    old, new = pair(metrics={"auc": 0.5, "loss": 0.25})
    for doc, state, initial in ((old, "b285d87d78a92f81", 7402775216201261681), (new, "7f9fb30cc2b480e7", 3270855)):
        doc["seeds"] = {"values": {"seed": 0}, "bit_reproducible": True, "missing": [], "seeded": ["torch"],
                        "generators": {"random": None, "torch": initial},
                        "observed": {"entry": {"random": {"state": state}, "torch": {"initial_seed": initial}}}}
    causes = verify(old, new)["causes"]
    assert [c.split(":")[0] for c in causes] == ["generators in another state"]
    assert causes[0].startswith("generators in another state: seeds.generators.torch 7402775216201261681 -> 3270855")
