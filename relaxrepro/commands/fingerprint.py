"""``relaxrepro fingerprint PATH...``: hash data trees fully into the cache that ``generate`` reads."""

from __future__ import annotations

import json
import os
import sys

from ..collect.context import safe_getcwd
from ..collect.fingerprint import Cache, default_cache_path, full_digest, scan
from ._common import Exit, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Dict, List, Mapping


def run(args: argparse.Namespace) -> int:
    return run_command(list(args.paths), as_json=args.json, env=dict(os.environ), cwd=safe_getcwd())


def run_command(paths: List[str], *, as_json: bool, env: Mapping[str, str], cwd: str) -> int:
    """Hash ``paths`` fully, filling the cache launch reads from. 0 when every path got a digest, else 1."""
    cache_path = default_cache_path(env)
    cache = Cache(cache_path, readonly=False) if cache_path else None
    if cache is None:
        sys.stderr.write("relaxrepro fingerprint: warning: neither XDG_CACHE_HOME nor HOME is set: "
                         "digests are not cached\n")
    shown = 0
    for w in cache.warnings if cache is not None else []:
        say("relaxrepro fingerprint: warning: %s", w)
        shown += 1
    results = []
    failed = False
    try:
        for path in paths:
            s = scan(path, cwd=cwd)
            record: Dict[str, object] = {"path": path, "kind": s.kind}
            if s.error is None:
                full = full_digest(s, cache, hash_missing=True, settle=True)
                record.update({"files": len(s.files), "bytes": s.total_bytes, "sha256": full.sha256,
                               "reused": full.reused, "hashed": full.hashed})
                links = sum(1 for e in s.entries if e.kind == "link")
                if links:
                    record["symlinks"] = links
                if s.skipped():
                    record["skipped"] = s.skipped()
                    say("relaxrepro fingerprint: warning: %s: %s", path, s.skipped())
                if s.not_read():
                    record["error"] = s.not_read()
            else:
                record["error"] = s.error
            if record.get("error"):
                failed = True
                say("relaxrepro fingerprint: %s: %s", path, record["error"])  # names files in the tree
            results.append(record)
    finally:
        if cache is not None:
            for w in cache.warnings[shown:]:
                say("relaxrepro fingerprint: warning: %s", w)
            cache.close()
    if as_json:
        sys.stdout.write(json.dumps(results, indent=1, sort_keys=True) + "\n")
    else:
        for r in results:
            if r.get("sha256"):
                links = "  %d symlinks" % r["symlinks"] if r.get("symlinks") else ""
                say("%s  %d files%s  %d bytes  %s", r["sha256"], r["files"], links, r["bytes"], r["path"],
                    out=sys.stdout)
    return Exit.FAIL if failed else Exit.OK
