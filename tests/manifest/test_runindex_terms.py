"""Every ``--where`` clause, ``--same-as``, lineage and a run-id lookup are answered by the run index's terms
(``query.terms``): the same runs as a scan, over runs whose facts are odd (huge integers, NaN, arguments of
every type) and next to files that are broken or planted with hostile values."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from relaxrepro.manifest import indexdb, runindex
from tests.helpers.common import clean_env, run_cli
from tests.helpers.recording import make_doc, put

OLD = time.time() - 3600  # older than the racy window: such files are stored


def _env(tmp_path: Path) -> dict:
    return clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))


def _age(path: Path) -> Path:
    os.utime(str(path), (OLD, OLD))
    return path


ARGS = [{"lr": 0.0003, "optim": {"name": "adam", "betas": [0.9, 0.95]}, "epochs": 3, "fp16": True},
        {"lr": "3e-4", "optim": {"name": "sgd"}, "epochs": "10", "fp16": False},
        {"lr": 1e-3, "optim": {"name": "Adam"}, "epochs": 10 ** 400, "fp16": None},
        {"lr": "NaN", "epochs": -2, "tag": "lr=3e-4 run"}]


def _tree(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    for i in range(8):
        metrics = {"auc": 0.85 + i / 100, "loss": "NaN" if i % 3 == 0 else 1.0 / (i + 1)}
        if i == 5:
            metrics["count"] = 10 ** 400
        if i == 6:
            metrics["count"] = -(10 ** 400)
        doc = make_doc("run%02d" % i, generated_at="2026-01-%02dT10:00:00Z" % (i + 1),
                       code={"relax": {"commit": "%040x" % (i // 2 + 1), "dirty": False}},
                       config={"hash": "sha256:" + "c" * 64, "resolved_args": ARGS[i % 4]},
                       environment={"packages": {"torch": "2.3.%d" % (i % 2)}, "packages_digest": "sha256:x"},
                       lineage={"group": "g%d" % (i % 2), "note": "Sweep LR %d" % i,
                                **({"parent": {"run_id": "run%02d" % (i - 1), "reason": "load", "found": True}}
                                   if i else {})},
                       outcome={"status": "ok" if i != 3 else "failed", "exit_code": 0 if i != 3 else 1},
                       results={"metrics": metrics},
                       data={"inputs": [{"path": "d", "full": {"sha256": "sha256:%064x" % (i // 4)}}]})
        _age(put(runs / doc["lineage"]["group"], doc))
    bad = runs / "bad"
    bad.mkdir()
    _age_text(bad / "manifest_broken.json", "{not json")
    _age_text(bad / "manifest_nan.json", '{\n "run_id": "nanrun",\n "schema_version": "1.0",\n "x": NaN\n}\n')
    _age_text(bad / "manifest_deep.json", "[" * 100000 + "]" * 100000)
    _age_text(bad / "manifest_list.json", "[1, 2]")
    # Planted by someone else: values of every wrong type where the facts are read.
    planted = make_doc("planted", generated_at="2026-02-01T00:00:00Z",
                       config={"resolved_args": {"lr": {"a": {"b": {"c": {"d": {"e": 1}}}}}, "epochs": [1, "x"],
                                                 "": "empty", "bad\u0000name": "\u202etxt"}},
                       lineage={"group": ["not", "text"], "note": 7, "parent": "run00x"},
                       outcome={"status": {"s": 1}, "exit_code": "zero"},
                       results={"metrics": {"auc": True, "loss": [1], "odd": "1e999", "f1": "0.95"}},
                       code={"relax": {"commit": 12345}, "other": "nope"})
    _age(put(runs / "planted", planted))
    # The same values where the reader's type checks let them through: a readable run with odd facts.
    odd = dict(planted, run_id="odd", code={"relax": {"commit": "f" * 40, "dirty": True}},
               lineage={"note": "\u202eodd", "parent": {"run_id": "planted"}})
    _age(put(runs / "planted", odd))
    # A group and a parent id that are numbers: not the index's text columns, so looked up by their terms.
    numbers = dict(odd, run_id="numbers", lineage={"group": 5, "parent": {"run_id": 7}})
    _age(put(runs / "planted", numbers))
    return runs


def _age_text(path: Path, text: str) -> None:
    path.write_text(text)
    _age(path)


def _both(tmp_path: Path, *argv: str, code: int = 0):
    a = run_cli(*argv, env=_env(tmp_path), cwd=tmp_path)
    b = run_cli(*argv, "--no-index", env=_env(tmp_path), cwd=tmp_path)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), argv
    assert a.returncode == code, a.stderr  # a usage error is the same both ways, and proves nothing
    return a


def _ids(res) -> list:
    return [line.split()[0] for line in res.stdout.splitlines()[1:] if line.split()[0].startswith("run")]


QUERIES = [
    "arg.lr=3e-4", "arg.lr==0.0003", "arg.lr!=3e-4", "arg.lr>0.0005", "arg.lr<=0.0003", "arg.lr", "arg.lr=NaN",
    "arg.optim.name=adam", "arg.optim.name~ADAM", "arg.optim.betas=[0.9, 0.95]", "arg.fp16=true", "arg.epochs=10",
    "arg.epochs>5", "arg.epochs<0", "arg.tag~3E-4", "arg.nothing", "arg.lr.a", "arg.epochs=[1, \"x\"]",
    "metric.auc>0.88", "metric.auc=0.87", "metric.auc!=0.87", "metric.loss", "metric.loss<0.3", "metric.loss!=0.5",
    "metric.count>1e300", "metric.count<-1e300", "metric.count!=0", "metric.f1>0.9", "metric.odd",
    "run=run03", "run=run0", "run!=run03", "run~RUN0", "run", "run=numbers", "group=g1", "group!=g1", "group",
    "group=5", "group!=5", "group~G", "group=['not', 'text']", "parent=run02", "parent=run00x", "parent", "parent=7",
    "parent!=7", "parent~RUN0", "repo=other", "repo!=other", "status=failed", "status~fail", "note~sweep lr 4",
    "note=Sweep LR 4", "note=7",
    "commit=0000", "commit=" + "%040x" % 2, "commit", "commit!=0000", "commit=ffff", "commit.relax=" + "0" * 39,
    "commit.other", "repo=relax",
    "repo!=relax", "exit=1", "exit!=0", "exit", "dirty", "dirty=false", "config=sha256:cc", "packages=sha256:x",
    "config=sha256:" + "c" * 64, "config=sha256:" + "c" * 63 + "d", "data=" + "0" * 64, "data=" + "0" * 63 + "1",
    "pkg.torch==2.3.1", "gpus", "cuda>=12",
]


@pytest.mark.parametrize("where", QUERIES)
def test_every_clause_answers_the_same_with_and_without_the_index(tmp_path, where):
    _tree(tmp_path)
    _both(tmp_path, "ls", "runs")  # build it
    for extra in ((), ("--json",)):
        _both(tmp_path, "ls", "runs", "--where", where, *extra)


def test_several_clauses_same_as_and_times_answer_the_same(tmp_path):
    _tree(tmp_path)
    _both(tmp_path, "ls", "runs")
    for argv in (("--where", "arg.lr=3e-4", "--where", "group=g0"), ("--where", "metric.auc>0.86", "--since",
                 "2026-01-04", "--until", "2026-01-07"), ("--same-as", "run00"), ("--same-as", "run01"),
                 ("--same-as", "runs/g0/manifest_run02.json"),
                 ("--same-as", "run02", "--where", "metric.auc<0.88"), ("--sort=-metric.auc", "--where", "arg.lr")):
        _both(tmp_path, "ls", "runs", *argv)
    res = _both(tmp_path, "ls", "runs", "--same-as", "nosuch", code=2)
    assert res.stderr == "relaxrepro ls: error: --same-as nosuch: no such run under runs\n"


def test_lineage_compare_and_run_ids_answer_the_same(tmp_path):
    _tree(tmp_path)
    _both(tmp_path, "ls", "runs")
    for argv, code in ((("lineage", "run07", "runs"), 0), (("lineage", "run00", "runs", "--down"), 0),
                       (("lineage", "run0", "runs"), 2), (("lineage", "planted", "runs"), 1),
                       (("lineage", "odd", "runs"), 1),
                       (("lineage", "run07", "runs", "--json"), 0), (("compare", "--group", "g0", "runs"), 0)):
        _both(tmp_path, *argv, code=code)


def test_arguments_are_queried_by_value_as_text_or_number(tmp_path):
    _tree(tmp_path)
    env = _env(tmp_path)
    ls = lambda *w: _ids(run_cli("ls", "runs", *w, env=env, cwd=tmp_path))  # noqa: E731
    assert ls("--where", "arg.lr=3e-4") == ["run00", "run01", "run04", "run05"]
    assert ls("--where", "arg.lr>0.0005") == ["run02", "run06"]
    assert ls("--where", "arg.optim.name~adam", "--where", "group=g0") == ["run00", "run02", "run04", "run06"]
    assert ls("--where", "arg.epochs=10") == ["run01", "run05"]
    assert ls("--where", "metric.count>1e300") == ["run05"]
    res = run_cli("ls", "runs", "--where", "arg.lr>fast", env=env, cwd=tmp_path)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == "relaxrepro ls: error: --where 'arg.lr>fast': 'fast' is not a number: > compares numbers\n"


def test_a_query_reads_the_facts_of_the_runs_it_may_match_only(tmp_path):
    # The index selects the candidates by its terms: the facts of every other run are not read (here they
    # are made unreadable in the database, and the answer is still the scan's).
    _tree(tmp_path)
    expected = {w: _both(tmp_path, "ls", "runs", "--where", w).stdout for w in ("metric.auc>0.91", "run=run02",
                                                                                "arg.lr=1e-3", "parent=run04")}
    db = runindex.db_path(str(tmp_path / "cache" / "index"), str(tmp_path / "runs"))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE docs SET facts = '{not json' WHERE id NOT IN (SELECT id FROM files WHERE path IN "
                 "('g0/manifest_run02.json', 'g1/manifest_run05.json', 'g0/manifest_run06.json', "
                 "'g1/manifest_run07.json'))")
    conn.commit()
    conn.close()
    for where, out in expected.items():
        res = run_cli("ls", "runs", "--where", where, env=_env(tmp_path), cwd=tmp_path)
        assert (res.returncode, res.stdout) == (0, out), res.stderr


def test_an_index_of_the_previous_version_is_rebuilt_not_read(tmp_path):
    _tree(tmp_path)
    _both(tmp_path, "ls", "runs")
    db = runindex.db_path(str(tmp_path / "cache" / "index"), str(tmp_path / "runs"))
    conn = sqlite3.connect(db)
    conn.execute("DROP VIEW terms")
    conn.execute("DROP TABLE fileterms")
    conn.execute("CREATE TABLE terms (path TEXT, key TEXT, value)")  # version 3's, by path
    conn.execute("PRAGMA user_version = %d" % (runindex.VERSION - 1))
    conn.commit()
    conn.close()
    res = run_cli("ls", "runs", "--where", "arg.lr=3e-4", env=_env(tmp_path), cwd=tmp_path)
    assert res.stderr.splitlines()[0] == ("relaxrepro ls: warning: run index %s: index version %d, this relaxrepro "
                                          "writes %d; rebuilt" % (db, runindex.VERSION - 1, runindex.VERSION))
    assert _ids(res) == ["run00", "run01", "run04", "run05"]
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM terms WHERE key = 'arg.lr'").fetchone()[0]
    assert rows == 8  # the eight runs; planted's lr is a table: its leaves are arg.lr.a.b...


def test_terms_follow_a_file_that_changes(tmp_path):
    runs = _tree(tmp_path)
    _both(tmp_path, "ls", "runs")
    path = runs / "g0" / "manifest_run00.json"
    doc = json.loads(path.read_text())
    doc["config"]["resolved_args"]["lr"] = 0.5
    put(runs / "g0", doc)
    _age(path)
    os.utime(str(path), (OLD + 5, OLD + 5))
    assert _ids(_both(tmp_path, "ls", "runs", "--where", "arg.lr=0.5")) == ["run00"]
    assert "run00" not in _ids(_both(tmp_path, "ls", "runs", "--where", "arg.lr=3e-4"))
    db = runindex.db_path(str(tmp_path / "cache" / "index"), str(tmp_path / "runs"))
    got = sqlite3.connect(db).execute("SELECT value FROM terms WHERE key = 'arg.lr' AND path = "
                                      "'g0/manifest_run00.json'").fetchall()
    assert got == [(0.5,)]
    conn = sqlite3.connect(db)
    orphans = conn.execute("SELECT count(*) FROM fileterms WHERE rowid >> %d NOT IN (SELECT id FROM files)"
                           % indexdb.TERM_BITS).fetchone()[0]
    assert orphans == 0  # the file's old terms went with its old row
    path.unlink()
    assert "run00" not in _ids(_both(tmp_path, "ls", "runs", "--where", "arg.lr"))
    assert conn.execute("SELECT count(*) FROM fileterms").fetchone()[0] == conn.execute(
        "SELECT count(*) FROM terms").fetchone()[0]


def test_a_run_id_group_and_parent_that_are_text_are_looked_up_in_their_columns_not_stored_as_terms(tmp_path):
    _tree(tmp_path)
    _both(tmp_path, "ls", "runs")
    db = runindex.db_path(str(tmp_path / "cache" / "index"), str(tmp_path / "runs"))
    got = sqlite3.connect(db).execute("SELECT key, value FROM terms WHERE key IN ('run', 'group', 'parent', 'repo',"
                                      " 'commit') ORDER BY key, value").fetchall()
    assert got == [("group", "5"), ("group", "['not', 'text']"), ("parent", "7")]
    assert _ids(_both(tmp_path, "ls", "runs", "--where", "parent=run02")) == ["run03"]
    assert _ids(_both(tmp_path, "ls", "runs", "--where", "repo=relax", "--where", "group=g1")) == [
        "run01", "run03", "run05", "run07"]
    assert "numbers" in _both(tmp_path, "ls", "runs", "--where", "parent=7").stdout


def test_a_file_read_once_for_the_listing_and_the_facts_lists_as_the_partial_reader_reads_it(tmp_path):
    # The index parses each file once and takes the listing's sections from that parse where the partial
    # reader would read the same: a repeated top-level key, a string that spells NaN, a large file are read
    # as a plain `ls --no-index` reads them.
    runs = tmp_path / "runs"
    doc = make_doc("twice", generated_at="2026-01-01T00:00:00Z", lineage={"note": "NaN and Infinity"},
                   results={"metrics": {"auc": "NaN"}})
    text = put(runs, doc).read_text()
    _age_text(runs / "manifest_twice.json", text.replace('\n "run_id": "twice",', '\n "run_id": "first",\n "run_id": '
                                                         '"twice",'))
    big = make_doc("big", generated_at="2026-01-02T00:00:00Z",
                   config={"blob": "x" * 100000, "resolved_args": {"lr": 1}})
    _age(put(runs, big))
    plain = [run_cli("ls", "runs", *extra, env=_env(tmp_path), cwd=tmp_path) for extra in ((), ("--no-index",))]
    assert plain[0].stdout == plain[1].stdout and "twice" in plain[0].stdout
    _both(tmp_path, "ls", "runs", "--where", "arg.lr=1")
    _both(tmp_path, "ls", "runs", "--where", "metric.auc")


def test_indexes_a_build_did_not_make_are_made_by_the_next_use(tmp_path):
    # A cold build makes its indexes after its rows: one stopped in between leaves an index without them,
    # right but slow, until the next command makes them.
    _tree(tmp_path)
    _both(tmp_path, "ls", "runs")
    db = runindex.db_path(str(tmp_path / "cache" / "index"), str(tmp_path / "runs"))
    conn = sqlite3.connect(db)
    conn.execute("DROP INDEX terms_kv")
    conn.execute("DROP INDEX files_run")
    conn.commit()
    conn.close()
    assert _ids(_both(tmp_path, "ls", "runs", "--where", "arg.lr=1e-3")) == ["run02", "run06"]
    names = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"terms_kv", "files_run", "files_parent", "files_grp", "files_pkg"} <= names


# -- relaxrepro.runs: the same questions from Python ------------------------------------------------

def _paths(rows) -> list:
    return [os.path.relpath(r.path) for r in rows]


def test_runs_answers_every_clause_as_ls_does_with_and_without_the_index(tmp_path, monkeypatch):
    import relaxrepro

    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))
    indexed, scanned = relaxrepro.runs("runs"), relaxrepro.runs("runs", use_index=False)
    for where in QUERIES:
        got = _paths(indexed.where(where))
        assert got == _paths(scanned.where(where)), where
        listed = json.loads(run_cli("ls", "runs", "--json", "--where", where, env=_env(tmp_path), cwd=tmp_path).stdout)
        assert sorted(got) == sorted(r["path"] for r in listed if "error" not in r), where
    assert _paths(indexed.where("arg.lr=3e-4", "group=g0")) == ["runs/g0/manifest_run00.json",
                                                                "runs/g0/manifest_run04.json"]
    assert len(indexed.where()) == 11  # every readable run: the eight, planted, odd and numbers
    assert indexed.warnings == []


def test_runs_fetches_a_run_by_id_with_its_document_and_facts(tmp_path, monkeypatch):
    import relaxrepro

    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))
    for runs in (relaxrepro.runs("runs"), relaxrepro.runs("runs", use_index=False)):
        run = runs.get("run03")
        assert (os.path.relpath(run.path), run.run_id, run.group, run.parent, run.error) == (
            "runs/g1/manifest_run03.json", "run03", "g1", "run02", None)
        assert run.doc["outcome"] == {"status": "failed", "exit_code": 1}
        assert run.facts["metric"]["auc"] == 0.88 and run.facts["arg"]["epochs"] == -2
        assert runs.get("run0") is None
        assert runs.get("nanrun") is None  # a file that does not parse records no run id


def test_runs_sees_a_file_changed_between_two_calls(tmp_path, monkeypatch):
    import relaxrepro

    runs_dir = _tree(tmp_path)
    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))
    runs = relaxrepro.runs(str(runs_dir))
    assert [r.run_id for r in runs.where("arg.lr=0.5")] == []
    # The tree unchanged but its database gone (a cache cleaned): the object remembers the walk, never the rows.
    db = runindex.db_path(str(tmp_path / "cache" / "index"), str(runs_dir))
    os.unlink(db)
    assert [r.run_id for r in runs.where("arg.lr=1e-3")] == ["run02", "run06"] and os.path.exists(db)
    path = runs_dir / "g0" / "manifest_run00.json"
    doc = json.loads(path.read_text())
    doc["config"]["resolved_args"]["lr"] = 0.5
    doc["results"]["metrics"]["auc"] = 0.5
    put(runs_dir / "g0", doc)
    os.utime(str(path), (OLD + 5, OLD + 5))
    assert [r.run_id for r in runs.where("arg.lr=0.5")] == ["run00"]
    assert runs.get("run00").facts["metric"]["auc"] == 0.5
    path.unlink()
    assert runs.get("run00") is None and runs.where("arg.lr=0.5") == []


def test_runs_refuses_a_bad_query_before_reading_anything(tmp_path, monkeypatch):
    import relaxrepro
    from relaxrepro.manifest.query import QueryError

    _tree(tmp_path)
    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))
    runs = relaxrepro.runs(str(tmp_path / "runs"))
    with pytest.raises(QueryError) as err:
        runs.where("metric.auc>0.9", "arg.lr>fast")
    assert str(err.value) == "--where 'arg.lr>fast': 'fast' is not a number: > compares numbers"
    assert isinstance(err.value, ValueError)
    assert not (tmp_path / "cache").exists()  # nothing walked, no index made
    with pytest.raises(FileNotFoundError) as missing:
        relaxrepro.runs(str(tmp_path / "runs"), str(tmp_path / "nosuch"))
    assert str(missing.value) == "relaxrepro.runs: no such directory: %s" % (tmp_path / "nosuch")
    with pytest.raises(ValueError) as none:
        relaxrepro.runs()
    assert str(none.value) == "relaxrepro.runs: name at least one directory"


def test_the_tree_digest_is_the_same_whichever_sha256_computes_it(tmp_path, monkeypatch):
    import sys

    from relaxrepro.manifest import treesig
    from relaxrepro.manifest.scan import Walk

    runs = str(_tree(tmp_path))
    sigs = treesig.stored_signatures(treesig.walk(runs, Walk.of([runs])), set())
    monkeypatch.setattr(treesig, "OPENSSL_FROM", 0)
    openssl = treesig.tree_digest(sigs)
    monkeypatch.setattr(treesig, "OPENSSL_FROM", 1 << 60)
    monkeypatch.delitem(sys.modules, "hashlib")
    builtin = treesig.tree_digest(sigs)
    assert "hashlib" not in sys.modules  # the builtin one computed it
    assert openssl == builtin and len(builtin) == 32
