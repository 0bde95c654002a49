"""``relaxrepro merge MANIFEST FRAGMENT|DIR...``: fold node fragments in (per-node data, heterogeneity)."""

from __future__ import annotations

import os
import sys

from ..collect.context import default_policy
from ..manifest import nodes, writer
from ..manifest.fields import section
from ..manifest.model import valid_run_id
from ..manifest.reader import ManifestError, load_manifest
from ._common import Exit, print_json, say
from ._runs import resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse


def run(args: argparse.Namespace) -> int:
    def fail(template: str, *values: object) -> int:
        say("relaxrepro merge: error: " + template, *values)
        return Exit.USAGE

    if not resolve_args("merge", args, "manifest"):
        return Exit.USAGE
    try:
        doc = load_manifest(args.manifest)
    except ManifestError as exc:
        return fail("%s: %s", args.manifest, exc)
    fragments = []
    for path in nodes.expand_paths(args.fragments):
        try:
            fragments.append(nodes.load_fragment(path, nodes.run_ids(doc)))
        except nodes.FragmentError as exc:
            return fail("%s: %s", path, exc)
    if not fragments:
        return fail("no node fragments (node_*.json) in %s", ", ".join(args.fragments))
    merged = nodes.merge_fragments(doc, fragments)
    for w in merged["collection"]["probes"]["nodes"]["warnings"]:
        if "reported twice" in w:
            say("relaxrepro: warning: %s", w)
    if not args.output and not valid_run_id(doc.run_id):
        # The default name is made of the run id: a hostile one ("../x", "a/b") would steer the write.
        return fail("%s: run id %s cannot name a file; name the output with -o", args.manifest, doc.run_id)
    out = args.output or os.path.join(os.path.dirname(os.path.abspath(args.manifest)),
                                      "manifest_%s.merged.json" % doc.run_id)
    result = writer.write(merged, path=out, default=default_policy())  # this machine's, as a dict carries none
    for w in result.warnings:
        say("relaxrepro: warning: %s", w)
    if result.path is None:
        return Exit.FAIL
    lines = nodes.summarize_heterogeneity(merged)
    if args.json:
        print_json({"path": result.path, "run_id": doc.run_id, "fragments": len(fragments),
                    "nodes": len(section(merged, "runtime").get("nodes") or ()),
                    "heterogeneity": list(lines)})
        return Exit.OK
    for line in lines:
        say("relaxrepro: %s", line)
    say("%s", result.path, out=sys.stdout)
    return Exit.OK
