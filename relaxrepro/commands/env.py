"""``relaxrepro env RUN [--format requirements|conda|dockerfile] [-o FILE]``: the recorded training
interpreter's packages as a file an installer reads; ``env RUN --check [--python PY]``: those packages
against an interpreter here, PASS / WARN / FAIL per package. It never installs anything.

The exporters and the judgement are :mod:`relaxrepro.analyze.environment`; the interpreter here is asked
by :func:`relaxrepro.collect.here.collect_environment`, the same collection ``check`` aims at it. ``-o``
writes atomically, and over an existing file only when ``env`` wrote it (it begins with
:data:`~relaxrepro.analyze.environment.MARK`): a hand-written ``requirements.txt`` is never replaced.
"""

from __future__ import annotations

import os
import sys

from ..analyze.environment import FORMATS, MARK, NotExportable, export, judge
from ..collect.here import collect_environment, is_interpreter
from ..manifest.writer import describe_os_error, replace_atomically, write_exclusive
from ..std.files import read_regular
from ..std.table import format_table
from ..std.text import safe_text
from ._common import Exit, print_json, say
from ._runs import read_or_report, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Optional

    from ..analyze.check import Report

def run(args: argparse.Namespace) -> int:
    problem = _misused(args)
    if problem:
        say("relaxrepro env: error: %s", problem)
        return Exit.USAGE
    if args.python and not is_interpreter(args.python):
        say("relaxrepro env: error: --python %s: not an executable file", args.python)
        return Exit.USAGE
    if not resolve_args("env", args, "manifest"):
        return Exit.USAGE
    read = read_or_report("env", args.manifest)
    if read is None:
        return Exit.USAGE
    doc, warnings = read
    for w in warnings:
        say("relaxrepro env: note: %s", w)
    if args.check:
        return _check(doc, args)
    try:
        text, plan = export(doc, args.format or "requirements")
    except NotExportable as exc:
        say("relaxrepro env: %s: %s", args.manifest, str(exc))
        return Exit.USAGE
    for note in plan.notes:
        say("relaxrepro env: warning: %s", note)
    if plan.unpinned:
        say("relaxrepro env: note: %d of %d packages cannot be pinned (a comment in the file says why): %s",
            len(plan.unpinned), len(plan.pins), ", ".join(p.name for p in plan.unpinned[:5])
            + (" ..." if len(plan.unpinned) > 5 else ""))
    if not args.output:
        sys.stdout.write(text)
        return Exit.OK
    return _write(args.output, text)


def _misused(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the options together, or None."""
    if args.format is not None and args.format not in FORMATS:
        return "--format %s: unknown format (one of: %s)" % (args.format, ", ".join(FORMATS))
    if args.check and (args.format or args.output):
        return "--check compares with an interpreter here and writes no file: no --format or -o with it"
    if not args.check and (args.python or args.json):
        return "%s goes with --check" % ("--python" if args.python else "--json")
    return None


def _write(path: str, text: str) -> int:
    """``text`` at ``path`` atomically; an existing file only when ``env`` wrote it."""
    data = text.encode("utf-8")
    try:
        if os.path.lexists(path):
            if not _ours(path):
                say("relaxrepro env: error: %s exists and was not written by relaxrepro env: not replaced "
                    "(remove it, or choose another -o)", path)
                return Exit.USAGE
            replace_atomically(path, data)
        else:
            write_exclusive(path, data)
    except FileExistsError:  # made between our look and our write: someone else's
        say("relaxrepro env: error: %s appeared while writing: not replaced", path)
        return Exit.USAGE
    except OSError as exc:
        say("relaxrepro env: error: %s", describe_os_error(exc, path))
        return Exit.FAIL
    sys.stdout.write(safe_text(path) + "\n")
    return Exit.OK


def _ours(path: str) -> bool:
    """Whether ``path`` is a regular file an earlier ``env`` wrote (a link, even to one, is not replaced)."""
    if os.path.islink(path):
        return False
    try:
        return read_regular(path, len(MARK)).decode("utf-8", "replace") == MARK
    except OSError:
        return False


def _check(doc: dict, args: argparse.Namespace) -> int:
    try:
        report = judge(doc, collect_environment(doc, env=dict(os.environ), python=args.python))
    except NotExportable as exc:
        say("relaxrepro env: %s: %s", args.manifest, str(exc))
        return Exit.USAGE
    for w in report.warnings:
        say("relaxrepro env: warning: %s", w)
    code = Exit.FAIL if report.failed() else Exit.OK
    if args.json:
        print_json({"manifest": args.manifest, "run_id": report.run_id, "verdict": report.verdict,
                    "exit_code": int(code), "counts": report.counts(), "items": [i.as_dict() for i in report.items],
                    "warnings": report.warnings})
    else:
        sys.stdout.write(_table(report))
    return code


def _table(report: Report) -> str:
    rows = [["ITEM", "RECORDED", "HERE", "VERDICT"]]
    for i in report.items:
        rows.append([safe_text(i.item, 64), safe_text(i.recorded, 40), safe_text(i.here, 40),
                     i.verdict + ("  (%s)" % safe_text(i.note, 160) if i.note else "")])
    return format_table(rows) + report.summary_line() + "\n"
