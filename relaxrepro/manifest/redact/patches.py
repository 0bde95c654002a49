"""A patch, redacted line by line: the line count is kept, so a patch stays a patch."""

from __future__ import annotations

from bisect import bisect_left

from ...std.lazy_re import LazyPattern
from .assignments import BLOCK_KEY_RE, file_mode, mask_assignments, sequence_line
from .names import KIND_SECRET, is_inert, name_kind
from .placeholders import MASK, PRIVATE_KEY, REDACTED
from .prefilter import Lines, hot_lines
from .tools import mask_commands

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict, List, Optional, Tuple

    from .protocol import Rules

# A .env line whose value opens a quote it does not close: the value goes on below (``DB_PASSWORD="a`` ... ``b"``).
_OPEN_QUOTE_RE = LazyPattern(r"(?:export[ \t]+)?[\w.-]+[ \t]*=[ \t]*([\"'])(?:(?!\1).)*")
_RUN_MAX = 64


def redact_lines(red: Rules, text: str, hot: Optional[List[int]] = None) -> Tuple[str, List[int]]:
    """Redact a patch line by line (see :meth:`Redactor.lines <relaxrepro.manifest.redact.redactor.Redactor.lines>`):
    the text and the 1-based numbers of the lines that changed.

    Only the lines that hold something a rule looks for (:func:`~.prefilter.hot_lines`), and those a state
    carries over to (a PEM key, a key's block, a secret's list, a continued command), go through the rules;
    the rest are kept as they are, which is what the rules would give back for them. Lines are cut where they
    are read (:class:`~.prefilter.Lines`): a 3.5 MB patch is never split into its 100,000 lines. ``hot``: those
    lines already found (:class:`~.prefilter.Stream`, as git printed the patch), with ``red.needles()``."""
    if not isinstance(text, str):
        return text, []
    lines = Lines(text)
    if hot is None:
        hot = hot_lines(text, lines, red.needles())
    new_lines: Dict[int, Tuple[int, str]] = {}  # where a changed line starts: (where it ends, its new text)
    in_key = False
    block = -1  # inside a secret's block scalar: the indentation of its key
    run: List[Tuple[int, int]] = []  # the lines of a command continued with backslashes, or of a quoted value
    quote = ""
    seq = None  # inside a secret's YAML list: the indentation of its key and the kind of its items
    mode = None
    n = len(text)
    k = 0  # the next of the hot lines
    at = 0
    while at < n:
        if hot is not None and not (in_key or block >= 0 or run or seq is not None):
            if k >= len(hot):
                break  # no rule has anything left to change
            if hot[k] < at:
                k = bisect_left(hot, at, k)
                continue
            at = hot[k]  # the lines before it are kept as they are
            k += 1
        start, at = at, lines.end(at)
        line = text[start:at]
        body = line.rstrip("\r\n")
        if (in_key or run) and body.startswith("diff --git "):
            # What a file leaves open ends with it: a PEM key, a continued command, an open quote never runs into
            # the next file's header (so that a patch redacted file by file, as git prints it, is the same).
            if len(run) > 1:
                _continued(red, text, new_lines, run, mode)
            run, quote, in_key = [], "", False
        if in_key:
            lead = body[:1] if body[:1] in ("+", "-", " ") and not body.startswith("-----") else ""
            if "PRIVATE KEY" in body and "-----END" in body:
                in_key = False
            new = lead + PRIVATE_KEY
        elif block >= 0 and (not body[1:].strip() or len(body) - 1 - len(body[1:].lstrip(" ")) > block):
            rest = body[1:].lstrip(" ")
            new = body if not rest.strip() or is_inert(rest) else body[:len(body) - len(rest)] + MASK
            if new != body:
                red.count("secret-name")
                red.remember(rest)
        else:
            block = -1
            if body.startswith("diff --git "):
                mode, in_key, seq = file_mode(body), False, None
            if "PRIVATE KEY" in body and "-----BEGIN" in body and "-----END" not in body.split("-----BEGIN", 1)[1]:
                in_key = True
            new = red.text(body) if mode is None else _text_in(red, body, mode)
            lead = body[:1] if body[:1] in ("+", "-", " ") else ""
            inner, seq = sequence_line(red, new[len(lead):], seq)
            new = lead + inner
            if ("|" in body or ">" in body) and ":" in body:
                key = BLOCK_KEY_RE.fullmatch(body, 1)
                if key and name_kind(key.group(2)) == KIND_SECRET:
                    block = len(key.group(1))
        if new != body:
            new_lines[start] = (at, new + line[len(body):])
        if quote:
            run.append((start, at))
            if quote in body[1:] or len(run) > _RUN_MAX:
                _continued(red, text, new_lines, run, mode)
                run, quote = [], ""
        elif run or body[-1:] == "\\":
            run.append((start, at))
            if body[-1:] != "\\" or len(run) > _RUN_MAX:
                _continued(red, text, new_lines, run, mode)
                run = []
        elif mode == "env" and ('"' in body or "'" in body):
            opened = _OPEN_QUOTE_RE.fullmatch(body, 1 if body[:1] in ("+", "-", " ") else 0)
            if opened:
                run, quote = [(start, at)], opened.group(1)
    if len(run) > 1:
        _continued(red, text, new_lines, run, mode)
    if not new_lines:
        return text, []
    starts = sorted(new_lines)
    out: List[str] = []
    last = 0
    for start in starts:
        end, new = new_lines[start]
        out += [text[last:start], new]
        last = end
    out.append(text[last:])
    return "".join(out), lines.numbers(starts)


def _text_in(red: Rules, line: str, mode: str) -> str:
    """``text`` for a line of a file of the given mode. Never raises."""
    try:
        return red.scan(line, mode)
    except Exception:
        red.count("error")
        return REDACTED


def _continued(red: Rules, text: str, new_lines: Dict[int, Tuple[int, str]], run: List[Tuple[int, int]],
               mode: Optional[str]) -> None:
    """Read the lines ``run`` (where each starts and ends) of a patch as one: a command continued with backslashes
    (``curl \\ -u u:PW``, ``export HF_TOKEN=\\`` then the token) or a ``.env`` value whose quote closes lines
    below. ``new_lines``: the lines changed so far, by where they start."""
    current = [new_lines[a][1] if a in new_lines else text[a:b] for a, b in run]
    bodies = [line.rstrip("\r\n") for line in current]
    leads = [b[:1] if b[:1] in ("+", "-", " ") else "" for b in bodies]
    joined = "\n".join(b[len(lead):] for b, lead in zip(bodies, leads))
    try:
        new = mask_assignments(red, mask_commands(red, joined), mode)
    except Exception:
        red.count("error")
        new = "\n".join(REDACTED for _ in run)
    for (a, b), line, body, lead, nb in zip(run, current, bodies, leads, new.split("\n")):
        if lead + nb != body:
            new_lines[a] = (b, lead + nb + line[len(body):])
