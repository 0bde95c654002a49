"""``relaxrepro env``: a real environment back from its manifest. A venv of the ~20 real wheels of
tests/env-export-wheels.txt and one package pip installed from a local git repo is recorded by ``generate
--python``; ``env`` writes its requirements file, pip installs that into a fresh venv (``--no-index``: the
wheelhouse tests/run.sh fills, no network), and ``check --python`` and ``env --check --python`` PASS on every
package row. Then the command's own manners: -o, run ids, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relaxrepro.analyze.environment import MARK
from tests.helpers.common import ROOT, clean_env, git, make_repo, run_cli
from tests.helpers.envfiles import conda_pins, dockerfile_pins, requirement_pins
from tests.helpers.read import base_manifest, write_json

WHEELHOUSE = ROOT / ".wheelhouse"
WHEELS = ROOT / "tests" / "env-export-wheels.txt"


needs_wheelhouse = pytest.mark.skipif(not (WHEELHOUSE / "six-1.16.0-py2.py3-none-any.whl").is_file(),
                                      reason="no .wheelhouse: tests/run.sh downloads tests/env-export-wheels.txt "
                                      "into it")


def _pip(python: Path, *args: str) -> None:
    """pip (this interpreter's) installing into ``python``'s environment, from the wheelhouse only."""
    res = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
                          "install", "-q", "--no-index", "--find-links", str(WHEELHOUSE), *args],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=60)
    return path / "bin" / "python"


def _git_package(tmp_path: Path) -> str:
    """A local git repo of a flit-built package; its pip URL at the commit."""
    repo = make_repo(tmp_path / "gitpkg", {
        "pyproject.toml": '[build-system]\nrequires = ["flit_core==3.9.0"]\nbuild-backend = "flit_core.buildapi"\n\n'
                          '[project]\nname = "gitpkg"\nversion = "0.3.1"\ndescription = "x"\n',
        "gitpkg/__init__.py": '"""A package installed from git."""\n',
    })
    commit = git(repo, "rev-parse", "HEAD").strip()
    return "git+file://%s@%s" % (repo, commit)


def _cli(*args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """relaxrepro as the tests' venv installed it, without PYTHONPATH: an interpreter judged with ``--python``
    inherits PYTHONPATH, and a checkout holding ``relaxrepro.egg-info`` (what ``pip install -e .`` leaves) would
    add relaxrepro to its packages."""
    env = clean_env()
    del env["PYTHONPATH"]
    return run_cli(*args, env=env, **kwargs)


@needs_wheelhouse
def test_requirements_of_a_recorded_venv_install_into_a_fresh_one_that_checks_pass(tmp_path):
    old = _venv(tmp_path / "old")
    url = _git_package(tmp_path)
    _pip(old, "-r", str(WHEELS), "gitpkg @ " + url)
    m = tmp_path / "m.json"
    res = _cli("generate", "-q", "--python", str(old), "--output", str(m), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    recorded = json.loads(m.read_text())["environment"]["packages"]
    assert len(recorded) == 24 and recorded["gitpkg"] == "0.3.1"

    req = tmp_path / "requirements.txt"
    res = _cli("env", str(m), "--format", "requirements", "-o", str(req))
    assert (res.returncode, res.stdout, res.stderr) == (0, "%s\n" % req, "")
    pins = requirement_pins(req.read_text())
    assert len(pins) == 24 and "gitpkg @ " + url in pins and "six==1.16.0" in pins

    new = _venv(tmp_path / "new")
    _pip(new, "-r", str(req))

    res = _cli("check", str(m), "--python", str(new), "--json")
    items = json.loads(res.stdout)["items"]
    rows = [i for i in items if i["item"].startswith(("package", "other packages"))]
    assert rows and all(i["verdict"] == "PASS" for i in rows), rows
    assert {i["item"]: i["verdict"] for i in items}["python"] == "PASS"

    res = _cli("env", str(m), "--check", "--python", str(new))
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    packages = [line for line in lines if line.startswith("package ")]
    assert len(packages) == 24 and all(line.split()[-1] == "PASS" for line in packages), res.stdout
    assert lines[-1] == "PASS (compatible): 0 FAIL, 0 WARN, 25 PASS, 1 INFO, 0 not recorded"

    # the same pins in the other two formats, read back as YAML and as Dockerfile instructions
    _, conda = conda_pins(_cli("env", str(m), "--format", "conda").stdout)
    _, docker = dockerfile_pins(_cli("env", str(m), "--format", "dockerfile").stdout)
    assert conda == docker == pins

    # and not vacuous: against the interpreter running these tests it fails, naming what differs
    res = _cli("env", str(m), "--check", "--python", sys.executable, "--json")
    assert res.returncode == 1
    verdicts = {i["item"]: (i["here"], i["verdict"]) for i in json.loads(res.stdout)["items"]}
    assert verdicts["package gitpkg"] == ("not installed", "FAIL")


@needs_wheelhouse
def test_a_local_wheel_is_a_comment_and_an_empty_interpreter_misses_every_package(tmp_path):
    old = _venv(tmp_path / "old")
    wheel = WHEELHOUSE / "tabulate-0.9.0-py3-none-any.whl"
    _pip(old, str(wheel), "six==1.16.0")
    m = tmp_path / "m.json"
    assert _cli("generate", "-q", "--python", str(old), "--output", str(m), cwd=tmp_path).returncode == 0
    res = _cli("env", str(m))
    assert res.returncode == 0 and requirement_pins(res.stdout) == ["six==1.16.0"]
    assert ("# not pinned: tabulate 0.9.0: installed from %s, a file on the recording machine: no index gives it "
            "back" % wheel.as_uri()) in res.stdout.splitlines()
    res = _cli("env", str(m), "--check", "--python", str(_venv(tmp_path / "empty")))
    assert res.returncode == 1
    rows = {line.split()[1]: line.split()[2:] for line in res.stdout.splitlines() if line.startswith("package ")}
    assert rows["six"] == ["1.16.0", "not", "installed", "FAIL"] and rows["tabulate"][:4] == [
        "0.9.0", "not", "installed", "FAIL"]


def _manifest(tmp_path: Path, **environment) -> Path:
    doc = base_manifest()
    doc["environment"].update(environment)
    return write_json(tmp_path / "m.json", doc)


def test_o_replaces_a_file_env_wrote_and_refuses_any_other(tmp_path):
    m = _manifest(tmp_path)
    out = tmp_path / "requirements.txt"
    assert run_cli("env", str(m), "-o", str(out)).returncode == 0
    first = out.read_text()
    assert first.startswith(MARK) and "torch==2.3.0+cu121" in first.splitlines()
    m2 = _manifest(tmp_path, packages={"six": "1.16.0"})
    res = run_cli("env", str(m2), "-o", str(out))
    assert res.returncode == 0 and requirement_pins(out.read_text()) == ["six==1.16.0"]

    mine = tmp_path / "mine.txt"
    mine.write_text("# my own pins\nsix==1.15.0\n")
    res = run_cli("env", str(m), "-o", str(mine))
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("relaxrepro env: error: %s exists and was not written by relaxrepro env: not replaced "
                          "(remove it, or choose another -o)\n" % mine)
    assert mine.read_text() == "# my own pins\nsix==1.15.0\n"
    link = tmp_path / "link.txt"
    link.symlink_to(out)
    assert run_cli("env", str(m), "-o", str(link)).returncode == 2
    assert requirement_pins(out.read_text()) == ["six==1.16.0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "m.json", "mine.txt", "requirements.txt"]


def test_o_into_a_missing_directory_writes_nothing(tmp_path):
    res = run_cli("env", str(_manifest(tmp_path)), "-o", str(tmp_path / "no" / "req.txt"))
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == "relaxrepro env: error: could not write %s: directory does not exist\n" % (
        tmp_path / "no" / "req.txt")


def test_a_run_id_is_found_under_runs(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    doc = base_manifest()
    write_json(runs / ("manifest_%s.json" % doc["run_id"]), doc)
    res = run_cli("env", doc["run_id"][:12], "--runs", str(runs), "--format", "dockerfile", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert dockerfile_pins(res.stdout)[1] == ["flash_attn==2.5.8", "numpy==1.26.4", "ray==2.9.3",
                                              "torch==2.3.0+cu121"]


def test_what_cannot_be_pinned_is_named_on_stderr(tmp_path):
    m = _manifest(tmp_path, editable={"torch": {"url": "file://<HOME>/torch", "editable": True}})
    res = run_cli("env", str(m))
    assert res.returncode == 0
    assert res.stderr == ("relaxrepro env: note: 1 of 4 packages cannot be pinned (a comment in the file says why): "
                          "torch\n")
    assert "# not pinned: torch 2.3.0+cu121: installed editable from file://<HOME>/torch" in res.stdout


@pytest.mark.parametrize("args,message", [
    (["--format", "pip"], "--format pip: unknown format (one of: requirements, conda, dockerfile)"),
    (["--check", "--format", "conda"], "--check compares with an interpreter here and writes no file: no --format "
     "or -o with it"),
    (["--python", sys.executable], "--python goes with --check"),
    (["--json"], "--json goes with --check"),
    (["--check", "--python", "/nonexistent/python"], "--python /nonexistent/python: not an executable file"),
], ids=["unknown-format", "check-and-format", "python-without-check", "json-without-check", "missing-python"])
def test_bad_options_one_line_exit_2_nothing_written(tmp_path, args, message):
    m = _manifest(tmp_path)
    res = run_cli("env", str(m), *args, cwd=tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", "relaxrepro env: error: %s\n" % message)
    assert sorted(os.listdir(tmp_path)) == ["m.json"]


@pytest.mark.parametrize("environment", [{"packages": {}}, {"key_packages": {"torch": "2.3.0"}}],
                         ids=["empty", "key-packages-only"])
def test_no_package_list_one_line_exit_2(tmp_path, environment):
    doc = base_manifest(environment=environment)
    m = write_json(tmp_path / "m.json", doc)
    for extra in ([], ["--check"], ["-o", str(tmp_path / "out.txt")]):
        res = run_cli("env", str(m), *extra)
        assert (res.returncode, res.stdout) == (2, ""), extra
        assert res.stderr.startswith("relaxrepro env: %s: the manifest records no package list" % m)
        assert res.stderr.count("\n") == 1
    assert not (tmp_path / "out.txt").exists()


def test_check_python_judges_the_given_interpreter(tmp_path):
    rec = base_manifest()
    rec["environment"]["python"]["executable"] = sys.executable
    m = write_json(tmp_path / "m.json", rec)
    res = run_cli("check", str(m), "--python", "/nonexistent/python")
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == "relaxrepro check: error: --python /nonexistent/python: not an executable file\n"
    venv = _venv(tmp_path / "other")
    site = next((tmp_path / "other" / "lib").glob("python*/site-packages"))
    (site / "torch-9.9.dist-info").mkdir()
    (site / "torch-9.9.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 9.9\n")
    res = run_cli("check", str(m), "--python", str(venv), "--json")
    items = {i["item"]: i for i in json.loads(res.stdout)["items"]}
    assert items["package torch"]["here"] == "9.9"  # the given venv's packages, not the recorded interpreter's
    assert "python interpreter" not in items  # no recorded-interpreter row: the user named the one to judge
