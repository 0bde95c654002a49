"""Which repositories the git probe finds, each once, under a stable name."""

from __future__ import annotations

import hashlib
import json

import pytest

from relaxrepro.collect import gitfs, repos
from tests.helpers.common import ROOT, git, make_repo
from tests.helpers.git import env_for, probe_doc


def _editable(site, dist_dir: str, name: str, src) -> None:
    d = site / dist_dir
    d.mkdir(parents=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: 0.1\n\nbody\n" % name)
    (d / "direct_url.json").write_text(json.dumps({"url": src.as_uri(), "dir_info": {"editable": True}}))


def test_script_of_the_command_in_another_repo(tmp_path):
    trainer = make_repo(tmp_path / "relax", {"relax/entrypoints/train.py": "print(1)\n"})
    work = tmp_path / "work"
    work.mkdir()
    doc = probe_doc(tmp_path, work, argv=["python", str(trainer / "relax/entrypoints/train.py")])
    assert list(doc["code"]) == ["relax"]
    assert doc["code"]["relax"]["found_by"] == ["script"]


def test_torchrun_script_relative_to_cwd(tmp_path):
    trainer = make_repo(tmp_path / "trainer", {"train.py": "x\n"})
    doc = probe_doc(tmp_path, trainer, argv=["torchrun", "--nproc_per_node", "8", "train.py", "--lr", "1"])
    assert doc["code"]["trainer"]["found_by"] == ["cwd", "script"]


def test_python_m_module_found_through_site_dirs(tmp_path):
    lib = make_repo(tmp_path / "sglang-src", {"sglang/launch_server.py": "x\n", "sglang/__init__.py": ""})
    work = tmp_path / "work"
    work.mkdir()
    doc = probe_doc(tmp_path, work, argv=["python", "-m", "sglang.launch_server"], site_dirs=[str(lib)])
    assert doc["code"]["sglang-src"]["found_by"] == ["script"]


def test_python_m_module_that_is_nowhere_warns(tmp_path, repo):
    doc = probe_doc(tmp_path, repo, argv=["python", "-m", "no.such.module"])
    assert "module no.such.module of the command not found on the search path" in \
        doc["collection"]["probes"]["git"]["warnings"]


def test_editable_installs_are_found_by_distribution_name(tmp_path, repo):
    megatron = make_repo(tmp_path / "Megatron-LM", {"megatron/core/__init__.py": ""})
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    site = tmp_path / "site-packages"
    _editable(site, "megatron_core-0.9.0.dist-info", "megatron_core", megatron)
    _editable(site, "plain-1.0.dist-info", "plain", plain)
    (site / "numpy-2.0.dist-info").mkdir()
    doc = probe_doc(tmp_path, repo, site_dirs=[str(site)])
    assert sorted(doc["code"]) == ["megatron-core", "repo"]
    assert doc["code"]["megatron-core"]["found_by"] == ["editable"]
    assert doc["code"]["megatron-core"]["path"] == str(megatron)


def test_pythonpath_repos_are_found_and_plain_dirs_ignored(tmp_path, repo):
    megatron = make_repo(tmp_path / "Megatron-LM")
    plain = tmp_path / "plain"
    plain.mkdir()
    env = env_for(tmp_path, PYTHONPATH="%s:%s:/does/not/exist" % (megatron, plain))
    doc = probe_doc(tmp_path, repo, env=env)
    assert sorted(doc["code"]) == ["Megatron-LM", "repo"]
    assert doc["code"]["Megatron-LM"]["found_by"] == ["pythonpath"]


def test_a_repo_reached_by_every_route_is_recorded_once(tmp_path):
    repo = make_repo(tmp_path / "relax", {"relax/train.py": "x\n"})
    site = tmp_path / "site"
    _editable(site, "relax-1.0.dist-info", "relax", repo)
    env = env_for(tmp_path, PYTHONPATH=str(repo))
    doc = probe_doc(tmp_path, repo / "relax", argv=["python", "train.py"], env=env, site_dirs=[str(site)],
                    repos={"trainer": str(repo / "relax")})
    assert list(doc["code"]) == ["trainer"]
    assert doc["code"]["trainer"]["found_by"] == ["explicit", "cwd", "script", "editable", "pythonpath"]


def test_same_directory_names_are_disambiguated_stably(tmp_path):
    a = make_repo(tmp_path / "a" / "model")
    b = make_repo(tmp_path / "b" / "model")
    env = env_for(tmp_path, PYTHONPATH="%s:%s" % (b, a))
    doc = probe_doc(tmp_path, tmp_path, env=env)
    suffix = hashlib.sha256(str(b).encode()).hexdigest()[:6]
    assert doc["code"]["model"]["path"] == str(a)
    assert doc["code"]["model-" + suffix]["path"] == str(b)


def test_explicit_name_wins_a_clash_with_a_directory_name(tmp_path):
    mine = make_repo(tmp_path / "x" / "megatron")
    theirs = make_repo(tmp_path / "y" / "other")
    env = env_for(tmp_path, PYTHONPATH=str(mine))
    doc = probe_doc(tmp_path, tmp_path, env=env, repos={"megatron": str(theirs)})
    assert doc["code"]["megatron"]["path"] == str(theirs)
    assert [k for k in doc["code"] if k.startswith("megatron-")]


def test_explicit_path_that_does_not_exist_warns(tmp_path, repo):
    doc = probe_doc(tmp_path, repo, repos={"gone": str(tmp_path / "gone")})
    assert list(doc["code"]) == ["repo"]
    assert any("repo gone:" in w and "does not exist" in w for w in doc["collection"]["probes"]["git"]["warnings"])


def test_explicit_subdirectory_means_its_repository(tmp_path):
    mono = make_repo(tmp_path / "mono", {"python/pkg/__init__.py": ""})
    found = repos.discover(cwd=str(tmp_path), explicit={"pkg": str(mono / "python" / "pkg")})
    assert [(f.name, f.top) for f in found] == [("pkg", str(mono))]


def test_discovery_only_looks_upwards(tmp_path):
    make_repo(tmp_path / "below" / "deep")  # a repo under cwd is not part of the run
    found = repos.discover(cwd=str(tmp_path))
    assert found == []


def test_nested_repo_wins_over_the_outer_one(tmp_path):
    outer = make_repo(tmp_path / "outer")
    inner = make_repo(outer / "vendor" / "inner")
    git(outer, "status")
    found = repos.discover(cwd=str(inner))
    assert [f.top for f in found] == [str(inner)]


def test_relaxrepro_own_checkout_on_pythonpath_is_not_part_of_the_run(tmp_path, repo):
    if gitfs.find_toplevel(str(ROOT)) != str(ROOT):
        pytest.skip("relaxrepro runs from outside a git checkout here")
    doc = probe_doc(tmp_path, repo, env=env_for(tmp_path, PYTHONPATH=str(ROOT)))
    assert list(doc["code"]) == ["repo"]


def test_a_command_script_that_is_not_there_is_a_note_not_a_failure(tmp_path, repo):
    doc = probe_doc(tmp_path, repo, argv=["python", "missing.py"])
    entry = doc["collection"]["probes"]["git"]
    assert entry["status"] == "ok" and entry["warnings"] == ["script missing.py of the command does not exist"]


def test_a_named_repo_that_is_missing_makes_the_probe_partial(tmp_path, repo):
    doc = probe_doc(tmp_path, repo, repos={"gone": str(tmp_path / "gone")})
    assert doc["collection"]["probes"]["git"]["status"] == "partial"
