"""The answers a command keeps for an unchanged tree (``ls``'s table, a query's rows): which are kept when many
shapes of question are asked in turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.manifest.test_runindex_terms import _tree


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))
    return _tree(tmp_path)


def _ask(runs_dir: Path, key: str, body: bytes):
    """What a command does with an answer it may keep: recalled, else made and offered to keep (a first ask
    leaves a mark, the second stores it)."""
    from relaxrepro.manifest import runindex

    src = runindex.open_roots([str(runs_dir)])
    try:
        got = src.recall(key)
        if got is None:
            src.keep(key, "meta", body)
        return got
    finally:
        src.close()


def test_a_rotation_of_queries_does_not_push_out_the_kept_table(runs_dir, monkeypatch):
    from relaxrepro.manifest import runindex

    table = b"t" * 1000
    queries = ["ls"] + ["where-%d" % i for i in range(6)]  # the bench asks six shapes in turn, ls among them
    for _ in range(2):
        for key in queries:
            assert _ask(runs_dir, key, table if key == "ls" else b"q") is None
    assert [_ask(runs_dir, key, b"") for key in queries] == [("meta", table)] + [("meta", b"q")] * 6
    # Past the size budget the oldest go, whatever their size; the newest stays even when it alone is over it.
    monkeypatch.setattr(runindex, "KEPT_BYTES", 1500)
    for _ in range(2):
        _ask(runs_dir, "big", b"b" * 2000)
    assert _ask(runs_dir, "big", b"") == ("meta", b"b" * 2000)
    assert _ask(runs_dir, "ls", b"") is None and _ask(runs_dir, "where-5", b"") is None
