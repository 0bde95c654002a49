"""Code state of every repository that shaped the run: commit, branch, dirty state, the exact patch.

Discovery is :mod:`..repos`; reading ``.git`` without git is :mod:`..gitfs`. Here: pure parsers of
git's machine output (``parse_*``), the pure choice between git's answers and the ``.git`` files
(:func:`choose_state`, :func:`submodule_records`), and a thin collector that runs a few git calls per
repository, all repositories in parallel, under the probe's budget. The patch is :mod:`.git_patch`.

Every git call passes ``safe.directory=*`` (repos owned by another uid inside Apptainer/Docker fail
with "detected dubious ownership" otherwise) and never writes: ``GIT_OPTIONAL_LOCKS=0`` stops
``git status`` from refreshing the index, so a training job never races a developer's git.
"""

from __future__ import annotations

import os
import re

from ...manifest.redact import strip_credentials
from ...manifest.redact.prefilter import Stream
from ...std import proc
from ...std.deadline import Running, call_all, start
from ...std.files import read_regular
from .. import gitfs, interpreter, repos
from ..context import Context
from ..runner import Outcome
from .git_patch import PatchParts, embed_untracked, patch_record, show, stream_for

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Tuple

UNTRACKED_LISTED = 100
"""Untracked files named (with sizes) in ``untracked.files``; the count is always exact."""
_MARGIN = 0.4
"""Seconds kept back from the probe budget so a killed git still leaves time to report."""

# Per-call config that makes output parseable whatever the user's config says; nothing is written.
_GIT_CONFIG = (
    "safe.directory=*",
    "core.quotepath=true",       # non-UTF-8 and odd names come out C-quoted, ASCII only
    "core.fsmonitor=false",      # never start a file-system monitor daemon from a training job
    "diff.noprefix=false",
    "diff.mnemonicprefix=false",
    "diff.relative=false",
    "color.ui=false",
)
_GIT_ENV_DROP = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_PAGER",
    "GIT_TRACE", "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF", "GIT_TRACE_PERFORMANCE", "GIT_TRACE_SETUP",
)
"""A training launcher that exported GIT_DIR (some CI runners do) would point every ``-C`` call at
the wrong repository."""


def git_argv(top: str, *args: str) -> List[str]:
    argv = ["git"]
    for item in _GIT_CONFIG:
        argv += ["-c", item]
    return argv + ["-C", top] + list(args)


def git_env(env: Dict[str, str]) -> Dict[str, str]:
    out = {k: v for k, v in env.items() if k not in _GIT_ENV_DROP}
    out.update({"LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"})
    return out


# -- pure parsers ---------------------------------------------------------------------------------

def parse_status_v2(data: bytes) -> Dict[str, Any]:
    """``git status --porcelain=v2 -z --branch``: head, upstream, changed and untracked entries.

    ``valid`` is False when no ``# branch.oid`` header came (not git's porcelain: a broken or fake
    git), so the caller records dirtiness as unknown rather than clean.
    """
    out: Dict[str, Any] = {"valid": False, "commit": None, "branch": None, "detached": False,
                           "upstream": None, "ahead": None, "behind": None, "changed": [], "untracked": []}
    tokens = data.split(b"\0")
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok:
            continue
        if tok.startswith(b"# "):
            key, _, value = tok[2:].partition(b" ")
            text = value.decode("utf-8", "backslashreplace")
            if key == b"branch.oid":
                out["valid"] = True
                out["commit"] = text if gitfs.is_sha(text) else None
            elif key == b"branch.head":
                if text == "(detached)":
                    out["detached"] = True
                else:
                    out["branch"] = text
            elif key == b"branch.upstream":
                out["upstream"] = text
            elif key == b"branch.ab":
                m = re.match(r"^\+(\d+) -(\d+)$", text)
                if m:
                    out["ahead"], out["behind"] = int(m.group(1)), int(m.group(2))
        elif tok[:2] in (b"1 ", b"2 ", b"u "):
            nfields = {b"1": 8, b"2": 9, b"u": 10}[tok[:1]]
            parts = tok.split(b" ", nfields)
            if len(parts) != nfields + 1:
                continue
            out["changed"].append({"xy": parts[1].decode("ascii", "replace"),
                                   "sub": parts[2].decode("ascii", "replace"), "path": parts[-1]})
            if tok[:1] == b"2":
                i += 1  # -z puts a rename's original path in the next token
        elif tok.startswith(b"? "):
            out["untracked"].append(tok[2:])
    return out


def submodule_flags(sub: str) -> Dict[str, bool]:
    """Porcelain v2 ``<sub>`` field ``S<c><m><u>``: commit changed, tracked changes, untracked files."""
    if not sub.startswith("S") or len(sub) != 4:
        return {}
    return {"commit_changed": sub[1] == "C", "modified": sub[2] == "M", "untracked": sub[3] == "U"}


def is_dirty(changed: List[Dict[str, Any]]) -> bool:
    """Tracked changes, staged or not; a submodule counts when it moved or has tracked changes
    inside (untracked files inside a submodule do not make the superproject dirty)."""
    for entry in changed:
        flags = submodule_flags(entry["sub"])
        if not flags or flags["commit_changed"] or flags["modified"]:
            return True
    return False


def parse_ls_tree(data: bytes) -> Dict[bytes, str]:
    """``git ls-tree -z`` -> {path: sha} of gitlinks (submodules)."""
    out: Dict[bytes, str] = {}
    for rec in data.split(b"\0"):
        meta, sep, path = rec.partition(b"\t")
        parts = meta.split(b" ")
        if sep and len(parts) == 3 and parts[1] == b"commit":
            sha = parts[2].decode("ascii", "replace")
            if gitfs.is_sha(sha):
                out[path] = sha
    return out


def parse_describe(text: str, commit: Optional[str]) -> Optional[str]:
    """``git describe --tags --always --long`` -> ``v1.2-3-g<abbrev>`` or ``<abbrev>``, checked
    against ``commit`` (``--long`` makes every answer end in the commit, so garbage is refused)."""
    lines = text.strip().splitlines()
    if not commit or len(lines) != 1 or len(lines[0]) > 200 or not re.match(r"^[^\s\x00-\x1f]+$", lines[0]):
        return None
    m = re.match(r"^(?:.+-\d+-g)?([0-9a-f]{4,64})$", lines[0])
    return lines[0] if m and commit.startswith(m.group(1)) else None




# -- git's answers or the .git files ------------------------------------------------------------

def _ok(res: Any) -> bool:
    return res is not None and not isinstance(res, Exception) and res.ok


def _failure(res: Any, what: str) -> str:
    if res is None:
        return "%s did not finish in time" % what
    if isinstance(res, Exception):
        return "%s crashed: %s" % (what, res)
    desc = res.describe().split(": ", 1)[-1]
    return "%s: %s" % (what, desc)


def choose_state(head: gitfs.Head, *, git_found: bool, bare: bool, status: Any = None,
                 describe: Any = None) -> Tuple[Dict[str, Any], List[str], Optional[Dict[str, Any]]]:
    """Commit, branch and dirty state of one repository: git's answers where git gave them, else
    what ``.git`` says (``head``, from :func:`gitfs.read_head`).

    ``status`` and ``describe`` are the captured ``git status --porcelain=v2`` and ``git describe``
    calls: a ProcResult, None when the call did not finish in time (or was not made: git missing,
    or ``status`` of a bare repository), the exception when running it crashed. git that is missing,
    fails, hangs, prints no porcelain or refuses the repository (a foreign owner's: "detected dubious
    ownership") leaves commit and branch to the files and the dirty state unknown, with the reason.
    Returns (record fields, problems for the warnings, the parsed status when git's view was taken).
    """
    fields: Dict[str, Any] = {"commit": head.commit}
    if head.detached:
        fields["detached"] = True
    elif head.branch:
        fields["branch"] = head.branch
    if head.unborn:
        fields["unborn"] = True
    problems = [head.reason] if head.reason else []
    if not git_found:
        fields.update(dirty=None, dirty_unknown_reason="git not found on PATH: commit and branch read from .git files")
        problems.append("git not found on PATH: dirty state unknown")
        return fields, problems, None
    if bare:
        fields.update(dirty=None, dirty_unknown_reason="bare repository: no working tree")
        if _ok(describe):
            fields["describe"] = parse_describe(describe.stdout.decode("utf-8", "replace"), fields["commit"])
        return fields, problems, None

    st = parse_status_v2(status.stdout) if _ok(status) else None
    if _ok(describe):
        fields["describe"] = parse_describe(describe.stdout.decode("utf-8", "replace"),
                                            (st or {}).get("commit") or fields["commit"])
    if st is None or not st["valid"]:
        why = _failure(status, "git status") if st is None else "git status printed no porcelain v2 output"
        fields.update(dirty=None, dirty_unknown_reason=why)
        problems.append(why)
        return fields, problems, None

    # git's view wins over the file read when both exist (e.g. reftable repos).
    if st["commit"]:
        fields["commit"] = st["commit"]
    if st["branch"] and not st["detached"]:
        fields["branch"] = st["branch"]
        fields.pop("detached", None)
    elif st["detached"]:
        fields["detached"] = True
        fields.pop("branch", None)
    if st["upstream"]:
        fields["upstream"] = {"name": st["upstream"], "ahead": st["ahead"], "behind": st["behind"]}
    fields["dirty"] = is_dirty(st["changed"])
    return fields, problems, st


def submodule_records(modules: List[Tuple[str, str]], checked_out: Dict[str, Optional[gitfs.Head]],
                      recorded: Dict[bytes, str], changed: Optional[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """One entry per ``.gitmodules`` submodule: the commit the superproject records (``git ls-tree``),
    the one checked out (its ``.git`` files: ``checked_out`` maps each path to its HEAD, None when it
    is not initialized), and its dirty state from the superproject's status (``changed``; None: unknown).
    """
    flags = {c["path"]: submodule_flags(c["sub"]) for c in (changed or []) if submodule_flags(c["sub"])}
    subs = []
    for _name, path in modules:
        key = path.encode("utf-8", "surrogateescape")
        head = checked_out.get(path)
        f = flags.get(key, {})
        entry: Dict[str, Any] = {
            "path": path,
            "recorded_sha": recorded.get(key),
            "checked_out_sha": head.commit if head is not None else None,
            "initialized": head is not None,
            "dirty": (bool(f.get("modified")) if changed is not None else None) if head is not None else None,
        }
        if f.get("untracked"):
            entry["untracked"] = True
        subs.append(entry)
    return subs


# -- collecting one repository -------------------------------------------------------------------

class _Git:
    """Runs git for one repository within an absolute deadline (works from any thread)."""

    def __init__(self, ctx: Context, top: str, deadline: float) -> None:
        self.ctx, self.top, self.deadline = ctx, top, deadline
        self.env = git_env(ctx.env)

    def __call__(self, *args: str, on_stdout: Optional[Callable[[bytes], None]] = None) -> Any:
        left = self.deadline - self.ctx.clock()
        return self.ctx.run(git_argv(self.top, *args), timeout=max(left, 0.0), env=self.env, cwd=self.top,
                            text=False, on_stdout=on_stdout)


def parallel(tasks: List[Callable[[], Any]], deadline: float, clock: Callable[[], float]) -> List[Any]:
    """Run ``tasks`` at once; each one's value, the exception it raised, or None when still running at
    ``deadline`` (each gets 0.2 s more from when its wait began: a bug in one costs that one only)."""
    calls = call_all(tasks, deadline, clock=clock, grace=0.2, name="relaxrepro-git")
    return [c.value if c.ok else c.error for c in calls]


def collect_repo(ctx: Context, found: repos.Found, deadline: float, redactor: Any,
                 private: Optional[Dict[str, bytes]] = None) -> Tuple[Dict[str, Any], List[str]]:
    """Everything about one repository; never raises. Returns (record, warnings)."""
    warnings: List[str] = []
    rec: Dict[str, Any] = {"path": found.top, "found_by": list(found.found_by)}
    if not found.has_git:
        rec.update({"commit": None, "dirty": None,
                    "absent_reason": "no .git at or above %s: sources without version control "
                                     "(copied into an image?)" % found.top})
        warnings.append("%s: no .git: code state unknown" % found.name)
        return rec, warnings
    gd = gitfs.locate(found.top)
    if gd is None:
        rec.update({"commit": None, "dirty": None, "absent_reason": "unreadable .git at %s" % found.top})
        return rec, ["%s: unreadable .git" % found.name]
    config = gitfs.read_config(gd)
    head = gitfs.read_head(gd)
    rec.update({
        "commit": head.commit,
        "shallow": gitfs.is_shallow(gd),
        "worktree": gd.linked_worktree,
        "bare": gd.bare,
        "remotes": {n: strip_credentials(u, users="secret", query="secrets")
                    for n, u in sorted(gitfs.remotes(config).items())},
    })
    modules = []
    if not gd.bare:
        # A run started mid-merge or mid-rebase ran a tree no commit describes, conflict markers and all.
        rec["operation"] = gitfs.read_operation(gd)
        gm = _read_bytes(os.path.join(found.top, ".gitmodules"), 1 << 20)
        modules = gitfs.parse_gitmodules(gm.decode("utf-8", "replace")) if gm else []

    git_found = ctx.which("git") is not None
    run = _Git(ctx, found.top, deadline)
    status: Any = None
    describe: Any = None
    listed: Any = None  # git ls-tree of the submodules' gitlinks
    if git_found and gd.bare:
        describe = run("describe", "--tags", "--always", "--long", "--abbrev=12")
    elif git_found:
        base = "HEAD" if head.commit or not head.unborn else gitfs.EMPTY_TREE[gitfs.object_format(config)]
        tasks: List[Callable[[], Any]] = [
            lambda: run("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--no-renames",
                        "--ignore-submodules=none"),
            lambda: run("describe", "--tags", "--always", "--long", "--abbrev=12"),
        ]
        if modules:
            tasks.append(lambda: run("ls-tree", "-z", "HEAD", "--", *[p for _, p in modules]))
        status, describe, listed = (parallel(tasks, deadline, ctx.clock) + [None])[:3]
    fields, problems, st = choose_state(head, git_found=git_found, bare=gd.bare, status=status, describe=describe)
    rec.update(fields)
    warnings.extend("%s: %s" % (found.name, p) for p in problems)
    if st is None:
        _add_submodules(rec, found.top, modules, {}, None)
        return _prune(rec), warnings

    untracked = st["untracked"]
    rec["untracked"] = {
        "count": len(untracked),
        "files": [{"path": show(n), "size": _size(found.top, n)} for n in untracked[:UNTRACKED_LISTED]],
        "truncated": len(untracked) > UNTRACKED_LISTED,
    }
    ls_tree = parse_ls_tree(listed.stdout) if _ok(listed) else {}
    _add_submodules(rec, found.top, modules, ls_tree, st["changed"])

    own_changes = [c for c in st["changed"] if not submodule_flags(c["sub"])]
    if own_changes or untracked:
        parts = PatchParts(files=[show(c["path"]) for c in own_changes])
        if own_changes:
            stream = stream_for(redactor)
            counts = dict(redactor.counts) if stream is not None else {}
            parts.body, parts.incomplete_reason, parts.incomplete = tracked_patch(run, base, own_changes, deadline,
                                                                                  ctx.clock, stream)
            if stream is not None and parts.body:
                parts.streamed = stream.redacted(parts.body)
            if stream is not None and parts.streamed is None:
                # What the stream redacted is not the patch kept (over the limit, timed out, read whole again):
                # the rules it fired count for nothing.
                redactor.counts = counts
            if parts.incomplete:
                warnings.append("%s: uncommitted changes not fully recorded (%s: %s)" % (
                    found.name, parts.incomplete_reason, parts.incomplete))
        embed_untracked(found.top, untracked, parts)
        patch, original = patch_record(parts, redactor)
        if private is not None:
            private[found.name] = original
            patch["private"] = True
        rec["patch"] = patch
    return _prune(rec), warnings


_DIFF_OPTS = ("--binary", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index",
              "--ignore-submodules=all", "--src-prefix=a/", "--dst-prefix=b/")
_MAX_PATHSPEC = 2000
"""Changed paths passed to ``diff-files``; more than this and it looks at every file instead."""


def tracked_patch(run: _Git, base: str, changed: List[Dict[str, Any]], deadline: float,
                  clock: Callable[[], float], stream: Optional[Stream] = None
                  ) -> Tuple[bytes, Optional[str], Optional[str]]:
    """The staged then the unstaged change, as one input ``git apply`` restores in order.

    ``git status`` already stat()ed every file; ``git diff HEAD`` would do it again (and, limited to
    paths, walks the index pathologically slowly: 3 s on 40k files in git 2.39). So: HEAD->index
    from ``diff-index --cached`` (no worktree access) and index->worktree from ``diff-files`` on the
    paths status named. A conflicted merge falls back to ``git diff HEAD``, the only form of an
    unmerged path that applies.

    Returns (patch, None, None), or (b"", reason, why) when it could not be taken whole: reason is
    ``timeout`` (git diff ran out of the budget), ``size`` (over the capture limit) or ``error``.
    ``stream``: fed the patch as git prints it, when it is one git command's output (the usual case: no staged
    change), so that it is redacted meanwhile (:class:`~relaxrepro.manifest.redact.prefilter.Stream`).
    """
    feed = stream.feed if stream is not None else None
    if any(c["xy"] in ("DD", "AU", "UD", "UA", "DU", "AA", "UU") for c in changed):
        jobs = [lambda: run("diff", *_DIFF_OPTS, base, "--", on_stdout=feed)]
    else:
        unstaged = [os.fsdecode(c["path"]) for c in changed if c["xy"][1:] != "."]
        jobs = []
        staged = any(c["xy"][:1] != "." for c in changed)
        if staged:
            jobs.append(lambda: run("diff-index", "--cached", "-p", *_DIFF_OPTS, base, "--",
                                    on_stdout=None if unstaged else feed))
        if unstaged:
            spec = ["--", *unstaged] if len(unstaged) <= _MAX_PATHSPEC else ["--"]
            jobs.append(lambda: run("--literal-pathspecs", "diff-files", "-p", *_DIFF_OPTS, *spec,
                                    on_stdout=None if staged else feed))
    body = b""
    for res in parallel(jobs, deadline, clock):
        if res is None or getattr(res, "timed_out", False):
            return b"", "timeout", _failure(res, "git diff")
        if _ok(res) and res.truncated:
            return b"", "size", "git diff output over the %d MiB capture limit" % (proc.MAX_OUTPUT >> 20)
        if not _ok(res):
            return b"", "error", _failure(res, "git diff")
        if res.stdout and not res.stdout.startswith(b"diff --git "):
            return b"", "error", "git diff printed no patch"
        body += res.stdout
    return body, None, None


def _prune(rec: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in rec.items() if v is not None or k in ("commit", "dirty")}


def _size(top: str, name: bytes) -> Optional[int]:
    try:
        return os.lstat(os.path.join(os.fsencode(top), name)).st_size
    except OSError:
        return None


def _read_bytes(path: str, limit: int) -> Optional[bytes]:
    try:
        return read_regular(path, limit)
    except OSError:
        return None


def _add_submodules(rec: Dict[str, Any], top: str, modules: List[Tuple[str, str]], recorded: Dict[bytes, str],
                    changed: Optional[List[Dict[str, Any]]]) -> None:
    """Read each submodule's HEAD from its ``.git`` files and record them all (:func:`submodule_records`)."""
    if not modules:
        return
    checked_out: Dict[str, Optional[gitfs.Head]] = {}
    for _name, path in modules:
        sub_gd = gitfs.locate(os.path.join(top, path))
        checked_out[path] = gitfs.read_head(sub_gd) if sub_gd else None
    rec["submodules"] = submodule_records(modules, checked_out, recorded, changed)


# -- the probe ------------------------------------------------------------------------------------

def collect(ctx: Context) -> Outcome:
    deadline = ctx.clock() + max(ctx.budget() - _MARGIN, 0.1)
    problems: List[str] = []  # make the probe partial (or timeout)
    notes: List[str] = []     # for the reader: a script that is not there, a cwd outside any repo
    explicit = {}
    for name, path in sorted((ctx.options.get("repos") or {}).items()):
        if os.path.exists(os.path.join(ctx.cwd, os.path.expanduser(str(path)))):
            explicit[str(name)] = str(path)
        else:
            problems.append("repo %s: %s does not exist" % (name, path))
    redactor = ctx.redactor  # the run's policy: --keep-paths and --redact-pattern reach the patches too
    before = dict(getattr(redactor, "counts", {}))  # shared with the rest of the run: count only ours
    private: Optional[Dict[str, bytes]] = ctx.memo("private_sidecars", dict) if ctx.options.get(
        "private_patch") else None
    # The repositories known without the training interpreter (the working directory's, the script's, --repo's)
    # are collected while interpreter.resolve waits on it: a big patch is taken and redacted meanwhile (the
    # bench's 3.5 MB patch, ~0.4 s, used to start after a ~0.25 s wait).
    # Each keeps its private patch apart until it is known to be used under the same name: one found again
    # under another name (an editable install taking it) is waited for and dropped, never written for.
    early: Dict[Tuple[str, str, bool], Tuple[Running, Optional[Dict[str, bytes]]]] = {}
    for f in repos.discover(cwd=ctx.cwd, argv=ctx.argv, env=ctx.env, explicit=explicit, warnings=[]):
        own: Optional[Dict[str, bytes]] = {} if private is not None else None
        early[_key(f)] = (start(_bind(ctx, f, deadline, redactor, own), name="relaxrepro-git", clock=ctx.clock), own)
    site_dirs: List[str] = []
    try:
        site_dirs = interpreter.resolve(ctx).site_dirs
    except Exception as exc:  # editable installs are a bonus, never the reason to fail
        notes.append("training interpreter unknown (%s): editable installs not searched" % exc)
    found = repos.discover(cwd=ctx.cwd, argv=ctx.argv, env=ctx.env, explicit=explicit, site_dirs=site_dirs,
                           warnings=notes)
    if not found:
        return Outcome(status="absent", warnings=problems + notes)

    code: Dict[str, Any] = {}
    used = {_key(f) for f in found}
    _collect_all(ctx, found, deadline, redactor, private, code, problems,
                 {k: run for k, (run, _) in early.items() if k in used})
    for key, (run, own) in early.items():
        if key not in used:
            run.wait(max(deadline + 0.3 - ctx.clock(), 0.0))
        elif private is not None and own:
            private.update(own)
    # A submodule with changes inside gets its own record (and patch), keyed "<repo>/<path>": the
    # superproject's patch leaves submodules out, as `git apply` cannot reach into them.
    inner = []
    known = {os.path.realpath(f.top): f.name for f in found}
    for name in sorted(code):
        for sub in code[name].get("submodules") or []:
            if sub.get("initialized") and (sub.get("dirty") or sub.get("untracked")):
                top = os.path.join(code[name]["path"], sub["path"])
                if os.path.realpath(top) in known:  # also on PYTHONPATH, say: recorded once
                    sub["repo"] = known[os.path.realpath(top)]
                    continue
                sub["repo"] = "%s/%s" % (name, sub["path"])
                inner.append(repos.Found(top=top, name=sub["repo"], found_by=["submodule"]))
    _collect_all(ctx, inner, deadline, redactor, private, code, problems)

    out = Outcome(data={"code": code}, status=probe_status(code, problems), warnings=problems + notes)
    counts = {k: v - before.get(k, 0) for k, v in getattr(redactor, "counts", {}).items() if v - before.get(k, 0)}
    if counts:  # patches were redacted here, before the document pass: count them with the rest
        out.data["collection"] = {"redactions": counts}
    return out


def probe_status(code: Dict[str, Any], problems: List[str]) -> str:
    """The probe's status from its repository records and problems (notes for the reader aside)."""
    if all(not r.get("commit") and r.get("absent_reason") for r in code.values()):
        return "absent"
    if any("timed out" in w or "did not finish" in w for w in problems):
        return "timeout"  # a hung git is not a missing repo: --strict must see it
    if problems or any(r.get("dirty") is None for r in code.values()):
        return "partial"
    return "ok"


def _collect_all(ctx: Context, found: List[repos.Found], deadline: float, redactor: Any,
                 private: Optional[Dict[str, bytes]], code: Dict[str, Any], problems: List[str],
                 started: Optional[Dict[Tuple[str, str, bool], Running]] = None) -> None:
    """Collect ``found`` in parallel into ``code``; a repo that did not finish still gets a record. ``started``: the
    collections already running, by :func:`_key` (a repository found again under the same name is not collected
    twice; its routes are the later discovery's)."""
    if not found:
        return
    running = [(started or {}).get(_key(f)) or start(_bind(ctx, f, deadline, redactor, private),
                                                     name="relaxrepro-git", clock=ctx.clock) for f in found]
    for r in running:  # as call_all waits: each until the deadline, plus a grace from when its wait began
        first = ctx.clock()
        left = max(deadline + 0.3, first) + 0.2 - ctx.clock()
        if left > 0:
            r.thread.join(left)
    for f, call in zip(found, [r.result() for r in running]):
        res = call.value if call.ok else call.error
        if isinstance(res, tuple):
            rec, warns = res
            rec["found_by"] = list(f.found_by)
            problems.extend(warns)
        else:
            why = "collection did not finish" if res is None else "collection crashed: %s" % res
            rec = {"path": f.top, "found_by": f.found_by, "commit": None, "dirty": None, "dirty_unknown_reason": why}
            problems.append("%s: %s" % (f.name, why))
        code[f.name] = rec


def _key(f: repos.Found) -> Tuple[str, str, bool]:
    return os.path.realpath(f.top), f.name, f.has_git


def _bind(ctx: Context, f: repos.Found, deadline: float, redactor: Any,
          private: Optional[Dict[str, bytes]]) -> Callable[[], Any]:
    return lambda: collect_repo(ctx, f, deadline, redactor, private)
