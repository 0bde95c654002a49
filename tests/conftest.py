"""Fixtures only; helpers live in ``tests/helpers/``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import slurm
from tests.helpers.common import make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temp dir every user may enter (pytest's own tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="relaxrepro-t6-"))
    d.chmod(0o777)
    try:
        yield d
    finally:
        for p in d.rglob("*"):
            try:
                if not p.is_symlink():
                    p.chmod(0o777)
            except OSError:
                pass
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator["slurm.Cluster"]:
    """A real one-node SLURM (munged, slurmctld, slurmd on loopback) for the whole session; skipped, saying
    why, where it cannot run (not root, slurm-wlm not installed). Nothing it started outlives the session."""
    why = slurm.why_not()
    if why:
        pytest.skip(why)
    cluster = slurm.start()
    try:
        yield cluster
    finally:
        cluster.stop()
