"""``relaxrepro verify A B``: did run B reproduce run A? The verdict is :func:`relaxrepro.analyze.verify.verify`'s;
here, finding the two manifests and printing it."""

from __future__ import annotations

import json
import math
import os
import sys

from ..analyze.verify import render, verify
from ..manifest.writer import describe_os_error
from ._common import Exit, say, verify_exit
from ._runs import read_or_report, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse


def run(args: argparse.Namespace) -> int:
    for name in ("rtol", "atol"):
        value = getattr(args, name)
        if not (value >= 0 and math.isfinite(value)):
            say("relaxrepro verify: error: --%s %s: expected a finite number >= 0", name, value)
            return Exit.USAGE
    if args.steps is not None and args.steps < 1:
        say("relaxrepro verify: error: --steps %s: expected a whole number >= 1", args.steps)
        return Exit.USAGE
    if not resolve_args("verify", args, "old", "new"):
        return Exit.USAGE
    docs, paths = [], []
    for given in (args.old, args.new):
        read = read_or_report("verify", given)
        if read is None:
            return Exit.USAGE
        docs.append(read[0])
        paths.append(given)
    result = verify(docs[0], docs[1], rtol=args.rtol, atol=args.atol, steps=args.steps)
    if getattr(args, "html", None) is not None:
        from ._pages import output, twoway  # lazy: ~12 ms (the page, std.proc for git), only for --html

        try:
            path, _ = output.target(args.html, "verify.html", paths, os.environ, flag="--html")
            output.write(path, twoway.two_run_page(paths, docs, result))
        except output.NotOurs as exc:
            say("relaxrepro verify: error: %s", str(exc))
            return Exit.USAGE
        except OSError as exc:
            say("relaxrepro verify: error: %s", describe_os_error(exc, args.html))
            return Exit.USAGE
    if args.json:
        # ensure_ascii: control characters from the files leave as \u escapes, never raw
        sys.stdout.write(json.dumps(result, sort_keys=True, indent=1, ensure_ascii=True, default=str) + "\n")
    else:
        sys.stdout.write(render(result))
    return verify_exit(result)
