"""``relaxrepro check``: judge what matters, not what merely differs.

The judgement itself is tested on hand-built documents in tests/analyze/test_check.py; here, what the command
makes of it (its table and exit code) and the collection on real repositories through the CLI, including the
four ways an earlier implementation failed: FAIL on a new SLURM job id, on a new untracked file, outside the
repo, and PASS after a second edit to an already-dirty file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from relaxrepro.analyze import check as rules
from relaxrepro.commands import check
from tests.helpers.common import clean_env, git, make_repo, run_cli
from tests.helpers.git import conflicting, git_with_slow_diff
from tests.helpers.gpu import driverless_linux
from tests.helpers.read import base_manifest, head, modified, write_json

# -- the judgement as the command shows it: its verdict, table and exit code -------------------------

def test_new_job_id_run_id_hostname_and_time_are_information_not_failure():
    rec = base_manifest()
    here = modified(rec, "scheduler.slurm.job_id", "9999")
    here = modified(here, "environment.system.hostname", "other-node")
    here = modified(here, "config.selected_env.SLURM_JOB_ID", "9999")
    here = modified(here, "run_id", "x")
    here = modified(here, "generated_at", "2027-01-01T00:00:00Z")
    report = rules.Report(items=rules.compare_documents(rec, here))
    assert report.verdict == rules.PASS and check.exit_code(report, strict=True) == 0


def test_absent_items_are_not_recorded_never_pass():
    rec = {"schema_version": "1.0", "run_id": "r", "generated_at": "2026-01-01T00:00:00Z", "command": {},
           "code": {}, "config": {}, "environment": {}, "hardware": {}, "runtime": {}, "training": {},
           "collection": {}}
    items = rules.compare_documents(rec, base_manifest())
    assert {i.verdict for i in items} <= {rules.NOT_RECORDED, rules.INFO}
    shown = {i.item: i for i in items}
    for item in ("code", "python", "packages", "cuda", "gpu model", "driver", "nccl", "cudnn", "seeds",
                 "selected env"):
        assert shown[item].verdict == rules.NOT_RECORDED, item
    report = rules.Report(items=items)
    assert check.render_table(report).splitlines()[-1] == (  # never "PASS (compatible)": nothing was shown to match
        "nothing to compare: the manifest records none of the items check judges (12 not recorded)")
    assert (report.verdict, check.exit_code(report)) == ("NOTHING", 1)


@pytest.mark.skipif(not driverless_linux(), reason="this machine has a GPU driver, or is not Linux")
def test_check_of_a_gpu_run_on_a_machine_without_gpus_fails(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    rec = modified(base_manifest(), "hardware", {"gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_count": 4})
    m = write_json(tmp_path / "m.json", rec)
    res = run_cli("check", str(m), env=clean_env(PATH=str(bindir)))
    assert res.returncode == 1, res.stdout + res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("gpu model"))
    assert line.split()[2:5] == ["NVIDIA", "A100-SXM4-80GB", "none"], line
    assert line.endswith("FAIL  (recorded 4 x NVIDIA A100-SXM4-80GB, no GPU here)"), line


def test_odd_types_never_crash():
    rec = base_manifest()
    rec["hardware"] = {"gpu_model": ["x"], "gpu_count": {"a": 1}, "nccl_version": 2.18}
    rec["seeds"] = {"seed": [1], "switches": "on"}
    rec["config"] = {"selected_env": ["A=1"], "files": [3, {"path": None}]}
    rec["data"] = {"inputs": "x"}
    rec["code"] = {"proj": "not a dict", "other": {"commit": 5, "patch": [], "submodules": "x",
                                                    "untracked": {"count": "3"}}}
    here = base_manifest(code={"other": {"commit": None, "patch": {"sha256": 1}}})
    items = rules.compare_documents(rec, here)
    assert items and all(i.verdict in rules.VERDICTS for i in items)
    assert check.render_table(rules.Report(items=items))


# -- the command, on real repositories ------------------------------------------------------------

def _generate(tmp_path, repo, name="m.json", env=None, command=("python", "train.py")):
    out = tmp_path / name
    res = run_cli("generate", "--output", str(out), "--", *command, cwd=repo, env=env)
    assert res.returncode == 0, res.stderr
    return out


def _check(manifest, *args, cwd=None, env=None):
    res = run_cli("check", str(manifest), "--json", *args, cwd=cwd, env=env)
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    return res.returncode, {i["item"]: i for i in doc["items"]}, doc


def test_check_from_another_directory_passes(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    m = _generate(tmp_path, repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rc, items, doc = _check(m, cwd=elsewhere)
    assert rc == 0, doc
    assert items["code repo commit"]["verdict"] == "PASS"
    assert items["code repo changes"]["verdict"] == "PASS"
    assert items["python"]["verdict"] == "PASS"
    res = run_cli("check", str(m), cwd=elsewhere)
    assert res.returncode == 0
    assert res.stdout.splitlines()[0].split() == ["ITEM", "RECORDED", "HERE", "VERDICT"]
    assert res.stdout.splitlines()[-1].startswith("PASS (compatible): 0 FAIL, 0 WARN, ")


def test_new_untracked_file_and_new_slurm_job_do_not_fail(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    m = _generate(tmp_path, repo, env=clean_env(SLURM_JOB_ID="1001", SLURM_PROCID="0"))
    (repo / "notes.txt").write_text("new\n")
    rc, items, doc = _check(m, env=clean_env(SLURM_JOB_ID="2002", SLURM_PROCID="0"))
    assert rc == 0, doc
    assert not [i for i in items.values() if i["verdict"] == "FAIL"]


def test_new_commit_fails(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    m = _generate(tmp_path, repo)
    (repo / "train.py").write_text("print(2)\n")
    git(repo, "commit", "-qam", "second")
    rc, items, doc = _check(m)
    assert rc == 1
    assert items["code repo commit"]["verdict"] == "FAIL"
    assert items["code repo commit"]["here"] == head(repo)[:12]


def test_second_edit_to_an_already_dirty_file_does_not_pass(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    (repo / "train.py").write_text("print(2)\n")
    m = _generate(tmp_path, repo)
    recorded = json.loads(m.read_text())["code"]["repo"]
    rc, items, _ = _check(m)
    if isinstance(recorded.get("patch"), dict):  # the git probe records the patch digest
        assert items["code repo changes"]["verdict"] == "PASS"
    else:  # a dirty run without a digest can never be verified, so never PASS
        assert items["code repo changes"]["verdict"] == "WARN"
    (repo / "train.py").write_text("print(3)\n")
    rc, items, _ = _check(m)
    assert items["code repo changes"]["verdict"] == "WARN"
    assert rc == 0
    assert run_cli("check", str(m), "--strict").returncode == 1


def test_a_diff_that_timed_out_twice_is_not_the_same_change(tmp_path):
    """git diff of a huge file times out when the run is recorded and again when it is checked: two
    empty diffs, which must not read as "same uncommitted changes"."""
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    (repo / "train.py").write_text("print(2)\n")
    env = clean_env(PATH=git_with_slow_diff(tmp_path / "bin"))
    m = _generate(tmp_path, repo, env=env)
    (repo / "train.py").write_text("print(3)\n")
    rc, items, _ = _check(m, env=env)
    item = items["code repo changes"]
    assert (item["verdict"], item["recorded"], item["here"]) == ("WARN", "patch incomplete", "patch incomplete")
    assert item["note"].startswith("uncommitted changes not fully recorded (timeout: git diff")
    patch = json.loads(m.read_text())["code"]["repo"]["patch"]
    assert patch["incomplete_reason"] == "timeout" and "sha256" not in patch


def test_a_run_started_mid_merge_is_a_warning(tmp_path):
    repo = conflicting(tmp_path / "repo", "train.py")
    with pytest.raises(subprocess.CalledProcessError):
        git(repo, "merge", "side")  # stops on the conflict
    m = _generate(tmp_path, repo)
    rc, items, _ = _check(m)
    item = items["code repo operation"]
    assert (item["verdict"], item["recorded"], item["here"]) == ("WARN", "merge", "merge")
    assert item["note"] == "the run started in the middle of a git merge (as this repo is here)"
    assert rc == 0


def test_recorded_home_path_resolves_against_this_home(tmp_path):
    home = tmp_path / "home"
    repo = make_repo(home / "proj", {"train.py": "print(1)\n"})
    doc = base_manifest()
    doc["code"] = {"proj": {"path": "<HOME>/proj", "commit": head(repo), "dirty": False}}
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m, env=clean_env(HOME=str(home)))
    assert items["code proj commit"]["verdict"] == "PASS"


def test_repo_option_points_at_a_moved_repo(tmp_path):
    repo = make_repo(tmp_path / "moved", {"train.py": "print(1)\n"})
    doc = base_manifest()
    doc["code"] = {"proj": {"path": "/nonexistent/proj", "commit": head(repo), "dirty": False}}
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m)
    assert rc == 1
    assert items["code proj commit"]["verdict"] == "FAIL"
    assert items["code proj commit"]["note"] == "no git repository at /nonexistent/proj; give --repo proj=PATH"
    rc, items, _ = _check(m, "--repo", "proj=%s" % repo)
    assert items["code proj commit"]["verdict"] == "PASS"
    res = run_cli("check", str(m), "--repo", "nope=/x")
    assert "--repo nope: the manifest records no repo of that name (it has: proj)" in res.stderr
    res = run_cli("check", str(m), "--repo", "novalue")
    assert res.returncode == 2 and "--repo 'novalue': expected NAME=VALUE" in res.stderr


def test_two_recorded_repos_are_both_checked(tmp_path):
    a = make_repo(tmp_path / "a", {"train.py": "print(1)\n"})
    b = make_repo(tmp_path / "b", {"lib.py": "x = 1\n"})
    doc = base_manifest()
    doc["command"]["cwd"] = str(a)
    doc["code"] = {"a": {"path": str(a), "commit": head(a), "dirty": False},
                   "megatron": {"path": str(b), "commit": head(b), "dirty": False}}
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m)
    assert items["code a commit"]["verdict"] == "PASS"
    assert items["code megatron commit"]["verdict"] == "PASS"


def test_gone_interpreter_is_reported_by_the_command(tmp_path):
    doc = base_manifest()
    doc["environment"]["python"]["executable"] = "/nonexistent/venv/bin/python"
    doc["environment"]["python"]["version"] = "%d.%d.0" % sys.version_info[:2]
    m = write_json(tmp_path / "m.json", doc)
    rc, items, _ = _check(m, env=clean_env(PATH=os.path.dirname(sys.executable)))
    item = items["python interpreter"]
    assert item["verdict"] == "WARN" and item["here"] == "gone"
    assert item["note"].startswith("closest match: " + os.path.dirname(sys.executable))


def test_terminal_escape_in_a_recorded_value_is_escaped_in_the_table(tmp_path):
    doc = base_manifest()
    doc["hardware"]["gpu_model"] = "H100\x1b]0;owned\x07\x1b[2J"
    m = write_json(tmp_path / "m.json", doc)
    res = run_cli("check", str(m))
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout
    assert "H100\\x1b]0;owned\\x07" in res.stdout
