"""``relaxrepro check`` of the Relax trainer's own manifests (tests/fixtures/relax), checked where they were
written: a real repo stands for the one each was captured in, and a copy of the capture gets that repo's
commit and this machine's arch, OS, kernel, Python and decisive packages written in (the capture's machine
state), as issue 17 asks. Relax records the working directory as ``"."`` and no repo path: check finds the
repo where it runs, when the recorded commit is there.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import pytest

from relaxrepro.commands import check
from relaxrepro.manifest.model import DECISIVE_PACKAGES
from tests.helpers.common import FIXTURES, git, make_repo, run_cli
from tests.helpers.gpu import driverless_linux
from tests.helpers.read import head, write_json

RELAX = FIXTURES / "relax"

pytestmark = pytest.mark.skipif(not driverless_linux(), reason="this machine has a GPU driver, or is not Linux: "
                                "the captures were written on a CPU-only Linux machine")


def _decisive_packages() -> dict:
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in DECISIVE_PACKAGES:
            found[name] = dist.version
    return found


def _at_its_commit(tmp_path: Path, name: str) -> tuple:
    """(the repo, a copy of capture ``name`` with the repo's commit and this machine's state written in)."""
    repo = make_repo(tmp_path / "Relax", {"relax/utils/manifest.py": "VERSION = 1\n", "configs/env.yaml": "a: 1\n"})
    doc = json.loads((RELAX / name).read_text())
    code = doc["code"]
    for entry in [code] if isinstance(code.get("commit"), str) else code.values():  # the earlier flat layout
        entry["commit"] = head(repo)
    env = doc["environment"]
    where = env["platform"] if "platform" in env else env
    where.update({"machine": platform.machine(), "system" if "platform" in env else "os": platform.system(),
                  "release" if "platform" in env else "os_version": platform.release()})
    env["python" if isinstance(env.get("python"), str) else "python_version"] = platform.python_version()
    env["packages"] = _decisive_packages()
    return repo, write_json(tmp_path / name, doc)


def _env(tmp_path: Path, manifest: Path) -> dict:
    """The environment the run recorded (its values that were not redacted), and ``python`` on PATH being
    the interpreter running these tests."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "python"
    shim.write_text('#!/bin/sh\nexec "%s" "$@"\n' % sys.executable)
    shim.chmod(0o755)
    env = {"PATH": str(bindir) + os.pathsep + os.environ["PATH"], "HOME": str(tmp_path / "home")}
    recorded = json.loads(manifest.read_text())["config"].get("environment") or {}
    env.update({k: v for k, v in recorded.items() if "<" not in v})
    return env


def _check(monkeypatch, capsys, manifest: Path, cwd: Path, env: dict, repos: dict = None) -> tuple:
    monkeypatch.chdir(cwd)
    rc = check.run_cli(str(manifest), repos=repos or {}, as_json=True, env=env)
    out, err = capsys.readouterr()
    report = json.loads(out)
    return rc, {i["item"]: i for i in report["items"]}, report


_SAME_MACHINE = {
    "run id": "INFO", "python": "PASS", "cuda": "not recorded", "gpu model": "not recorded",
    "driver": "not recorded", "nccl": "not recorded", "cudnn": "not recorded", "arch": "PASS", "os": "PASS",
    "kernel": "PASS", "runtime mode": "PASS", "nodes": "PASS", "container": "not recorded",
}
_RELAX_1_0 = dict(_SAME_MACHINE, **{
    "gpu count": "PASS", "gpu memory (GB)": "not recorded", "hostname": "INFO", "seeds": "not recorded",
    "code relax commit": "PASS", "code relax changes": "PASS", "code relax untracked": "INFO",
})
EXPECTED = {
    "relax-A-clean.json": ("PASS", dict(_RELAX_1_0, **{
        "selected env": "PASS", "config configs/env.yaml": "INFO"})),
    "relax-A-dirty.json": ("WARN", dict(_RELAX_1_0, **{
        "code relax changes": "WARN", "selected env": "PASS", "config configs/env.yaml": "INFO"})),
    "relax-A-argv-env.json": ("PASS", dict(_RELAX_1_0, **{
        "seeds": None, "seed seed": "PASS", "selected env": "PASS", "env HF_HOME": "INFO", "env HF_TOKEN": "INFO",
        "env RAY_ADDRESS": "INFO", "env SLURM_JOB_NODELIST": "INFO", "env WANDB_API_KEY": "INFO",
        "config config.yaml": "INFO", "config configs/env.yaml": "INFO", "slurm job": "INFO"})),
    "relax-A-old-argv.json": ("PASS", dict(_SAME_MACHINE, **{
        "run id": "INFO", "code Relax commit": "PASS", "code Relax changes": "PASS", "code Relax untracked": "INFO",
        "seed seed": "PASS", "selected env": "not recorded"})),
    "relax-C-submodule.json": ("PASS", dict(_RELAX_1_0)),
}


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n[:-5])
def test_a_relax_manifest_checked_where_it_was_written(tmp_path, monkeypatch, capsys, name):
    repo, manifest = _at_its_commit(tmp_path, name)
    if name == "relax-A-dirty.json":  # as captured: a modified tracked file and an untracked notes.txt
        (repo / "relax/utils/manifest.py").write_text("VERSION = 2\n")
        (repo / "notes.txt").write_text("n\n")
    verdict, expected = EXPECTED[name]
    expected = {k: v for k, v in expected.items() if v is not None}
    rc, items, report = _check(monkeypatch, capsys, manifest, repo, _env(tmp_path, manifest))
    got = {k: i["verdict"] for k, i in items.items() if not k.startswith(("package ", "other packages"))}
    assert got == expected
    assert (report["verdict"], rc) == (verdict, 0)
    assert not [i for i in items.values() if i["verdict"] == "FAIL"]


def test_the_recorded_commit_elsewhere_in_the_working_directorys_repo_is_a_failed_commit(tmp_path, monkeypatch,
                                                                                       capsys):
    repo, manifest = _at_its_commit(tmp_path, "relax-A-clean.json")
    recorded = head(repo)
    (repo / "relax/utils/manifest.py").write_text("VERSION = 2\n")
    git(repo, "commit", "-qam", "later")
    rc, items, _ = _check(monkeypatch, capsys, manifest, repo, _env(tmp_path, manifest))
    item = items["code relax commit"]
    assert (rc, item["verdict"], item["recorded"], item["here"]) == (1, "FAIL", recorded[:12], head(repo)[:12])


def test_a_repo_without_the_commit_or_no_repo_here_is_not_found_and_repo_finds_it(tmp_path, monkeypatch, capsys):
    repo, manifest = _at_its_commit(tmp_path, "relax-A-clean.json")
    env = _env(tmp_path, manifest)
    other = make_repo(tmp_path / "other", {"x.py": "x = 1\n"})
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    for cwd in (other, nowhere):
        rc, items, _ = _check(monkeypatch, capsys, manifest, cwd, env)
        item = items["code relax commit"]
        assert (rc, item["verdict"], item["here"]) == (1, "FAIL", "repo not found")
        assert item["note"] == ("no path recorded, and no repo holding this commit at the recorded working "
                                "directory (.); give --repo relax=PATH")
    rc, items, _ = _check(monkeypatch, capsys, manifest, nowhere, env, repos={"relax": str(repo)})
    assert items["code relax commit"]["verdict"] == "PASS"


def test_nothing_to_compare_is_not_a_pass(tmp_path):
    m = write_json(tmp_path / "m.json", {"schema_version": "1.7", "cli_args": ["python", "train.py"]})
    res = run_cli("check", str(m), cwd=tmp_path)
    assert res.returncode == 1
    assert res.stdout.splitlines()[-1] == (
        "nothing to compare: the manifest records none of the items check judges (12 not recorded)")
    res = run_cli("check", str(m), "--json", cwd=tmp_path)
    report = json.loads(res.stdout)
    assert (res.returncode, report["verdict"], report["exit_code"]) == (1, "NOTHING", 1)
