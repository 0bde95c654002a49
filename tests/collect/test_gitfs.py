"""Pure parts of the git probe: git's machine output, ``.git`` files, URLs, patch hunks, commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from relaxrepro.collect import gitfs, repos
from relaxrepro.collect.probes import git as g
from relaxrepro.collect.probes import git_patch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "git"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_status_mid_merge_with_rename_and_odd_names():
    st = g.parse_status_v2(fixture("status-v2-merge-rename-2.39.z"))
    assert st["valid"] is True
    assert st["commit"] == "073ba48406e6ec5337da7508a22cda5d169749f6"
    assert (st["branch"], st["detached"]) == ("main", False)
    assert (st["upstream"], st["ahead"], st["behind"]) == ("origin/main", 1, 0)
    assert [(c["xy"], c["path"]) for c in st["changed"]] == [
        (".M", b"a.txt"), ("R.", b"new name.txt"), ("UU", b"conflict.txt")]
    # the rename's original path is its own -z token and must not turn into an entry
    assert st["untracked"] == [b"caf\xe9.txt", b"untracked file.txt"]
    assert g.is_dirty(st["changed"]) is True


def test_status_submodule_with_changes_inside():
    st = g.parse_status_v2(fixture("status-v2-submodule-dirty-2.39.z"))
    (entry,) = st["changed"]
    assert entry["path"] == b"lib"
    assert g.submodule_flags(entry["sub"]) == {"commit_changed": False, "modified": True, "untracked": True}
    assert st["upstream"] is None and st["ahead"] is None
    assert g.is_dirty(st["changed"]) is True


def test_status_untracked_inside_a_submodule_alone_is_not_dirty():
    changed = [{"xy": ".M", "sub": "S..U", "path": b"lib"}]
    assert g.is_dirty(changed) is False


def test_status_of_a_repo_without_commits():
    st = g.parse_status_v2(fixture("status-v2-initial-2.39.z"))
    assert st["valid"] is True and st["commit"] is None and st["branch"] == "main"
    assert [c["xy"] for c in st["changed"]] == ["A."]


def test_status_detached():
    st = g.parse_status_v2(fixture("status-v2-detached-2.39.z"))
    assert st["detached"] is True and st["branch"] is None
    assert st["changed"] == [] and st["untracked"] == []


@pytest.mark.parametrize("data", [b"", b"garbage\n", b"1 .M N... short\0", b"\xff\xfe\0\0"],
                         ids=["empty", "text", "short-entry", "binary"])
def test_status_that_is_not_porcelain_is_invalid(data):
    st = g.parse_status_v2(data)
    assert st["valid"] is False and st["changed"] == []


def test_ls_tree_gitlinks():
    assert g.parse_ls_tree(fixture("ls-tree-submodule-2.39.z")) == {
        b"lib": "d1836361932f7c027a2e8cd5835542e0672d968a"}
    assert g.parse_ls_tree(b"100644 blob 78981922613b2afb6025042ff6bd878ac1994e85\ta\0") == {}


@pytest.mark.parametrize("text, expected", [
    ("v1.2-3-g0123456789ab\n", "v1.2-3-g0123456789ab"),
    ("0123456789ab\n", "0123456789ab"),
    ("release-2024-05-0-g0123456789ab\n", "release-2024-05-0-g0123456789ab"),
    ("v1.2-3-gffffffffffff\n", None),
    ("garbage\n", None),
    ("two\nlines\n", None),
    ("", None),
], ids=["tag", "no-tag", "dashed-tag", "other-commit", "garbage", "two-lines", "empty"])
def test_describe_must_end_in_the_commit(text, expected):
    assert g.parse_describe(text, "0123456789abcdef0123456789abcdef01234567") == expected


@pytest.mark.parametrize("name, expected", [
    (b"plain/path.py", b"plain/path.py"),
    (b"with space.txt", b'"with space.txt"'),
    (b"caf\xe9.txt", b'"caf\\351.txt"'),
    (b'q"uote\\back\ttab', b'"q\\"uote\\\\back\\ttab"'),
], ids=["plain", "space", "latin-1", "specials"])
def test_quote_path_like_git(name, expected):
    assert git_patch.quote_path(name) == expected


def test_new_file_hunks():
    assert git_patch.new_file_patch(b"a.txt", b"x\ny\n") == (
        b"diff --git a/a.txt b/a.txt\nnew file mode 100644\n--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n")
    assert git_patch.new_file_patch(b"n", b"last") .endswith(b"@@ -0,0 +1 @@\n+last\n\\ No newline at end of file\n")
    assert git_patch.new_file_patch(b"e", b"") == b"diff --git a/e b/e\nnew file mode 100644\n"


def test_redact_lines_shim_reports_one_based_line_numbers():
    class Upper:
        def text(self, s, key=None):
            return s.replace("secret", "<redacted>")

    out, changed = git_patch.redact_lines(Upper(), "a\nsecret here\nb\nsecret\n")
    assert out == "a\n<redacted> here\nb\n<redacted>\n" and changed == [2, 4]


def test_redact_lines_prefers_the_redactors_own_lines():
    class WithLines:
        def lines(self, s):
            return s.upper(), [1]

    assert git_patch.redact_lines(WithLines(), "a") == ("A", [1])


# -- .git files ---------------------------------------------------------------------------------------

def test_packed_refs():
    text = ("# pack-refs with: peeled fully-peeled sorted \n"
            "0123456789abcdef0123456789abcdef01234567 refs/heads/main\n"
            "89abcdef0123456789abcdef0123456789abcdef refs/tags/v1\n"
            "^fedcba9876543210fedcba9876543210fedcba98\n"
            "not-a-sha refs/heads/bad\n")
    assert gitfs.parse_packed_refs(text) == {
        "refs/heads/main": "0123456789abcdef0123456789abcdef01234567",
        "refs/tags/v1": "89abcdef0123456789abcdef0123456789abcdef"}


@pytest.mark.parametrize("text, expected", [
    ("ref: refs/heads/main\n", ("refs/heads/main", None)),
    ("0123456789abcdef0123456789abcdef01234567\n", (None, "0123456789abcdef0123456789abcdef01234567")),
    ("garbage\n", (None, None)),
], ids=["branch", "detached", "garbage"])
def test_head(text, expected):
    assert gitfs.parse_head(text) == expected


def test_gitfile():
    assert gitfs.parse_gitfile("gitdir: ../.git/worktrees/wt\n") == "../.git/worktrees/wt"
    assert gitfs.parse_gitfile("nonsense") is None


def test_config_remotes_bare_and_object_format():
    text = ('[core]\n\tbare = false\n[remote "origin"]\n\turl = https://u:p@h/r.git ; comment\n'
            '[remote "my \\"odd\\" one"]\n\turl = "/path with # hash"\n[extensions]\n\tobjectFormat = sha256\n')
    cfg = gitfs.parse_config(text)
    assert gitfs.remotes(cfg) == {"origin": "https://u:p@h/r.git", 'my "odd" one': "/path with # hash"}
    assert cfg["core.bare"] == "false" and gitfs.object_format(cfg) == "sha256"


def test_gitmodules_in_file_order():
    text = '[submodule "b"]\n\tpath = third_party/b\n\turl = x\n[submodule "a"]\n\tpath = a\n'
    assert gitfs.parse_gitmodules(text) == [("b", "third_party/b"), ("a", "a")]


# -- the recorded command -------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["python", "relax/entrypoints/train.py", "--lr", "3e-4"], ("script", "relax/entrypoints/train.py")),
    (["/opt/conda/bin/python3.11", "-u", "-W", "ignore", "-X", "dev", "train.py"], ("script", "train.py")),
    (["python3", "-m", "relax.train", "--cfg", "x.py"], ("module", "relax.train")),
    (["python", "-mrelax.train"], ("module", "relax.train")),
    (["python", "-c", "import x"], None),
    (["torchrun", "--nproc_per_node", "8", "--nnodes=2", "train.py", "--cfg", "c.py"], ("script", "train.py")),
    (["torchrun", "--nproc-per-node=2", "-m", "relax.train"], ("module", "relax.train")),
    (["python", "-m", "torch.distributed.run", "--nproc-per-node", "8", "train.py"], ("script", "train.py")),
    (["deepspeed", "--num_gpus", "8", "pretrain.py", "--deepspeed"], ("script", "pretrain.py")),
    (["accelerate", "launch", "--config_file", "acc.yaml", "sft.py"], ("script", "sft.py")),
    (["srun", "-N2", "env", "A=1", "python", "-u", "train.py"], ("script", "train.py")),
    (["bash", "run.sh"], None),
    (["./train.py", "--x"], ("script", "./train.py")),
    ([], None),
], ids=["python-script", "python-options", "python-m", "python-m-attached", "python-c", "torchrun",
        "torchrun-module", "torch-distributed-run", "deepspeed", "accelerate", "srun-env-python", "shell",
        "executable-script", "empty"])
def test_parse_command(argv, expected):
    assert repos.parse_command(argv) == expected


@pytest.mark.parametrize("text, expected", [
    ('{"url": "file:///src/Megatron-LM", "dir_info": {"editable": true}}', "/src/Megatron-LM"),
    ('{"url": "file:///src/with%20space", "dir_info": {"editable": true}}', "/src/with space"),
    ('{"url": "file:///src/x", "dir_info": {}}', None),
    ('{"url": "https://h/x.whl", "archive_info": {}}', None),
    ("not json", None),
], ids=["editable", "quoted", "not-editable", "archive", "garbage"])
def test_direct_url(text, expected):
    assert repos.parse_direct_url(text) == expected


@pytest.mark.parametrize("names, operation", [
    ((), None),
    (("MERGE_HEAD",), "merge"),
    (("rebase-merge",), "rebase"),
    (("rebase-apply",), "rebase"),
    (("rebase-apply", "rebase-apply/applying"), "am"),
    (("CHERRY_PICK_HEAD",), "cherry-pick"),
    (("REVERT_HEAD",), "revert"),
    (("BISECT_LOG",), "bisect"),
    (("rebase-merge", "CHERRY_PICK_HEAD"), "rebase"),  # a pick stopped inside a rebase: the rebase is to finish
    (("rebase-merge", "MERGE_HEAD"), "rebase"),        # rebase --rebase-merges stopped on a merge
    (("BISECT_LOG", "MERGE_HEAD"), "merge"),           # a merge stopped during a bisect
    (("ORIG_HEAD", "FETCH_HEAD", "sequencer"), None),  # left behind by finished operations
], ids=["none", "merge", "rebase-merge", "rebase-apply", "am", "cherry-pick", "revert", "bisect",
        "pick-in-rebase", "merge-in-rebase", "merge-in-bisect", "leftovers"])
def test_operation_in_progress(names, operation):
    assert gitfs.parse_operation(names) == operation
