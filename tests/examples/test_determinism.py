"""examples/determinism.py, the PyTorch trainer of the guides' table, recorded and replayed for real:
deterministic mode reproduces bit for bit (in full and for its first steps), an unconstrained run is caught
at its first step. Few runs, few steps, small data: these are the slowest tests of the suite."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.helpers.common import ROOT, make_repo, run_cli
from tests.helpers.recording import load, manifests

pytest.importorskip("torch", reason="examples/determinism.py needs torch (pip install -r tests/requirements-ml.txt)")

SMALL = ["--steps", "30", "--rows", "800"]


def _record(tmp_path, mode):
    """One run of the example under ``relaxrepro run``, from a git repository of its own."""
    project = make_repo(tmp_path / "proj", {"README.md": "the example\n"})
    shutil.copy(str(ROOT / "examples" / "determinism.py"), str(project / "determinism.py"))
    res = run_cli("run", "--output-dir", "runs/" + mode, "--", sys.executable, "determinism.py", "--mode", mode,
                  *SMALL, cwd=project, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "mode %s: 30 steps" % mode in res.stdout
    return manifests(project / "runs" / mode)[0], project


def _rerun(original, project, *args):
    return run_cli("rerun", str(original), "--confirm", *args, cwd=project, timeout=120)


def test_deterministic_mode_reproduces_in_full_and_for_its_first_steps(tmp_path):
    original, project = _record(tmp_path, "deterministic")
    res = _rerun(original, project, "--full")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reproduced" in res.stdout
    replayed = load(manifests(project / "runs/deterministic.replay-1")[0])
    first = load(original)
    assert replayed["results"]["metrics"] == first["results"]["metrics"]
    assert replayed["lineage"]["replay_of"] == first["run_id"]

    res = _rerun(original, project, "--quick", "5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reproduced (bit-exact, first 5 trace steps)" in res.stdout
    quick = load(manifests(project / "runs/deterministic.replay-2")[0])
    assert quick["results"]["trace"]["steps"] == [1, 2, 3, 4, 5]  # stopped after step 5 of 30
    assert quick["outcome"]["status"] == "ok"


def test_an_unconstrained_run_diverges_at_its_first_step_and_its_weights_differ(tmp_path):
    original, project = _record(tmp_path, "unconstrained")
    res = _rerun(original, project, "--full")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "diverged" in res.stdout
    assert "step 1" in res.stdout and "loss" in res.stdout
    assert "weights.pt" in res.stdout
