"""compare --group: the metrics across a group's runs and how reproducible the group is."""

from __future__ import annotations

import json

from relaxrepro.analyze.compare import compare_group
from tests.helpers.common import run_cli
from tests.helpers.recording import make_doc, put


def _trace(loss):
    return {"steps": [0, 1], "names": ["loss"], "values": [[(1.0).hex(), loss.hex()]], "last_step": 1}


def _group(tmp_path):
    runs = [(0.90, "a", 0.5), (0.90, "a", 0.5), (0.93, "b", 0.25), (float("nan"), "a", 0.5)]
    for i, (auc, digest, loss) in enumerate(runs):
        results = {"metrics": {"auc": "NaN" if auc != auc else auc, "epochs": 3},
                   "outputs": {"w.pt": {"kind": "file", "sha256": digest * 64, "size": 1}}, "trace": _trace(loss)}
        put(tmp_path / "runs", make_doc("r%d" % i, schema_version="1.3", lineage={"group": "det"}, results=results))
    put(tmp_path / "runs", make_doc("old", lineage={"group": "det"}))  # 1.0: no results, counted nowhere


def test_metrics_and_reproducibility_of_a_group(tmp_path):
    _group(tmp_path)
    result = compare_group("det", [str(tmp_path / "runs")])
    auc = result["metrics"]["auc"]
    assert auc["runs"] == 4 and auc["non_finite"] == 1
    assert (auc["min"], auc["max"]) == (0.90, 0.93)
    assert abs(auc["mean"] - 0.91) < 1e-12 and abs(auc["std"] - 0.017320508075688787) < 1e-12
    assert result["metrics"]["epochs"] == {"runs": 4, "mean": 3.0, "std": 0.0, "min": 3.0, "max": 3.0}
    assert result["reproducibility"] == {"outputs": {"runs": 4, "matching": 3, "rate": 0.75},
                                         "trace": {"runs": 4, "matching": 3, "rate": 0.75}}


def test_the_rendered_text_and_json_show_them(tmp_path):
    _group(tmp_path)
    res = run_cli("compare", "--group", "det", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    tail = res.stdout.split("\n\n")[-1].splitlines()
    assert tail == [
        "metrics across the runs:",
        "  auc  4 runs  mean 0.91  std 0.0173  min 0.9  max 0.93  (1 not finite)",
        "  epochs  4 runs  mean 3  std 0  min 3  max 3",
        "reproducibility:",
        "  outputs match the most common (weight-hash match rate): 3 of 4 runs (75%)",
        "  traces bit-identical to the most common: 3 of 4 runs (75%)",
    ]
    js = json.loads(run_cli("compare", "--group", "det", "runs", "--json", cwd=tmp_path).stdout)
    assert js["reproducibility"]["outputs"]["rate"] == 0.75 and js["metrics"]["auc"]["runs"] == 4


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


def test_a_trackers_copy_of_a_manifest_is_counted_once(tmp_path):
    # TensorBoard's log dir (or MLflow's local artifact store) below the runs holds manifest_<run-id>.json again.
    for i, auc in enumerate((0.9, 0.8)):
        put(tmp_path / "runs", make_doc("r%d" % i, lineage={"group": "g"}, results={"metrics": {"auc": auc}}))
    (tmp_path / "runs" / "tb").mkdir()
    copy = tmp_path / "runs" / "tb" / "manifest_r0.json"
    copy.write_bytes((tmp_path / "runs" / "manifest_r0.json").read_bytes())
    result = compare_group("g", [str(tmp_path / "runs")])
    assert [r["run_id"] for r in result["runs"]] == ["r0", "r1"]
    assert result["metrics"]["auc"]["runs"] == 2 and result["copies"] == [str(copy)]
    res = run_cli("compare", "--group", "g", "runs", cwd=tmp_path)
    assert "  (a copy, counted once: runs/tb/manifest_r0.json)" in res.stdout.splitlines()
    copy.write_text(copy.read_text().replace('"g"', '"g" ', 1))  # same JSON, other bytes: still the same run
    assert compare_group("g", [str(tmp_path / "runs")])["copies"] == [str(copy)]
