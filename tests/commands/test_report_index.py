"""``report`` of many runs through the run index: the same page, byte for byte, from the index (cold, then from
the cards it keeps) and from the files (``--no-index``, ``RELAXREPRO_NO_CACHE``); sweeps from the stored facts equal
``compare``'s from whole documents; every change to a file is seen; a card not ours or of another format, a lost
package table and a write by another process are never taken for the truth."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from relaxrepro.analyze.compare import compare_group
from relaxrepro.commands.report import _sweep, cards
from relaxrepro.manifest import runindex, runrow
from tests.commands.test_report import _COUNT_OPENS
from tests.helpers.common import ROOT, clean_env, run_cli
from tests.helpers.recording import make_doc, put
from tests.helpers.results import H, group, trace

OLD = time.time() - 3600  # older than the racy window: such files are stored


def _age(root: Path) -> None:
    for p in root.rglob("manifest_*.json"):
        os.utime(str(p), (OLD, OLD))


def rich_tree(base: Path) -> Path:
    """Runs that exercise every part of a sweep: metrics (NaN, Infinity, beyond a float), outputs and traces,
    a replay and one whose original is elsewhere, a tracker's copy (same bytes; same JSON in other bytes), two
    files of one run id that differ, patches inline and not fully recorded, package tables shared and not,
    a file that is not JSON, one the strict reader refuses but whose card sections read, a group of one."""
    group(base)  # base/runs: group det
    runs = base / "runs"
    res = {"outputs": {"ckpt/w.pt": {"kind": "file", "sha256": "c" * 64, "size": 3}},
           "trace": trace(range(4), loss=[H(1.0 / (i + 1)) for i in range(4)])}
    for i, lr in enumerate((1e-4, 1e-3, 1e-2)):
        where = runs / "lr" / ("s%d" % i)
        put(where, make_doc(
            "s%d" % i, generated_at="2026-01-0%dT00:00:00Z" % (i + 1), schema_version="1.3",
            config={"resolved_args": {"lr": lr, "opt": {"name": "adam", "betas": [0.9, 0.99]}},
                    "selected_env": {"NCCL_ALGO": "ring" if i else "tree"}},
            command={"argv": ["python", "train.py", "--lr", str(lr)], "cwd": str(where), "source": "cli"},
            code={"proj": {"commit": "%040x" % (i // 2), "dirty": i == 1,
                           "patch": {"sha256": "e" * 64, "text": "diff --git a b\n+x\n" * 50} if i == 1 else None}},
            environment={"packages": {"torch": "2.5.1", "numpy": "1.26.%d" % (i // 2), "weird": 3}},
            hardware={"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3", "driver_version": "550.1"},
            seeds={"bit_reproducible": i == 0},
            lineage={"group": "lr", "note": "<script>alert(%d)</script>" % i,
                     "parent": {"run_id": "s0"} if i else None,
                     "trackers": [{"tool": "wandb", "run": "ent/proj/abc%d" % i}]},
            outcome={"status": "ok", "exit_code": 0} if i < 2 else {"status": "exit", "exit_code": 3},
            results=dict(res, metrics={"loss": 1 - i / 10, "flat": 0.617, "big": 10 ** 400 if i == 2 else 1})))
    where = runs / "lr" / "s0.replay-1"
    put(where, make_doc("s9", generated_at="2026-01-09T00:00:00Z", schema_version="1.3", outcome={"status": "ok"},
                        command={"argv": ["python", "train.py"], "cwd": str(where), "source": "cli"},
                        config={"resolved_args": {"lr": 1e-4, "opt": {"name": "adam", "betas": [0.9, 0.99]}}},
                        lineage={"group": "lr", "replay_of": "s0"}, results=dict(res, metrics={"loss": 1.0})))
    put(runs / "lr" / "s5", make_doc("s5", generated_at="2026-01-05T00:00:00Z", schema_version="1.3",
                                     lineage={"group": "lr", "replay_of": "elsewhere"},
                                     results=dict(res, metrics={"loss": "Infinity"})))
    (runs / "tb").mkdir()
    (runs / "tb" / "manifest_r0.json").write_bytes((runs / "manifest_r0.json").read_bytes())
    (runs / "mlflow" / "relaxrepro").mkdir(parents=True)
    (runs / "mlflow" / "relaxrepro" / "manifest_r1.json").write_text(
        (runs / "manifest_r1.json").read_text().replace('"det"', '"det" ', 1))
    other = json.loads((runs / "manifest_r2.json").read_text())
    other["results"]["metrics"]["auc"] = 0.5
    put(runs / "dup", other)
    for i in range(2):
        put(runs / "inc", make_doc("i%d" % i, generated_at="2026-02-0%dT00:00:00Z" % (i + 1), lineage={"group": "inc"},
                                   code={"p": {"commit": "a" * 40, "dirty": True,
                                               "patch": {"incomplete": "timeout", "sha256": "f" * 64}}}))
    (runs / "bad").mkdir()
    (runs / "bad" / "manifest_broken.json").write_text("{")
    put(runs / "bad", {"schema_version": "1.0", "run_id": "envstr", "generated_at": "2026-03-01T00:00:00Z",
                       "environment": "oops", "lineage": {"group": "inc"}})
    put(runs / "solo", make_doc("solo", lineage={"group": "alone"}, results={"metrics": {"x": 1}}))
    put(base / "elsewhere", make_doc("outside", lineage={"group": "lr"}))
    (runs / "link").symlink_to(base / "elsewhere")  # not followed: one warning
    _age(runs)
    return runs


def _env(tmp_path: Path, **more: str) -> dict:
    return clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"), **more)


def _page(tmp_path: Path, *args: str, **env: str):
    out = tmp_path / "out.html"
    if out.exists():
        out.unlink()
    res = run_cli("report", "runs", *args, "-o", str(out), env=_env(tmp_path, **env), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return out.read_bytes(), res.stderr


def _db(tmp_path: Path) -> Path:
    return Path(runindex.db_path(str(tmp_path / "cache" / "index"), str(tmp_path / "runs")))


def _count(tmp_path: Path, table: str) -> int:
    return sqlite3.connect(str(_db(tmp_path))).execute("SELECT count(*) FROM %s" % table).fetchone()[0]


@pytest.mark.parametrize("args", [(), ("--group", "lr"), ("--group", "det", "--chart", "metric.auc"),
                                  ("--group", "inc"), ("--group", "alone")], ids=lambda a: " ".join(a) or "all")
def test_a_page_is_the_same_from_the_files_the_index_and_its_cards(tmp_path, args):
    rich_tree(tmp_path)
    files = _page(tmp_path, *args, "--no-index")
    assert not (tmp_path / "cache").exists()
    assert _page(tmp_path, *args) == files  # the index built, the cards made from the files
    assert _count(tmp_path, "cards") == _count(tmp_path, "files") == 18
    assert _page(tmp_path, *args) == files  # from the cards
    assert _page(tmp_path, *args, RELAXREPRO_NO_CACHE="1") == files
    page = files[0].decode()
    assert "<script>alert" not in page and "unreadable: runs/bad/manifest_broken.json: not JSON" in files[1]
    assert "outside" not in page and "runs/link -> " in files[1]


def test_sweeps_from_the_cards_are_compares_from_whole_documents(tmp_path):
    runs = rich_tree(tmp_path)
    env = _env(tmp_path)
    sweeps = {}
    for use_index in (True, True, False):  # the first makes the cards, the second reads them
        got = cards.read([str(runs)], use_index=use_index, env=env)
        for name in ("det", "lr", "inc", "alone"):
            members = sorted((e for e in got.entries if e.error is None and e.doc["lineage"].get("group") == name),
                             key=lambda e: (str(e.doc.get("generated_at")), str(e.doc.get("run_id"))))
            sweeps[name] = _sweep(name, [e.path for e in members], got)
            theirs = compare_group(name, [str(runs)], use_index=False)
            for key in ("runs", "varying", "compared", "metrics", "reproducibility", "copies", "replays"):
                assert sweeps[name][key] == theirs[key], (name, key)
    assert sorted(p[len(str(runs)) + 1:] for p in sweeps["det"]["copies"]) == [
        "mlflow/relaxrepro/manifest_r1.json", "tb/manifest_r0.json"]
    assert len(sweeps["det"]["runs"]) == 6  # r0..r3, old and the other r2
    lr = sweeps["lr"]
    assert lr["replays"] == {"runs": 2, "reproduced": 0, "diverged": 1, "unverified": 1}
    assert lr["varying"]["pkg.numpy"] == ["1.26.0", "1.26.0", "1.26.1", None, None]  # s0 s1 s2 s5 s9
    assert lr["varying"]["code.proj"][1] == "0000000* patch:eeeeeee"


def _opens(tmp_path: Path, *args: str) -> str:
    res = subprocess.run([sys.executable, "-c", _COUNT_OPENS, "report", "runs", *args, "-o", "o.html"],
                         capture_output=True, text=True, cwd=str(tmp_path), timeout=120,
                         env=dict(_env(tmp_path), PYTHONPATH=str(ROOT)))
    return res.stdout.splitlines()[-1]


def test_a_page_reads_each_manifest_once_and_the_next_one_reads_none(tmp_path):
    rich_tree(tmp_path)
    # Each file once for its card; a replay's original (s0) is read whole once more, to verify the replay.
    assert _opens(tmp_path, "--no-index") == "0 [1, 2] 18"
    # The first page through the index: the index reads each file once for its row and its card; as without
    # it, a copy's (r0, r1, r2: a card made again with its key) and a replay's (s9, and s0 for it) once more.
    assert _opens(tmp_path) == "0 [1, 2] 18"
    assert _opens(tmp_path) == "0 [1] 2"  # then only the replay s9 and its original, whole
    page = (tmp_path / "o.html").read_bytes()
    _opens(tmp_path, "--no-index")
    assert (tmp_path / "o.html").read_bytes() == page


def test_every_change_to_a_file_is_seen_and_a_gone_file_loses_its_card(tmp_path):
    runs = rich_tree(tmp_path)
    _page(tmp_path)
    target = runs / "lr" / "s1" / "manifest_s1.json"
    target.write_text(target.read_text().replace('"loss": 0.9', '"loss": 0.4242'))
    os.utime(str(target), (OLD + 10, OLD + 10))
    page, _ = _page(tmp_path)
    assert b"0.4242" in page and page == _page(tmp_path, "--no-index")[0]
    (runs / "solo" / "manifest_solo.json").unlink()
    page, _ = _page(tmp_path)
    assert b"solo" not in page and page == _page(tmp_path, "--no-index")[0]
    assert _count(tmp_path, "cards") == _count(tmp_path, "files") == 17
    db = sqlite3.connect(str(_db(tmp_path)))
    assert db.execute("SELECT count(*) FROM cards WHERE path NOT IN (SELECT path FROM files)").fetchone()[0] == 0


@pytest.mark.parametrize("damage", [
    "UPDATE cards SET card = '{\"v\":0}' WHERE path LIKE 'lr/%'",  # an older relaxrepro's
    "UPDATE cards SET card = '{\"v\":1,\"key\":null,' WHERE path LIKE 'lr/%'",  # cut short
    "UPDATE cards SET card = '{\"v\":1,\"key\":null,\"fields\":{}}' WHERE path LIKE 'inc/%'",  # no run id
    "UPDATE cards SET card = '{\"v\":1,\"key\":null,\"fields\":{\"run_id\":\"x\"},\"facts\":[]}'",
    "UPDATE cards SET card = '[1]'",
    "DELETE FROM cardsets",
    "UPDATE cardsets SET body = '{oops'",
], ids=["old-format", "cut-short", "no-run-id", "facts-not-an-object", "not-an-object", "sets-lost", "sets-damaged"])
def test_a_card_of_another_format_damaged_or_without_its_table_is_made_again_from_the_file(tmp_path, damage):
    rich_tree(tmp_path)
    want = _page(tmp_path)
    db = sqlite3.connect(str(_db(tmp_path)))
    with db:
        db.execute(damage)
    db.close()
    assert _page(tmp_path) == want
    db = sqlite3.connect(str(_db(tmp_path)))
    if damage.startswith("UPDATE cards"):  # made again and kept
        assert db.execute("SELECT count(*) FROM cards WHERE card NOT LIKE '{\"v\":1,\"key\":%\"fields\"%' "
                          "AND card NOT LIKE '%\"error\"%'").fetchone()[0] == 0
    assert _page(tmp_path) == want
    assert _opens(tmp_path) == "0 [1] 2"  # all kept again: only the replay and its original are read


def test_cards_are_not_kept_over_a_write_by_another_process(tmp_path):
    # Between this page's snapshot and its cards, another process updates the index: the rows it read may
    # be other files' now, so the cards wait for the next page.
    runs = rich_tree(tmp_path)
    env = _env(tmp_path)
    assert run_cli("index", "runs", env=env, cwd=tmp_path).returncode == 0
    src = runindex.open_roots([str(runs)], env=env)
    try:
        rows = src.find()
        put(runs / "late", make_doc("late"))
        _age(runs / "late")
        assert run_cli("index", "runs", env=env, cwd=tmp_path).returncode == 0
        src.keep_cards([(r.path, cards.make(r.path)[0]) for r in rows], [])
    finally:
        src.close()
    assert _count(tmp_path, "cards") == 0
    src = runindex.open_roots([str(runs)], env=env)
    try:
        src.keep_cards([(r.path, cards.make(r.path)[0]) for r in src.find()] + [(str(runs / "nope.json"), "x")], [])
    finally:
        src.close()
    assert _count(tmp_path, "cards") == 19  # only the files the index holds


def test_no_index_and_a_bypassed_index_say_so_as_ls_does(tmp_path):
    rich_tree(tmp_path)
    want, _ = _page(tmp_path, "--no-index")
    _page(tmp_path)
    os.chmod(str(_db(tmp_path)), 0o666)
    page, err = _page(tmp_path)
    assert page == want
    assert err.splitlines()[0] == ("relaxrepro report: warning: run index %s: the database is writable by others; "
                                   "listing without it" % _db(tmp_path))


def test_a_copy_that_appears_later_is_told_by_key_after_one_more_read(tmp_path):
    # The cards were made when each run id had one file (no key): a tracker's copy added later makes the
    # cards of that run id again, with their keys, and the page after reads neither file.
    runs = tmp_path / "runs"
    for i in range(2):
        put(runs, make_doc("r%d" % i, lineage={"group": "g"}, results={"metrics": {"auc": 0.9 - i / 10}}))
    _age(runs)
    _page(tmp_path)
    (runs / "tb").mkdir()
    (runs / "tb" / "manifest_r0.json").write_bytes((runs / "manifest_r0.json").read_bytes())
    _age(runs)
    assert _opens(tmp_path) == "0 [1, 2] 2"  # the copy: by the index and for its card; r0 for its card again
    page = (tmp_path / "o.html").read_bytes()
    assert _opens(tmp_path) == "0 [] 0"
    assert (tmp_path / "o.html").read_bytes() == page == _page(tmp_path, "--no-index")[0]
    assert b"1 identical copies of a run&#x27;s manifest counted once" in page


def test_no_index_finds_a_run_by_its_id_and_makes_no_index(tmp_path):
    rich_tree(tmp_path)
    out = tmp_path / "one.html"
    res = run_cli("report", "s1", "runs", "--no-index", "-o", str(out), env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "<title>Run s1</title>" in out.read_text() and not (tmp_path / "cache").exists()
    res = run_cli("report", "s1", "runs", "--against", "s0", "--no-index", "-o", str(out), env=_env(tmp_path),
                  cwd=tmp_path)
    assert res.returncode == 0 and not (tmp_path / "cache").exists(), res.stderr


_COUNT_EVERY_OPEN = """
import os, sys
log = os.environ["OPENS_LOG"]
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".json") and "manifest_" in args[0]:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # a forked reader's opens too
        os.write(fd, ("%d %s\\n" % (os.getpid(), args[0])).encode())
        os.close(fd)
sys.addaudithook(hook)
from relaxrepro.manifest import fanout
if os.environ.get("FORKS"):  # read by forked children however few the files and cores
    fanout.children_for = lambda count: int(os.environ["FORKS"])
from relaxrepro import cli
print(cli.main(sys.argv[1:]), os.getpid())
"""


def _every_open(tmp_path: Path, *args: str, forks: int = 0):
    """The page's exit code, and the files it opened: {path: times}, and the pids that opened them."""
    log = tmp_path / "opens.log"
    if log.exists():
        log.unlink()
    res = subprocess.run([sys.executable, "-c", _COUNT_EVERY_OPEN, "report", "runs", *args, "-o", "o.html"],
                         capture_output=True, text=True, cwd=str(tmp_path), timeout=120,
                         env=dict(_env(tmp_path), PYTHONPATH=str(ROOT), OPENS_LOG=str(log),
                                  FORKS=str(forks) if forks else ""))
    code, pid = res.stdout.splitlines()[-1].split()
    assert code == "0", res.stderr
    lines = [line.split(" ", 1) for line in log.read_text().splitlines()] if log.exists() else []
    counts: dict = {}
    for _, path in lines:
        counts[path] = counts.get(path, 0) + 1
    return counts, {int(p) for p, _ in lines} - {int(pid)}


@pytest.mark.parametrize("forks", [0, 2], ids=["in-process", "forked-readers"])
@pytest.mark.parametrize("aged", [True, False], ids=["stored", "written-just-now"])
def test_a_cold_index_page_reads_each_manifest_exactly_once(tmp_path, forks, aged):
    # The index reads each file for its row and, with the same bytes, makes its card (in a forked reader too:
    # the card comes back with the row); the page reads none again. A file written just now is not stored,
    # and its card is the one made as it was read. The page is the same as without the index, and the next.
    runs = tmp_path / "runs"
    for i in range(12):
        put(runs / ("g%d" % (i % 3)), make_doc(
            "r%02d" % i, generated_at="2026-03-01T00:00:%02dZ" % i, config={"resolved_args": {"lr": i % 4}},
            environment={"packages": {"torch": "2.%d.0" % (i % 2)}}, lineage={"group": "g%d" % (i % 3)},
            results={"metrics": {"auc": 0.5 + i / 100}}))
    (runs / "bad").mkdir()
    (runs / "bad" / "manifest_broken.json").write_text("{")
    if aged:
        _age(runs)
    files = _page(tmp_path, "--no-index")[0]
    opened, readers = _every_open(tmp_path, forks=forks)
    assert sorted(opened.values()) == [1] * 13
    assert bool(readers) == bool(forks)  # the forked readers did open them
    first = (tmp_path / "o.html").read_bytes()
    assert first == files
    assert _count(tmp_path, "cards") == (13 if aged else 0) and _count(tmp_path, "cardsets") == 2
    opened, _ = _every_open(tmp_path, forks=forks)
    assert opened == ({} if aged else {str(p.relative_to(tmp_path)): 1 for p in runs.rglob("manifest_*.json")})
    assert (tmp_path / "o.html").read_bytes() == first


def test_the_index_alone_makes_no_cards(tmp_path):
    # ls and index pass no card maker: a cold build stores rows, never cards.
    rich_tree(tmp_path)
    res = run_cli("ls", "runs", env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _count(tmp_path, "files") == 18 and _count(tmp_path, "cards") == _count(tmp_path, "cardsets") == 0


def test_a_card_made_of_the_index_s_read_and_parse_is_the_one_made_of_the_file(tmp_path):
    # The index hands its bytes and its parse (sections shared between documents) to the card maker: the card
    # is the one made of the file alone, for every kind of file: a Relax trainer's layouts and a flat legacy
    # record (normalised: what they change is copied, never a shared section), broken ones, a BigInt metric.
    runs = rich_tree(tmp_path)
    for fixture in sorted((ROOT / "tests" / "fixtures" / "relax").glob("*.json")):
        put(runs / "relax", json.loads(fixture.read_text()), name="manifest_%s.json" % fixture.stem)
    for i in range(2):
        put(runs / "flat", {"experiment_name": "e", "seed": i, "cli_args": ["--lr", "1"],
                            "hyperparams": {"lr%02d" % k: k / 3 for k in range(12)}, "metrics": {"auc": 0.5}},
            name="manifest_flat%d.json" % i)
    paths = sorted(str(p) for p in runs.rglob("manifest_*.json"))
    assert len(paths) > 25
    want = [cards.make(p) for p in paths]
    for _ in range(2):  # the second time, the sections parsed before are the same objects
        for path, (text, table, _doc, keep) in zip(paths, want):
            raw = Path(path).read_bytes()
            assert cards.made_of(path, raw, runrow._parse_whole(raw)) == ((text, table) if keep else None), path
    assert [cards.make(p)[:2] for p in paths] == [w[:2] for w in want]
