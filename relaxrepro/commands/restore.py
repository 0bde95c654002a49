"""``relaxrepro restore MANIFEST --into DIR``: rebuild each recorded repo's exact source tree.

For every repo: clone from the local repo (its recorded path, or ``--from NAME=PATH``) without
touching it, check out the recorded commit, apply the recorded patch (inline or the sidecar beside
the manifest, verified by its sha256 before anything is created), and check out each submodule at
its recorded SHA (:mod:`relaxrepro.record.restore`). ``DIR`` must be new or empty; on any failure
what this command created is removed.
"""

from __future__ import annotations

import os
import sys

from ..manifest.fields import section
from ..record.restore import RestoreError, restore
from ..std.text import safe_text
from ._common import Exit, pairs, print_json, say
from ._runs import read_with_notes, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Mapping, Optional


def run_cli(path: str, into: str, *, sources: Mapping[str, str], env: Optional[Mapping[str, str]] = None,
            allow_incomplete: bool = False, as_json: bool = False) -> int:
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
    names = sorted(section(doc, "code"), key=str)
    if as_json:
        code = section(doc, "code")
        print_json({"into": into, "run_id": doc.get("run_id"), "notes": list(notes),
                    "repos": [{"name": str(n), "path": os.path.join(into, str(n)),
                               "commit": code[n].get("commit") if isinstance(code[n], dict) else None}
                              for n in names]})
        return Exit.OK
    for name in names:
        say("%s", os.path.join(into, str(name)), out=sys.stdout)
    return Exit.OK


def run(args: argparse.Namespace) -> int:
    if not resolve_args("restore", args, "manifest"):
        return Exit.USAGE
    return run_cli(args.manifest, args.into, sources=pairs(args.sources, "--from"),
                   allow_incomplete=args.allow_incomplete, as_json=args.json)
