"""Lineage over chains a user can make as long as they like: no recursion over them (``lineage --down``, its
``--json``, ``report``'s run page), a cycle reported the same walking down as up, and an ancestry that holds
one manifest at a time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import ROOT, clean_env, run_cli
from tests.helpers.recording import make_doc, put

DEEP = 600  # past Python's recursion limit of 1,000 frames, twice over for the JSON of a tree


def _chain(top: Path, n: int, *, loop: bool = False) -> None:
    for i in range(n):
        parent = "r%04d" % (i - 1) if i else ("r%04d" % (n - 1) if loop else None)
        put(top / "runs", make_doc("r%04d" % i, generated_at="2026-01-01T00:00:00Z",
                                   config={"resolved_args": {"step": i}},
                                   lineage={"parent": {"run_id": parent, "reason": "load"}} if parent else {}))


def _env(top: Path) -> dict:
    return clean_env(RELAXREPRO_CACHE_DIR=str(top / "cache"))


@pytest.fixture(scope="module")
def deep(tmp_path_factory) -> Path:
    top = tmp_path_factory.mktemp("deep")
    _chain(top, DEEP)
    return top


@pytest.mark.parametrize("index", [True, False], ids=["index", "no-index"])
def test_lineage_down_draws_a_chain_of_any_length(deep, index):
    res = run_cli("lineage", "--down", "r0000", "runs", *(() if index else ("--no-index",)), env=_env(deep), cwd=deep)
    assert (res.returncode, res.stderr) == (0, "")
    lines = res.stdout.splitlines()
    assert [line.split()[0] if i == 0 else line.split("`-- ")[1].split()[0] for i, line in enumerate(lines)] == \
        ["r%04d" % i for i in range(DEEP)]
    assert lines[-1] == " " * 4 * (DEEP - 2) + "`-- r%04d  2026-01-01 00:00  runs/manifest_r%04d.json" % (DEEP - 1,
                                                                                                       DEEP - 1)


def test_lineage_down_json_of_a_chain_of_any_length(deep):
    res = run_cli("lineage", "--down", "--json", "r0000", "runs", env=_env(deep), cwd=deep)
    assert (res.returncode, res.stderr) == (0, "")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10 * DEEP)  # json.loads recurses too: 1,200 levels of objects and lists
    try:
        tree = json.loads(res.stdout)
    finally:
        sys.setrecursionlimit(limit)
    node, depth = tree["root"], 0
    while node["children"]:
        assert [c["run_id"] for c in node["children"]] == ["r%04d" % (depth + 1)]
        node, depth = node["children"][0], depth + 1
    assert depth == DEEP - 1
    assert sorted(tree) == ["cycle", "error", "root", "unreadable"]


def test_a_run_page_over_a_chain_of_any_length(deep):
    res = run_cli("report", "-o", "page.html", "runs/manifest_r0000.json", "runs", env=_env(deep), cwd=deep,
                  timeout=120)
    assert (res.returncode, res.stderr) == (0, "")
    page = (deep / "page.html").read_text()
    assert "r0299" in page  # the page draws the first 300 runs of the family


def test_lineage_up_of_a_chain_of_any_length_says_each_step(deep):
    res = run_cli("lineage", "r%04d" % (DEEP - 1), "runs", env=_env(deep), cwd=deep, timeout=120)
    assert (res.returncode, res.stderr) == (0, "")
    lines = res.stdout.splitlines()
    assert len(lines) == 2 * DEEP - 1
    assert lines[:3] == ["r0000  2026-01-01 00:00  runs/manifest_r0000.json", "  | load: args: step 0 -> 1",
                         "r0001  2026-01-01 00:00  runs/manifest_r0001.json"]
    assert lines[-2] == "  | load: args: step %d -> %d" % (DEEP - 2, DEEP - 1)


@pytest.mark.parametrize("start", ["r0000", "r0001"])
def test_a_cycle_is_reported_the_same_walking_down_as_up(tmp_path, start):
    _chain(tmp_path, 3, loop=True)  # r0000's parent is r0002
    loop = {"r0000": "r0000 -> r0002 -> r0001 -> r0000", "r0001": "r0001 -> r0000 -> r0002 -> r0001"}[start]
    for down in (("--down",), ()):
        res = run_cli("lineage", *down, start, "runs", env=_env(tmp_path), cwd=tmp_path)
        assert res.returncode == 1, (down, res.stdout)
        assert res.stderr == "relaxrepro lineage: error: cycle in lineage: %s\n" % loop, down
        assert len(res.stdout.splitlines()) == (3 if down else 6)
    js = json.loads(run_cli("lineage", "--down", "--json", start, "runs", env=_env(tmp_path), cwd=tmp_path).stdout)
    assert js["cycle"] == loop.split(" -> ")


def test_two_manifests_of_one_run_are_no_cycle(tmp_path):
    _chain(tmp_path, 3)
    put(tmp_path / "copy", make_doc("r0001", lineage={"parent": {"run_id": "r0000", "reason": "load"}}))
    res = run_cli("lineage", "--down", "r0000", "runs", "copy", env=_env(tmp_path), cwd=tmp_path)
    assert (res.returncode, res.stderr) == (0, "")
    assert [line.split()[-4] for line in res.stdout.splitlines()] == ["r0000", "r0001", "r0002"]


_COUNT_WALKS = """
import collections, os, sys
walked = collections.Counter()
def hook(event, args):
    # a directory is listed by path, or (the index's walk) opened and listed by its descriptor
    if event == "os.scandir" and not isinstance(args[0], int) or (
            event == "open" and isinstance(args[0], str) and (args[2] or 0) & os.O_DIRECTORY):
        walked[os.path.abspath(args[0])] += 1
sys.addaudithook(hook)
from relaxrepro import cli
code = cli.main(sys.argv[1:])
print(code, walked[os.path.abspath("runs")])
"""


@pytest.mark.parametrize("down", [False, True], ids=["up", "down"])
def test_a_run_named_by_id_is_found_and_followed_in_one_walk(tmp_path, down):
    # lineage RUN-ID walks the tree once: the id's lookup and the chain share one snapshot of it.
    _chain(tmp_path, 5)
    argv = ["lineage", "r0003", "runs"] + (["--down"] if down else [])
    for _ in range(2):  # cold, then warm
        res = subprocess.run([sys.executable, "-c", _COUNT_WALKS] + argv, capture_output=True, text=True,
                             cwd=str(tmp_path), env=dict(_env(tmp_path), PYTHONPATH=str(ROOT)), timeout=60)
        assert res.stdout.splitlines()[-1] == "0 1", res.stderr
