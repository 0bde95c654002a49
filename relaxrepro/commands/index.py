"""``relaxrepro index [DIR...]``: build or refresh the run index of directories (``ls``, ``lineage`` and
``compare`` refresh it themselves; this does it ahead, e.g. from cron after a night of runs)."""

from __future__ import annotations

import os

from ..manifest import runindex
from ..std.cache import cache_dir
from ._common import Exit, dirs_or_cwd, print_json, progress_line, report_missing, say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse


def run(args: argparse.Namespace) -> int:
    dirs = dirs_or_cwd(args.dirs)
    missing = report_missing(dirs, "index")
    if cache_dir(os.environ) is None:
        say("relaxrepro index: error: no cache directory (RELAXREPRO_NO_CACHE is set, or no HOME)")
        return Exit.FAIL
    failed = False
    answer = []
    for d in dirs:
        if not os.path.isdir(d):
            continue
        # Counted by the database: a build of 100,000 runs does not read them all back to count them.
        found = runindex.open_roots([d], progress=progress_line())
        try:
            total = found.count()
            bad = len(found.find("error IS NOT NULL", (), lambda r: r.error is not None))
        finally:
            found.close()
        for w in found.warnings:
            if not any(w.startswith(u) for u in found.unstored):  # the error below says those
                say("relaxrepro index: warning: %s", w)
        counted = "%d manifests%s" % (total, ", %d unreadable" % bad if bad else "")
        answer.append({"dir": d, "manifests": total, "unreadable": bad, "not_stored": list(found.unstored)})
        if found.unstored:
            say("relaxrepro index: error: %s: %s, not stored: %s", d, counted, "; ".join(found.unstored))
            failed = True
        elif not args.json:
            say("relaxrepro index: %s: %s", d, counted)
    if args.json:
        print_json(answer)
    return Exit.FAIL if missing or failed else Exit.OK
