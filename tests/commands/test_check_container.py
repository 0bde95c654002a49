"""``check`` of a run recorded in a container, end to end: ``generate`` in a (stand-in) Apptainer image named
by ``RELAXREPRO_IMAGE``, then ``check`` on this host with and without that image."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.common import clean_env, generate, run_cli

NAME = "nvcr.io/nvidia/pytorch:24.05-py3"
DIGEST = "sha256:" + "5" * 64


@pytest.fixture
def recorded(tmp_path):
    sif = tmp_path / "images" / "pytorch-24.05.sif"
    sif.parent.mkdir()
    sif.write_bytes(os.urandom(1 << 20))
    env = clean_env(APPTAINER_CONTAINER=str(sif), APPTAINER_NAME=sif.name, RELAXREPRO_IMAGE=NAME + "@" + DIGEST,
                    RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))
    doc = generate(tmp_path, env=env, cwd=tmp_path)
    return tmp_path / "m_0.json", doc, sif


def _check(manifest, **env):
    res = run_cli("check", str(manifest), "--json", env=clean_env(**env))
    report = json.loads(res.stdout)
    row = [i for i in report["items"] if i["item"] == "container"]
    return res.returncode, row[0]


def test_the_manifest_records_the_image_the_user_named_and_says_so(recorded):
    _, doc, sif = recorded
    image = doc["container"]["image"]
    assert doc["container"]["runtime"] == "apptainer"
    assert (image["name"], image["digest"], image["digest_source"]) == (NAME, DIGEST, "RELAXREPRO_IMAGE")
    assert image["path"] == str(sif) and image["size_bytes"] == 1 << 20
    warnings = doc["collection"]["probes"]["container"]["warnings"]
    assert warnings == ["container image from RELAXREPRO_IMAGE=%s@%s (the runtime said name %s)" % (NAME, DIGEST,
                                                                                                   sif.name)]
    assert not (sif.parent.parent / "cache" / "fingerprints.sqlite").exists()  # the digest was given: not hashed


def test_check_on_a_host_without_that_image_fails_the_container_row(recorded):
    code, row = _check(recorded[0])
    assert code == 1
    assert row["verdict"] == "FAIL" and row["recorded"] == "%s@%s (apptainer)" % (NAME, DIGEST[:19])


def test_check_with_the_same_digest_here_passes(recorded):
    code, row = _check(recorded[0], RELAXREPRO_IMAGE=NAME + "@" + DIGEST)
    assert row["verdict"] == "PASS", row
    assert code == 0


def test_check_with_the_same_name_and_another_digest_warns(recorded):
    code, row = _check(recorded[0], RELAXREPRO_IMAGE=NAME + "@sha256:" + "6" * 64)
    assert (row["verdict"], row["note"]) == ("WARN", "same name, other digest")
    assert code == 0


def test_check_with_another_image_fails(recorded):
    code, row = _check(recorded[0], RELAXREPRO_IMAGE="nvcr.io/nvidia/pytorch:23.10-py3@sha256:" + "6" * 64)
    assert (row["verdict"], row["note"], code) == ("FAIL", "another image", 1)


def test_diff_shows_a_change_of_image_digest(recorded, tmp_path):
    manifest, doc, _ = recorded
    other = json.loads(json.dumps(doc))
    other["container"]["image"]["digest"] = "sha256:" + "6" * 64
    other["run_id"] = doc["run_id"][:-1] + ("0" if doc["run_id"][-1] != "0" else "1")
    (tmp_path / "other.json").write_text(json.dumps(other))
    res = run_cli("diff", str(manifest), str(tmp_path / "other.json"))
    assert res.returncode == 1
    assert "  ~ container.image.digest  %s -> sha256:%s" % (DIGEST, "6" * 64) in res.stdout.splitlines()


def test_show_names_the_image_by_digest(recorded):
    res = run_cli("show", str(recorded[0]))
    assert res.returncode == 0, res.stderr
    assert "  container  %s@%s (apptainer)" % (NAME, DIGEST[:19]) in res.stdout.splitlines()
