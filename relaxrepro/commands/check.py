"""``relaxrepro check MANIFEST``: can this run be reproduced here? PASS / WARN / FAIL per item.

Two halves: :func:`relaxrepro.collect.here.collect_here` runs the registered probes once (as
``generate`` does), pointed at the recorded repos and the recorded command; the rules in
:mod:`relaxrepro.analyze.check` judge the two documents. Here: the whole command, and its rendering.
"""

from __future__ import annotations

import json
import os
import sys

from ..analyze.check import FAIL, INFO, NOT_RECORDED, PASS, WARN, Report, judge
from ..collect.here import collect_here, is_interpreter
from ..std.text import safe_text, use_color
from ._common import Exit, pairs, say
from ._runs import read_or_report, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Mapping, Optional


def exit_code(report: Report, strict: bool = False) -> Exit:
    """FAIL when the run cannot be reproduced here (:meth:`~relaxrepro.analyze.check.Report.failed`), else OK."""
    return Exit.FAIL if report.failed(strict) else Exit.OK


# -- output -----------------------------------------------------------------------------------

_VERDICT_COLOR = {PASS: "32", WARN: "33", FAIL: "31", INFO: "36", NOT_RECORDED: "2"}


def render_table(report: Report, *, color: bool = False, strict: bool = False) -> str:
    headers = ("ITEM", "RECORDED", "HERE", "VERDICT")
    rows = [(safe_text(i.item, 48), safe_text(i.recorded, 36), safe_text(i.here, 36), i.verdict,
             safe_text(i.note, 160)) for i in report.items]
    widths = [max([len(headers[k])] + [len(r[k]) for r in rows]) for k in range(3)]
    lines = ["%-*s  %-*s  %-*s  %s" % (widths[0], headers[0], widths[1], headers[1], widths[2], headers[2],
                                       headers[3])]
    for r in rows:
        verdict = r[3]
        shown = "\x1b[%sm%s\x1b[0m" % (_VERDICT_COLOR[verdict], verdict) if color else verdict
        line = "%-*s  %-*s  %-*s  %s" % (widths[0], r[0], widths[1], r[1], widths[2], r[2], shown)
        if r[4]:
            line += "  (%s)" % r[4]
        lines.append(line.rstrip())
    lines.append(report.summary_line(strict=strict))
    return "\n".join(lines) + "\n"


def render_json(report: Report, path: str, *, strict: bool = False) -> str:
    doc = {
        "manifest": path,
        "run_id": report.run_id,
        "verdict": report.verdict,
        "exit_code": int(exit_code(report, strict)),
        "counts": report.counts(),
        "items": [i.as_dict() for i in report.items],
        "warnings": report.warnings,
    }
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n"


def run_cli(path: str, *, repos: Mapping[str, str], as_json: bool = False, strict: bool = False,
            env: Optional[Mapping[str, str]] = None, python: Optional[str] = None) -> int:
    """The subcommand: 0 compatible, 1 any FAIL (``strict``: any WARN) or nothing to compare, 2 unreadable
    manifest. ``python``: judge this interpreter's packages instead of the recorded one's."""
    env = dict(os.environ if env is None else env)
    read = read_or_report("check", path)
    if read is None:
        return Exit.USAGE
    rec, warnings = read
    report = judge(rec, *collect_here(rec, repos=repos, env=env, python=python))
    report.warnings = warnings + report.warnings
    for w in report.warnings:
        sys.stderr.write("relaxrepro check: note: %s\n" % safe_text(w))
    if as_json:
        sys.stdout.write(render_json(report, path, strict=strict))
    else:
        sys.stdout.write(render_table(report, color=use_color(sys.stdout, env), strict=strict))
    return exit_code(report, strict)


def run(args: argparse.Namespace) -> int:
    if not resolve_args("check", args, "manifest"):
        return Exit.USAGE
    if args.python and not is_interpreter(args.python):
        say("relaxrepro check: error: --python %s: not an executable file", args.python)
        return Exit.USAGE
    return run_cli(args.manifest, repos=pairs(args.repo, "--repo"), as_json=args.json, strict=args.strict,
                   python=args.python)
