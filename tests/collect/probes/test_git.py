"""The git probe on real repositories built in temp dirs; every dirty case round-trips."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

from relaxrepro.manifest.model import CAP_BYTES
from tests.helpers.common import clean_env, fake_tool, generate, git, make_repo, run_cli, validate_manifest
from tests.helpers.git import (
    conflicting,
    env_for,
    git_with_slow_diff,
    only,
    probe_doc,
    round_trip,
    status,
    stored_patch,
)


def test_clean_repo_has_commit_branch_and_no_patch(tmp_path, repo):
    rec = only(probe_doc(tmp_path, repo))
    assert rec["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert rec["branch"] == "main" and "detached" not in rec
    assert rec["dirty"] is False
    assert rec["untracked"] == {"count": 0, "files": [], "truncated": False}
    assert rec["describe"] == rec["commit"][:12]
    assert rec["found_by"] == ["cwd"]
    assert rec["shallow"] is False and rec["worktree"] is False and rec["bare"] is False
    assert "patch" not in rec


def test_describe_names_the_nearest_tag(tmp_path, repo):
    git(repo, "tag", "v1.0")
    (repo / "x.py").write_text("x\n")
    git(repo, "add", "x.py")
    git(repo, "commit", "-qm", "x")
    rec = only(probe_doc(tmp_path, repo))
    assert rec["describe"] == "v1.0-1-g" + rec["commit"][:12]


def test_staged_and_unstaged_changes_round_trip(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "a = 1\n", "b.py": "b = 1\n", "gone.py": "x\n"})
    (repo / "a.py").write_text("a = 2\n")
    git(repo, "add", "a.py")
    (repo / "a.py").write_text("a = 3\n")  # staged and then changed again
    (repo / "b.py").write_text("b = 2\n")
    git(repo, "rm", "-q", "gone.py")
    (repo / "added.py").write_text("new = 1\n")
    git(repo, "add", "added.py")
    (repo / "added.py").write_text("new = 2\n")  # a staged new file, changed again
    (repo / "b.py").chmod(0o755)
    rec = only(probe_doc(tmp_path, repo))
    assert rec["dirty"] is True
    patch = rec["patch"]
    assert sorted(patch["files"]) == ["a.py", "added.py", "b.py", "gone.py"]
    assert patch["restores_exactly"] is True and patch["redacted_lines"] == []
    assert patch["sha256"] == patch["stored_sha256"] == hashlib.sha256(stored_patch(patch)).hexdigest()
    assert patch["size"] == len(stored_patch(patch))
    round_trip(repo, rec, tmp_path / "clone")


def test_untracked_files_are_counted_listed_and_embedded(tmp_path, repo):
    (repo / "notes.txt").write_text("first\nsecond")  # no final newline
    (repo / "pkg").mkdir()
    (repo / "pkg" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "pkg" / "run.sh").chmod(0o755)
    (repo / "pkg" / "empty.py").write_text("")
    os.symlink("notes.txt", str(repo / "link"))
    (repo / "weights.bin").write_bytes(b"\x00\x01\x02" * 100)
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "train.log").write_text("ignored\n")
    rec = only(probe_doc(tmp_path, repo))
    assert rec["dirty"] is False  # untracked files alone are not tracked changes
    assert rec["untracked"]["count"] == 6
    sizes = {f["path"]: f["size"] for f in rec["untracked"]["files"]}
    assert sizes["weights.bin"] == 300 and sizes["notes.txt"] == 12 and "train.log" not in sizes
    patch = rec["patch"]
    assert patch["binary_untracked"] == [{"path": "weights.bin", "size": 300}]
    assert patch["restores_exactly"] is False  # the binary file is listed, not embedded
    assert set(patch["files"]) == {"notes.txt", "pkg/run.sh", "pkg/empty.py", "link", ".gitignore"}
    round_trip(repo, rec, tmp_path / "clone")


def test_conflicted_merge_round_trips_with_its_markers(tmp_path):
    repo = make_repo(tmp_path / "repo", {"c.txt": "base\n", "other.txt": "o\n"})
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "c.txt").write_text("side\n")
    git(repo, "commit", "-qam", "side")
    git(repo, "checkout", "-q", "main")
    (repo / "c.txt").write_text("main\n")
    git(repo, "commit", "-qam", "main")
    with pytest.raises(subprocess.CalledProcessError):  # the conflict stops the merge half-way
        git(repo, "merge", "side")
    (repo / "other.txt").write_text("also edited\n")
    rec = only(probe_doc(tmp_path, repo))
    assert rec["dirty"] is True and "<<<<<<< HEAD" in rec["patch"]["text"]
    round_trip(repo, rec, tmp_path / "clone")


def test_detached_head(tmp_path, repo):
    git(repo, "checkout", "-q", "--detach")
    rec = only(probe_doc(tmp_path, repo))
    assert rec["detached"] is True and "branch" not in rec


def test_upstream_with_ahead_and_behind_and_remote_without_credentials(tmp_path, repo):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    (repo / "up.txt").write_text("upstream\n")
    git(repo, "add", "up.txt")
    git(repo, "commit", "-qm", "upstream moved")
    git(clone, "fetch", "-q")
    (clone / "mine.txt").write_text("local\n")
    git(clone, "add", "mine.txt")
    git(clone, "commit", "-qm", "local work")
    git(clone, "remote", "add", "mirror", "https://x-access-token:ghs_abcdefabcdefabcdefabcdefabcdefabcdef@github.com/o/r.git")
    rec = only(probe_doc(tmp_path, clone))
    assert rec["upstream"] == {"name": "origin/main", "ahead": 1, "behind": 1}
    assert rec["remotes"]["mirror"] == "https://github.com/o/r.git"
    assert rec["remotes"]["origin"] == str(repo)


def test_shallow_clone_round_trips(tmp_path):
    src = make_repo(tmp_path / "src", {"a.txt": "1\n"})
    (src / "a.txt").write_text("2\n")
    git(src, "commit", "-qam", "second")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", "file://%s" % src, str(shallow))
    (shallow / "a.txt").write_text("3\n")
    rec = only(probe_doc(tmp_path, shallow))
    assert rec["shallow"] is True and rec["dirty"] is True
    round_trip(shallow, rec, tmp_path / "clone")


def test_linked_worktree_round_trips(tmp_path, repo):
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(wt))
    (wt / "README.md").write_text("changed in the worktree\n")
    rec = only(probe_doc(tmp_path, wt))
    assert rec["worktree"] is True and rec["branch"] == "feature" and rec["dirty"] is True
    assert rec["path"] == str(wt)
    round_trip(wt, rec, tmp_path / "clone")


def test_submodule_with_changes_inside_gets_its_own_record(tmp_path):
    lib = make_repo(tmp_path / "lib", {"lib.py": "v = 1\n"})
    top = make_repo(tmp_path / "top", {"main.py": "import lib\n"})
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "third_party/lib")
    git(top, "commit", "-qm", "add lib")
    recorded = git(top / "third_party" / "lib", "rev-parse", "HEAD").strip()
    (top / "third_party" / "lib" / "lib.py").write_text("v = 2\n")
    (top / "third_party" / "lib" / "new.py").write_text("n = 1\n")
    doc = probe_doc(tmp_path, top)
    rec = doc["code"]["top"]
    assert rec["submodules"] == [{"path": "third_party/lib", "recorded_sha": recorded, "checked_out_sha": recorded,
                                  "initialized": True, "dirty": True, "untracked": True,
                                  "repo": "top/third_party/lib"}]
    assert rec["dirty"] is True
    assert "patch" not in rec  # the superproject itself has no change of its own
    inner = doc["code"]["top/third_party/lib"]
    assert inner["found_by"] == ["submodule"] and inner["commit"] == recorded
    assert sorted(inner["patch"]["files"]) == ["lib.py", "new.py"]
    round_trip(top / "third_party" / "lib", inner, tmp_path / "clone")


def test_dirty_submodule_also_on_pythonpath_is_recorded_once(tmp_path):
    lib = make_repo(tmp_path / "lib")
    top = make_repo(tmp_path / "top")
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "megatron")
    git(top, "commit", "-qm", "add")
    (top / "megatron" / "README.md").write_text("patched\n")
    doc = probe_doc(tmp_path, top, env=env_for(tmp_path, PYTHONPATH=str(top / "megatron")))
    assert sorted(doc["code"]) == ["megatron", "top"]
    assert doc["code"]["top"]["submodules"][0]["repo"] == "megatron"
    assert doc["code"]["megatron"]["found_by"] == ["pythonpath"] and doc["code"]["megatron"]["dirty"] is True


def test_uninitialized_submodule_is_listed(tmp_path):
    lib = make_repo(tmp_path / "lib")
    top = make_repo(tmp_path / "top")
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(top, "commit", "-qm", "add lib")
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(top), str(fresh))
    rec = only(probe_doc(tmp_path, fresh))
    (sub,) = rec["submodules"]
    assert sub["initialized"] is False and sub["checked_out_sha"] is None
    assert sub["recorded_sha"] == git(lib, "rev-parse", "HEAD").strip()
    assert rec["dirty"] is False


def test_foreign_owned_repo_works_without_touching_git_config(tmp_path, repo):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    (repo / "README.md").write_text("edited by someone else\n")
    subprocess.run(["chown", "-R", "12345:12345", str(repo)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    plain = subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, text=True,
                           env={"PATH": os.environ["PATH"], "HOME": str(home)})
    assert "dubious ownership" in plain.stderr  # the trap the probe must avoid
    rec = only(probe_doc(tmp_path, repo))
    assert rec["dirty"] is True and "README.md" in rec["patch"]["files"]
    assert list(home.iterdir()) == []  # no .gitconfig written
    subprocess.run(["chown", "-R", "0:0", str(repo)], check=True)  # so the test's own clone may read it
    round_trip(repo, rec, tmp_path / "clone")


def test_empty_repo_with_staged_file_round_trips(tmp_path):
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q")
    rec = only(probe_doc(tmp_path, repo))
    assert rec["commit"] is None and rec["unborn"] is True and rec["branch"] == "main"
    assert rec["dirty"] is False and "describe" not in rec
    (repo / "first.py").write_text("print('first')\n")
    git(repo, "add", "first.py")
    (repo / "untracked.txt").write_text("u\n")
    rec = only(probe_doc(tmp_path, repo))
    assert rec["dirty"] is True
    round_trip(repo, rec, tmp_path / "clone")


def test_non_utf8_names_round_trip(tmp_path):
    repo = make_repo(tmp_path / "repo")
    tracked = os.path.join(os.fsencode(str(repo)), b"caf\xe9.txt")
    with open(tracked, "wb") as fh:
        fh.write(b"one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "latin-1 name")
    with open(tracked, "wb") as fh:
        fh.write(b"two\n")
    with open(os.path.join(os.fsencode(str(repo)), b"new \xff\"q\".txt"), "wb") as fh:
        fh.write(b"fresh\n")
    (repo / "snowman \u2603.txt").write_text("utf-8 name\n")
    env = env_for(tmp_path)
    with open(os.path.join(env["HOME"], ".gitconfig"), "w") as fh:
        fh.write("[core]\n\tquotePath = false\n")  # the user's taste must not change the patch
    rec = only(probe_doc(tmp_path, repo, env=env))
    assert rec["dirty"] is True
    assert "caf\\xe9.txt" in rec["patch"]["files"]
    assert '"a/caf\\351.txt"' in rec["patch"]["text"]  # C-quoted as git writes it, whatever core.quotePath
    round_trip(repo, rec, tmp_path / "clone")


def test_non_utf8_content_is_stored_as_base64_and_round_trips(tmp_path):
    repo = make_repo(tmp_path / "repo", {"legacy.py": "# old\n"})
    (repo / "legacy.py").write_bytes(b"# caf\xe9 in latin-1\n")
    rec = only(probe_doc(tmp_path, repo))
    patch = rec["patch"]
    assert "text" not in patch and patch["restores_exactly"] is True
    round_trip(repo, rec, tmp_path / "clone")


def test_binary_change_round_trips(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "model.bin").write_bytes(bytes(range(256)) * 4)
    git(repo, "add", "model.bin")
    git(repo, "commit", "-qm", "binary")
    (repo / "model.bin").write_bytes(bytes(reversed(range(256))) * 5)
    rec = only(probe_doc(tmp_path, repo))
    assert "GIT binary patch" in rec["patch"]["text"]
    round_trip(repo, rec, tmp_path / "clone")


def test_large_untracked_file_is_listed_not_read(tmp_path, repo):
    big = repo / "checkpoint.pt"
    with open(str(big), "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: the test costs no disk, the probe must not read it
    (repo / "small.txt").write_text("s\n")
    started = time.monotonic()
    rec = only(probe_doc(tmp_path, repo))
    assert time.monotonic() - started < 5
    patch = rec["patch"]
    assert patch["skipped_untracked"] == [{"path": "checkpoint.pt", "size": 50 * 1024 * 1024,
                                           "reason": "over 262144 bytes"}]
    assert patch["size"] < 1000
    assert {"path": "checkpoint.pt", "size": 50 * 1024 * 1024} in rec["untracked"]["files"]
    round_trip(repo, rec, tmp_path / "clone")


def test_many_untracked_files_are_counted_exactly_and_listed_up_to_the_cap(tmp_path, repo):
    for i in range(150):
        (repo / ("u%03d.txt" % i)).write_text("%d\n" % i)
    rec = only(probe_doc(tmp_path, repo))
    assert rec["untracked"]["count"] == 150 and rec["untracked"]["truncated"] is True
    assert len(rec["untracked"]["files"]) == 100


def test_redacted_patch_marks_its_lines_and_says_it_does_not_restore_exactly(tmp_path, repo):
    (repo / "paths.py").write_text("DATA = 'x'\nCACHE = '/home/alice/.cache/hf'\n")
    doc = probe_doc(tmp_path, repo)
    rec = only(doc)
    patch = rec["patch"]
    lines = patch["text"].split("\n")
    assert [lines[n - 1] for n in patch["redacted_lines"]] == ["+CACHE = '<HOME>/.cache/hf'"]
    assert "alice" not in json.dumps(rec)
    assert patch["sha256"] != patch["stored_sha256"] == hashlib.sha256(stored_patch(patch)).hexdigest()
    assert patch["restores_exactly"] is False
    assert doc["collection"]["redactions"] == {"home-path": 1}


def test_patch_adding_a_token_does_not_carry_it(tmp_path, repo):
    from relaxrepro.manifest.redact import Redactor

    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
    if Redactor().text("HF_TOKEN=" + token) == "HF_TOKEN=" + token:
        pytest.skip("this Redactor has no rule for Hugging Face tokens yet (issue 7)")
    (repo / ".env").write_text("HF_TOKEN=%s\n" % token)
    rec = only(probe_doc(tmp_path, repo))
    assert token not in json.dumps(rec) and rec["patch"]["redacted_lines"]


def test_git_missing_reads_commit_and_branch_from_files(tmp_path, repo):
    git(repo, "pack-refs", "--all")  # the branch now lives only in packed-refs
    (repo / "README.md").write_text("changed\n")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    doc = probe_doc(tmp_path, repo, env=env_for(tmp_path, path=str(empty_bin)))
    rec = only(doc)
    assert rec["commit"] == git(repo, "rev-parse", "HEAD").strip() and rec["branch"] == "main"
    assert rec["dirty"] is None
    assert rec["dirty_unknown_reason"].startswith("git not found on PATH")
    assert status(doc) == "partial"


def test_git_missing_in_a_linked_worktree_follows_the_gitdir_file(tmp_path, repo):
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "side", str(wt))
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    rec = only(probe_doc(tmp_path, wt, env=env_for(tmp_path, path=str(empty_bin))))
    assert rec["branch"] == "side" and rec["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert rec["worktree"] is True


def test_git_that_hangs_is_cut_off_within_the_budget(tmp_path, repo):
    bindir = tmp_path / "bin"
    fake_tool(bindir, "git", "trap '' TERM\n%s 30\n" % shutil.which("sleep"))
    started = time.monotonic()
    doc = probe_doc(tmp_path, repo, env=env_for(tmp_path, path=str(bindir)), probe_budget_s=1.5)
    assert time.monotonic() - started < 3.5
    rec = only(doc)
    assert rec["commit"] == git(repo, "rev-parse", "HEAD").strip()  # from the files
    assert rec["dirty"] is None and "timed out" in rec["dirty_unknown_reason"]
    assert status(doc) == "timeout"


def test_git_that_prints_garbage_is_not_believed(tmp_path, repo):
    bindir = tmp_path / "bin"
    fake_tool(bindir, "git", "echo 'garbage: not porcelain'\necho '1 .M N... x y'\nexit 0\n")
    doc = probe_doc(tmp_path, repo, env=env_for(tmp_path, path=str(bindir)))
    rec = only(doc)
    assert rec["dirty"] is None
    assert rec["dirty_unknown_reason"] == "git status printed no porcelain v2 output"
    assert "describe" not in rec and "patch" not in rec
    assert rec["commit"] == git(repo, "rev-parse", "HEAD").strip()


def test_git_that_fails_reports_why(tmp_path, repo):
    bindir = tmp_path / "bin"
    fake_tool(bindir, "git", "echo 'fatal: something broke' >&2\nexit 128\n")
    rec = only(probe_doc(tmp_path, repo, env=env_for(tmp_path, path=str(bindir))))
    assert rec["dirty"] is None and "fatal: something broke" in rec["dirty_unknown_reason"]


def test_sources_without_git_are_absent_with_the_reason(tmp_path):
    src = tmp_path / "image" / "app"
    src.mkdir(parents=True)
    (src / "train.py").write_text("print(1)\n")
    doc = probe_doc(tmp_path, src, argv=["python", "train.py"])
    assert doc["code"] == {}
    assert status(doc) == "absent"
    warnings = doc["collection"]["probes"]["git"]["warnings"]
    assert any("train.py is not inside a git repository" in w for w in warnings)


def test_named_source_without_git_is_recorded_as_absent(tmp_path):
    src = tmp_path / "megatron"
    src.mkdir()
    doc = probe_doc(tmp_path, tmp_path, repos={"megatron": str(src)})
    rec = doc["code"]["megatron"]
    assert rec["commit"] is None and rec["dirty"] is None and "no .git" in rec["absent_reason"]
    assert status(doc) == "absent"


def test_bare_repo_named_explicitly(tmp_path, repo):
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    doc = probe_doc(tmp_path, tmp_path, repos={"mirror": str(bare)})
    rec = doc["code"]["mirror"]
    assert rec["bare"] is True and rec["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert rec["dirty"] is None and rec["dirty_unknown_reason"] == "bare repository: no working tree"


# -- through the CLI -----------------------------------------------------------------------------

def test_cli_patch_over_inline_budget_goes_to_a_sidecar(tmp_path, repo):
    body = "".join("line %05d of a long generated file\n" % i for i in range(6000))  # ~210 KB
    (repo / "big.py").write_text(body)
    git(repo, "add", "big.py")
    out = tmp_path / "out"
    out.mkdir()
    res = run_cli("generate", "--output-dir", str(out), cwd=repo)
    assert res.returncode == 0, res.stderr
    (manifest_path,) = out.glob("manifest_*.json")
    assert manifest_path.stat().st_size <= CAP_BYTES
    doc = json.loads(manifest_path.read_text())
    validate_manifest(doc)
    patch = doc["code"]["repo"]["patch"]
    assert patch["inline"] is False and "text" not in patch
    sidecar = out / patch["sidecar"]
    assert sidecar.name == "manifest_%s.repo.patch" % doc["run_id"]
    data = sidecar.read_bytes()
    assert hashlib.sha256(data).hexdigest() == patch["sha256"] == patch["stored_sha256"]
    assert len(data) == patch["size"]
    round_trip(repo, doc["code"]["repo"], tmp_path / "clone", patch_bytes=data)


def test_cli_private_patch_keeps_an_unredacted_0600_sidecar(tmp_path, repo):
    (repo / "paths.py").write_text("CACHE = '/home/alice/.cache'\n")
    out = tmp_path / "out"
    out.mkdir()
    res = run_cli("generate", "--output-dir", str(out), "--private-patch", cwd=repo)
    assert res.returncode == 0, res.stderr
    (manifest_path,) = out.glob("manifest_*.json")
    doc = json.loads(manifest_path.read_text())
    validate_manifest(doc)
    patch = doc["code"]["repo"]["patch"]
    assert patch["private"] is True and "/home/alice" not in manifest_path.read_text()
    private = out / ("manifest_%s.repo.private.patch" % doc["run_id"])
    assert private.stat().st_mode & 0o777 == 0o600
    assert hashlib.sha256(private.read_bytes()).hexdigest() == patch["sha256"]
    assert b"/home/alice/.cache" in private.read_bytes()


def test_cli_without_private_patch_writes_no_private_file(tmp_path, repo):
    (repo / "README.md").write_text("changed\n")
    out = tmp_path / "out"
    out.mkdir()
    assert run_cli("generate", "--output-dir", str(out), cwd=repo).returncode == 0
    assert len(list(out.glob("manifest_*.json"))) == 1
    assert list(out.glob("*.private.patch")) == []


def test_cli_repo_flag_records_the_named_repo(tmp_path, repo):
    other = make_repo(tmp_path / "Megatron-LM")
    doc = generate(tmp_path, "--repo", "megatron=%s" % other, cwd=repo)
    assert doc["code"]["megatron"]["found_by"] == ["explicit"]
    assert doc["code"]["megatron"]["commit"] == git(other, "rev-parse", "HEAD").strip()
    assert "repo" in doc["code"]


@pytest.mark.parametrize("value, message", [
    ("megatron", "expected NAME=PATH"),
    ("=/opt/x", "NAME may hold"),
    ("mega tron=/opt/x", "NAME may hold"),
    ("m=", "expected NAME=PATH"),
], ids=["no-equals", "empty-name", "space-in-name", "empty-path"])
def test_cli_bad_repo_flag_is_a_usage_error_and_writes_nothing(tmp_path, value, message):
    res = run_cli("generate", "--output-dir", str(tmp_path), "--repo", value, cwd=tmp_path)
    assert res.returncode == 2
    assert message in res.stderr and res.stderr.startswith("relaxrepro generate: error: --repo")
    assert list(tmp_path.iterdir()) == []


def test_cli_repo_flag_given_twice_for_one_name(tmp_path):
    res = run_cli("generate", "--output-dir", str(tmp_path), "--repo", "a=/x", "--repo", "a=/y", cwd=tmp_path)
    assert res.returncode == 2 and "NAME a given twice" in res.stderr


def test_cli_without_git_on_path_still_writes_a_valid_manifest(tmp_path, repo):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(shutil.which("python3") or "/usr/bin/python3", str(bindir / "python3"))
    env = clean_env(PATH=str(bindir))
    doc = generate(tmp_path, env=env, cwd=repo)
    assert doc["code"]["repo"]["dirty"] is None
    assert doc["collection"]["probes"]["git"]["status"] == "partial"


def test_api_repos_and_private_patch(tmp_path, repo, monkeypatch):
    from relaxrepro import collect_manifest, write_manifest

    other = make_repo(tmp_path / "Megatron-LM")
    (other / "README.md").write_text("local hack\n")
    monkeypatch.chdir(str(repo))
    m = collect_manifest(argv=["python", "train.py"], env=env_for(tmp_path), repos={"megatron": other},
                         private_patch=True)
    assert m is not None and m["code"]["megatron"]["found_by"] == ["explicit"]
    out = tmp_path / "out"
    out.mkdir()
    path = write_manifest(m, out)
    doc = json.loads(open(path).read())
    validate_manifest(doc)
    private = out / ("manifest_%s.megatron.private.patch" % doc["run_id"])
    assert private.stat().st_mode & 0o777 == 0o600
    assert hashlib.sha256(private.read_bytes()).hexdigest() == doc["code"]["megatron"]["patch"]["sha256"]


def test_untracked_files_beyond_the_limits_are_counted_not_embedded(tmp_path, repo, monkeypatch):
    from relaxrepro.collect.probes import git_patch

    monkeypatch.setattr(git_patch, "UNTRACKED_CONSIDERED", 5)
    monkeypatch.setattr(git_patch, "EMBED_TOTAL_MAX", 25)
    for i in range(8):
        (repo / ("f%d.txt" % i)).write_text("0123456789\n")
    patch = only(probe_doc(tmp_path, repo))["patch"]
    assert patch["files"] == ["f0.txt", "f1.txt"]  # 11 + 11 bytes; the third would pass 25
    assert [(f["path"], f["reason"]) for f in patch["skipped_untracked"]] == [
        ("f2.txt", "patch budget spent"), ("f3.txt", "patch budget spent"), ("f4.txt", "patch budget spent")]
    assert patch["untracked_over_limit"] == 3 and patch["restores_exactly"] is False


def test_relaxrepro_outputs_in_the_tree_are_not_embedded_in_the_patch(tmp_path):
    # The default output directory is the cwd: a second manifest must not carry the first one.
    repo = make_repo(tmp_path / "r")
    res = run_cli("generate", cwd=repo)  # into the repo itself, the default
    first = json.loads((repo / os.path.basename(res.stdout.strip())).read_text())
    (repo / "notes.txt").write_text("a real untracked file\n")
    second = generate(tmp_path, cwd=repo)
    patch = second["code"]["r"]["patch"]
    assert patch["files"] == ["notes.txt"]
    assert patch["relaxrepro_outputs"] == ["manifest_%s.json" % first["run_id"]]
    assert patch["restores_exactly"] is True
    assert second["code"]["r"]["untracked"]["count"] == 2


def test_git_diff_that_times_out_leaves_no_comparable_digest(tmp_path, repo):
    (repo / "README.md").write_text("changed\n")
    (repo / "new.txt").write_text("untracked\n")
    path = git_with_slow_diff(tmp_path / "bin")
    doc = probe_doc(tmp_path, repo, env=env_for(tmp_path, path=path), probe_budget_s=2.0)
    patch = only(doc)["patch"]
    assert "sha256" not in patch  # an empty diff's digest would match every other run that timed out
    assert patch["incomplete_reason"] == "timeout"
    assert patch["incomplete"] in ("git diff did not finish in time",) or patch["incomplete"].startswith(
        "git diff: timed out after ")
    assert patch["restores_exactly"] is False
    assert patch["files"] == ["README.md", "new.txt"]
    assert stored_patch(patch).startswith(b"diff --git a/new.txt b/new.txt\n")  # what was read is kept
    assert patch["stored_sha256"] == hashlib.sha256(stored_patch(patch)).hexdigest()
    assert status(doc) == "timeout"
    warnings = doc["collection"]["probes"]["git"]["warnings"]
    assert [w for w in warnings if w.startswith("repo: uncommitted changes not fully recorded (timeout: git diff")]


def test_git_diff_over_the_capture_limit_leaves_no_comparable_digest(tmp_path):
    repo = make_repo(tmp_path / "repo", {"big.txt": ("x" * 1000 + "\n") * 3000})
    (repo / "big.txt").write_text(("y" * 1000 + "\n") * 3000)  # a 6 MB diff
    doc = probe_doc(tmp_path, repo)
    patch = only(doc)["patch"]
    assert "sha256" not in patch
    assert (patch["incomplete_reason"], patch["incomplete"]) == ("size", "git diff output over the 4 MiB capture limit")
    assert patch["restores_exactly"] is False and stored_patch(patch) == b""
    assert status(doc) == "partial"


def test_a_patch_over_the_capture_limit_counts_no_redaction(tmp_path):
    # The stream redacts each run of files as git prints it; a patch then dropped (over the limit) fires no rule
    # in the record: collection.redactions counts what the manifest holds.
    repo = make_repo(tmp_path / "repo", {"f%02d.txt" % k: ("x" * 100 + "\n") * 3000 for k in range(20)})
    for k in range(20):
        (repo / ("f%02d.txt" % k)).write_text("password = Tr0ub4dor&3x%d\n" % k + ("y" * 100 + "\n") * 3000)
    doc = probe_doc(tmp_path, repo)
    assert only(doc)["patch"]["incomplete_reason"] == "size"
    assert "secret-name" not in doc["collection"].get("redactions", {})


def _stopped(repo, *args):
    with pytest.raises(subprocess.CalledProcessError):  # the conflict stops it half-way
        git(repo, *args)


@pytest.mark.parametrize("operation", ["merge", "rebase", "rebase-apply", "am", "cherry-pick", "revert", "bisect"])
def test_operation_in_progress_is_recorded(tmp_path, operation):
    repo = conflicting(tmp_path / "repo")
    if operation == "merge":
        _stopped(repo, "merge", "side")
    elif operation == "rebase":
        _stopped(repo, "rebase", "side")
    elif operation == "rebase-apply":
        _stopped(repo, "rebase", "--apply", "side")
    elif operation == "am":
        mbox = git(repo, "format-patch", "--stdout", "main~1..side")
        (tmp_path / "side.mbox").write_text(mbox)
        _stopped(repo, "am", str(tmp_path / "side.mbox"))
    elif operation == "cherry-pick":
        _stopped(repo, "cherry-pick", "side")
    elif operation == "revert":
        (repo / "c.txt").write_text("third\n")
        git(repo, "commit", "-qam", "third")
        _stopped(repo, "revert", "--no-edit", "HEAD~1")
    else:
        git(repo, "bisect", "start", "main", "main~1")
    rec = only(probe_doc(tmp_path, repo))
    assert rec["operation"] == {"rebase-apply": "rebase"}.get(operation, operation)


def test_an_aborted_merge_leaves_no_operation(tmp_path):
    repo = conflicting(tmp_path / "repo")
    _stopped(repo, "merge", "side")
    git(repo, "merge", "--abort")
    assert "operation" not in only(probe_doc(tmp_path, repo))


@pytest.mark.parametrize("staged", [False, True], ids=["unstaged", "staged-and-unstaged"])
def test_a_patch_redacted_as_git_prints_it_is_the_patch_redacted_whole(tmp_path, repo, monkeypatch, staged):
    # The patch redacted while git diff runs (prefilter.Stream) gives the record a pass over the whole body gives:
    # tracked files of several kinds, then untracked ones embedded after them.
    from relaxrepro.collect.probes import git as git_probe

    pw = "Tr0ub4dor&3-patches"
    for k in range(30):
        (repo / ("m%02d.py" % k)).write_text("".join("x_%d = %d  # line\n" % (i, i) for i in range(400)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "many")
    for k in range(30):
        (repo / ("m%02d.py" % k)).write_text("db_password = '%s'\nHOST = 'gpu-1.internal'\nnote = 'Ünï'\n" % pw
                                             + "".join("y_%d = %d\n" % (i, i) for i in range(400)))
    (repo / ".env").write_text("API_TOKEN=%s\n" % pw)
    (repo / "new.sh").write_text("curl -u bob:%s \\\n  https://x.example.com\n" % pw)
    if staged:
        git(repo, "add", "m00.py")
    fed = []
    monkeypatch.setattr(git_probe.Stream, "feed", lambda self, chunk, _f=git_probe.Stream.feed: (
        fed.append(len(chunk)), _f(self, chunk))[1])
    streamed = only(probe_doc(tmp_path, repo))
    assert bool(fed) is not staged  # a staged change and an unstaged one: two outputs, scanned whole after
    monkeypatch.setattr(git_probe.Stream, "redacted", lambda self, body: None)
    whole = only(probe_doc(tmp_path, repo))
    assert streamed["patch"] == whole["patch"] and pw not in json.dumps(streamed)
    assert "new.sh" in streamed["patch"]["files"]
