"""The fields this round added to a manifest (``collection.recording``; ``seeds.set``, ``observed``, ``generators``,
``seeded``, ``unused_values``, ``dataloaders``, ``warnings``; results' ``not hashed`` outputs and ``<int of N bits>``
metrics; the container's digest, the scheduler's tasks and GPUs per node, the packages' direct installs) arrive
from another user's file with any shape: every command that reads them gives output or one clean
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


def _env_doc(run_id: str, shape) -> dict:
    """The fields of the container, scheduler and environment export (``container.image.digest``,
    ``digest_source``, ``path``; ``scheduler.ntasks_per_node``, ``gpus_on_node``; ``environment.direct_installs``)
    in ``shape``, beside a package list that is whole."""
    return make_doc(run_id, lineage={"group": "g"},
                    container={"runtime": "apptainer", "image": {"name": shape, "digest": shape,
                                                                 "digest_source": shape, "path": shape}},
                    scheduler={"type": "slurm", "job_id": "7", "node_count": 1, "ntasks_per_node": shape,
                               "gpus_on_node": shape, "gpus_per_node_spec": shape},
                    environment={"python_version": "3.11.7", "packages": {"six": "1.16.0", "odd": shape},
                                 "direct_installs": shape, "vcs_installs": shape, "editable": shape})


@pytest.mark.parametrize("shape", sorted(SHAPES) + ["image"])
def test_every_reader_of_the_container_scheduler_and_export_fields_takes_any_shape(tmp_path: Path,
                                                                                    shape: str) -> None:
    value = SHAPES.get(shape, {"name": {"x": 1}, "digest": [1]})  # "image": the image itself the wrong shape
    docs = [_env_doc(n, value) for n in ("a", "b")]
    if shape == "image":
        for doc in docs:
            doc["container"]["image"] = ["not", "an", "object"]
    for n, doc in zip("ab", docs):
        put(tmp_path / "runs" / n, doc)
    a, b = "runs/a/manifest_a.json", "runs/b/manifest_b.json"
    env = clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))
    for argv in (("check", a), ("diff", a, b), ("show", a), ("show", "--section", "container", a),
                 ("env", a), ("env", a, "--format", "conda"), ("env", a, "--format", "dockerfile"),
                 ("env", a, "--check"), ("rerun", a, "--dry-run"), ("rerun", a, "--dry-run", "--container"),
                 ("rerun", a, "--sbatch"), ("rerun", a, "--sbatch", "--container"), ("merge", a, b, "-o", "m.json"),
                 ("ls", "--json", "runs"), ("report", "-o", "all.html", "runs")):
        res = run_cli(*argv, env=env, cwd=tmp_path, timeout=120)
        said = res.stdout + res.stderr
        assert "internal error" not in said and "Traceback" not in said, (argv, said)
        assert res.returncode in (0, 1, 2), (argv, res.returncode, said)
