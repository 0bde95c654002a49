"""The run index (SQLite in the per-user cache): never stale, never trusted when it is not ours, the same
output as a scan, safe with several processes at once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from relaxrepro.manifest import runindex
from tests.helpers.common import ROOT, clean_env, run_cli
from tests.helpers.config import run_unprivileged
from tests.helpers.recording import make_doc, put

OLD = time.time() - 3600  # older than the racy window: such files are stored


def _env(tmp_path: Path) -> dict:
    return clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))


def _age(path: Path, when: float = OLD) -> None:
    os.utime(str(path), (when, when))


def _tree(tmp_path: Path, n: int = 6) -> Path:
    runs = tmp_path / "runs"
    for i in range(n):
        doc = make_doc("run%02d" % i, generated_at="2026-01-%02dT10:00:00Z" % (i + 1),
                       code={"relax": {"commit": "%040x" % (i + 1), "dirty": i % 2 == 1,
                                       "patch": {"sha256": "%064x" % i}}},
                       config={"hash": "sha256:" + "c" * 64 if i < 4 else "sha256:" + "d" * 64},
                       environment={"packages": {"torch": "2.3.%d" % (i % 3), "numpy": "1.26.4"},
                                    "packages_digest": "sha256:x"},
                       hardware={"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3", "driver_version": "550.54",
                                 "cuda_version": "12.4", "nccl_version": "2.21.5"},
                       training={"world_size": 8 * (i + 1)},
                       data={"inputs": [{"source": "option", "kind": "tree", "path": "/d",
                                         "quick": {"sha256": "sha256:" + ("%x" % (i % 2)) * 64, "complete": True}}]},
                       lineage={"group": "g%d" % (i % 2), "note": "lr sweep %d" % i,
                                **({"parent": {"run_id": "run%02d" % (i - 1), "reason": "load", "found": True}}
                                   if i else {})},
                       outcome={"status": "ok" if i != 3 else "exit", "exit_code": 0 if i != 3 else 1},
                       results={"metrics": {"auc": 0.85 + i / 100, "loss": "NaN"}})
        _age(put(runs / doc["lineage"]["group"], doc))
    return runs


def _ls(tmp_path: Path, *args: str, index: bool = True):
    return run_cli("ls", "runs", *args, *(() if index else ("--no-index",)), env=_env(tmp_path), cwd=tmp_path)


def _ids(res) -> list:
    return [line.split()[0] for line in res.stdout.splitlines()[1:]]


def _db(tmp_path: Path) -> Path:
    return Path(runindex.db_path(str(tmp_path / "cache" / "index"), str(tmp_path / "runs")))


def _argv(command: str, args: tuple) -> tuple:
    """``runs`` where each command takes its directories: after lineage's RUN, at the end for the others."""
    return (command, args[0], "runs") + args[1:] if command == "lineage" else (command,) + args + ("runs",)


def _same_both_ways(tmp_path: Path, *args: str, command: str = "ls") -> str:
    a = run_cli(*_argv(command, args), env=_env(tmp_path), cwd=tmp_path)
    b = run_cli(*_argv(command, args), "--no-index", env=_env(tmp_path), cwd=tmp_path)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
    assert a.returncode != 2, a.stderr  # a usage error is the same both ways, and proves nothing
    return a.stdout


def test_index_is_built_in_the_cache_and_lists_what_a_scan_lists(tmp_path):
    _tree(tmp_path)
    first = _same_both_ways(tmp_path)
    assert _db(tmp_path).is_file()
    assert len(first.splitlines()) == 7
    rows = sqlite3.connect(str(_db(tmp_path))).execute("SELECT count(*) FROM files").fetchone()[0]
    assert rows == 6
    assert _same_both_ways(tmp_path) == first  # warm: from the database


@pytest.mark.parametrize("args", [
    ("--json",), ("--where", "group=g1"), ("--where", "pkg.torch==2.3.*"), ("--where", "pkg.torch>=2.3.1"),
    ("--where", "metric.auc>0.87"), ("--where", "exit!=0"), ("--where", "dirty"), ("--where", "commit=0000"),
    ("--where", "data=" + "1" * 64), ("--where", "note~SWEEP 2"), ("--where", "gpu~h100", "--where", "world_size>=24"),
    ("--where", "cuda>=12.1"), ("--where", "driver=550.54"), ("--since", "2026-01-03", "--until", "2026-01-04"),
    ("--same-as", "run00"), ("--json", "--where", "pkg.numpy"),
], ids=lambda a: " ".join(a))
def test_ls_queries_answer_the_same_with_and_without_the_index(tmp_path, args):
    _tree(tmp_path)
    _same_both_ways(tmp_path)  # build it
    _same_both_ways(tmp_path, *args)


def test_queries_select_the_runs_they_name(tmp_path):
    _tree(tmp_path)
    assert _ids(_ls(tmp_path, "--where", "pkg.torch==2.3.1")) == ["run01", "run04"]
    assert _ids(_ls(tmp_path, "--where", "pkg.torch>2.3.0", "--where", "group=g0")) == ["run02", "run04"]
    assert _ids(_ls(tmp_path, "--where", "metric.auc>0.87")) == ["run03", "run04", "run05"]
    assert _ids(_ls(tmp_path, "--where", "exit!=0")) == ["run03"]
    assert _ids(_ls(tmp_path, "--where", "data=sha256:" + "1" * 64)) == ["run01", "run03", "run05"]
    assert _ids(_ls(tmp_path, "--since", "2026-01-05")) == ["run04", "run05"]
    assert _ids(_ls(tmp_path, "--until", "2026-01-02")) == ["run00", "run01"]
    # dirty runs' patches differ, clean ones share code only with themselves: run00 is alone
    assert _ids(_ls(tmp_path, "--same-as", "run00")) == ["run00"]
    res = _ls(tmp_path, "--where", "pkg.torch==9.*")
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "relaxrepro ls: no run matches\n")


@pytest.mark.parametrize("expr, why", [
    ("pkg.torch>>2", "'>2' is not a version"),
    ("colour=red", "unknown key colour"),
    ("metric.auc>high", "'high' is not a number"),
    ("group>g1", "group is text: use =, != or ~"),
    ("exit=", "no value after ="),
    ("=1", "expected KEY, or KEY OP VALUE"),
    ("pkg.torch>=2.*", "a wildcard takes == or !="),
    ("dirty=maybe", "dirty takes =true or =false"),
])
def test_a_bad_expression_is_one_line_and_exit_2(tmp_path, expr, why):
    _tree(tmp_path, 1)
    res = _ls(tmp_path, "--where", expr)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.startswith("relaxrepro ls: error: --where %r: " % expr) and why in res.stderr
    assert res.stderr.count("\n") == 1


def test_bad_dates_and_same_as_are_refused(tmp_path):
    _tree(tmp_path, 1)
    res = _ls(tmp_path, "--since", "yesterday")
    assert (res.returncode, res.stderr) == (2, "relaxrepro ls: error: --since 'yesterday': expected a date "
                                               "YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] (UTC)\n")
    res = _ls(tmp_path, "--same-as", "nope")
    assert (res.returncode, res.stderr) == (2, "relaxrepro ls: error: --same-as nope: no such run under runs\n")


def test_same_as_refuses_a_run_whose_patch_is_not_fully_recorded(tmp_path):
    doc = make_doc("x", code={"r": {"commit": "a" * 40, "dirty": True, "patch": {"incomplete": "timeout"}}},
                   config={"hash": "sha256:1"}, environment={"packages": {"a": "1"}})
    put(tmp_path / "runs", doc)
    res = _ls(tmp_path, "--same-as", "x")
    assert res.returncode == 2 and "not fully recorded" in res.stderr


def _rewrite(path: Path, old: bytes, new: bytes, when: float) -> None:
    data = path.read_bytes()
    assert old in data and len(old) == len(new)
    path.write_bytes(data.replace(old, new))
    _age(path, when)


def test_staleness_every_change_is_seen(tmp_path):
    runs = _tree(tmp_path)
    _ls(tmp_path)
    target = next((runs / "g0").glob("manifest_run00.json"))
    # same size, new mtime
    _rewrite(target, b'"group": "g0"', b'"group": "gX"', OLD + 10)
    assert "gX" in _same_both_ways(tmp_path)
    # touch alone: re-read, same answer
    _age(target, OLD + 20)
    assert "gX" in _same_both_ways(tmp_path)
    # replaced by another file (new inode), same size and mtime as before
    tmp = target.with_name("tmp")
    tmp.write_bytes(target.read_bytes().replace(b'"gX"', b'"gY"'))
    _age(tmp, OLD + 20)
    os.replace(str(tmp), str(target))
    assert "gY" in _same_both_ways(tmp_path)
    # renamed, deleted, a new subdirectory
    target.rename(target.with_name("manifest_moved.json"))
    assert "manifest_moved.json" in _same_both_ways(tmp_path)
    (runs / "g1" / "manifest_run05.json").unlink()
    out = _same_both_ways(tmp_path)
    assert "run05" not in out
    _age(put(runs / "new" / "deeper", make_doc("fresh")))
    assert "fresh" in _same_both_ways(tmp_path)
    stored = sqlite3.connect(str(_db(tmp_path))).execute("SELECT path FROM files ORDER BY path").fetchall()
    assert [p for (p,) in stored] == ["g0/manifest_moved.json", "g0/manifest_run02.json", "g0/manifest_run04.json",
                                      "g1/manifest_run01.json", "g1/manifest_run03.json",
                                      "new/deeper/manifest_fresh.json"]


def test_the_index_answers_from_the_database_when_the_file_key_is_unchanged(tmp_path):
    # What proves the warm path reads the database: an edit that keeps size, mtime and inode is not seen
    # (the documented limit of the key), until the file is touched.
    runs = _tree(tmp_path, 1)
    target = next((runs / "g0").glob("*.json"))
    _ls(tmp_path)
    _rewrite(target, b'"group": "g0"', b'"group": "gZ"', OLD)
    assert "gZ" not in _ls(tmp_path).stdout
    assert "gZ" in _ls(tmp_path, index=False).stdout
    _age(target, OLD + 1)
    assert "gZ" in _ls(tmp_path).stdout


def test_a_file_written_just_now_is_read_but_not_stored(tmp_path):
    put(tmp_path / "runs", make_doc("now"))
    assert "now" in _ls(tmp_path).stdout
    assert sqlite3.connect(str(_db(tmp_path))).execute("SELECT count(*) FROM files").fetchone()[0] == 0


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty-tables", "other-version", "foreign-db"])
def test_a_damaged_database_is_rebuilt_with_one_warning(tmp_path, damage):
    _tree(tmp_path)
    expected = _ls(tmp_path, index=False).stdout
    _ls(tmp_path)
    db = _db(tmp_path)
    if damage == "truncated":
        data = db.read_bytes()
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True) if sys.version_info >= (3, 8) else None
        db.write_bytes(data[: len(data) // 2 or 100])
    elif damage == "garbage":
        db.write_bytes(os.urandom(8192))
    else:
        conn = sqlite3.connect(str(db))
        if damage == "empty-tables":
            conn.execute("DROP TABLE pkgsets")
        elif damage == "other-version":
            conn.execute("PRAGMA user_version = 99")
        else:
            conn.execute("DROP TABLE files")
            conn.execute("DROP TABLE pkgsets")
            conn.execute("CREATE TABLE other (x)")
        conn.commit()
        conn.close()
    res = _ls(tmp_path)
    assert (res.returncode, res.stdout) == (0, expected)
    lines = res.stderr.splitlines()
    assert len(lines) <= 1 and all(line.startswith("relaxrepro ls: warning: run index ") for line in lines)
    assert damage == "truncated" or (lines and lines[0].endswith("; rebuilt"))
    res = _ls(tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (0, expected, "")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_foreign_owned_or_shared_writable_database_is_bypassed(tmp_path):
    _tree(tmp_path)
    expected = _ls(tmp_path, index=False).stdout
    _ls(tmp_path)
    db = _db(tmp_path)
    os.chown(str(db), 12345, 12345)
    res = _ls(tmp_path)
    assert (res.returncode, res.stdout) == (0, expected)
    assert res.stderr == "relaxrepro ls: warning: run index %s: the database belongs to uid 12345, not to us; " \
                         "listing without it\n" % db
    os.chown(str(db), 0, 0)
    os.chmod(str(db), 0o666)
    res = _ls(tmp_path)
    assert res.stdout == expected and "the database is writable by others; listing without it" in res.stderr


def test_no_cache_means_no_index(tmp_path):
    _tree(tmp_path, 2)
    res = run_cli("ls", "runs", env=clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"), RELAXREPRO_NO_CACHE="1"),
                  cwd=tmp_path)
    assert res.returncode == 0 and not (tmp_path / "cache").exists()


def test_a_read_only_run_tree_is_indexed(tmp_path):
    runs = _tree(tmp_path)
    for d, _, files in os.walk(str(runs)):
        for f in files:
            os.chmod(os.path.join(d, f), 0o444)
        os.chmod(d, 0o555)
    try:
        out = _same_both_ways(tmp_path)
        assert len(out.splitlines()) == 7 and _db(tmp_path).is_file()
    finally:
        for d, _, _files in os.walk(str(runs)):
            os.chmod(d, 0o755)


_UPDATER = """
import os, sys, time
sys.path.insert(0, %r)
from relaxrepro.manifest import runindex, writer
runs, me = sys.argv[1], int(sys.argv[2])
for i in range(15):
    d = os.path.join(runs, "p%%d" %% me)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "manifest_p%%d_%%02d.json" %% (me, i))
    doc = {"schema_version": "1.0", "run_id": "p%%d_%%02d" %% (me, i), "generated_at": "2026-01-01T00:00:00Z",
           "command": {"argv": ["x"]}, "code": {}, "config": {}, "environment": {}, "hardware": {}, "runtime": {},
           "training": {}, "collection": {"probes": {}}}
    with open(path, "wb") as fh:
        fh.write(writer.serialize(doc))
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    found = runindex.listing([runs])
    assert not found.warnings, found.warnings
    assert sum(1 for r in found.rows if r.run_id == "p%%d_%%02d" %% (me, i)) == 1
print("ok")
"""


def test_eight_processes_update_one_index_at_once(tmp_path):
    runs = _tree(tmp_path)
    script = tmp_path / "updater.py"
    script.write_text(_UPDATER % str(ROOT))
    env = _env(tmp_path)
    procs = [subprocess.Popen([sys.executable, str(script), str(runs), str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(8)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [(p.returncode, out, err) for p, (out, err) in zip(procs, results)] == [(0, "ok\n", "")] * 8
    out = _same_both_ways(tmp_path)
    assert len(out.splitlines()) == 1 + 6 + 8 * 15
    stored = sqlite3.connect(str(_db(tmp_path))).execute("SELECT count(*) FROM files").fetchone()[0]
    assert stored == 6 + 8 * 15


def test_lineage_and_compare_answer_the_same_with_and_without_the_index(tmp_path):
    _tree(tmp_path)
    for args in (("run03",), ("run03", "--json"), ("run01", "--down"), ("run00", "--down", "--json")):
        _same_both_ways(tmp_path, *args, command="lineage")
    for args in (("--group", "g0"), ("--group", "g1", "--json")):
        _same_both_ways(tmp_path, *args, command="compare")


def test_lineage_down_draws_the_descendants(tmp_path):
    _tree(tmp_path)
    res = run_cli("lineage", "run02", "runs", "--down", env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "run02  2026-01-03 10:00  runs/g0/manifest_run02.json",
        "`-- run03  2026-01-04 10:00  runs/g1/manifest_run03.json",
        "    `-- run04  2026-01-05 10:00  runs/g0/manifest_run04.json",
        "        `-- run05  2026-01-06 10:00  runs/g1/manifest_run05.json",
    ]
    res = run_cli("lineage", "nope", "runs", "--down", env=_env(tmp_path), cwd=tmp_path)
    assert (res.returncode, res.stderr) == (2, "relaxrepro lineage: error: nope: no such file, and no run id starts "
                                               "with it under runs (name where runs are with --runs DIR or "
                                               "$RELAXREPRO_RUNS)\n")


def test_lineage_down_of_a_manifest_file_however_its_path_is_spelled(tmp_path):
    _tree(tmp_path)
    for given in ("runs/g1/manifest_run03.json", "./runs/g1/manifest_run03.json",
                  str(tmp_path / "runs" / "g1" / "manifest_run03.json")):
        res = run_cli("lineage", given, "runs", "--down", env=_env(tmp_path), cwd=tmp_path)
        assert res.returncode == 0, (given, res.stderr)
        assert res.stdout.splitlines()[0] == "run03  2026-01-04 10:00  runs/g1/manifest_run03.json"


def test_index_command_builds_and_reports(tmp_path):
    _tree(tmp_path)
    res = run_cli("index", "runs", env=_env(tmp_path), cwd=tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "relaxrepro index: runs: 6 manifests\n")
    assert _db(tmp_path).is_file()
    res = run_cli("index", "nowhere", env=_env(tmp_path), cwd=tmp_path)
    assert (res.returncode, res.stderr) == (1, "relaxrepro index: error: nowhere: no such file or directory\n")


def _state(tmp_path: Path) -> tuple:
    return sqlite3.connect(str(_db(tmp_path))).execute("SELECT tree, gen FROM state").fetchone()


def test_an_unchanged_tree_is_answered_whole_and_any_change_is_still_seen(tmp_path):
    # The fast path: the walk's digest equals the stored one, so no row is loaded and ls prints the
    # answer it kept. Every kind of change must still show, one at a time.
    runs = _tree(tmp_path)
    first = _same_both_ways(tmp_path)
    tree, gen = _state(tmp_path)
    assert tree is not None
    assert _same_both_ways(tmp_path) == first and _state(tmp_path) == (tree, gen)  # nothing written
    # Asked a second time for this tree, the answer was kept; the third is that answer (altered here to
    # show it is the one printed), never one kept for another tree.
    conn = sqlite3.connect(str(_db(tmp_path)))
    with conn:
        assert conn.execute("UPDATE outputs SET body = CAST(replace(body, 'run00', 'runXX') AS BLOB) "
                            "WHERE body IS NOT NULL").rowcount == 1
    assert "runXX" in _ls(tmp_path).stdout
    target = runs / "g0" / "manifest_run00.json"
    _rewrite(target, b'"group": "g0"', b'"group": "gQ"', OLD + 5)  # same size, in place, new mtime
    out = _same_both_ways(tmp_path)
    assert "gQ" in out and "runXX" not in out and _state(tmp_path)[0] not in (None, tree)
    _rewrite(target, b'"group": "gQ"', b'"group": "gR"', OLD + 5)  # same size and mtime: the key's limit
    _age(target, OLD + 6)  # ... until a touch
    assert "gR" in _same_both_ways(tmp_path)
    assert _same_both_ways(tmp_path, "--json").count('"gR"') == 1


def test_kept_answers_depend_on_the_options_and_the_working_directory(tmp_path):
    _tree(tmp_path)
    _same_both_ways(tmp_path)
    sub = tmp_path / "sub"
    (sub / "two" / "three").mkdir(parents=True)
    env = _env(tmp_path)
    for cwd in (tmp_path, sub, sub / "two" / "three", tmp_path):  # the last: paths shown as given
        a = run_cli("ls", str(tmp_path / "runs"), env=env, cwd=cwd)
        b = run_cli("ls", str(tmp_path / "runs"), "--no-index", env=env, cwd=cwd)
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
    assert "../runs/g0/manifest_run00.json" in run_cli("ls", "../runs", env=env, cwd=sub).stdout
    assert _ids(_ls(tmp_path, "--where", "group=g1")) == ["run01", "run03", "run05"]
    assert _ids(_ls(tmp_path, "--where", "group=g0")) == ["run00", "run02", "run04"]


def test_two_manifests_of_one_run_are_ordered_by_the_walk_not_the_path(tmp_path):
    # runs/a, runs/a/b, runs/a-c is the walk's order; by path a-c sorts before a/b. The first found is
    # the one lineage follows, and ls breaks the tie the same way, with the index and without.
    runs = tmp_path / "runs"
    for sub, note in (("a-c", "second"), ("a/b", "first")):
        _age(put(runs / sub, make_doc("twin", generated_at="2026-01-01T00:00:00Z", lineage={"note": note})))
    _age(put(runs / "a", make_doc("kid", generated_at="2026-01-02T00:00:00Z",
                                  lineage={"parent": {"run_id": "twin", "reason": "load"}})))
    out = _same_both_ways(tmp_path)
    assert out.index("a/b/manifest_twin.json") < out.index("a-c/manifest_twin.json")
    _same_both_ways(tmp_path)
    down = _same_both_ways(tmp_path, "twin", "--down", command="lineage")
    assert down.splitlines()[0].endswith("runs/a/b/manifest_twin.json")
    up = _same_both_ways(tmp_path, "kid", command="lineage")
    assert "runs/a/b/manifest_twin.json" in up and "a-c" not in up


@pytest.mark.parametrize("command, args", [("lineage", ("run03",)), ("lineage", ("run01", "--down")),
                                           ("compare", ("--group", "g0"))])
def test_lineage_and_compare_say_when_the_index_was_rebuilt_or_bypassed(tmp_path, command, args):
    _tree(tmp_path)
    expected = run_cli(*_argv(command, args), "--no-index", env=_env(tmp_path), cwd=tmp_path)
    _ls(tmp_path)
    db = _db(tmp_path)
    db.write_bytes(os.urandom(8192))
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink() if Path(str(db) + suffix).exists() else None
    res = run_cli(*_argv(command, args), env=_env(tmp_path), cwd=tmp_path)
    assert (res.returncode, res.stdout) == (expected.returncode, expected.stdout)
    assert res.stderr.startswith("relaxrepro %s: warning: run index %s: " % (command, db))
    assert res.stderr.splitlines()[0].endswith("; rebuilt")
    assert res.stderr.splitlines()[1:] == expected.stderr.splitlines()
    os.chmod(str(db), 0o666)
    res = run_cli(*_argv(command, args), env=_env(tmp_path), cwd=tmp_path)
    assert res.stdout == expected.stdout
    assert res.stderr.splitlines()[0] == "relaxrepro %s: warning: run index %s: the database is writable by " \
                                         "others; listing without it" % (command, db)


_RACER = """
import os, subprocess, sys, time
sys.path.insert(0, %r)
from relaxrepro.manifest import runindex, writer
runs = sys.argv[1]
raced = []

def progress(done, total):
    # Between this process's compare and its write, another one adds a run and updates the index.
    if raced:
        return
    raced.append(1)
    doc = {"schema_version": "1.0", "run_id": "late", "generated_at": "2026-02-01T00:00:00Z",
           "command": {"argv": ["x"]}, "code": {}, "config": {}, "environment": {}, "hardware": {}, "runtime": {},
           "training": {}, "collection": {"probes": {}}}
    os.makedirs(os.path.join(runs, "late"))
    path = os.path.join(runs, "late", "manifest_late.json")
    with open(path, "wb") as fh:
        fh.write(writer.serialize(doc))
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    subprocess.run([sys.executable, "-m", "relaxrepro", "index", runs], check=True, capture_output=True)

found = runindex.listing([runs], progress=progress)
print(raced, found.warnings, sorted(r.run_id for r in found.rows), all(r.cells for r in found.rows))
"""


def test_a_write_by_another_process_between_compare_and_write_is_never_taken_for_ours(tmp_path):
    runs = _tree(tmp_path)
    _ls(tmp_path)
    _rewrite(runs / "g0" / "manifest_run00.json", b'"group": "g0"', b'"group": "gW"', OLD + 7)
    script = tmp_path / "racer.py"
    script.write_text(_RACER % str(ROOT))
    res = subprocess.run([sys.executable, str(script), str(runs)], env=_env(tmp_path), cwd=str(ROOT),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    # What this process walked, read right: the run added after its walk is not in it, run00 is changed.
    # ... and each of its rows has the cells the listing asked for, stored or read.
    assert res.stdout == "[1] [] %s True\n" % ["run%02d" % i for i in range(6)]
    out = _same_both_ways(tmp_path)
    assert "late" in out and "gW" in out


def test_a_missing_home_is_never_created_the_listing_goes_without_an_index(tmp_path):
    _tree(tmp_path, 2)
    home = tmp_path / "nohome"
    env = clean_env(HOME=str(home))
    env.pop("XDG_CACHE_HOME", None)
    for command in (("ls", "runs"), ("lineage", "run01", "runs"), ("compare", "--group", "g1", "runs")):
        res = run_cli(*command, env=env, cwd=tmp_path)
        assert res.returncode == 0 and res.stderr == "", (command, res.stderr)
    assert len(run_cli("ls", "runs", env=env, cwd=tmp_path).stdout.splitlines()) == 3
    res = run_cli("index", "runs", env=env, cwd=tmp_path)
    assert (res.returncode, res.stderr) == (1, "relaxrepro index: error: no cache directory (RELAXREPRO_NO_CACHE "
                                               "is set, or no HOME)\n")
    assert not home.exists()


def test_a_read_only_cache_is_read_around_with_one_warning(shared_tmp):
    # A snapshot or a read-only home: the index there is neither written nor removed, the command lists
    # from the files. As an unprivileged user (root writes through a chmod).
    _tree(shared_tmp, 3)
    env = {"RELAXREPRO_CACHE_DIR": str(shared_tmp / "cache")}
    expected = {c: run_unprivileged(*_argv(c, a), "--no-index", cwd=shared_tmp, env=env)
                for c, a in (("ls", ()), ("lineage", ("run02",)))}
    assert run_unprivileged("ls", "runs", cwd=shared_tmp, env=env).returncode == 0  # built, by that user
    db = Path(runindex.db_path(str(shared_tmp / "cache" / "index"), str(shared_tmp / "runs")))
    kept = db.read_bytes()
    for p in (db.parent / name for name in os.listdir(str(db.parent))):
        p.chmod(0o444)
    for d in (db.parent, db.parent.parent):
        d.chmod(0o555)
    for command, args in (("ls", ()), ("lineage", ("run02",))):
        res = run_unprivileged(*_argv(command, args), cwd=shared_tmp, env=env)
        assert (res.returncode, res.stdout) == (0, expected[command].stdout), res.stderr
        assert res.stderr == "relaxrepro %s: warning: run index %s: the cache is read-only; listing without " \
                             "it\n" % (command, db)
    res = run_unprivileged("index", "runs", cwd=shared_tmp, env=env)
    assert (res.returncode, res.stderr) == (1, "relaxrepro index: error: runs: 3 manifests, not stored: run index "
                                               "%s: the cache is read-only\n" % db)
    assert db.read_bytes() == kept


def _limited(max_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))


def test_index_on_a_full_disk_says_it_stored_nothing_and_fails(tmp_path):
    # RLIMIT_FSIZE stands for the full disk: a write past it fails (EFBIG; Python ignores SIGXFSZ).
    runs = tmp_path / "runs"
    for i in range(300):
        _age(put(runs / ("d%d" % (i % 7)), make_doc("r%03d" % i, lineage={"note": "n" * 300})))
    expected = _ls(tmp_path, index=False).stdout
    for command in (("index", "runs"), ("ls", "runs")):
        res = subprocess.run([sys.executable, "-m", "relaxrepro", *command], env=_env(tmp_path), cwd=str(tmp_path),
                             capture_output=True, text=True, timeout=120, preexec_fn=lambda: _limited(48 * 1024))
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
        if command[0] == "index":
            assert res.returncode == 1
            assert res.stderr.startswith("relaxrepro index: error: runs: 300 manifests, not stored: run index ")
            assert res.stderr.count("\n") == 1
        else:
            assert (res.returncode, res.stdout) == (0, expected)
            assert res.stderr.startswith("relaxrepro ls: warning: run index ") and res.stderr.count("\n") == 1
    res = run_cli("index", "runs", env=_env(tmp_path), cwd=tmp_path)  # room again: stored
    assert (res.returncode, res.stderr) == (0, "relaxrepro index: runs: 300 manifests\n")
    assert _same_both_ways(tmp_path) == expected


_WRITER = """
import os, sys, time
sys.path.insert(0, %r)
from relaxrepro.manifest import writer
runs = sys.argv[1]
for i in range(60):
    d = os.path.join(runs, "new%%d" %% (i %% 4))
    os.makedirs(d, exist_ok=True)
    doc = {"schema_version": "1.0", "run_id": "new%%02d" %% i, "generated_at": "2026-03-01T00:00:%%02dZ" %% i,
           "command": {"argv": ["x"]}, "code": {}, "config": {}, "environment": {}, "hardware": {}, "runtime": {},
           "training": {}, "collection": {"probes": {}}}
    tmp = os.path.join(d, ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(writer.serialize(doc))
    os.utime(tmp, (time.time() - 3600, time.time() - 3600))  # stored at once: every listing writes the index
    os.replace(tmp, os.path.join(d, "manifest_new%%02d.json" %% i))
    time.sleep(0.02)
"""


def test_concurrent_listings_with_a_writer_all_succeed_and_each_is_whole(tmp_path):
    # 8 processes list one tree 5 times each while another adds runs: listings race to build and update
    # the index, so some answer from a database another process wrote between their compare and their write.
    # Every listing exits 0, says nothing on stderr, and is a whole table: each run once, every column.
    runs = _tree(tmp_path, 40)
    script = tmp_path / "writer.py"
    script.write_text(_WRITER % str(ROOT))
    env = _env(tmp_path)
    lister = "for i in 1 2 3 4 5; do %s -m relaxrepro ls runs > out.$$.$i 2> err.$$.$i; echo $? >> rc.$$; done"
    listers = [subprocess.Popen(["bash", "-c", lister % sys.executable], cwd=str(tmp_path), env=env)
               for _ in range(8)]
    writer = subprocess.Popen([sys.executable, str(script), str(runs)], cwd=str(tmp_path), env=env)
    assert [p.wait(timeout=300) for p in listers] == [0] * 8 and writer.wait(timeout=300) == 0
    codes = "".join(p.read_text() for p in tmp_path.glob("rc.*")).split()
    errors = [p.read_text() for p in tmp_path.glob("err.*") if p.read_text()]
    assert (len(codes), set(codes), errors) == (40, {"0"}, [])
    base = {"run%02d" % i for i in range(40)}
    for out in tmp_path.glob("out.*"):
        lines = out.read_text().splitlines()
        assert lines[0].split() == "RUN TIME (UTC) CODE ALGO GPUS GROUP PARENT OUTCOME PATH".split()
        rows = [line.split() for line in lines[1:]]
        for r in rows:
            where = r[6] if r[0] in base else "new%d" % (int(r[0][3:]) % 4)
            assert len(r) >= 10 and r[-1] == "runs/%s/manifest_%s.json" % (where, r[0]), (out.name, r)
        ids = [r[0] for r in rows]
        assert len(ids) == len(set(ids)) and base <= set(ids), out.name
    final = _same_both_ways(tmp_path)
    assert len(final.splitlines()) == 1 + 40 + 60


@pytest.mark.parametrize("args", [(), ("--since", "2026-01-01")], ids=["table", "filtered"])
def test_a_stored_row_without_its_cells_is_listed_from_the_file(tmp_path, args):
    # What a listing that raced another writer once made of its rows (their cells left out): the table
    # came out garbled or not at all. The index is never trusted over the files.
    _tree(tmp_path)
    expected = _ls(tmp_path, *args, index=False).stdout
    _ls(tmp_path)
    conn = sqlite3.connect(str(_db(tmp_path)))
    with conn:
        conn.execute("UPDATE files SET cells = '' WHERE path LIKE '%run03.json'")
    res = _ls(tmp_path, *args)
    assert (res.returncode, res.stdout) == (0, expected)
    assert res.stderr == "relaxrepro ls: warning: the run index gave rows without their cells; listing without it\n"


def test_index_whose_writes_fail_on_a_full_disk_keeps_the_old_index_and_fails(tmp_path):
    runs = tmp_path / "runs"
    for i in range(20):
        _age(put(runs / "old", make_doc("o%02d" % i)))
    assert run_cli("index", "runs", env=_env(tmp_path), cwd=tmp_path).returncode == 0
    for i in range(200):
        _age(put(runs / ("d%d" % (i % 7)), make_doc("r%03d" % i, lineage={"note": "n" * 300})))
    expected = _ls(tmp_path, index=False).stdout
    room = _db(tmp_path).stat().st_size + 32 * 1024  # the database opens; the new rows do not fit
    for command in ("index", "ls"):
        res = subprocess.run([sys.executable, "-m", "relaxrepro", command, "runs"], env=_env(tmp_path),
                             cwd=str(tmp_path), capture_output=True, text=True, timeout=120,
                             preexec_fn=lambda: _limited(room))
        why = "run index %s: not updated this time (" % _db(tmp_path)
        if command == "index":
            assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
            assert res.stderr.startswith("relaxrepro index: error: runs: 220 manifests, not stored: " + why)
        else:
            assert (res.returncode, res.stdout) == (0, expected)
            assert res.stderr.startswith("relaxrepro ls: warning: " + why) and res.stderr.count("\n") == 1
    assert sqlite3.connect(str(_db(tmp_path))).execute("SELECT count(*) FROM files").fetchone()[0] == 20
