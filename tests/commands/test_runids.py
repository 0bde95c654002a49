"""A run named by its id, or a unique prefix of one, in every command that reads a manifest: found through the run
index below ``--runs DIR``, else ``$RELAXREPRO_RUNS``, else the default output directory and ``.``; an ambiguous
prefix names its candidates and a miss where it looked, each in one line with exit 2; an existing path is a path.

The runs are real: ``relaxrepro generate`` in a real git repository, with ``--run-id`` so that two share a prefix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers.common import clean_env, make_repo, run_cli

A = "20261203_175551_a1c2651"
B = "20261203_175551_a1d0000"  # shares "20261203_175551_a1" with A
C = "20261204_000000_bbbbbbb"
PREFIX = "20261203_175551_a1c"  # A's alone
AMBIGUOUS = "20261203_175551_a1"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """runs/ holding three recorded runs of a clean repository, and nodes/ a node fragment of run A."""
    base = tmp_path_factory.mktemp("runids")
    repo = make_repo(base / "repo", {"train.py": "print('train')\n"})
    for run_id in (A, B, C):
        res = run_cli("generate", "--output-dir", str(base / "runs"), "--run-id", run_id, "--", sys.executable,
                      "train.py", cwd=repo)
        assert res.returncode == 0, res.stderr
    res = run_cli("generate", "--node-report", "--output-dir", str(base / "nodes"), cwd=repo,
                  env=clean_env(RELAXREPRO_RUN_ID=A))
    assert res.returncode == 0, res.stderr
    return base


@pytest.fixture
def here(tmp_path, recorded) -> Path:
    """A working directory of this test's own: the runs copied into runs/ (a command may write beside them), the
    node fragment into nodes/."""
    shutil.copytree(str(recorded / "runs"), str(tmp_path / "runs"))
    shutil.copytree(str(recorded / "nodes"), str(tmp_path / "nodes"))
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


def _env(here: Path, **extra: str) -> dict:
    return clean_env(RELAXREPRO_CACHE_DIR=str(here / "cache"), **extra)


def _manifest(run_id: str) -> str:
    return os.path.join("runs", "manifest_%s.json" % run_id)


def _check(res, here):
    assert res.returncode == 0, res.stderr
    assert re.search(r"^run id +%s " % A, res.stdout, re.M), res.stdout


def _diff(res, here):
    assert res.returncode == 0, res.stderr  # the same clean code, packages and machine: identical
    out = json.loads(res.stdout)
    assert (out["old"]["run_id"], out["new"]["run_id"]) == (A, C)
    assert out["old"]["path"].endswith(_manifest(A))


def _verify(res, here):
    assert res.stdout.startswith("verify %s -> %s: nothing to verify" % (A, C)), res.stderr


def _rerun(res, here):
    assert res.returncode == 0, res.stderr
    assert "# Replay of run %s, written by: relaxrepro rerun --dry-run " % A in res.stdout


def _restore(res, here):
    assert res.returncode == 0, res.stderr
    assert str(here / "restored" / "repo") in res.stdout.splitlines()
    assert (here / "restored" / "repo" / "train.py").read_text() == "print('train')\n"


def _report(res, here):
    assert res.returncode == 0, res.stderr
    assert A in (here / "page.html").read_text()


def _attach(res, here):
    assert res.returncode == 0, res.stderr
    assert json.loads((here / "tb" / ("manifest_%s.json" % A)).read_text())["run_id"] == A


def _lineage(res, here):
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(A + "  ")


def _merge(res, here):
    assert res.returncode == 0, res.stderr
    merged = here / "runs" / ("manifest_%s.merged.json" % A)
    assert res.stdout.strip().endswith(str(merged.name)) and json.loads(merged.read_text())["run_id"] == A


COMMANDS = {
    "check": (lambda ref, here: ["check", ref], _check),
    "diff": (lambda ref, here: ["diff", ref, C, "--json"], _diff),
    "verify": (lambda ref, here: ["verify", ref, C], _verify),
    "rerun": (lambda ref, here: ["rerun", ref, "--dry-run"], _rerun),
    "restore": (lambda ref, here: ["restore", ref, "--into", str(here / "restored")], _restore),
    "report": (lambda ref, here: ["report", ref, "-o", str(here / "page.html")], _report),
    "attach": (lambda ref, here: ["attach", ref, "--tensorboard", str(here / "tb")], _attach),
    "lineage": (lambda ref, here: ["lineage", ref], _lineage),
    "merge": (lambda ref, here: ["merge", ref, str(here / "nodes")], _merge),
}


def _argv(command: str, ref: str, here: Path) -> list:
    if command == "attach":
        pytest.importorskip("torch.utils.tensorboard")
        (here / "tb").mkdir(exist_ok=True)
    return COMMANDS[command][0](ref, here)


@pytest.mark.parametrize("ref", [A, PREFIX], ids=["full-id", "unique-prefix"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_takes_a_run_id_or_a_unique_prefix_of_one(here, command, ref):
    res = run_cli(*_argv(command, ref, here), env=_env(here), cwd=here)
    COMMANDS[command][1](res, here)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_ambiguous_prefix_names_its_candidates_and_exits_2(here, command):
    res = run_cli(*_argv(command, AMBIGUOUS, here), env=_env(here), cwd=here)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("relaxrepro %s: error: %s is ambiguous: 2 runs start with it: %s, %s; give more of the id "
                          "or a manifest file\n" % (command, AMBIGUOUS, A, B))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_miss_says_where_it_looked_and_exits_2(here, command):
    argv = _argv(command, "20991231", here) + ["--runs", "runs", "--runs", "gone"]
    res = run_cli(*argv, env=_env(here), cwd=here)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("relaxrepro %s: error: 20991231: no such file, and no run id starts with it under runs, "
                          "gone (no such directory) (name where runs are with --runs DIR or $RELAXREPRO_RUNS)\n"
                          % command)


def test_the_run_directories_are_runs_options_else_the_variable_else_the_output_directory_and_here(here):
    elsewhere = here / "elsewhere"

    def diff(*extra: str, **env: str):
        return run_cli("diff", PREFIX, C, "--json", *extra, env=_env(here, **env), cwd=elsewhere)

    res = diff()
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro diff: error: %s: no such file, and no run id starts with it under . (name where "
                          "runs are with --runs DIR or $RELAXREPRO_RUNS)\n" % PREFIX)
    runs = str(here / "runs")
    for found in (diff("--runs", runs), diff("--runs", str(here / "gone"), "--runs", runs),
                  diff(RELAXREPRO_RUNS=os.pathsep.join([str(here / "gone"), runs])),
                  diff(RELAXREPRO_OUTPUT_DIR=runs)):
        _diff(found, here)
    # --runs replaces the variable's directories; the variable replaces the output directory and .
    res = diff("--runs", str(elsewhere), RELAXREPRO_RUNS=runs)
    assert res.returncode == 2 and "under %s (name where" % elsewhere in res.stderr
    res = diff(RELAXREPRO_RUNS=str(elsewhere), RELAXREPRO_OUTPUT_DIR=runs)
    assert res.returncode == 2 and "under %s (name where" % elsewhere in res.stderr


@pytest.mark.parametrize("no_cache", ["", "1"], ids=["run-index", "no-cache"])
def test_a_full_id_wins_over_the_longer_ids_it_prefixes_with_or_without_the_index(here, no_cache):
    shutil.copy(str(here / _manifest(C)), str(here / "runs" / "manifest_x.json"))
    doc = json.loads((here / _manifest(C)).read_text())
    doc["run_id"] = A + "_again"  # A is a prefix of this run's id: A itself still names A alone
    (here / "runs" / "manifest_x.json").write_text(json.dumps(doc))
    env = _env(here, RELAXREPRO_NO_CACHE=no_cache) if no_cache else _env(here)
    for _ in range(2):  # the second answers from the index the first built
        _diff(run_cli("diff", A, C, "--json", env=env, cwd=here), here)
        res = run_cli("diff", PREFIX, C, env=env, cwd=here)
        assert res.returncode == 2
        assert res.stderr.startswith("relaxrepro diff: error: %s is ambiguous: 2 runs start with it: %s, %s_again;"
                                     % (PREFIX, A, A))


def test_an_existing_path_is_a_path_even_when_it_reads_as_a_run_id(here):
    shutil.copy(str(here / _manifest(A)), str(here / "20261204"))  # a file named like a prefix of C's id
    res = run_cli("diff", "20261204", C, "--json", env=_env(here), cwd=here)
    out = json.loads(res.stdout)
    assert (out["old"]["path"], out["old"]["run_id"]) == ("20261204", A)
