"""What the run read: data, models, checkpoints and tokenizers, fingerprinted within the launch budget.

Inputs are the paths given with ``generate --data`` / API ``data=[...]`` plus those named in the
resolved arguments under well-known keys. A local path gets a listing and a quick fingerprint; its
full digest is recorded only when the cache (filled by ``relaxrepro fingerprint``) is fresh for every
file. A hub id (``org/name`` that is not a local path) is recorded as an identifier.
"""

from __future__ import annotations

import os
import re
import time

from .. import fingerprint
from ..context import Context
from ..runner import Outcome
from . import config

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Tuple

INPUT_KEYS = config.INPUT_KEYS
REVISION_KEYS = ("revision", "model_revision", "hf_revision", "dataset_revision", "tokenizer_revision")
MAX_INPUTS = 32
# An HF hub id: "org/name" or "name", optionally "@revision"; never a path that starts with / . ~
_HUB_RE = re.compile(r"^(?P<id>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<rev>[\w./-]{1,128}))?$")
_URL_RE = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)


def _leaf(key: str) -> str:
    return key.split(".")[-1].lower().replace("-", "_")


def inputs_from_args(args: Dict[str, Any]) -> List[Tuple[str, str]]:
    """``(key, value)`` for each string under a well-known input key (lists of paths included)."""
    out: List[Tuple[str, str]] = []

    def visit(node: Any, prefix: str, depth: int) -> None:
        if depth > 8 or not isinstance(node, dict):
            return
        for key, value in node.items():
            name = prefix + str(key)
            if isinstance(value, dict):
                visit(value, name + ".", depth + 1)
            elif _leaf(str(key)) in INPUT_KEYS:
                values = value if isinstance(value, list) else [value]
                for v in values[:MAX_INPUTS]:
                    # Megatron's --data-path interleaves weights and prefixes: "0.7 a 0.3 b".
                    if isinstance(v, str) and v and not _is_number(v):
                        out.append((name, v))

    visit(args, "", 0)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _revision(args: Dict[str, Any], key: str) -> Optional[str]:
    leaf = _leaf(key)
    for name in ("%s_revision" % leaf,) + REVISION_KEYS:
        value = args.get(name)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def describe_local(path: str, cwd: str, deadline: float, cache: Optional[fingerprint.Cache]) -> Dict[str, Any]:
    """The record of one local file or tree: counts, quick digest, full digest when fresh."""
    s = fingerprint.scan(path, cwd=cwd, deadline=deadline)
    entry: Dict[str, Any] = {"path": path, "kind": s.kind}
    if s.error is not None:
        entry["error"] = s.error
        return entry
    if s.real != os.path.normpath(os.path.join(cwd, path)):
        entry["resolved"] = s.real
    entry["files"] = len(s.files)
    entry["bytes"] = s.total_bytes
    links = sum(1 for e in s.entries if e.kind == "link")
    if links:
        entry["symlinks"] = links
    if s.skipped():
        entry["skipped"] = s.skipped()
    # The cached full digest first: one lookup, and worth more than the quick one if time runs out.
    full = fingerprint.full_digest(s, cache, hash_missing=False)
    entry["quick"] = fingerprint.quick_digest(s, deadline=deadline)
    if full.sha256 is not None:
        entry["full"] = {"sha256": full.sha256}
    entry["full_status"] = full.status
    if not s.complete:
        entry["complete"] = False
    for name in ("unreadable", "vanished"):
        items = sorted(set(getattr(s, name)))
        if items:
            entry[name] = items[: fingerprint.MAX_LISTED]
            if len(items) > fingerprint.MAX_LISTED:
                entry[name + "_count"] = len(items)
    return entry


def _local_exists(value: str, cwd: str) -> bool:
    try:
        return os.path.lexists(value if os.path.isabs(value) else os.path.join(cwd, value))
    except ValueError:
        return False


def collect(ctx: Context) -> Outcome:
    out = Outcome()
    requested = ctx.options.get("data") or []
    if isinstance(requested, (str, os.PathLike)):
        requested = [requested]
    wanted: List[Tuple[str, str]] = [
        ("option", os.fspath(p) if isinstance(p, (str, os.PathLike)) else str(p)) for p in requested if p]
    args, _source, _notes = config.resolved_args(ctx)
    wanted += [("args:" + k, v) for k, v in inputs_from_args(args)]
    if not wanted:
        return Outcome(status="absent")

    cache: Optional[fingerprint.Cache] = None
    cache_path = fingerprint.default_cache_path(ctx.env)
    if cache_path is not None:
        cache = fingerprint.Cache(cache_path, readonly=True)
        for w in cache.warnings:
            out.warn(w)
    records: List[Dict[str, Any]] = []
    seen = set()
    try:
        todo = []
        for source, value in wanted:
            if value not in seen:  # --data x and --load x: fingerprinted once, under the first name
                seen.add(value)
                todo.append((source, value))
        if len(todo) > MAX_INPUTS:
            out.warn("%d inputs named; only the first %d are fingerprinted" % (len(todo), MAX_INPUTS))
            todo = todo[:MAX_INPUTS]
        for n, (source, value) in enumerate(todo):
            record = _describe(ctx, source, value, args, cache, len(todo) - n)
            if record.get("skipped"):
                out.warn("%s %s: %s" % (source, value, record.pop("skipped")))
            if record.get("error"):
                out.warn("%s %s: %s" % (source, value, record["error"]))
            elif record.get("unreadable") or record.get("vanished"):
                out.warn("%s %s: some files unreadable or vanished during the scan" % (source, value))
            elif record.get("complete") is False or (record.get("quick") or {}).get("complete") is False:
                out.warn("%s %s: fingerprinted only in part within the launch budget" % (source, value))
            records.append(record)
    finally:
        if cache is not None:
            cache.close()
    out.data = {"data": {"inputs": records}}
    return out


def _describe(ctx: Context, source: str, value: str, args: Dict[str, Any],
              cache: Optional[fingerprint.Cache], left: int) -> Dict[str, Any]:
    if _URL_RE.match(value):
        return {"source": source, "kind": "url", "id": value}
    if not value.startswith(("/", ".", "~")) and not _local_exists(value, ctx.cwd):
        m = _HUB_RE.match(value)
        if m:
            record: Dict[str, Any] = {"source": source, "kind": "hub", "id": m.group("id")}
            rev = m.group("rev") or (_revision(args, source[5:]) if source.startswith("args:") else None)
            if rev:
                record["revision"] = rev
            return record
    # Each input gets an equal share of what is left, so one huge tree cannot starve the others.
    share = max(ctx.budget() - 0.3, 0.0) / max(left, 1)
    local = value
    if value.startswith("~/") and ctx.env.get("HOME"):  # a path quoted past the shell's expansion
        local = os.path.join(ctx.env["HOME"], value[2:])
    record = describe_local(local, ctx.cwd, time.monotonic() + share, cache)
    record["path"] = value
    record["source"] = source
    return record
