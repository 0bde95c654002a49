"""The exporters of ``relaxrepro env`` on hand-built documents: what is pinned, what becomes a comment and
why, the base image and CUDA, and the conda and Dockerfile outputs read back (YAML, Dockerfile instructions)
naming the same pins as the requirements file. The real round trip through pip: tests/commands/test_env.py."""

from __future__ import annotations

import pytest

from relaxrepro.analyze import environment as E
from tests.helpers.envfiles import conda_pins, dockerfile_instructions, dockerfile_pins, requirement_pins
from tests.helpers.read import SHA_A, base_manifest, modified

DIGEST = "sha256:" + "0123456789abcdef" * 4


def _doc(**environment):
    doc = base_manifest()
    doc["environment"].update(environment)
    return doc


def _comments(text):
    return [line for line in text.splitlines() if line.startswith("# not pinned: ")]


def test_every_package_pinned_exactly_and_the_python_version_said():
    text, _ = E.export(_doc(), "requirements")
    assert requirement_pins(text) == ["flash_attn==2.5.8", "numpy==1.26.4", "ray==2.9.3", "torch==2.3.0+cu121"]
    lines = text.splitlines()
    assert lines[0].startswith(E.MARK + " (--format requirements) from run 20260101_000000_abcdef0")
    assert "# python 3.11.7 (cpython)" in lines
    assert "# CUDA 12.4 with driver 550.54.15 recorded: the host needs a driver that supports it" in lines


def test_a_git_install_is_pinned_at_its_commit():
    doc = _doc(packages={"mylib": "0.3.1", "six": "1.16.0"},
               vcs_installs={"mylib": {"url": "https://github.com/org/mylib.git", "vcs": "git", "commit": SHA_A,
                                       "requested_revision": "main", "editable": False}})
    text, _ = E.export(doc, "requirements")
    assert requirement_pins(text) == ["mylib @ git+https://github.com/org/mylib.git@" + SHA_A, "six==1.16.0"]


@pytest.mark.parametrize("url,why", [
    ("https://<internal-host>/org/mylib.git", "installed from git at https://<internal-host>/org/mylib.git, a URL "
     "that was redacted: give it yourself"),
    ("file://<HOME>/src/mylib", "installed from git at file://<HOME>/src/mylib, a URL that was redacted: give it "
     "yourself"),
    ("https://gitlab.example.com/<redacted>/x.git", "installed from git at https://gitlab.example.com/<redacted>/"
     "x.git, a URL that was redacted: give it yourself"),
    ("https://host/x.git' && rm -rf / #", "installed from git at https://host/x.git' && rm -rf / #, not a URL an "
     "installer reads"),
], ids=["internal-host", "home", "redacted-path", "shell-quote"])
def test_a_git_install_from_a_redacted_or_unusable_url_is_a_comment_never_unredacted(url, why):
    doc = _doc(packages={"mylib": "0.3.1"}, vcs_installs={"mylib": {"url": url, "vcs": "git", "commit": SHA_A}})
    for form in E.FORMATS:
        text, p = E.export(doc, form)
        assert _comments(text) == ["# not pinned: mylib 0.3.1: " + why], form
        assert p.lines == []
        assert "mylib @" not in text and "mylib==" not in text


def test_a_git_install_without_a_commit_is_a_comment():
    doc = _doc(packages={"mylib": "0.3.1"}, vcs_installs={"mylib": {"url": "https://h/x.git", "vcs": "git"}})
    text, _ = E.export(doc, "requirements")
    assert _comments(text) == ["# not pinned: mylib 0.3.1: installed from git+https://h/x.git without a recorded "
                               "commit"]


def test_an_editable_install_is_a_comment_that_says_where_it_came_from():
    doc = _doc(packages={"proj": "0.1.0", "six": "1.16.0"},
               editable={"proj": {"url": "file://<HOME>/src/proj", "editable": True}})
    text, _ = E.export(doc, "requirements")
    assert requirement_pins(text) == ["six==1.16.0"]
    assert _comments(text) == ["# not pinned: proj 0.1.0: installed editable from file://<HOME>/src/proj: install "
                               "its source tree (relaxrepro restore rebuilds recorded repos)"]


@pytest.mark.parametrize("url,line,why", [
    ("file:///tmp/wheels/mylib-0.3.1-py3-none-any.whl", None, "installed from file:///tmp/wheels/mylib-0.3.1-py3-"
     "none-any.whl, a file on the recording machine: no index gives it back"),
    ("file://<HOME>/src/mylib", None, "installed from file://<HOME>/src/mylib, a file on the recording machine: no "
     "index gives it back"),
    ("https://files.example.com/mylib-0.3.1.tar.gz", "mylib @ https://files.example.com/mylib-0.3.1.tar.gz", ""),
    ("https://<internal-host>/mylib-0.3.1.tar.gz", None, "installed from https://<internal-host>/mylib-0.3.1.tar.gz, "
     "a URL that was redacted: give it yourself"),
], ids=["local-wheel", "local-dir-redacted", "archive-url", "archive-url-redacted"])
def test_a_direct_install_is_pinned_by_its_url_or_said_to_be_local(url, line, why):
    doc = _doc(packages={"mylib": "0.3.1"}, direct_installs={"mylib": {"url": url, "editable": False}})
    text, p = E.export(doc, "requirements")
    assert requirement_pins(text) == ([line] if line else [])
    assert _comments(text) == (["# not pinned: mylib 0.3.1: " + why] if why else [])


def test_a_git_install_from_a_local_repository_is_pinned_and_said_to_be_local():
    doc = _doc(packages={"mylib": "0.3.1"},
               vcs_installs={"mylib": {"url": "file:///srv/git/mylib", "vcs": "git", "commit": SHA_A}})
    text, _ = E.export(doc, "requirements")
    assert requirement_pins(text) == ["mylib @ git+file:///srv/git/mylib@" + SHA_A]
    assert ("# installed from a git repository on the recording machine's disk (file:), found only where it is: "
            "mylib") in text.splitlines()


@pytest.mark.parametrize("name,version,why", [
    ("evil\nos-system==1", "1.0", "not a distribution name an installer reads"),
    ("six", "1.0\n--index-url http://evil", "not a version an installer reads"),
    ("six", "1.0 ; python_version<'3'", "not a version an installer reads"),
    ("six", "", "no version recorded"),
], ids=["newline-name", "newline-version", "marker-version", "empty-version"])
def test_a_hostile_name_or_version_never_adds_a_line(name, version, why):
    text, _ = E.export(_doc(packages={name: version, "attrs": "23.2.0"}), "requirements")
    assert requirement_pins(text) == ["attrs==23.2.0"]
    assert _comments(text)[0].endswith(": " + why)
    assert "--index-url" not in requirement_pins(text)


def test_conda_and_dockerfile_name_the_same_pins_as_requirements():
    doc = _doc(packages={"mylib": "0.3.1", "six": "1.16.0", "attrs": "23.2.0", "proj": "0.1"},
               vcs_installs={"mylib": {"url": "https://github.com/org/mylib.git", "vcs": "git", "commit": SHA_A}},
               editable={"proj": {"url": "file:///src/proj", "editable": True}})
    pins = requirement_pins(E.export(doc, "requirements")[0])
    assert len(pins) == 3
    env, conda = conda_pins(E.export(doc, "conda")[0])
    assert conda == pins
    assert env["name"] == "relaxrepro-20260101_000000_abcdef0" and env["channels"] == ["conda-forge"]
    assert env["dependencies"][:2] == ["python=3.11", "pip"]
    base, docker = dockerfile_pins(E.export(doc, "dockerfile")[0])
    assert docker == pins
    assert base == "python:3.11.7-slim"
    # the git install needs git in python:*-slim, installed before pip runs
    runs = [a for i, a in dockerfile_instructions(E.export(doc, "dockerfile")[0]) if i == "RUN"]
    assert runs[0].startswith("apt-get update && apt-get install -y --no-install-recommends git")


@pytest.mark.parametrize("image,expected,note", [
    ({"name": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": DIGEST, "digest_source": "docker"},
     "nvcr.io/nvidia/pytorch:24.05-py3@" + DIGEST, "the run ran in docker image nvcr.io/nvidia/pytorch:24.05-py3 "
     "(digest from docker)"),
    ({"name": "nvcr.io#nvidia/pytorch:24.05-py3"}, "nvcr.io/nvidia/pytorch:24.05-py3",
     "no digest was recorded, so the tag may name another image now"),
    ({"name": "docker://ghcr.io/org/img:1@" + DIGEST}, "ghcr.io/org/img:1@" + DIGEST, "(digest)"),
    ({"name": "pytorch-24.05.sif", "digest": DIGEST, "digest_source": "sif"}, "python:3.11.7-slim",
     "which FROM cannot name: start from the image it was built from"),
    ({"name": "<HOME>/images/x.sif"}, "python:3.11.7-slim", "which FROM cannot name"),
    ({"name": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": "sha256:short"}, "nvcr.io/nvidia/pytorch:24.05-py3",
     "no digest was recorded"),
], ids=["docker-digest", "pyxis-name", "docker-uri-digest", "sif", "redacted-sif-path", "bad-digest"])
def test_the_dockerfile_starts_from_the_recorded_image_by_digest_where_it_can(image, expected, note):
    runtime = "apptainer" if "sif" in image["name"] else "docker" if "docker" in str(image) else "enroot"
    doc = modified(_doc(packages={"six": "1.16.0"}), "container", {"runtime": runtime, "image": image})
    text, _ = E.export(doc, "dockerfile")
    assert dockerfile_pins(text) == (expected, ["six==1.16.0"])
    assert note in text
    conda_text, _ = E.export(doc, "conda")
    assert note in conda_text  # the conda file names the image it cannot start from


def test_truncated_package_list_is_said_in_the_file():
    doc = _doc(packages_truncated={"count": 4000, "sha256": "x"})
    text, p = E.export(doc, "requirements")
    assert "# incomplete: the manifest kept 4 of 4000 packages" in text and p.notes


@pytest.mark.parametrize("environment,message", [
    ({}, "the manifest records no package list (environment.packages)"),
    ({"packages": {}}, "the manifest records no package list (environment.packages)"),
    ({"packages": ["six"]}, "the manifest records no package list (environment.packages)"),
    ({"key_packages": {"torch": "2.3.0"}}, "the manifest records no package list (environment.packages); only "
     "environment.key_packages, too few to rebuild the environment from"),
], ids=["none", "empty", "list", "key-only"])
def test_no_package_list_is_not_exportable(environment, message):
    doc = base_manifest(environment=environment)
    with pytest.raises(E.NotExportable) as info:
        E.export(doc, "requirements")
    assert str(info.value) == message


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown format 'pip' .one of: requirements, conda, dockerfile.$"):
        E.export(base_manifest(), "pip")


def test_judge_passes_same_fails_other_and_missing_warns_extra():
    rec = _doc(packages={"six": "1.16.0", "attrs": "23.2.0", "mylib": "0.3"},
               vcs_installs={"mylib": {"url": "https://h/x.git", "vcs": "git", "commit": SHA_A}})
    here = _doc(packages={"six": "1.16.0", "attrs": "23.1.0", "mylib": "0.3", "extra": "1"},
                vcs_installs={"mylib": {"url": "https://h/x.git", "vcs": "git", "commit": "b" * 40}})
    report = E.judge(rec, here)
    rows = {i.item: (i.recorded, i.here, i.verdict) for i in report.items}
    assert rows["package six"] == ("1.16.0", "1.16.0", "PASS")
    assert rows["package attrs"] == ("23.2.0", "23.1.0", "FAIL")
    assert rows["package mylib"] == ("0.3 aaaaaaaaaaaa", "0.3 bbbbbbbbbbbb", "FAIL")
    assert rows["package extra"] == ("not installed", "1", "WARN")
    assert rows["python"] == ("3.11.7", "3.11.7", "PASS")
    assert report.failed()
    same = E.judge(rec, rec)
    assert not same.failed() and {i.verdict for i in same.items} == {"PASS", "INFO"}
    gone = E.judge(rec, _doc(packages={"six": "1.16.0"}))
    assert {i.item: i.here for i in gone.items}["package attrs"] == "not installed"


def test_judge_of_an_interpreter_without_packages_names_each_missing_one():
    rec = _doc(packages={"six": "1.16.0", "attrs": "23.2.0"})
    empty = base_manifest(environment={"python": {"version": "3.11.7"}},
                          collection={"probes": {"packages": {"status": "absent"}}})
    rows = {i.item: (i.here, i.verdict) for i in E.judge(rec, empty).items}
    assert rows["package six"] == rows["package attrs"] == ("not installed", "FAIL")
    failed = base_manifest(environment={"python": {"version": "3.11.7"}},
                           collection={"probes": {"packages": {"status": "timeout"}}})
    rows = {i.item: (i.here, i.verdict, i.note) for i in E.judge(rec, failed).items}
    assert rows["packages"] == ("-", "FAIL", "no package list could be read from the interpreter here")


def test_a_relax_manifest_says_its_list_is_only_relaxs_own_packages():
    doc = _doc(packages={"torch": "2.3.0", "ray": "2.9.3"})
    doc["created_at"] = "2026-01-01T00:00:00Z"  # a field only Relax writes
    text, p = E.export(doc, "requirements")
    assert requirement_pins(text) == ["ray==2.9.3", "torch==2.3.0"]
    assert ("# incomplete: a manifest written by Relax records only its own packages (relax, torch, ray, sglang, "
            "transformers, megatron-core, numpy), not the whole environment") in text.splitlines()
    here = _doc(packages={"torch": "2.3.0", "ray": "2.9.3", "six": "1.16.0"})
    report = E.judge(doc, here)
    assert "package six" not in {i.item for i in report.items} and not report.failed()


def test_cuda_from_wheels_is_said_to_come_with_them():
    doc = _doc(packages={"torch": "2.3.0", "nvidia-cudnn-cu12": "8.9.2.26"})
    for form in E.FORMATS:
        text, _ = E.export(doc, form)
        assert ("# CUDA 12.4 with driver 550.54.15 recorded: the host needs a driver that supports it; the CUDA "
                "libraries are the nvidia-* wheels below") in text.splitlines(), form
