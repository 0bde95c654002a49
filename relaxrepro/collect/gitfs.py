"""Read a repository's ``.git`` without git: HEAD, refs, packed-refs, ``gitdir`` files, config.

Containers often ship sources with their ``.git`` but no git binary (slim CUDA images), so commit
and branch must still come from plain files. Nothing here starts a process or writes anything;
every reader returns None (or an empty value) rather than raise. The ``parse_*`` functions are pure.
"""

from __future__ import annotations

import os
import re

from ..std.files import read_regular
from ..std.records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict, Iterable, List, Optional, Tuple

_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_MAX_FILE = 1 << 20
"""Bytes read from one ``.git`` file; packed-refs of huge monorepos run to MBs, we need a few lines."""

EMPTY_TREE = {
    "sha1": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "sha256": "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}


def is_sha(value: Optional[str]) -> bool:
    """A full lowercase object name (SHA-1 or SHA-256)."""
    return bool(value) and bool(_SHA_RE.match(value or ""))


class GitDir(Record):
    """Where a working tree keeps its repository data.

    ``top``: the working tree (or, for a bare repository, the repository itself). ``gitdir``: per-worktree
    data, HEAD and index (``.git``, or ``.git/worktrees/<name>`` for a linked worktree). ``common``: shared
    data, objects, refs, packed-refs, config, shallow. ``linked_worktree``: ``.git`` is a file pointing at
    ``<common>/worktrees/<name>`` (``git worktree add``). ``gitfile``: ``.git`` is a file (a linked worktree
    or a submodule whose data lives in ``.git/modules``).
    """

    top: str
    gitdir: str
    common: str
    bare: bool = False
    linked_worktree: bool = False
    gitfile: bool = False


def _read(path: str, limit: int = _MAX_FILE) -> Optional[str]:
    try:
        return read_regular(path, limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def looks_like_gitdir(path: str) -> bool:
    """A repository directory itself (bare repo or a ``.git`` dir): HEAD, objects/ and refs/."""
    return (
        os.path.isfile(os.path.join(path, "HEAD"))
        and os.path.isdir(os.path.join(path, "objects"))
        and (os.path.isdir(os.path.join(path, "refs")) or os.path.isdir(os.path.join(path, "reftable")))
    )


def find_toplevel(start: str) -> Optional[str]:
    """The nearest directory at or above ``start`` holding ``.git`` (dir or file), or ``start`` itself
    when it is a bare repository. Looks only at ``start`` and its ancestors, never below."""
    path = os.path.abspath(start)
    if looks_like_gitdir(path) and os.path.basename(path) != ".git":
        return path
    while True:
        if os.path.lexists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def parse_gitfile(text: str) -> Optional[str]:
    """The target of a ``.git`` file (``gitdir: ../.git/worktrees/x``), or None."""
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = line[len("gitdir:"):].strip()
            return target or None
    return None


def locate(top: str) -> Optional[GitDir]:
    """Resolve the git directories of the working tree (or bare repository) ``top``."""
    dotgit = os.path.join(top, ".git")
    if os.path.isdir(dotgit):
        gitdir, gitfile = dotgit, False
    elif os.path.isfile(dotgit):
        target = parse_gitfile(_read(dotgit, 4096) or "")
        if target is None:
            return None
        gitdir, gitfile = os.path.normpath(os.path.join(top, target)), True
    elif looks_like_gitdir(top):
        return GitDir(top=top, gitdir=top, common=_common(top), bare=True)
    else:
        return None
    common = _common(gitdir)
    bare = parse_config(_read(os.path.join(common, "config")) or "").get("core.bare") == "true" and not gitfile
    return GitDir(top=top, gitdir=gitdir, common=common, bare=bare,
                  linked_worktree=os.path.isfile(os.path.join(gitdir, "commondir")), gitfile=gitfile)


def _common(gitdir: str) -> str:
    text = _read(os.path.join(gitdir, "commondir"), 4096)
    if text and text.strip():
        return os.path.normpath(os.path.join(gitdir, text.strip()))
    return gitdir


def parse_head(text: str) -> Tuple[Optional[str], Optional[str]]:
    """``HEAD`` contents -> (symbolic ref, sha): ``("refs/heads/main", None)`` or ``(None, sha)``."""
    text = text.strip()
    if text.startswith("ref:"):
        return text[4:].strip() or None, None
    return None, text if is_sha(text) else None


def parse_packed_refs(text: str) -> Dict[str, str]:
    """``packed-refs`` -> {ref: sha}; peeled lines (``^sha``) and comments skipped."""
    refs: Dict[str, str] = {}
    for line in text.splitlines():
        if not line or line[0] in "#^":
            continue
        sha, _, ref = line.partition(" ")
        if is_sha(sha) and ref:
            refs[ref.strip()] = sha
    return refs


def resolve_ref(gd: GitDir, ref: str, _depth: int = 0) -> Optional[str]:
    """The sha a ref points at: loose file (worktree's, then shared), then packed-refs."""
    if _depth > 5 or ".." in ref.split("/"):
        return None
    for base in (gd.gitdir, gd.common):
        text = _read(os.path.join(base, *ref.split("/")), 4096)
        if text is None:
            continue
        target, sha = parse_head(text)
        if sha:
            return sha
        if target:
            return resolve_ref(gd, target, _depth + 1)
    packed = _read(os.path.join(gd.common, "packed-refs"), 64 << 20)
    return parse_packed_refs(packed).get(ref) if packed else None


class Head(Record):
    """What HEAD says. ``unborn``: it names a branch with no commit yet (an empty repository);
    ``reason``: why the commit could not be read, when it could not."""

    commit: Optional[str] = None
    branch: Optional[str] = None
    detached: bool = False
    unborn: bool = False
    reason: Optional[str] = None


def read_head(gd: GitDir) -> Head:
    """Commit and branch from HEAD and the refs, without git."""
    text = _read(os.path.join(gd.gitdir, "HEAD"), 4096)
    if text is None:
        return Head(reason="cannot read %s" % os.path.join(gd.gitdir, "HEAD"))
    ref, sha = parse_head(text)
    if sha:
        return Head(commit=sha, detached=True)
    if ref is None:
        return Head(reason="HEAD is neither a ref nor a commit")
    branch = ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
    if os.path.isdir(os.path.join(gd.common, "reftable")):
        # git >= 2.45 with extensions.refStorage=reftable keeps refs in a binary table.
        return Head(branch=None, reason="refs are in reftable format; reading them needs git")
    commit = resolve_ref(gd, ref)
    if commit is None:
        return Head(branch=branch, unborn=True)
    return Head(commit=commit, branch=branch)


OPERATION_MARKERS: Tuple[str, ...] = ("rebase-merge", "rebase-apply", "rebase-apply/applying", "MERGE_HEAD",
                                       "CHERRY_PICK_HEAD", "REVERT_HEAD", "BISECT_LOG")
"""What git leaves in a worktree's git directory while an operation waits for the user (wt-status.c)."""


def parse_operation(names: Iterable[str]) -> Optional[str]:
    """The operation in progress from the :data:`OPERATION_MARKERS` present: ``rebase``, ``am``, ``merge``,
    ``cherry-pick``, ``revert``, ``bisect`` or None.

    A rebase comes first: its own conflicted pick or merge leaves CHERRY_PICK_HEAD or MERGE_HEAD beside
    ``rebase-merge/``, and the user has to finish (or abort) the rebase. ``rebase-apply/`` with
    ``applying`` is ``git am``. A bisect comes last: a merge can be stopped inside one.
    """
    found = set(names)
    if "rebase-apply/applying" in found:
        return "am"
    if "rebase-merge" in found or "rebase-apply" in found:
        return "rebase"
    for name, op in (("MERGE_HEAD", "merge"), ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"),
                     ("BISECT_LOG", "bisect")):
        if name in found:
            return op
    return None


def read_operation(gd: GitDir) -> Optional[str]:
    """:func:`parse_operation` over the markers in ``gd``'s per-worktree git directory (a few stats)."""
    return parse_operation(n for n in OPERATION_MARKERS if os.path.lexists(os.path.join(gd.gitdir, n)))


def is_shallow(gd: GitDir) -> bool:
    try:
        return os.path.getsize(os.path.join(gd.common, "shallow")) > 0
    except OSError:
        return False


_SECTION_RE = re.compile(r'^\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')


def parse_config(text: str) -> Dict[str, str]:
    """A git config file -> {``section.sub.key``: value} (last wins; section and key lowercased).

    Enough for ``core.bare``, ``extensions.objectformat`` and ``remote.<name>.url``; includes and
    multi-line values are ignored (git itself is asked when it is there).
    """
    out: Dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = _SECTION_RE.match(line)
            if not m:
                section = ""
                continue
            section = m.group(1).lower()
            if m.group(2) is not None:
                section += "." + re.sub(r"\\(.)", r"\1", m.group(2))
            rest = line[m.end():].strip()
            if not rest or rest[0] in "#;":
                continue
            line = rest
        if not section:
            continue
        key, sep, value = line.partition("=")
        key = key.strip().lower()
        if not key or not re.match(r"^[a-z][a-z0-9-]*$", key):
            continue
        out[section + "." + key] = _config_value(value) if sep else "true"
    return out


def _config_value(value: str) -> str:
    value = value.strip()
    out: List[str] = []
    quoted = False
    i = 0
    while i < len(value):
        c = value[i]
        if c == '"':
            quoted = not quoted
        elif c == "\\" and i + 1 < len(value):
            i += 1
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(value[i], value[i]))
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def read_config(gd: GitDir) -> Dict[str, str]:
    return parse_config(_read(os.path.join(gd.common, "config")) or "")


def remotes(config: Dict[str, str]) -> Dict[str, str]:
    """{remote name: url} from a parsed config."""
    out = {}
    for key, value in config.items():
        if key.startswith("remote.") and key.endswith(".url"):
            out[key[len("remote."):-len(".url")]] = value
    return out


def object_format(config: Dict[str, str]) -> str:
    return config.get("extensions.objectformat", "sha1").lower() or "sha1"


def parse_gitmodules(text: str) -> List[Tuple[str, str]]:
    """``.gitmodules`` -> [(name, path)] in file order."""
    paths: Dict[str, str] = {}
    for key, value in parse_config(text).items():
        if key.startswith("submodule.") and key.endswith(".path"):
            paths[key[len("submodule."):-len(".path")]] = value
    order = [m.group(2) for m in (_SECTION_RE.match(line.strip()) for line in text.splitlines()) if m and m.group(2)]
    return sorted(paths.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
