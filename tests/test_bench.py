"""The benchmark scripts still import and build their inputs against the package as it is now.

They are run by hand (bench/run.py), not by CI: without this, a moved module breaks them unseen
(issue 15 moved collect_fragment; bench/merge.py failed only when the merge case ran).
"""

from __future__ import annotations

import subprocess
import sys
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
