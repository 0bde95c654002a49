"""The fields this round added to a manifest (``collection.recording``; ``seeds.set``, ``observed``, ``generators``,
``seeded``, ``unused_values``, ``dataloaders``, ``warnings``; results' ``not hashed`` outputs and ``<int of N bits>``
metrics) arrive from another user's file with any shape: every command that reads them gives output or one clean
line, never an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.common import clean_env, run_cli
from tests.helpers.recording import make_doc, put

SHAPES = {"string": "x", "number": 7, "list": [1, "a", None], "null": None, "nested": {"a": {"b": [{}]}}}


def _doc(run_id: str, shape) -> dict:
    return make_doc(run_id, collection={"probes": {}, "recording": shape},
                    seeds={"set": shape, "observed": {"entry": shape, "exit": shape}, "generators": shape,
                           "seeded": shape, "unused_values": shape, "dataloaders": shape, "warnings": shape},
                    lineage={"group": "g", "replay_of": shape if isinstance(shape, str) else None},
                    results={"metrics": {"m": "<int of 16610 bits, sha256 0123456789abcdef>", "n": shape},
                             "outputs": {"w.bin": {"kind": "file", "error": "not hashed: relaxrepro ended before "
                                                   "the digest was taken"}, "x": shape}})


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_reader_of_the_new_fields_takes_any_shape(tmp_path: Path, shape: str) -> None:
    value = SHAPES[shape]
    put(tmp_path / "runs" / "a", _doc("a", value))
    put(tmp_path / "runs" / "b", _doc("b", value))
    a, b = "runs/a/manifest_a.json", "runs/b/manifest_b.json"
    env = clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))
    for argv in (("check", a), ("diff", a, b), ("verify", a, b), ("show", a), ("show", "--json", a),
                 ("rerun", a, "--dry-run"), ("ls", "runs"), ("ls", "--json", "runs"),
                 ("compare", "--group", "g", "runs"), ("lineage", "a", "runs"),
                 ("report", "-o", "one.html", a), ("report", "-o", "two.html", a, b),
                 ("report", "-o", "all.html", "runs")):
        res = run_cli(*argv, env=env, cwd=tmp_path, timeout=120)
        said = res.stdout + res.stderr
        assert "internal error" not in said and "Traceback" not in said, (argv, said)
        assert res.returncode in (0, 1, 2), (argv, res.returncode, said)
