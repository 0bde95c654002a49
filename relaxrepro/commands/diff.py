"""``relaxrepro diff OLD NEW``: what differs between two runs, most important first.

The differences are :func:`relaxrepro.analyze.diff.diff_documents`'; here, how they are shown. Imports no probe:
it runs on a laptop with nothing but Python, and starts fast.
"""

from __future__ import annotations

import json
import os
import re
import sys

from ..analyze.diff import Change, diff_documents, same, summary_line
from ..manifest.fields import MISSING
from ..std.text import safe_text, use_color
from ._common import Exit
from ._runs import read_or_report, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, List, Mapping, Optional, Tuple

_TITLES = {"env": "selected env", "volatile": "volatile (shown with --all)",
           "unrecorded": "not recorded on one side (shown with --all)"}
"""Category titles in the text form (the others are their own names)."""


# -- output -----------------------------------------------------------------------------------

_COLORS = {"added": "32", "removed": "31", "upgraded": "32", "downgraded": "31", "changed": "33", "title": "1"}
_SIGNS = {"added": "+", "removed": "-", "upgraded": "^", "downgraded": "v", "changed": "~"}


_WIDTH = 100
"""How much of a value a line shows."""


def _show(value: Any, path: str = "") -> str:
    return safe_text(_text(value, path), _WIDTH)


def _text(value: Any, path: str = "") -> str:
    """A value whole, as one line will show it (JSON but for strings; a full commit as its 12 first)."""
    if value is MISSING:
        return "(absent)"
    if isinstance(value, str):
        if path.endswith(".commit") and re.match(r"^[0-9a-f]{40,64}$", value):
            return value[:12]
        return value or '""'
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


_CONTEXT = 2
"""Unchanged list items, or twenty times as many characters, kept on each side of where two values differ."""


def _show_pair(old: Any, new: Any, path: str) -> Tuple[str, str]:
    """Both sides of a change; when either is too long to show whole, the part where they differ, so that
    two argv differing in their tail never print the same cut-off text."""
    if len(_text(old, path)) <= _WIDTH and len(_text(new, path)) <= _WIDTH:
        return _show(old, path), _show(new, path)
    if isinstance(old, list) and isinstance(new, list):
        return _middle_items(old, new)
    if isinstance(old, str) and isinstance(new, str):
        return _middle_text(old, new)
    return _show(old, path), _show(new, path)


def _common_ends(a: Any, b: Any) -> Tuple[int, int]:
    """How long the common head and the common tail of two sequences are (not overlapping)."""
    limit = min(len(a), len(b))
    head = 0
    while head < limit and same(a[head], b[head]):
        head += 1
    tail = 0
    while tail < limit - head and same(a[len(a) - 1 - tail], b[len(b) - 1 - tail]):
        tail += 1
    return head, tail


def _middle_items(a: List[Any], b: List[Any]) -> Tuple[str, str]:
    head, tail = _common_ends(a, b)
    skip_head = max(head - _CONTEXT, 0)
    skip_tail = max(tail - _CONTEXT, 0)

    def part(items: List[Any]) -> str:
        shown = items[skip_head:len(items) - skip_tail]
        cells = [json.dumps(x, sort_keys=True, ensure_ascii=False) for x in shown]
        if skip_head:
            cells.insert(0, "...%d same" % skip_head)
        if skip_tail:
            cells.append("%d same..." % skip_tail)
        return safe_text("[" + ", ".join(cells) + "]", _WIDTH)

    return part(a), part(b)


def _middle_text(a: str, b: str) -> Tuple[str, str]:
    head, tail = _common_ends(a, b)
    skip_head = max(head - 20 * _CONTEXT, 0)
    skip_tail = max(tail - 20 * _CONTEXT, 0)

    def part(text: str) -> str:
        shown = text[skip_head:len(text) - skip_tail]
        return safe_text(("..." if skip_head else "") + shown + ("..." if skip_tail else ""), _WIDTH)

    return part(a), part(b)


def _line(c: Change) -> str:
    label = c.path
    if c.category == "packages" and c.path.startswith("environment.packages."):
        label = c.path[len("environment.packages."):]
    elif c.category == "env" and c.path.startswith("config.selected_env."):
        label = c.path[len("config.selected_env."):]
    elif c.category == "code":
        label = c.path[len("code."):]
    label = safe_text(label, 80)
    if c.kind == "nodes":
        return "nodes  %s" % safe_text(c.extra.get("summary", ""), 200)
    if c.path.endswith(".patch") and c.category == "code":
        files = c.extra.get("files") or []
        what = {"added": "uncommitted changes appeared", "removed": "uncommitted changes gone",
                "changed": "uncommitted changes differ"}[c.kind]
        if c.extra.get("incomplete"):
            what = "uncommitted changes not fully recorded (%s), cannot tell whether they differ" % safe_text(
                c.extra["incomplete"], 120)
        marks = []
        for f in files:
            sign = "+" if f in c.extra.get("files_added", ()) else "-" if f in c.extra.get("files_removed", ()) else ""
            marks.append(sign + safe_text(f, 80))
        return "%s  %s%s" % (label, what, (": " + ", ".join(marks[:20]) + (" ..." if len(marks) > 20 else ""))
                             if marks else "")
    if c.path.endswith(".untracked") and c.category == "code":
        news = c.extra.get("files_added") or []
        gone = c.extra.get("files_removed") or []
        names = ["+" + safe_text(f, 80) for f in news[:10]] + ["-" + safe_text(f, 80) for f in gone[:10]]
        return "%s  %s -> %s untracked files%s" % (label, _show(c.old), _show(c.new),
                                                   (": " + ", ".join(names)) if names else "")
    if c.kind == "added" and c.old is MISSING and c.new is MISSING:
        return "%s  (added%s)" % (label, _extra_note(c))
    if c.kind == "removed" and c.old is MISSING and c.new is MISSING:
        return "%s  (removed%s)" % (label, _extra_note(c))
    if c.kind == "added":
        return "%s  %s" % (label, _show(c.new, c.path))
    if c.kind == "removed":
        return "%s  %s" % (label, _show(c.old, c.path))
    return "%s  %s -> %s" % ((label,) + _show_pair(c.old, c.new, c.path))


def _extra_note(c: Change) -> str:
    if c.extra.get("commit"):
        return ", commit %s" % _show(c.extra["commit"], ".commit")
    if "count" in c.extra:
        return ", %d packages" % c.extra["count"]
    return ""


def render_text(changes: List[Change], hidden: Mapping[str, int], *, color: bool = False) -> str:
    """The terminal form: a title per category, one line per change, and a summary line."""
    def paint(text: str, what: str) -> str:
        return "\x1b[%sm%s\x1b[0m" % (_COLORS[what], text) if color else text

    lines: List[str] = []
    current = None
    for c in changes:
        if c.category != current:
            current = c.category
            lines.append(paint(_TITLES.get(current, current), "title"))
        lines.append("  %s %s" % (paint(_SIGNS.get(c.kind, "~"), c.kind), _line(c)))
    lines.append(summary_line(changes, hidden))
    return "\n".join(lines) + "\n"


def render_json(changes: List[Change], hidden: Mapping[str, int], old_path: str, new_path: str,
                old: Mapping[str, Any], new: Mapping[str, Any], warnings: List[str]) -> str:
    doc = {
        "identical": not changes,
        "old": {"path": old_path, "run_id": old.get("run_id")},
        "new": {"path": new_path, "run_id": new.get("run_id")},
        "changes": [c.as_json() for c in changes],
        "hidden_volatile": hidden.get("volatile", 0),
        "hidden_unrecorded": hidden.get("unrecorded", 0),
        "summary": summary_line(changes, hidden),
        "warnings": warnings,
    }
    # ensure_ascii: control characters from the files leave as \u escapes, never raw
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True, default=str) + "\n"


def run_cli(old_path: str, new_path: str, *, as_json: bool = False, include_volatile: bool = False,
        env: Optional[Mapping[str, str]] = None, stdout: Any = None, stderr: Any = None) -> int:
    """The subcommand: 0 identical, 1 different, 2 unreadable input (like diff(1))."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    docs = []
    warnings: List[str] = []
    for path in (old_path, new_path):
        read = read_or_report("diff", path, stderr)
        if read is None:
            return Exit.USAGE
        doc, warns = read
        docs.append(doc)
        warnings.extend("%s: %s" % (path, w) for w in warns)
    for w in warnings:
        stderr.write("relaxrepro diff: note: %s\n" % safe_text(w))
    changes, hidden = diff_documents(docs[0], docs[1], include_volatile=include_volatile)
    if as_json:
        stdout.write(render_json(changes, hidden, old_path, new_path, docs[0], docs[1], warnings))
    else:
        stdout.write(render_text(changes, hidden, color=use_color(stdout, dict(env or {}))))
    return Exit.FAIL if changes else Exit.OK


def run(args: argparse.Namespace) -> int:
    if not resolve_args("diff", args, "old", "new"):
        return Exit.USAGE
    return run_cli(args.old, args.new, as_json=args.json, include_volatile=args.all, env=os.environ)
