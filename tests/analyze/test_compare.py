"""A group's comparison: the metrics across its runs and how reproducible the group is."""

from __future__ import annotations

from relaxrepro.analyze.compare import compare_group
from tests.helpers.recording import make_doc, put
from tests.helpers.results import group


def test_metrics_and_reproducibility_of_a_group(tmp_path):
    group(tmp_path)
    result = compare_group("det", [str(tmp_path / "runs")])
    auc = result["metrics"]["auc"]
    assert auc["runs"] == 4 and auc["non_finite"] == 1
    assert (auc["min"], auc["max"]) == (0.90, 0.93)
    assert abs(auc["mean"] - 0.91) < 1e-12 and abs(auc["std"] - 0.017320508075688787) < 1e-12
    assert result["metrics"]["epochs"] == {"runs": 4, "mean": 3.0, "std": 0.0, "min": 3.0, "max": 3.0}
    assert result["reproducibility"] == {"outputs": {"runs": 4, "matching": 3, "rate": 0.75},
                                         "trace": {"runs": 4, "matching": 3, "rate": 0.75}}


def test_an_output_digest_not_taken_in_full_matches_nothing(tmp_path):
    for i in range(2):
        put(tmp_path, make_doc("r%d" % i, lineage={"group": "g"}, results={
            "outputs": {"w": {"kind": "file", "size": 1, "error": "not fully read"}}}))
    assert compare_group("g", [str(tmp_path)])["reproducibility"]["outputs"] == {"runs": 0, "matching": 0,
                                                                                 "rate": None}


def test_weights_written_into_each_runs_own_directory_match_by_content(tmp_path):
    # A sweep's runs write runs/<run>/weights.pt: the paths always differ, the files may not.
    for i, digest in enumerate("aab"):
        put(tmp_path, make_doc("r%d" % i, lineage={"group": "g"}, results={
            "outputs": {"runs/r%d/weights.pt" % i: {"kind": "file", "sha256": digest * 64, "size": 1}}}))
    assert compare_group("g", [str(tmp_path)])["reproducibility"]["outputs"] == {"runs": 3, "matching": 2,
                                                                                 "rate": 2 / 3}


def test_traces_alike_row_for_row_but_of_another_number_of_calls_do_not_match(tmp_path):
    # a per-epoch step counter ends on the same step however many epochs ran: the calls tell the runs apart
    rows = {"steps": [0, 1, 0, 1], "names": ["loss"], "values": [["0x1.0p+0"] * 4], "last_step": 1}
    for i, calls in enumerate((40, 40, 60)):
        put(tmp_path, make_doc("r%d" % i, lineage={"group": "g"}, results={"trace": dict(rows, calls=calls)}))
    assert compare_group("g", [str(tmp_path)])["reproducibility"]["trace"] == {"runs": 3, "matching": 2,
                                                                               "rate": 2 / 3}
