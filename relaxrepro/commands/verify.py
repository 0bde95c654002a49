"""``relaxrepro verify A B``: did run B reproduce run A? The verdict is :func:`relaxrepro.analyze.verify.verify`'s;
here, finding the two manifests and printing it."""

from __future__ import annotations

import json
import math
import os
import sys

from ..analyze.verify import render, verify
from ..manifest.model import valid_run_id
from ..manifest.runindex import find_run
from ._common import Exit, read_or_report, say, verify_exit

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import List


def resolve(given: str, roots: List[str]) -> str:
    """A manifest path, or the manifest of run id ``given`` found under ``roots`` (as ``lineage`` finds one);
    else ``given`` itself, for the reader to say why it cannot be read."""
    if os.path.exists(given):
        return given
    return (find_run(given, roots) if valid_run_id(given) else None) or given


def run(args: argparse.Namespace) -> int:
    for name in ("rtol", "atol"):
        value = getattr(args, name)
        if not (value >= 0 and math.isfinite(value)):
            say("relaxrepro verify: error: --%s %s: expected a finite number >= 0", name, value)
            return Exit.USAGE
    if args.steps is not None and args.steps < 1:
        say("relaxrepro verify: error: --steps %s: expected a whole number >= 1", args.steps)
        return Exit.USAGE
    docs = []
    for given in (args.old, args.new):
        read = read_or_report("verify", resolve(given, ["."]))
        if read is None:
            return Exit.USAGE
        docs.append(read[0])
    result = verify(docs[0], docs[1], rtol=args.rtol, atol=args.atol, steps=args.steps)
    if args.json:
        # ensure_ascii: control characters from the files leave as \u escapes, never raw
        sys.stdout.write(json.dumps(result, sort_keys=True, indent=1, ensure_ascii=True, default=str) + "\n")
    else:
        sys.stdout.write(render(result))
    return verify_exit(result)
