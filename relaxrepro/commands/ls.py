"""``relaxrepro ls [DIR...]``: every manifest below directories, one line each, oldest first."""

from __future__ import annotations

import os
import sys

from ._common import EXIT_FAIL, EXIT_OK, dirs_or_cwd, report_missing, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse


def run(args: argparse.Namespace) -> int:
    import json

    from ..manifest import index

    dirs = dirs_or_cwd(args.dirs)
    missing = report_missing(dirs, "ls")
    entries = index.scan([d for d in dirs if os.path.exists(d)])
    if args.json:
        rows = [index.summary(e) for e in entries]
        rows.sort(key=lambda r: ("error" in r, str(r.get("generated_at") or ""), str(r.get("run_id") or r["path"])))
        sys.stdout.write(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    elif entries:
        sys.stdout.write(index.render_ls(entries))
    bad = sum(1 for e in entries if e.error is not None)
    if bad:
        say("relaxrepro ls: %d of %d manifests unreadable", bad, len(entries))
    elif not entries and not missing:
        say("relaxrepro ls: no manifest_*.json under %s", ", ".join(dirs))
    return EXIT_FAIL if missing else EXIT_OK
