"""compare --group: the metrics across a group's runs and how reproducible the group is, as the command shows
them."""

from __future__ import annotations

import json

from relaxrepro.analyze.compare import compare_group
from tests.helpers.common import run_cli
from tests.helpers.recording import make_doc, put
from tests.helpers.results import group


def test_the_rendered_text_and_json_show_them(tmp_path):
    group(tmp_path)
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
