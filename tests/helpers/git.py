"""Helpers for the git probe tests: run the probe in-process on real repos, and the round trip."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence, Set

from relaxrepro.collect import assemble, interpreter
from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import git as git_probe
from relaxrepro.collect.runner import Probe
from relaxrepro.manifest import writer
from tests.helpers.common import fake_tool, git, make_repo, validate_manifest


def env_for(tmp_path: Path, path: Optional[str] = None, **extra: str) -> Dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"] if path is None else path, "HOME": str(home)}
    env.update(extra)
    return env


def probe_doc(
    tmp_path: Path,
    cwd: Path,
    *,
    argv: Sequence[str] = (),
    env: Optional[Dict[str, str]] = None,
    site_dirs: Iterable[str] = (),
    probe_budget_s: float = 4.0,
    **options: Any,
) -> dict:
    """Build a manifest with only the git probe, check it against the schema, return it.

    The training interpreter is pinned to one with ``site_dirs`` only, so an editable install of
    relaxrepro itself (tests/run.sh makes one) never shows up as an extra repository.
    """
    ctx = Context(env=env or env_for(tmp_path), cwd=str(cwd), argv=argv, options=options,
                  probe_budget_s=probe_budget_s, deadline_s=probe_budget_s + 2)
    ctx.memo("interpreter", lambda: interpreter.Interpreter(executable="python3", sys_path=list(site_dirs)))
    doc = assemble.build(ctx, probes=[Probe("git", git_probe.collect)], derivers=[])
    validate_manifest(json.loads(writer.serialize(doc)))
    return doc


def only(doc: dict) -> dict:
    """The single repository record of ``doc``."""
    code = doc["code"]
    assert len(code) == 1, sorted(code)
    return next(iter(code.values()))


def status(doc: dict) -> str:
    return doc["collection"]["probes"]["git"]["status"]


def stored_patch(patch: dict, directory: Optional[Path] = None) -> bytes:
    if "text" in patch:
        return patch["text"].encode("utf-8")
    if "text_base64" in patch:
        return base64.b64decode(patch["text_base64"])
    assert directory is not None and patch.get("sidecar"), patch
    return (directory / patch["sidecar"]).read_bytes()


def round_trip(src: Path, rec: dict, dest: Path, patch_bytes: Optional[bytes] = None) -> None:
    """Rebuild ``src``'s tree from the record alone: clone the commit, ``git apply`` the patch, and
    compare with the working tree byte for byte (untracked files the patch only lists excluded)."""
    body = stored_patch(rec["patch"]) if patch_bytes is None else patch_bytes
    if rec.get("commit"):
        subprocess.run(["git", "clone", "-q", "--no-checkout", "--no-local", str(src), str(dest)], check=True,
                       capture_output=True)
        git(dest, "checkout", "-q", rec["commit"])
    else:
        dest.mkdir()
        git(dest, "init", "-q")
    patch_file = dest.parent / (dest.name + ".patch")
    patch_file.write_bytes(body)
    if body:
        res = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch_file)], cwd=str(dest),
                             capture_output=True)
        assert res.returncode == 0, res.stderr.decode("utf-8", "replace")
    listed = {os.fsencode(f["path"]) for f in rec["patch"].get("binary_untracked", []) +
              rec["patch"].get("skipped_untracked", [])}
    ignored = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(src), "ls-files", "-z", "--others",
                              "--ignored", "--exclude-standard"], capture_output=True, check=True).stdout
    listed.update(p for p in ignored.split(b"\0") if p)  # ignored files are not part of the tree
    assert tree(src, listed) == tree(dest, set())


def tree(root: Path, exclude: Set[bytes]) -> Dict[bytes, Any]:
    """{relative path: (kind, content, executable)} of a working tree, ``.git`` left out."""
    out: Dict[bytes, Any] = {}
    base = os.fsencode(str(root))
    for dirpath, dirnames, filenames in os.walk(base):
        if b".git" in dirnames:
            dirnames.remove(b".git")
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, base)
            if rel in exclude or name == b".git":
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full), False)
            else:
                with open(full, "rb") as fh:
                    out[rel] = ("file", fh.read(), bool(st.st_mode & 0o100))
    return out


def git_with_slow_diff(bindir: Path) -> str:
    """A ``git`` in ``bindir`` that is the real one, except that every diff outlasts any probe budget
    (as ``git diff`` of a 300 MB modified file does); returns a PATH with it first."""
    fake_tool(bindir, "git", """
        for a in "$@"; do
          case "$a" in diff|diff-files|diff-index) exec %s 60 ;; esac
        done
        exec %s "$@"
        """ % (shutil.which("sleep"), shutil.which("git")))
    return "%s%s%s" % (bindir, os.pathsep, os.environ["PATH"])


def conflicting(path: Path, name: str = "c.txt") -> Path:
    """A repo whose branches main and side both changed ``name``; HEAD on main, nothing merged yet."""
    repo = make_repo(path, {name: "base\n"})
    git(repo, "checkout", "-q", "-b", "side")
    (repo / name).write_text("side\n")
    git(repo, "commit", "-qam", "side")
    git(repo, "checkout", "-q", "main")
    (repo / name).write_text("main\n")
    git(repo, "commit", "-qam", "main")
    return repo
