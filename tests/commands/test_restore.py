"""``relaxrepro restore``: the exact source tree, byte for byte, without touching the source repo.

The patches are made by ``git diff --binary`` from real dirty repositories (binary change, deleted
file, mode change, untracked file) and written into hand-built manifests, inline or as sidecars.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers.common import git, make_repo, run_cli
from tests.helpers.read import base_manifest, binary_patch, head, patch_record, tree_bytes, write_json


def _dirty_repo_with_submodule(tmp_path):
    sub = make_repo(tmp_path / "sub", {"lib.c": "int x = 1;\n"})
    first = head(sub)
    (sub / "lib.c").write_text("int x = 2;\n")
    git(sub, "commit", "-qam", "second")
    main = make_repo(tmp_path / "src", {"train.py": "print(1)\n", "data.bin": "", "old.txt": "bye\n",
                                        "run.sh": "echo hi\n"})
    (main / "data.bin").write_bytes(bytes(range(256)) * 4)
    git(main, "add", "-A")
    git(main, "commit", "-qm", "binary")
    git(main, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", str(sub), "third_party/sub")
    git(main, "commit", "-qm", "submodule")
    git(main / "third_party" / "sub", "checkout", "-q", first)  # checked out at another SHA than recorded
    # the uncommitted state: text edit, binary edit, deletion, mode change, new untracked file
    (main / "train.py").write_text("print(2)\n# second line\n")
    (main / "data.bin").write_bytes(bytes(range(255, -1, -1)) * 4 + b"\0tail")
    (main / "old.txt").unlink()
    os.chmod(main / "run.sh", 0o755)
    (main / "notes").mkdir()
    (main / "notes" / "new.txt").write_text("untracked\n")
    return main, sub, first


def _simple_dirty(tmp_path):
    """A dirty repo without submodules, for the refusals (cheaper to build)."""
    main = make_repo(tmp_path / "src", {"train.py": "print(1)\n"})
    (main / "train.py").write_text("print(2)\n# second line\n")
    return main, None, None


def _manifest(tmp_path, main, first, body, *, inline=True, sidecar="manifest_r.src.patch"):
    doc = base_manifest()
    patch = patch_record(body, ["train.py", "data.bin", "old.txt", "run.sh", "notes/new.txt"], inline=inline,
                         sidecar=None if inline else sidecar)
    doc["code"] = {"src": {"path": str(main), "commit": head(main), "dirty": True, "patch": patch}}
    if first:
        doc["code"]["src"]["submodules"] = [{"path": "third_party/sub", "recorded_sha": git(
            main, "rev-parse", "HEAD:third_party/sub").strip(), "checked_out_sha": first, "dirty": False}]
    return write_json(tmp_path / "manifest.json", doc), doc


def _state(repo):
    return (tree_bytes(repo), git(repo, "status", "--porcelain"), head(repo), git(repo, "stash", "list"))


@pytest.mark.parametrize("inline", [True, False], ids=["inline-patch", "sidecar-patch"])
def test_restore_rebuilds_the_tree_byte_for_byte(tmp_path, inline):
    main, sub, first = _dirty_repo_with_submodule(tmp_path)
    body = binary_patch(main)
    assert b"GIT binary patch" in body and b"new file mode" in body
    m, doc = _manifest(tmp_path, main, first, body, inline=inline)
    if not inline:
        (tmp_path / "manifest_r.src.patch").write_bytes(body)
    before = _state(main)
    into = tmp_path / "restored"
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "%s\n" % (into / "src")
    assert tree_bytes(into / "src") == tree_bytes(main)
    assert head(into / "src" / "third_party" / "sub") == first
    assert _state(main) == before  # the source repo is untouched


def test_sidecar_altered_is_refused_and_nothing_is_left(tmp_path):
    main, _, first = _simple_dirty(tmp_path)
    body = binary_patch(main)
    m, _ = _manifest(tmp_path, main, first, body, inline=False)
    (tmp_path / "manifest_r.src.patch").write_bytes(body.replace(b"second line", b"SECOND line"))
    into = tmp_path / "restored"
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 1
    assert res.stderr.startswith("relaxrepro restore: repo src: the patch sidecar %s does not match its recorded "
                                 "sha256" % (tmp_path / "manifest_r.src.patch"))
    assert not into.exists()


def test_sidecar_missing_is_refused(tmp_path):
    main, _, first = _simple_dirty(tmp_path)
    m, _ = _manifest(tmp_path, main, first, binary_patch(main), inline=False)
    into = tmp_path / "restored"
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 1
    assert res.stderr == "relaxrepro restore: repo src: patch sidecar %s: No such file or directory\n" % (
        tmp_path / "manifest_r.src.patch")
    assert not into.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs, /dev/zero")
@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero"])
def test_sidecar_that_is_a_fifo_or_a_device_is_refused_unread(tmp_path, kind):
    # open() on the FIFO waited forever; /dev/zero was read until memory ran out.
    main, _, first = _simple_dirty(tmp_path)
    m, _ = _manifest(tmp_path, main, first, binary_patch(main), inline=False)
    sidecar = tmp_path / "manifest_r.src.patch"
    if kind == "fifo":
        os.mkfifo(str(sidecar))
    else:
        sidecar.symlink_to("/dev/zero")
    into = tmp_path / "restored"
    res = run_cli("restore", str(m), "--into", str(into))  # run_cli's timeout is the hang guard
    assert res.returncode == 1
    assert res.stderr == "relaxrepro restore: repo src: patch sidecar %s: not a regular file\n" % sidecar
    assert not into.exists()


@pytest.mark.parametrize("name", ["../escape.patch", "/etc/passwd", "sub/x.patch", "..", "a..b.patch"])
def test_sidecar_name_escaping_its_directory_is_refused(tmp_path, name):
    main, _, first = _simple_dirty(tmp_path)
    body = binary_patch(main)
    m, _ = _manifest(tmp_path, main, first, body, inline=False, sidecar=name)
    (tmp_path / "escape.patch").write_bytes(body)  # even when the file it points at would verify
    res = run_cli("restore", str(m), "--into", str(tmp_path / "restored"))
    assert res.returncode == 1
    assert res.stderr == ("relaxrepro restore: patch sidecar name %r is not a plain file name beside the manifest; "
                          "refused\n" % name)


def test_non_empty_target_is_refused_and_left_alone(tmp_path):
    main, _, first = _simple_dirty(tmp_path)
    m, _ = _manifest(tmp_path, main, first, binary_patch(main))
    into = tmp_path / "restored"
    into.mkdir()
    (into / "keep.txt").write_text("mine")
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 1
    assert res.stderr == "relaxrepro restore: %s is not empty; restore only writes into a new or empty directory\n" % (
        into)
    assert sorted(p.name for p in into.iterdir()) == ["keep.txt"]


def test_empty_existing_target_is_used(tmp_path):
    repo = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    doc = base_manifest(code={"src": {"path": str(repo), "commit": head(repo), "dirty": False}})
    m = write_json(tmp_path / "m.json", doc)
    into = tmp_path / "empty"
    into.mkdir()
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 0, res.stderr
    assert tree_bytes(into / "src") == tree_bytes(repo)


def test_from_option_and_missing_source(tmp_path):
    repo = make_repo(tmp_path / "moved", {"a.txt": "a\n"})
    doc = base_manifest(code={"src": {"path": "/nonexistent/src", "commit": head(repo), "dirty": False}})
    m = write_json(tmp_path / "m.json", doc)
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 1
    assert res.stderr == ("relaxrepro restore: repo src: no local repository at /nonexistent/src; "
                          "give --from src=PATH\n")
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"), "--from", "src=%s" % repo)
    assert res.returncode == 0, res.stderr
    assert tree_bytes(tmp_path / "out" / "src") == tree_bytes(repo)
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out2"), "--from", "other=%s" % repo)
    assert res.returncode == 1 and "--from other: the manifest records no repo of that name" in res.stderr


def test_commit_missing_from_source_cleans_up(tmp_path):
    repo = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    doc = base_manifest(code={"src": {"path": str(repo), "commit": "0123456789" * 4, "dirty": False}})
    m = write_json(tmp_path / "m.json", doc)
    into = tmp_path / "out"
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 1
    assert res.stderr.startswith("relaxrepro restore: repo src: commit 012345678901 is not in %s" % repo)
    assert not into.exists()


def test_dirty_without_a_patch_is_refused(tmp_path):
    repo = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    doc = base_manifest(code={"src": {"path": str(repo), "commit": head(repo), "dirty": True}})
    m = write_json(tmp_path / "m.json", doc)
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 1
    assert res.stderr == ("relaxrepro restore: repo src had uncommitted changes but no patch was recorded: its "
                          "exact tree cannot be rebuilt\n")


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden"])
def test_unsafe_repo_names_are_refused(tmp_path, name):
    repo = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    m = write_json(tmp_path / "m.json", base_manifest(code={name: {"path": str(repo), "commit": head(repo)}}))
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 1 and "cannot be a directory name; refused" in res.stderr
    assert not (tmp_path / "evil").exists()


def test_a_patch_that_was_not_stored_says_why(tmp_path):
    repo = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    rec = {"sha256": "9" * 64, "files": ["a.txt"], "not_stored": "File too large (EFBIG)"}
    m = write_json(tmp_path / "m.json", base_manifest(code={"src": {"path": str(repo), "commit": head(repo),
                                                                    "dirty": True, "patch": rec}}))
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 1
    assert res.stderr == ("relaxrepro restore: repo src: the patch was not stored (File too large (EFBIG)): its "
                          "exact tree cannot be rebuilt\n")
    assert not (tmp_path / "out").exists()


def test_redacted_patch_restores_with_a_note(tmp_path):
    repo = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    (repo / "a.txt").write_text("TOKEN=<redacted>\n")
    body = binary_patch(repo)
    rec = patch_record(body, ["a.txt"])
    rec.update(redacted_lines=[1], restores_exactly=False, sha256="9" * 64)  # original differs; stored verifies
    m = write_json(tmp_path / "m.json", base_manifest(code={"src": {"path": str(repo), "commit": head(repo),
                                                                    "dirty": True, "patch": rec}}))
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert "the patch had redacted lines; they hold placeholders" in res.stderr
    assert (tmp_path / "out" / "src" / "a.txt").read_text() == "TOKEN=<redacted>\n"


def test_restore_of_a_generated_manifest(tmp_path):
    main, _, _ = _dirty_repo_with_submodule(tmp_path)
    out = tmp_path / "gen.json"
    res = run_cli("generate", "--output", str(out), cwd=main)
    assert res.returncode == 0, res.stderr
    recorded = json.loads(out.read_text())["code"]
    repo = next(iter(recorded.values()))
    into = tmp_path / "restored"
    res = run_cli("restore", str(out), "--into", str(into))
    if not isinstance(repo.get("patch"), dict):
        # The foundation git probe records no patch: a dirty tree is refused, never half-rebuilt.
        assert res.returncode == 1 and "no patch was recorded" in res.stderr
        assert not into.exists()
        return
    assert res.returncode == 0, res.stderr
    assert tree_bytes(into / next(iter(recorded))) == tree_bytes(main)


def test_submodule_deinitialised_in_the_source_comes_from_its_module_store(tmp_path):
    sub = make_repo(tmp_path / "sub", {"lib.c": "int x = 1;\n"})
    main = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    git(main, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", str(sub), "third_party/sub")
    git(main, "commit", "-qm", "submodule")
    git(main, "submodule", "--quiet", "deinit", "-f", "third_party/sub")
    assert not (main / "third_party" / "sub" / "lib.c").exists()
    doc = base_manifest(code={"src": {"path": str(main), "commit": head(main), "dirty": False, "submodules": [
        {"path": "third_party/sub", "recorded_sha": head(sub), "checked_out_sha": None}]}})
    m = write_json(tmp_path / "m.json", doc)
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "src" / "third_party" / "sub" / "lib.c").read_text() == "int x = 1;\n"


def test_clean_repo_with_an_empty_patch_record(tmp_path):
    import hashlib

    repo = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    patch = {"sha256": hashlib.sha256(b"").hexdigest(), "size": 0, "files": []}
    m = write_json(tmp_path / "m.json", base_manifest(code={"src": {"path": str(repo), "commit": head(repo),
                                                                    "dirty": False, "patch": patch}}))
    res = run_cli("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert tree_bytes(tmp_path / "out" / "src") == tree_bytes(repo)


def _submodule_swapped_for_a_link(tmp_path, outside):
    """A real repo with a submodule at third/sub, and a real patch (``git diff --binary``) that removes
    the submodule and puts the symlink ``third -> outside`` in its place."""
    sub = make_repo(tmp_path / "sub", {"lib.c": "int x = 1;\n"})
    main = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    git(main, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", str(sub), "third/sub")
    git(main, "commit", "-qm", "submodule")
    evil = tmp_path / "evil"
    git(tmp_path, "clone", "-q", str(main), str(evil))
    git(evil, "rm", "-q", "third/sub")
    if (evil / "third").is_dir():
        (evil / "third").rmdir()
    os.symlink(str(outside), str(evil / "third"))
    git(evil, "add", "third")
    body = subprocess.run(["git", "diff", "--cached", "--binary", "HEAD"], cwd=str(evil), capture_output=True,
                          check=True).stdout
    assert b"new file mode 120000" in body and b"-Subproject commit" in body
    doc = base_manifest(code={"src": {
        "path": str(main), "commit": head(main), "dirty": True, "patch": patch_record(body, [".gitmodules", "third"]),
        "submodules": [{"path": "third/sub", "recorded_sha": head(sub), "checked_out_sha": head(sub)}]}})
    return write_json(tmp_path / "m.json", doc)


def test_a_submodule_path_through_a_link_the_patch_made_is_refused_and_nothing_is_written_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    m = _submodule_swapped_for_a_link(tmp_path, outside)
    into = tmp_path / "restored"
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 2, res.stderr
    assert res.stderr == ("relaxrepro restore: %s is a symbolic link (to %s): writing %s through it would leave %s; "
                          "refused\n" % (into / "src" / "third", outside, into / "src" / "third" / "sub", into))
    assert list(outside.iterdir()) == []
    assert not into.exists()


def test_a_link_in_the_committed_tree_is_not_followed_either(tmp_path):
    """The commit itself holds ``third -> outside`` where the manifest puts a submodule (which the source
    repo once had: its object store is still in .git/modules)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    sub = make_repo(tmp_path / "sub", {"lib.c": "int x = 1;\n"})
    main = make_repo(tmp_path / "src", {"a.txt": "a\n"})
    git(main, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", str(sub), "third/sub")
    git(main, "commit", "-qm", "submodule")
    git(main, "rm", "-q", "third/sub")
    if (main / "third").is_dir():
        (main / "third").rmdir()
    os.symlink(str(outside), str(main / "third"))
    git(main, "add", "third")
    git(main, "commit", "-qm", "link")
    doc = base_manifest(code={"src": {"path": str(main), "commit": head(main), "dirty": False, "submodules": [
        {"path": "third/sub", "recorded_sha": head(sub), "checked_out_sha": head(sub)}]}})
    m = write_json(tmp_path / "m.json", doc)
    into = tmp_path / "empty"
    into.mkdir()
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 2, res.stderr
    assert res.stderr == ("relaxrepro restore: %s is a symbolic link (to %s): writing %s through it would leave %s; "
                          "refused\n" % (into / "src" / "third", outside, into / "src" / "third" / "sub", into))
    assert list(outside.iterdir()) == []
    assert list(into.iterdir()) == []  # the directory given stays, emptied of what restore made


def test_a_patch_not_taken_in_full_is_refused_unless_allowed(tmp_path):
    """A 6 MB diff is over git's capture limit: the manifest holds the untracked file, not the edit."""
    committed = ("x" * 1000 + "\n") * 3000
    main = make_repo(tmp_path / "src", {"big.txt": committed})
    (main / "big.txt").write_text(("y" * 1000 + "\n") * 3000)
    (main / "new.txt").write_text("untracked\n")
    m = tmp_path / "m.json"
    res = run_cli("generate", "--output", str(m), cwd=main)
    assert res.returncode == 0, res.stderr
    into = tmp_path / "restored"
    res = run_cli("restore", str(m), "--into", str(into))
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro restore: repo src: the recorded patch is incomplete (size: git diff output "
                          "over the 4 MiB capture limit): the exact tree cannot be rebuilt; --allow-incomplete "
                          "restores the commit with the part that was recorded\n")
    assert not into.exists()
    res = run_cli("restore", str(m), "--into", str(into), "--allow-incomplete")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ("relaxrepro restore: note: repo src: the patch is incomplete (size: git diff output over "
                          "the 4 MiB capture limit): the uncommitted changes to tracked files are missing from the "
                          "restored tree\n")
    assert (into / "src" / "big.txt").read_text() == committed
    assert (into / "src" / "new.txt").read_text() == "untracked\n"
