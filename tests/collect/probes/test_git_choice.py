"""git's answers or the ``.git`` files, decided on captured results alone: ``choose_state`` (commit,
branch, dirty state), ``submodule_records`` and ``probe_status``, no git started.

Each case hands over what the collector would have captured: the HEAD read from ``.git``
(``gitfs.Head``) and git's answers (tests/fixtures/git/, real git 2.39 output) as the process
records the collector gets. test_git.py drives the same choices through real repos and fake gits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

import pytest

from relaxrepro.collect import gitfs
from relaxrepro.collect.probes import git as g
from relaxrepro.std.proc import ProcResult

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "git"
TOP = "/srv/train"

MERGE_RENAME = "073ba48406e6ec5337da7508a22cda5d169749f6"  # branch.oid of status-v2-merge-rename-2.39.z
DETACHED = "76c4c7ed9720ed64b143245aedcfdded882d900b"  # branch.oid of status-v2-detached-2.39.z
SUPERPROJECT = "e6759696ac5b7ba1d2b1621eda37854702857f82"  # branch.oid of status-v2-submodule-dirty-2.39.z
LIB_RECORDED = "d1836361932f7c027a2e8cd5835542e0672d968a"  # lib's gitlink in ls-tree-submodule-2.39.z
OLDER = "1d0d0ebb9ad22e01053350aa980d249d064ac40f"

STATUS_ARGS = ("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--no-renames",
               "--ignore-submodules=none")
DESCRIBE_ARGS = ("describe", "--tags", "--always", "--long", "--abbrev=12")


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def status(stdout: Union[str, bytes] = b"", *, rc: Optional[int] = 0, stderr: str = "",
           timed_out: bool = False, seconds: float = 0.0) -> ProcResult:
    """``git status`` as the collector captures it: ``stdout`` a fixture name or the bytes printed."""
    data = fixture(stdout) if isinstance(stdout, str) else stdout
    return ProcResult(argv=g.git_argv(TOP, *STATUS_ARGS), rc=None if timed_out else rc, stdout=data, stderr=stderr,
                      timed_out=timed_out, seconds=seconds)


def describe(stdout: bytes = b"", *, rc: int = 0, stderr: str = "") -> ProcResult:
    return ProcResult(argv=g.git_argv(TOP, *DESCRIBE_ARGS), rc=rc, stdout=stdout, stderr=stderr)


DUBIOUS = (FIXTURES / "dubious-ownership-2.39.stderr").read_text()


# ------------------------------------------------------------------------- the files answer
def test_git_missing_leaves_commit_and_branch_to_the_files() -> None:
    head = gitfs.Head(commit=MERGE_RENAME, branch="main")
    fields, problems, st = g.choose_state(head, git_found=False, bare=False)
    assert fields == {"commit": MERGE_RENAME, "branch": "main", "dirty": None,
                      "dirty_unknown_reason": "git not found on PATH: commit and branch read from .git files"}
    assert problems == ["git not found on PATH: dirty state unknown"] and st is None


def test_git_refusing_a_foreign_owned_repo_leaves_it_to_the_files() -> None:
    # A git that does not honour -c safe.directory=* refuses the repository of another uid; the
    # reason is the last line git printed, its advice.
    head = gitfs.Head(commit=MERGE_RENAME, branch="main")
    fields, problems, st = g.choose_state(head, git_found=True, bare=False, status=status(rc=128, stderr=DUBIOUS),
                                          describe=describe(rc=128, stderr=DUBIOUS))
    why = "git status: exit 128: git config --global --add safe.directory /tmp/foreign/repo"
    assert fields == {"commit": MERGE_RENAME, "branch": "main", "dirty": None, "dirty_unknown_reason": why}
    assert problems == [why] and st is None


def test_git_that_fails_says_why() -> None:
    fields, problems, _ = g.choose_state(gitfs.Head(commit=OLDER, branch="main"), git_found=True, bare=False,
                                         status=status(rc=128, stderr="fatal: something broke\n"))
    assert fields["dirty"] is None and fields["commit"] == OLDER
    assert problems == ["git status: exit 128: fatal: something broke"]


@pytest.mark.parametrize("answer,why", [
    (None, "git status did not finish in time"),
    (status(timed_out=True, seconds=1.5), "git status: timed out after 1.5 s"),
    (RuntimeError("boom"), "git status crashed: boom"),
], ids=["unfinished", "timed-out", "crashed"])
def test_git_that_hangs_or_crashes_leaves_it_to_the_files(answer: object, why: str) -> None:
    head = gitfs.Head(commit=OLDER, detached=True)
    fields, problems, st = g.choose_state(head, git_found=True, bare=False, status=answer, describe=None)
    assert fields == {"commit": OLDER, "detached": True, "dirty": None, "dirty_unknown_reason": why}
    assert problems == [why] and st is None


def test_hung_git_makes_the_probe_timeout() -> None:
    for answer in (None, status(timed_out=True, seconds=1.5)):
        fields, problems, _ = g.choose_state(gitfs.Head(commit=OLDER), git_found=True, bare=False, status=answer)
        assert g.probe_status({"train": fields}, ["train: " + p for p in problems]) == "timeout"


def test_git_printing_no_porcelain_is_not_believed() -> None:
    garbage = b"garbage: not porcelain\n1 .M N... x y\n"
    fields, problems, st = g.choose_state(gitfs.Head(commit=OLDER, branch="main"), git_found=True, bare=False,
                                          status=status(garbage), describe=describe(garbage))
    assert fields["commit"] == OLDER and fields["branch"] == "main"
    assert fields["dirty"] is None and fields["dirty_unknown_reason"] == "git status printed no porcelain v2 output"
    assert fields["describe"] is None  # garbage is refused (and pruned from the record)
    assert problems == ["git status printed no porcelain v2 output"] and st is None


def test_describe_without_status_is_checked_against_the_files_commit() -> None:
    head = gitfs.Head(commit=MERGE_RENAME, branch="main")
    fields, _, _ = g.choose_state(head, git_found=True, bare=False, status=None,
                                  describe=describe(b"v1.0-3-g073ba48406e6\n"))
    assert fields["describe"] == "v1.0-3-g073ba48406e6"


def test_bare_repo_has_no_dirty_state_but_a_describe() -> None:
    fields, problems, st = g.choose_state(gitfs.Head(commit=MERGE_RENAME, branch="main"), git_found=True, bare=True,
                                          describe=describe(b"073ba48406e6\n"))
    assert fields == {"commit": MERGE_RENAME, "branch": "main", "dirty": None,
                      "dirty_unknown_reason": "bare repository: no working tree", "describe": "073ba48406e6"}
    assert problems == [] and st is None


# --------------------------------------------------------------------------- git's view wins
def test_git_wins_over_files_that_cannot_read_reftable_refs() -> None:
    head = gitfs.Head(reason="refs are in reftable format; reading them needs git")
    fields, problems, st = g.choose_state(head, git_found=True, bare=False,
                                          status=status("status-v2-merge-rename-2.39.z"),
                                          describe=describe(b"v1.0-3-g073ba48406e6\n"))
    assert fields == {"commit": MERGE_RENAME, "branch": "main", "dirty": True, "describe": "v1.0-3-g073ba48406e6",
                      "upstream": {"name": "origin/main", "ahead": 1, "behind": 0}}
    assert problems == ["refs are in reftable format; reading them needs git"]  # still said
    assert st is not None and st["untracked"] == [b"caf\xe9.txt", b"untracked file.txt"]


def test_git_says_detached_where_the_files_said_a_branch() -> None:
    # HEAD moved between the file read and git status: git's later answer is the one kept.
    head = gitfs.Head(commit=OLDER, branch="main")
    fields, problems, _ = g.choose_state(head, git_found=True, bare=False, status=status("status-v2-detached-2.39.z"))
    assert fields == {"commit": DETACHED, "detached": True, "dirty": False}
    assert problems == []


def test_describe_naming_another_commit_than_git_status_is_refused() -> None:
    fields, _, _ = g.choose_state(gitfs.Head(commit=OLDER, branch="main"), git_found=True, bare=False,
                                  status=status("status-v2-merge-rename-2.39.z"),
                                  describe=describe(b"v1.0-3-g1d0d0ebb9ad2\n"))
    assert fields["commit"] == MERGE_RENAME and fields["describe"] is None


def test_repo_without_commits_keeps_the_files_unborn_branch() -> None:
    head = gitfs.Head(branch="main", unborn=True)
    fields, _, st = g.choose_state(head, git_found=True, bare=False, status=status("status-v2-initial-2.39.z"),
                                   describe=describe(rc=128, stderr="fatal: bad revision 'HEAD'\n"))
    assert fields == {"commit": None, "branch": "main", "unborn": True, "dirty": True}
    assert [c["xy"] for c in st["changed"]] == ["A."]


# --------------------------------------------------------------------------------- submodules
def test_submodule_with_changes_inside() -> None:
    _, _, st = g.choose_state(gitfs.Head(commit=SUPERPROJECT, branch="topic"), git_found=True, bare=False,
                              status=status("status-v2-submodule-dirty-2.39.z"))
    subs = g.submodule_records([("lib", "lib")], {"lib": gitfs.Head(commit=LIB_RECORDED, detached=True)},
                               g.parse_ls_tree(fixture("ls-tree-submodule-2.39.z")), st["changed"])
    assert subs == [{"path": "lib", "recorded_sha": LIB_RECORDED, "checked_out_sha": LIB_RECORDED,
                     "initialized": True, "dirty": True, "untracked": True}]


def test_uninitialized_submodule_and_unknown_status() -> None:
    modules = [("lib", "lib"), ("vendor", "third_party/vendor")]
    checked_out = {"lib": gitfs.Head(commit=OLDER, detached=True), "third_party/vendor": None}
    subs = g.submodule_records(modules, checked_out, {}, None)
    assert subs == [
        {"path": "lib", "recorded_sha": None, "checked_out_sha": OLDER, "initialized": True, "dirty": None},
        {"path": "third_party/vendor", "recorded_sha": None, "checked_out_sha": None, "initialized": False,
         "dirty": None},
    ]


# ---------------------------------------------------------------------------------- the probe
@pytest.mark.parametrize("code,problems,expected", [
    ({"src": {"commit": None, "dirty": None, "absent_reason": "no .git"}}, ["src: no .git"], "absent"),
    ({"a": {"commit": OLDER, "dirty": None}}, ["a: git status did not finish in time"], "timeout"),
    ({"a": {"commit": OLDER, "dirty": None}}, ["a: git not found on PATH: dirty state unknown"], "partial"),
    ({"a": {"commit": OLDER, "dirty": None}}, [], "partial"),
    ({"a": {"commit": OLDER, "dirty": False}}, [], "ok"),
], ids=["all-absent", "hung", "git-missing", "dirty-unknown", "ok"])
def test_probe_status(code: dict, problems: list, expected: str) -> None:
    assert g.probe_status(code, problems) == expected
