"""Installed distributions of the training interpreter, read from metadata directories."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from relaxrepro.collect.probes import packages
from tests.helpers.common import clean_env, generate
from tests.helpers.env import add_dist, cuda_python, fake_site, interp, make_ctx


def _collect(tmp_path: Path, *sites: Path):
    return packages.collect(make_ctx(tmp_path, interpreter=interp([str(s) for s in sites])))


def test_names_versions_count_and_digest(tmp_path):
    site = tmp_path / "site"
    add_dist(site, "Flash_Attn", "2.6.3")
    add_dist(site, "torch", "2.3.0+cu121")
    add_dist(site, "my.pkg", "0.1")
    (site / "PyYAML-6.0.1-py3.11.egg-info").write_text("Metadata-Version: 1.0\nName: PyYAML\nVersion: 6.0.1\n")
    egg = site / "legacy.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 3\n")
    out = _collect(tmp_path, site)
    env = out.data["environment"]
    assert out.status == "ok"
    assert env["packages"] == {"flash-attn": "2.6.3", "legacy": "3", "my-pkg": "0.1", "pyyaml": "6.0.1",
                               "torch": "2.3.0+cu121"}
    assert env["packages_count"] == 5
    lines = "flash-attn==2.6.3\nlegacy==3\nmy-pkg==0.1\npyyaml==6.0.1\ntorch==2.3.0+cu121\n"
    assert env["packages_digest"] == "sha256:" + hashlib.sha256(lines.encode()).hexdigest()
    assert env["key_packages"] == {"flash-attn": "2.6.3", "torch": "2.3.0+cu121"}


def test_key_packages_include_the_cuda_wheels(tmp_path):
    site = tmp_path / "site"
    for name in ("nvidia-cudnn-cu12", "nvidia-nccl-cu13", "nvidia-cuda-runtime", "nvidia-cublas-cu12",
                 "nvidia-cufft-cu12", "transformer-engine-cu12", "megatron-core", "requests"):
        add_dist(site, name, "1.0")
    keys = set(_collect(tmp_path, site).data["environment"]["key_packages"])
    assert keys == {"nvidia-cudnn-cu12", "nvidia-nccl-cu13", "nvidia-cuda-runtime", "nvidia-cublas-cu12",
                    "transformer-engine-cu12", "megatron-core"}


def test_first_on_the_path_wins(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    add_dist(first, "torch", "2.4.0")
    add_dist(second, "torch", "2.1.0")
    assert _collect(tmp_path, first, second).data["environment"]["packages"] == {"torch": "2.4.0"}


@pytest.mark.parametrize("dirname,metadata,expect", [
    ("nover-1.0.dist-info", "Metadata-Version: 2.1\nName: nover\n", "metadata without Version"),
    ("noname-1.0.dist-info", "Metadata-Version: 2.1\nVersion: 1.0\n", "metadata without Name"),
    ("empty-1.0.dist-info", "", "metadata without Name"),
    ("garbage-1.0.dist-info", "\x00\x01\x02 not headers", "metadata without Name"),
], ids=["missing-version", "missing-name", "empty", "garbage"])
def test_broken_metadata_is_skipped_with_a_warning(tmp_path, dirname, metadata, expect):
    site = tmp_path / "site"
    add_dist(site, "good", "1.0")
    add_dist(site, "x", None, dirname=dirname, metadata=metadata)
    out = _collect(tmp_path, site)
    assert out.data["environment"]["packages"] == {"good": "1.0"}
    assert out.status == "partial"
    assert any(dirname in w and expect in w for w in out.warnings), out.warnings


def test_unreadable_metadata_is_skipped_with_a_warning(tmp_path):
    site = tmp_path / "site"
    add_dist(site, "good", "1.0")
    (site / "half_installed-1.0.dist-info").mkdir()  # pip killed mid-install: no METADATA
    bad = site / "dir_as_metadata-1.0.dist-info"
    (bad / "METADATA").mkdir(parents=True)  # reading a directory fails like an unreadable file
    out = _collect(tmp_path, site)
    assert out.data["environment"]["packages"] == {"good": "1.0"}
    assert sum("unreadable or missing" in w for w in out.warnings) == 2


def test_many_broken_distributions_give_a_bounded_number_of_warnings(tmp_path):
    site = tmp_path / "site"
    add_dist(site, "good", "1.0")
    for i in range(25):
        (site / ("broken%02d-1.dist-info" % i)).mkdir(parents=True)
    out = _collect(tmp_path, site)
    assert len(out.warnings) == 11 and out.warnings[-1] == "15 more broken distributions skipped"


def test_no_distributions_is_absent(tmp_path):
    (tmp_path / "empty").mkdir()
    out = _collect(tmp_path, tmp_path / "empty", tmp_path / "does-not-exist")
    assert out.status == "absent" and out.data == {}


def test_two_thousand_distributions(tmp_path):
    site = fake_site(tmp_path / "site", 2000)
    env = _collect(tmp_path, site).data["environment"]
    assert env["packages_count"] == 2000
    assert env["packages"]["pkg1999"] == "1.1999"


def test_editable_and_vcs_installs(tmp_path):
    site = tmp_path / "site"
    add_dist(site, "mytrainer", "0.1.dev0", direct_url={"url": "file:///src/mytrainer", "dir_info": {"editable": True}})
    add_dist(site, "megatron-core", "0.9.0", direct_url={
        "url": "https://oauth2:glpat-abcdefghijklmnopqrst@gitlab.example.com/nv/megatron.git",
        "vcs_info": {"vcs": "git", "commit_id": "a" * 40, "requested_revision": "main"}})
    add_dist(site, "wheelfile", "1.0", direct_url={"url": "file:///tmp/w.whl", "archive_info": {}})
    add_dist(site, "brokenurl", "1.0")
    (site / "brokenurl-1.0.dist-info" / "direct_url.json").write_text("{not json")
    out = _collect(tmp_path, site)
    env = out.data["environment"]
    assert env["editable"] == {"mytrainer": {"url": "file:///src/mytrainer", "editable": True}}
    assert env["vcs_installs"] == {"megatron-core": {
        "url": "https://gitlab.example.com/nv/megatron.git", "editable": False, "vcs": "git",
        "commit": "a" * 40, "requested_revision": "main"}}
    # a local wheel: no index gives it back, so it is recorded apart (env writes it as a comment, not a pin)
    assert env["direct_installs"] == {"wheelfile": {"url": "file:///tmp/w.whl", "editable": False}}
    assert any("direct_url.json is not valid" in w for w in out.warnings)
    assert "brokenurl" in env["packages"]


def test_parse_metadata_stops_at_the_body():
    text = "Metadata-Version: 2.1\nName: a\nSummary: s\n\nVersion: 9\n"
    assert packages.parse_metadata(text) == ("a", None)


def test_generate_lists_the_training_interpreters_real_wheels(tmp_path):
    doc = generate(tmp_path, "--python", cuda_python(), env=clean_env())
    env = doc["environment"]
    assert env["key_packages"] == {"nvidia-cuda-runtime-cu12": "12.9.79", "nvidia-nccl-cu12": "2.32.3"}
    assert doc["collection"]["probes"]["packages"]["status"] == "ok"


def test_version_after_a_kilobyte_of_headers(tmp_path):
    site = tmp_path / "site"
    meta = "Metadata-Version: 2.1\nName: late\n" + "Classifier: Topic :: Scientific/Engineering\n" * 60
    add_dist(site, "late", None, dirname="late-3.2.1.dist-info", metadata=meta + "Version: 3.2.1\n\nbody\n")
    assert _collect(tmp_path, site).data["environment"]["packages"] == {"late": "3.2.1"}


def test_generate_with_two_thousand_distributions_fits_the_cap(tmp_path):
    site = fake_site(tmp_path / "site", 2000)
    env = clean_env()
    env["PYTHONPATH"] += ":" + str(site)
    doc = generate(tmp_path, env=env)
    assert doc["environment"]["packages_count"] >= 2000
    assert doc["collection"]["probes"]["packages"]["status"] == "ok"
