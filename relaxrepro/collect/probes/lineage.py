"""Lineage: which run this run was derived from, the sweep it belongs to, a note.

``--parent RUN_ID|MANIFEST``, ``--group`` and ``--note`` (or ``RELAXREPRO_PARENT`` / ``RELAXREPRO_GROUP``)
are recorded as given. Edges are also *derived*: when a resolved argument such as ``load`` or
``resume_from`` points into another run's output directory holding a manifest, that run is recorded
with the argument's name as the reason. A parent that cannot be found is kept as given and flagged
(``found: false``), never dropped: the manifest may simply live on another cluster.

The section is built by :func:`derive`, a :class:`runner.Deriver` run after every probe, because it
reads ``config.resolved_args`` that the config probe fills.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ...manifest.flat import ARG_DEPTH, flatten
from ...manifest.model import OUTPUT_DIR_ENV, READ_LIMIT_BYTES
from ...manifest.reader import parse_json, read_bytes
from ...std import deadline
from ..arguments import parse_argv_args
from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

CHECKPOINT_ARG = re.compile(r"(^|_)(load|ckpt|checkpoint|resume|restore|init_from|pretrained)(_|$)")
"""Argument names that point at another run's output: Megatron/slime ``--load``/``--ref-load``,
HF ``resume_from_checkpoint``, ``pretrained_checkpoint``, nanoGPT ``init_from``, Lightning ``ckpt_path``."""

_MAX_UP = 3
"""Directories above a checkpoint path searched for a manifest (Megatron: run/ckpt/iter_0000100/...)."""

_MAX_ENTRIES = 20000
"""Entries read from one directory before giving up: a flat dataset directory is not a run directory."""

MANIFEST_RE = re.compile(r"^manifest_(.+)\.json$")


def derive(doc: Dict[str, Any], ctx: Context) -> Optional[Outcome]:
    """The ``lineage`` section from the options, the environment and the resolved arguments."""
    opts = ctx.options
    given = opts.get("parent") or ctx.env.get("RELAXREPRO_PARENT") or None
    group = opts.get("group") or ctx.env.get("RELAXREPRO_GROUP") or None
    note = opts.get("note") or None
    out = Outcome()
    section: Dict[str, Any] = {}
    own = str(doc.get("run_id") or "")
    search = _search_dirs(ctx)
    if given is not None:
        parent = _within(ctx, lambda: resolve_parent(given, search, cwd=ctx.cwd))
        if parent is None:
            parent = {"given": str(given), "run_id": None, "reason": "explicit", "found": False}
            out.warn("looking for parent %s took over %g s (a slow filesystem?); recorded as given"
                     % (given, _LOOKUP_S))
        elif not parent["found"]:
            out.warn("parent %s not found (looked in %s); recorded as given"
                     % (parent["given"], ", ".join(search) or "no directory"))
        section["parent"] = parent
    args = resolved_args(doc, ctx)
    edges = _within(ctx, lambda: derived_edges(args, cwd=ctx.cwd))
    if edges is None:
        edges = []
        out.warn("looking for runs behind checkpoint arguments took over %g s; none recorded" % _LOOKUP_S)
    derived = [d for d in edges if d["run_id"] != own]
    if derived:
        section["derived"] = derived
        if "parent" not in section:
            first = derived[0]
            section["parent"] = {"run_id": first["run_id"], "path": first["path"], "reason": first["reason"],
                                 "found": True}
    if group is not None:
        section["group"] = str(group)
    if note is not None:
        section["note"] = str(note)
    if opts.get("replay_of"):
        section["replay_of"] = str(opts["replay_of"])  # rerun --quick/--full
    if not section:
        return None
    out.data = {"lineage": section}
    return out


_LOOKUP_S = 2.0
"""Seconds the file lookups of one derive may take: derivers run outside the probes' threads, and a
hung network filesystem must not hold the training back."""


def _within(ctx: Context, fn: Callable[[], Any]) -> Any:
    """``fn()`` in a daemon thread for at most ``_LOOKUP_S`` (and the collection's deadline); None if late.

    An exception counts as a late answer: the deriver notes it and carries on."""
    return deadline.call(fn, max(min(_LOOKUP_S, ctx.remaining()), 0.2), name="relaxrepro-lineage").value


def _search_dirs(ctx: Context) -> List[str]:
    """Where a parent given by run id is looked for: this run's output directory, its parent, the cwd."""
    dirs: List[str] = []
    out = ctx.options.get("output_dir") or ctx.env.get(OUTPUT_DIR_ENV)  # an explicit one only: not "."
    for d in ([out, os.path.join(out, "..")] if out else []) + [ctx.cwd]:
        full = os.path.normpath(os.path.join(ctx.cwd, d))
        if full not in dirs:
            dirs.append(full)
    return dirs


def resolve_parent(given: Any, search: Sequence[str], *, cwd: str = ".") -> Dict[str, Any]:
    """``{given, run_id, path, reason: "explicit", found}`` for a run id, a manifest or a run directory.

    A run id is looked for as ``manifest_<id>.json`` in each of ``search`` and one level below it
    (sweeps keep one directory per run side by side).
    """
    if isinstance(given, Mapping):  # the API's parent=<Manifest>
        path = getattr(given, "path", None)
        entry: Dict[str, Any] = {"given": str(given.get("run_id") or path or "?"), "reason": "explicit",
                                 "run_id": str(given.get("run_id")) if given.get("run_id") else None,
                                 "found": bool(given.get("run_id"))}
        if path:
            entry["path"] = os.path.abspath(path)
        return entry
    text = str(given).strip()
    entry = {"given": text, "run_id": None, "reason": "explicit", "found": False}
    candidate = os.path.join(cwd, os.path.expanduser(text))
    looks_like_path = os.sep in text or text.endswith(".json") or os.path.exists(candidate)
    if looks_like_path:
        entry["path"] = os.path.abspath(candidate)
        m = MANIFEST_RE.match(os.path.basename(text))
        if m:
            entry["run_id"] = m.group(1)
        if os.path.isdir(candidate):
            found = newest_manifest(candidate)
            if found:
                entry.update(run_id=found[0], path=found[1], found=True)
        elif os.path.isfile(candidate):
            run_id = read_run_id(candidate)
            if run_id:
                entry.update(run_id=run_id, found=True)
        return entry
    entry["run_id"] = text
    name = "manifest_%s.json" % text
    for d in search:
        for path in _candidates(d, name):
            if os.path.isfile(path) and read_run_id(path) == text:
                entry.update(path=os.path.abspath(path), found=True)
                return entry
    return entry


def _candidates(directory: str, name: str) -> Iterator[str]:
    yield os.path.join(directory, name)
    try:
        with os.scandir(directory) as it:
            for n, e in enumerate(it):
                if n >= _MAX_ENTRIES:
                    return
                if not e.name.startswith(".") and e.is_dir():
                    yield os.path.join(e.path, name)
    except OSError:
        return


def read_run_id(path: str) -> Optional[str]:
    """The run id of a manifest file, or None when it is unreadable or not a manifest."""
    try:
        doc = parse_json(read_bytes(path, READ_LIMIT_BYTES).decode("utf-8"))
    except ValueError:  # ReadError and ManifestError, UnicodeDecodeError
        return None
    run_id = doc.get("run_id") if isinstance(doc, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def newest_manifest(directory: str) -> Optional[Tuple[str, str]]:
    """(run id, path) of the most recently written manifest directly in ``directory``."""
    best: Optional[Tuple[float, str]] = None
    try:
        with os.scandir(directory) as it:
            for n, e in enumerate(it):
                if n >= _MAX_ENTRIES:
                    break
                if MANIFEST_RE.match(e.name) and e.is_file():
                    try:
                        key = (e.stat().st_mtime, e.path)
                    except OSError:
                        continue
                    if best is None or key > best:
                        best = key
    except OSError:
        return None
    if best is None:
        return None
    run_id = read_run_id(best[1])
    return (run_id, os.path.abspath(best[1])) if run_id else None


def resolved_args(doc: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    """``config.resolved_args`` flattened to dotted names; before the config probe fills it, the
    API's ``args`` and the recorded command's ``--name value`` pairs stand in."""
    config = doc.get("config")
    args = config.get("resolved_args") if isinstance(config, dict) else None
    if not isinstance(args, dict):
        args = _args_from_options(ctx.options.get("args"))
        if not args:
            args = parse_argv_args(ctx.argv)
    return flatten(args, max_depth=ARG_DEPTH)


def _args_from_options(args: Any) -> Dict[str, Any]:
    if isinstance(args, Mapping):
        return dict(args)
    try:
        return dict(vars(args)) if args is not None else {}
    except TypeError:
        return {}


def derived_edges(args: Mapping[str, Any], *, cwd: str = ".") -> List[Dict[str, Any]]:
    """Runs whose output directory a checkpoint-like argument points into, one per run, in arg order."""
    edges: List[Dict[str, Any]] = []
    seen = set()
    stop = _ancestors(os.path.abspath(cwd))
    flat = flatten(dict(args), max_depth=ARG_DEPTH)
    for name in sorted(flat):
        value = flat[name]
        leaf = name.rsplit(".", 1)[-1].lower().replace("-", "_")
        if not isinstance(value, str) or not value.strip() or not CHECKPOINT_ARG.search(leaf):
            continue
        found = run_dir_manifest(os.path.join(cwd, os.path.expanduser(value.strip())), stop=stop)
        if found and found[0] not in seen:
            seen.add(found[0])
            edges.append({"run_id": found[0], "path": found[1], "reason": name, "found": True})
    return edges


def _ancestors(path: str) -> set:
    out = set()
    while True:
        out.add(path)
        parent = os.path.dirname(path)
        if parent == path:
            return out
        path = parent


def run_dir_manifest(path: str, *, stop: Optional[set] = None) -> Optional[Tuple[str, str]]:
    """The newest manifest in ``path``'s directory or up to three directories above it.

    Directories in ``stop`` (the working directory and its ancestors) are never searched: manifests
    written to ``.`` by earlier runs would otherwise make every relative checkpoint path their child.
    """
    path = os.path.abspath(path)
    if not os.path.exists(path):
        return None
    d = path if os.path.isdir(path) else os.path.dirname(path)
    for _ in range(_MAX_UP + 1):
        if stop and d in stop:
            return None
        found = newest_manifest(d)
        if found:
            return found
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
    return None
