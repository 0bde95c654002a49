"""One rule for numbers read from a manifest: an integer larger than a float and a digit run longer than
Python converts reach every reading command as values it handles -- output, an exit code, never an
internal error -- and one such file does not keep the other runs of a tree from being listed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from relaxrepro.manifest import fields
from relaxrepro.manifest.reader import parse_manifest
from tests.helpers.common import clean_env, run_cli
from tests.helpers.recording import make_doc, put

HUGE = 10 ** 400  # a metric the API and ``run --metrics`` write as given
LONG = "1" * 5000  # past Python's 4,300-digit int() limit (3.11+)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """``runs/``: a normal run, its child whose ``run --metrics`` wrote 10**400, a sibling of the same group with
    an ordinary metric, and a run whose versions are 5,000 digits long."""
    top = tmp_path_factory.mktemp("numbers")
    env = _env(top)
    put(top / "runs" / "base", make_doc("base", generated_at="2026-01-01T00:00:00Z",
                                        environment={"packages": {"torch": "2.3.0"}, "python_version": "3.11.7"},
                                        hardware={"cuda_version": "12.4"}))
    (top / "huge.json").write_text('{"loss": %d, "acc": 0.5}' % HUGE)
    (top / "small.json").write_text('{"loss": 0.25, "acc": 0.5}')
    for rid, metrics in (("big", "huge.json"), ("small", "small.json")):
        res = run_cli("run", "-q", "--output-dir", "runs/" + rid, "--run-id", rid, "--parent", "base", "--group", "sw",
                      "--metrics", metrics, "--", "python3", "-c", "pass", env=env, cwd=top)
        assert res.returncode == 0, res.stderr
    assert '"loss": %d' % HUGE in (top / "runs" / "big" / "manifest_big.json").read_text()
    put(top / "runs" / "ver", make_doc("ver", generated_at="2026-01-02T00:00:00Z",
                                       environment={"packages": {"torch": "2." + LONG}, "python_version": "3." + LONG},
                                       hardware={"cuda_version": LONG, "driver_version": LONG}))
    return top


def _env(top: Path) -> dict:
    return clean_env(RELAXREPRO_CACHE_DIR=str(top / "cache"))


def _path(rid: str) -> str:
    return "runs/%s/manifest_%s.json" % (rid, rid)


COMMANDS = {
    "ls": (("ls", "runs"), 0),
    "ls --no-index": (("ls", "--no-index", "runs"), 0),
    "ls --json": (("ls", "--json", "runs"), 0),
    "index": (("index", "runs"), 0),
    "ls --where metric": (("ls", "runs", "--where", "metric.loss>1"), 0),
    "ls --where pkg": (("ls", "runs", "--where", "pkg.torch>=2.3"), 0),
    "ls --where cuda": (("ls", "runs", "--where", "cuda>12"), 0),
    "ls --where driver": (("ls", "runs", "--where", "driver<=9"), 0),  # no run matches: 0 too
    "lineage up": (("lineage", _path("big"), "runs"), 0),
    "lineage down": (("lineage", "--down", "base", "runs"), 0),
    "lineage json": (("lineage", "--json", "big", "runs"), 0),
    "compare": (("compare", "--group", "sw", "runs"), 0),
    "verify same": (("verify", _path("big"), _path("big")), 0),
    "verify differs": (("verify", _path("big"), _path("small")), 1),
    "verify rtol": (("verify", "--rtol", "0.1", _path("small"), _path("big")), 1),
    "diff metric": (("diff", _path("small"), _path("big")), 1),
    "diff versions": (("diff", _path("base"), _path("ver")), 1),
    "check": (("check", _path("ver")), 1),  # another major CUDA: FAIL
    "report run": (("report", "-o", "run.html", _path("big"), "runs"), 0),
    "report diff": (("report", "-o", "diff.html", _path("base"), _path("ver")), 0),
    "report runs": (("report", "-o", "runs.html", "runs"), 0),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_reads_a_huge_number_or_version_without_an_internal_error(tree, name):
    argv, code = COMMANDS[name]
    res = run_cli(*argv, env=_env(tree), cwd=tree, timeout=120)
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert res.returncode == code, (res.stdout, res.stderr)
    if name in ("ls", "ls --no-index"):
        assert sorted(line.split()[0] for line in res.stdout.splitlines()[1:]) == ["base", "big", "small", "ver"]


def test_the_huge_metric_is_compared_exactly_and_listed(tree):
    env = _env(tree)
    same = run_cli("verify", _path("big"), _path("big"), env=env, cwd=tree)
    assert same.stdout.startswith("verify big -> big: reproduced (bit-exact)")
    assert "same       loss  %d" % HUGE in same.stdout
    differs = run_cli("verify", _path("big"), _path("small"), env=env, cwd=tree)
    assert "diverged" in differs.stdout.splitlines()[0]
    # a float cannot hold it: greater than any float, and the index says so
    assert _ids(run_cli("ls", "runs", "--where", "metric.loss>1e308", env=env, cwd=tree)) == ["big"]
    assert _ids(run_cli("ls", "runs", "--where", "metric.loss<1", env=env, cwd=tree)) == ["small"]
    stats = json.loads(run_cli("compare", "--json", "--group", "sw", "runs", env=env, cwd=tree).stdout)["metrics"]
    assert stats["loss"] == {"runs": 2, "mean": 0.25, "std": 0.0, "min": 0.25, "max": 0.25, "non_finite": 1}
    assert stats["acc"]["runs"] == 2


def test_a_long_version_is_ordered_exactly(tree):
    env = _env(tree)
    assert _ids(run_cli("ls", "runs", "--where", "pkg.torch>2.3", env=env, cwd=tree)) == ["ver"]
    assert _ids(run_cli("ls", "runs", "--where", "pkg.torch<2.4", env=env, cwd=tree)) == ["base"]
    assert _ids(run_cli("ls", "runs", "--where", "cuda>99.0", env=env, cwd=tree)) == ["ver"]
    check = run_cli("check", _path("ver"), env=env, cwd=tree).stdout
    assert [line.split()[-1] for line in check.splitlines() if line.startswith("cuda ")] == ["version)"]
    assert "another major version" in check


def _ids(res) -> list:
    return sorted(line.split()[0] for line in res.stdout.splitlines()[1:])


@pytest.mark.parametrize("old, new, order", [
    ("2." + LONG, "2." + LONG + "1", 1),
    ("2." + LONG, "2.3", -1),
    ("2.0010", "2.10", 0),
    (LONG, LONG, 0),
])
def test_release_numbers_compare_at_any_length(old, new, order):
    assert fields.version_order(old, new) == order


def test_the_reader_keeps_a_huge_integer_exact_and_refuses_a_huge_schema_major():
    doc, _ = parse_manifest(json.dumps(make_doc("x", results={"metrics": {"n": HUGE, "m": -HUGE}})).encode())
    assert doc["results"]["metrics"] == {"n": HUGE, "m": -HUGE}
    assert float(doc["results"]["metrics"]["n"]) == float("inf")
    assert float(doc["results"]["metrics"]["m"]) == float("-inf")
    assert json.dumps(doc["results"]["metrics"]) == '{"n": %d, "m": %d}' % (HUGE, -HUGE)


def test_a_schema_version_of_5000_digits_is_one_line_and_exit_2(tmp_path):
    path = put(tmp_path, make_doc("x"))
    path.write_text(path.read_text().replace('"schema_version": "1.0"', '"schema_version": "%s.0"' % LONG))
    res = run_cli("check", str(path), env=_env(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "internal error" not in res.stderr
    assert "unsupported schema_version 1111" in res.stderr and "(5002 characters)" in res.stderr
    assert os.path.getsize(str(path)) > 5000


def test_a_listing_shows_a_huge_count_or_exit_code_shortened(tmp_path):
    put(tmp_path / "runs", make_doc("hw", hardware={"gpu_count": HUGE, "gpu_model": "NVIDIA H100"},
                                    outcome={"status": "exit", "exit_code": -HUGE - 1}))
    for index in ((), ("--no-index",)):
        res = run_cli("ls", "runs", *index, env=_env(tmp_path), cwd=tmp_path)
        assert (res.returncode, res.stderr) == (0, "")
        assert res.stdout.splitlines()[1].split()[5:9] == ["1.000e+400xH100", "-", "-", "exit"]
        assert res.stdout.splitlines()[1].split()[9] == "-1.000e+400"
        for where in ("gpus>1", "exit<0", "exit!=1"):  # the facts, from the file or the index: exact ints
            res = run_cli("ls", "runs", *index, "--where", where, env=_env(tmp_path), cwd=tmp_path)
            assert (res.returncode, res.stderr, _ids(res)) == (0, "", ["hw"]), where


@pytest.mark.parametrize("rtol", [(), ("--rtol", "0.5")], ids=["bit-exact", "rtol"])
def test_two_huge_metrics_one_apart_differ(tmp_path, rtol):
    for rid, value in (("a", HUGE), ("b", HUGE + 1)):
        put(tmp_path, make_doc(rid, schema_version="1.3", results={"metrics": {"n": value}}))
    res = run_cli("verify", *rtol, "manifest_a.json", "manifest_b.json", env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "diverged" in res.stdout.splitlines()[0] and "differs    n  %d -> %d" % (HUGE, HUGE + 1) in res.stdout
