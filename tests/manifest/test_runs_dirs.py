"""``relaxrepro.runs(DIR, check="dirs")``: a call stats each directory, not each manifest, and lists again only
a directory whose stat changed (or that was changing when it was listed). Its answers are a scan's for every
query shape; what it sees at the next call, and the one thing it does not (a manifest rewritten in place)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import relaxrepro
from relaxrepro.manifest import treesig
from relaxrepro.manifest.writer import serialize
from tests.helpers.recording import make_doc, put
from tests.manifest.test_runindex_terms import OLD, QUERIES, _tree


@pytest.fixture
def kept_at_once(monkeypatch):
    """Directories made by the test count as settled at once: their ctime cannot be set back in time. So that a
    change within the same timestamp tick as the last listing is still seen, :func:`_settle` is called after each."""
    monkeypatch.setattr(treesig, "KEPT_AFTER_NS", 0)


_SETTLED = [0]


def _settle(root: Path) -> None:
    """Every directory of the tree given an old mtime, another one each time."""
    _SETTLED[0] += 1
    for d, _, _ in os.walk(str(root)):
        os.utime(d, (OLD + _SETTLED[0], OLD + _SETTLED[0]))


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))
    return _tree(tmp_path)


def _ids(rows) -> list:
    return [r.run_id for r in rows]


def _replace(path: Path, doc: dict) -> None:
    """Write ``doc`` over ``path`` as our writer does: a new file renamed over the old one (a new inode)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(serialize(doc))
    os.utime(str(tmp), (OLD + 5, OLD + 5))
    os.replace(str(tmp), str(path))


def test_every_query_answers_as_a_scan_does(runs_dir, kept_at_once):
    _settle(runs_dir)
    dirs = relaxrepro.runs(str(runs_dir), check="dirs")
    scanned = relaxrepro.runs(str(runs_dir), use_index=False)
    for _ in range(2):  # the first call lists every directory, the second takes them all from what it kept
        for where in QUERIES:
            assert [r.path for r in dirs.where(where)] == [r.path for r in scanned.where(where)], where
        assert dirs.get("run03").facts["metric"]["auc"] == 0.88 and dirs.get("run0") is None
        assert dirs.warnings == []


def test_a_run_added_replaced_moved_or_removed_is_seen_at_the_next_call(runs_dir, kept_at_once):
    _settle(runs_dir)
    runs = relaxrepro.runs(str(runs_dir), check="dirs")
    assert _ids(runs.where("group=g0")) == ["run00", "run02", "run04", "run06"]
    put(runs_dir / "g0", make_doc("run08", lineage={"group": "g0"}))
    _settle(runs_dir)
    assert _ids(runs.where("group=g0")) == ["run00", "run02", "run04", "run06", "run08"]
    path = runs_dir / "g0" / "manifest_run00.json"
    doc = json.loads(path.read_text())
    doc["results"]["metrics"]["auc"] = 0.5
    _replace(path, doc)
    _settle(runs_dir)
    assert runs.get("run00").facts["metric"]["auc"] == 0.5
    (runs_dir / "g2" / "deeper").mkdir(parents=True)
    os.rename(str(path), str(runs_dir / "g2" / "deeper" / path.name))
    _settle(runs_dir)
    assert os.path.relpath(runs.get("run00").path, str(runs_dir)) == os.path.join("g2", "deeper", path.name)
    (runs_dir / "g2" / "deeper" / path.name).unlink()
    _settle(runs_dir)
    assert runs.get("run00") is None
    for p in (runs_dir / "g1").iterdir():
        p.unlink()
    (runs_dir / "g1").rmdir()
    _settle(runs_dir)
    assert runs.where("group=g1") == [] and runs.get("run01") is None


def test_a_manifest_rewritten_in_place_is_not_seen_until_the_object_is_made_again(runs_dir, kept_at_once):
    _settle(runs_dir)
    runs = relaxrepro.runs(str(runs_dir), check="dirs")
    assert runs.get("run02").facts["metric"]["auc"] == 0.87
    path = runs_dir / "g0" / "manifest_run02.json"
    inode = path.stat().st_ino
    doc = json.loads(path.read_text())
    doc["results"]["metrics"]["auc"] = 0.5
    put(runs_dir / "g0", doc)  # the same file written again: its directory's stat does not change
    os.utime(str(path), (OLD + 5, OLD + 5))
    assert path.stat().st_ino == inode
    assert runs.get("run02").facts["metric"]["auc"] == 0.87  # what the documentation says it misses
    assert relaxrepro.runs(str(runs_dir), check="dirs").get("run02").facts["metric"]["auc"] == 0.5
    assert relaxrepro.runs(str(runs_dir)).get("run02").facts["metric"]["auc"] == 0.5


def test_a_directory_changed_just_before_its_listing_is_listed_again_at_every_call(runs_dir):
    runs = relaxrepro.runs(str(runs_dir), check="dirs")  # KEPT_AFTER_NS as shipped: the tree was made just now
    assert runs.get("run02").facts["metric"]["auc"] == 0.87
    path = runs_dir / "g0" / "manifest_run02.json"
    doc = json.loads(path.read_text())
    doc["results"]["metrics"]["auc"] = 0.5
    put(runs_dir / "g0", doc)  # in place, but within the racy window of its directory: seen
    os.utime(str(path), (OLD + 5, OLD + 5))
    assert runs.get("run02").facts["metric"]["auc"] == 0.5


def test_a_link_out_of_the_tree_is_warned_about_at_every_call(runs_dir, kept_at_once, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), str(runs_dir / "g0" / "out"))
    _settle(runs_dir)
    runs = relaxrepro.runs(str(runs_dir), check="dirs")
    for _ in range(2):
        assert len(runs.where("group=g0")) == 4
        assert runs.warnings == ["1 symbolic link leads out of the directories listed and was not followed: "
                                 "%s -> %s" % (runs_dir / "g0" / "out", tmp_path / "elsewhere")]


def test_a_check_that_is_not_files_or_dirs_is_refused(runs_dir):
    with pytest.raises(ValueError) as err:
        relaxrepro.runs(str(runs_dir), check="nothing")
    assert str(err.value) == "relaxrepro.runs: check must be 'files' or 'dirs', not 'nothing'"
    with pytest.raises(ValueError) as err:
        relaxrepro.runs(str(runs_dir), check="dirs", use_index=False)
    assert str(err.value) == ("relaxrepro.runs: check='dirs' keeps what the run index read; use_index=False reads "
                              "every manifest at every call")
    assert not (runs_dir.parent / "cache").exists()

