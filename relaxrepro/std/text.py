"""Text for people: one printable line per value, one escaped message on stderr (``say``), shell words a
reviewer can read, and whether a stream takes color."""

from __future__ import annotations

import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Optional

# C0/C1 controls, DEL, and the invisible format characters that reorder or hide text
# ("Trojan Source", CVE-2021-42574): none of them may reach a terminal from a manifest. A lone
# surrogate (an argv byte that was not UTF-8, kept by surrogateescape) cannot even be written to one.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2064\u2066-\u2069"
                     "\ud800-\udfff\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def _escape_char(m: "re.Match[str]") -> str:
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    return "\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u%04x" % ord(c)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _visible_byte(m: "re.Match[str]") -> str:
    c = ord(m.group(0))
    return "\\x%02x" % (c - 0xDC00) if 0xDC80 <= c <= 0xDCFF else "\\u%04x" % c


def visible_bytes(text: str) -> str:
    """``text`` with each byte that was not UTF-8 (kept by ``surrogateescape`` as ``\\udc80``..``\\udcff``)
    written as the visible escape ``\\xff``, and any other lone surrogate as ``\\ud800``: text that UTF-8
    can hold, for a manifest, a database or a tracker, that still shows which bytes were there."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(_visible_byte, text)


def safe_text(value: Any, limit: Optional[int] = None) -> str:
    """``value`` as one printable line: control and bidi characters escaped, optionally shortened."""
    text = value if isinstance(value, str) else str(value)
    if not text.isprintable():  # every character escaped is unprintable; the test costs ~20 ns (ls: 90,000 cells)
        text = _UNSAFE.sub(_escape_char, text)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 3, 1)] + "..."
    return text


def safe_format(template: str, *values: Any) -> str:
    """``template % values`` for people: each value a :func:`safe_text` (numbers as they are, for ``%d``),
    so nothing read from a file, a manifest or a tool adds a line or reaches a terminal as a control."""
    return template % tuple(v if isinstance(v, (int, float)) else safe_text(v) for v in values)


def say(template: str, *values: Any, out: Any = None) -> None:
    """One message for people on stderr (``out``: another stream): ``template % values`` and a newline.

    Every value is escaped (:func:`safe_format`): a manifest, a file name or a tool's stderr cannot add a line
    to what the user reads, clear the screen or retitle the terminal.
    """
    (out or sys.stderr).write(safe_format(template, *values) + "\n")


def safe_lines(text: str) -> str:
    """``text`` with its own line breaks kept and every other control escaped (argparse's usage + error)."""
    return "\n".join(safe_text(line) for line in text.split("\n"))


def safe_json(text: str) -> str:
    """JSON text as ``json.dumps(ensure_ascii=False)`` wrote it, with the C1 controls, DEL and bidi
    characters it leaves raw inside strings written ``\\uXXXX``: the same document, safe on a terminal."""
    return _UNSAFE.sub(lambda m: m.group(0) if m.group(0) == "\n" else "\\u%04x" % ord(m.group(0)), text)


def shell_quote(value: str) -> str:
    """``value`` as one POSIX shell word (:func:`shlex.quote`), or, when it holds a control, bidi or
    line-breaking character, as a bash ``$'...'`` word whose escapes (``\\e``, ``\\n``, ``\\xHH`` per UTF-8
    byte) show the reviewer what a single-quoted word would hide or act on in their terminal."""
    if not _UNSAFE.search(value):
        import shlex  # ~1 ms; only a replay script needs it

        return shlex.quote(value)
    return "$'" + "".join(_ansi_c(c) for c in value) + "'"


_ANSI_C = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}


def _ansi_c(c: str) -> str:
    if c in _ANSI_C:
        return _ANSI_C[c]
    if " " <= c <= "~" or not _UNSAFE.match(c):
        return c
    try:  # surrogateescape: an argv byte that was not UTF-8 comes back as that byte
        raw = c.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = c.encode("utf-8", "surrogatepass")
    return "".join("\\x%02x" % b for b in raw)


def use_color(stream: Any, env: Dict[str, str]) -> bool:
    """Color only on a terminal, never with ``NO_COLOR`` set (https://no-color.org) or TERM=dumb."""
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
