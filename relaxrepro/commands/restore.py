"""``relaxrepro restore MANIFEST --into DIR``: rebuild each recorded repo's exact source tree.

For every repo: clone from the local repo (its recorded path, or ``--from NAME=PATH``) without
touching it, check out the recorded commit, apply the recorded patch (inline or the sidecar beside
the manifest, verified by its sha256 before anything is created), and check out each submodule at
its recorded SHA. ``DIR`` must be new or empty; on any failure what this command created is removed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import sys

from ..manifest import fields
from ..manifest.fields import scalar, section
from ..std import proc
from ..std.files import read_regular
from ..std.records import Factory, Record
from ..std.text import safe_text
from ._common import Exit, pairs, say
from ._runs import read_with_notes, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Mapping, Optional

CLONE_TIMEOUT = 1800.0
"""Seconds for one clone or checkout: a user command on a possibly large repo, but never unbounded."""
SIDECAR_LIMIT_BYTES = 64 << 20
"""A recorded patch is at most two captured diffs (4 MB each) and 2 MB of untracked files: anything far
larger beside the manifest is not one, and is not read into memory."""

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class RestoreError(Exception):
    """One line saying why a repo cannot be restored (exit 1)."""

    code = Exit.FAIL


class Refused(RestoreError):
    """A restore that would be unsafe or inexact, refused before anything is written there (exit 2)."""

    code = Exit.REFUSED


class Source(Record):
    name: str
    source: str
    commit: str
    patch: Optional[bytes]
    submodules: List[Dict[str, str]] = Factory(list)
    notes: List[str] = Factory(list)


def _git(*args: str, cwd: Optional[str] = None, stdin: Optional[bytes] = None,
         env: Optional[Mapping[str, str]] = None) -> proc.ProcResult:
    # safe.directory per call: a source repo owned by another uid (containers) clones without
    # touching the user's git config; no prompt may ever wait for a terminal.
    run_env = dict(os.environ if env is None else env)
    run_env["GIT_TERMINAL_PROMPT"] = "0"
    run_env.setdefault("LC_ALL", "C")
    return proc.run(["git", "-c", "safe.directory=*"] + list(args), timeout=CLONE_TIMEOUT, env=run_env,
                    cwd=cwd, stdin_data=stdin)


def sidecar_path(manifest_path: str, name: Any) -> str:
    """The sidecar beside the manifest; a name that could point anywhere else is refused."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name \
            or ".." in name or "\x00" in name:
        raise RestoreError("patch sidecar name %r is not a plain file name beside the manifest; refused"
                           % (name,))
    return os.path.join(os.path.dirname(os.path.abspath(manifest_path)), name)


def patch_bytes(name: str, patch: Mapping[str, Any], manifest_path: str) -> Optional[bytes]:
    """The recorded patch, verified against ``stored_sha256`` (else ``sha256``); None when empty."""
    expected = scalar(patch.get("stored_sha256")) or scalar(patch.get("sha256"))
    if expected == _EMPTY_SHA256 and "text" not in patch:
        return None  # an empty patch needs no body
    if isinstance(patch.get("text"), str):
        body = patch["text"].encode("utf-8", "surrogateescape")
        where = "inline patch"
    elif patch.get("sidecar") is not None:
        path = sidecar_path(manifest_path, patch.get("sidecar"))
        try:
            body = read_regular(path, SIDECAR_LIMIT_BYTES + 1)  # a FIFO or /dev/zero: refused, not read
        except OSError as exc:
            raise RestoreError("repo %s: patch sidecar %s: %s" % (name, path, exc.strerror or exc)) from None
        if len(body) > SIDECAR_LIMIT_BYTES:
            raise RestoreError("repo %s: patch sidecar %s: over %d MB, not a recorded patch"
                               % (name, path, SIDECAR_LIMIT_BYTES >> 20))
        where = "patch sidecar %s" % path
    elif patch.get("not_stored"):
        raise RestoreError("repo %s: the patch was not stored (%s): its exact tree cannot be rebuilt"
                           % (name, safe_text(scalar(patch.get("not_stored")) or "no reason recorded")))
    else:
        raise RestoreError("repo %s had uncommitted changes but no patch was recorded: its exact tree "
                           "cannot be rebuilt" % name)
    if not expected:
        raise RestoreError("repo %s: the %s has no recorded sha256 to verify it against" % (name, where))
    actual = hashlib.sha256(body).hexdigest()
    if actual != expected:
        raise RestoreError("repo %s: the %s does not match its recorded sha256 (%s, found %s): altered or "
                           "from another run" % (name, where, expected[:12], actual[:12]))
    return body or None


def prepare(doc: Mapping[str, Any], manifest_path: str, sources: Mapping[str, str],
            env: Mapping[str, str], allow_incomplete: bool = False) -> List[Source]:
    """Check everything that can be checked before creating anything."""
    repos = section(doc, "code")
    if not repos:
        raise RestoreError("the manifest records no repository")
    unknown = sorted(set(sources) - set(map(str, repos)))
    if unknown:
        raise RestoreError("--from %s: the manifest records no repo of that name (it has: %s)"
                           % (", ".join(unknown), ", ".join(sorted(map(str, repos)))))
    home = env.get("HOME")
    out: List[Source] = []
    for name in sorted(repos, key=str):
        r = repos[name] if isinstance(repos[name], dict) else {}
        name = str(name)
        if not _NAME.match(name):
            raise RestoreError("repo name %r cannot be a directory name; refused" % name)
        commit = scalar(r.get("commit"))
        if not commit or not _SHA.match(commit):
            raise RestoreError("repo %s: no full commit recorded" % name)
        src = sources.get(name) or fields.resolve_home(r.get("path"), home)
        if not src or not os.path.isdir(src):
            raise RestoreError("repo %s: no local repository at %s; give --from %s=PATH"
                               % (name, safe_text(src or r.get("path") or "?"), name))
        patch = r.get("patch") if isinstance(r.get("patch"), dict) else None
        body = None
        notes: List[str] = []
        why = fields.patch_incomplete(patch)
        if why and not allow_incomplete:
            raise Refused("repo %s: the recorded patch is incomplete (%s): the exact tree cannot be rebuilt; "
                          "--allow-incomplete restores the commit with the part that was recorded"
                          % (name, safe_text(why)))
        if why:
            notes.append("repo %s: the patch is incomplete (%s): the uncommitted changes to tracked files are "
                         "missing from the restored tree" % (name, safe_text(why)))
        if patch is not None and (scalar(patch.get("sha256")) or "text" in patch or "sidecar" in patch):
            body = patch_bytes(name, patch, manifest_path)
            redacted = patch.get("redacted_lines")
            if isinstance(redacted, list) and redacted:
                notes.append("repo %s: the patch had redacted lines; they hold placeholders, not the original "
                             "text" % name)
            elif patch.get("restores_exactly") is False and not why:
                notes.append("repo %s: the patch does not restore the tree exactly: untracked files it only "
                             "lists (binary, large, or beyond the limits) are missing" % name)
        elif r.get("dirty") is True:
            raise RestoreError("repo %s had uncommitted changes but no patch was recorded: its exact tree "
                               "cannot be rebuilt" % name)
        subs = []
        for s in r.get("submodules") or []:
            if not isinstance(s, dict):
                continue
            path = scalar(s.get("path"))
            sha = scalar(s.get("checked_out_sha")) or scalar(s.get("recorded_sha"))
            if not path or not sha:
                notes.append("repo %s: a submodule without path or SHA was skipped" % name)
                continue
            parts = path.split("/")
            if os.path.isabs(path) or ".." in parts or not _SHA.match(sha):
                raise RestoreError("repo %s: submodule path %r or SHA %r is not safe to use" % (name, path, sha))
            if s.get("dirty") is True:
                notes.append("repo %s: submodule %s had uncommitted changes, which are not recorded" % (name, path))
            subs.append({"path": path, "sha": sha})
        out.append(Source(name, os.path.abspath(src), commit, body, subs, notes))
    return out


def check_inside(root: str, path: str) -> None:
    """Refuse unless writing ``path`` stays under ``root`` (a real directory): no component below
    ``root`` may be a symbolic link. Called just before each write, as an earlier step (a patch that
    adds ``third -> /elsewhere``, a submodule's own checkout) may have made one."""
    rel = os.path.relpath(path, root)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        raise Refused("%s is outside %s; refused" % (safe_text(path), safe_text(root)))
    cur = root
    for part in rel.split(os.sep):
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except OSError:
            return  # absent: git creates it (and what is below it) as a real directory
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(cur)
            except OSError:
                target = "?"
            raise Refused("%s is a symbolic link (to %s): writing %s through it would leave %s; refused"
                          % (safe_text(cur), safe_text(target), safe_text(path), safe_text(root)))


def restore_one(src: Source, dest: str, root: str) -> None:
    """Clone, check out, apply the patch, check out submodules, each write checked to stay in ``root``.
    Raises :class:`RestoreError`."""
    check_inside(root, dest)
    res = _git("clone", "--quiet", "--no-checkout", src.source, dest)
    if not res.ok:
        raise RestoreError("repo %s: could not clone %s: %s" % (src.name, src.source, res.describe()))
    res = _git("-C", dest, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", src.commit)
    if not res.ok:
        raise RestoreError("repo %s: commit %s is not in %s: %s" % (src.name, src.commit[:12], src.source,
                                                                   res.describe()))
    if src.patch:
        res = _git("-C", dest, "apply", "--binary", "--whitespace=nowarn", stdin=src.patch)
        if not res.ok:
            raise RestoreError("repo %s: the recorded patch does not apply: %s" % (src.name, res.describe()))
    for sub in src.submodules:
        origin = os.path.join(src.source, sub["path"])
        target = os.path.join(dest, sub["path"])
        if not os.path.exists(os.path.join(origin, ".git")):
            # not checked out there: its object store may still be in .git/modules/<path> (the default name)
            origin = os.path.join(src.source, ".git", "modules", sub["path"])
        if not os.path.isdir(origin):
            raise RestoreError("repo %s: submodule %s is not checked out in %s" % (src.name, sub["path"],
                                                                                 src.source))
        check_inside(root, target)
        if os.path.isdir(target) and os.listdir(target):
            raise RestoreError("repo %s: submodule path %s is not empty after checkout" % (src.name, sub["path"]))
        res = _git("clone", "--quiet", "--no-checkout", origin, target)
        if res.ok:
            res = _git("-C", target, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach",
                       sub["sha"])
        if not res.ok:
            raise RestoreError("repo %s: submodule %s at %s: %s" % (src.name, sub["path"], sub["sha"][:12],
                                                                   res.describe()))


def restore(doc: Mapping[str, Any], manifest_path: str, into: str, *, sources: Mapping[str, str],
            env: Mapping[str, str], allow_incomplete: bool = False) -> List[str]:
    """Restore every repo under ``into``; returns notes. On failure nothing created is left behind."""
    if os.path.exists(into) and not os.path.isdir(into):
        raise RestoreError("%s exists and is not a directory" % into)
    if os.path.isdir(into) and os.listdir(into):
        raise RestoreError("%s is not empty; restore only writes into a new or empty directory" % into)
    plan = prepare(doc, manifest_path, sources, env, allow_incomplete)
    created_root = not os.path.isdir(into)
    try:
        os.makedirs(into, exist_ok=True)
    except OSError as exc:
        raise RestoreError("cannot create %s: %s" % (into, exc.strerror or exc)) from None
    made: List[str] = []
    root = os.path.realpath(into)  # where the user pointed us; below it, no link is followed
    try:
        for src in plan:
            dest = os.path.join(root, src.name)
            made.append(dest)
            restore_one(src, dest, root)
    except BaseException:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        if created_root:
            shutil.rmtree(into, ignore_errors=True)
        raise
    return [n for src in plan for n in src.notes]


def run_cli(path: str, into: str, *, sources: Mapping[str, str], env: Optional[Mapping[str, str]] = None,
            allow_incomplete: bool = False) -> int:
    """The subcommand: 0 restored, 1 could not restore (nothing left behind), 2 unreadable manifest or
    refused (a write that would leave ``into``, an incomplete patch without ``--allow-incomplete``)."""
    env = dict(os.environ if env is None else env)
    doc = read_with_notes("restore", path)
    if doc is None:
        return Exit.USAGE
    try:
        notes = restore(doc, path, into, sources=sources, env=env, allow_incomplete=allow_incomplete)
    except RestoreError as exc:
        sys.stderr.write("relaxrepro restore: %s\n" % safe_text(exc, 2000))
        return exc.code
    for n in notes:
        sys.stderr.write("relaxrepro restore: note: %s\n" % safe_text(n))
    for name in sorted(section(doc, "code"), key=str):
        say("%s", os.path.join(into, str(name)), out=sys.stdout)
    return Exit.OK


def run(args: argparse.Namespace) -> int:
    if not resolve_args("restore", args, "manifest"):
        return Exit.USAGE
    return run_cli(args.manifest, args.into, sources=pairs(args.sources, "--from"),
                   allow_incomplete=args.allow_incomplete)
