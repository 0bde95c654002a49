"""Text for people: one printable line per value, and whether a stream takes color."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Optional

# C0/C1 controls, DEL, and the invisible format characters that reorder or hide text
# ("Trojan Source", CVE-2021-42574): none of them may reach a terminal from a manifest.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2064\u2066-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def _escape_char(m: "re.Match[str]") -> str:
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    return "\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u%04x" % ord(c)


def safe_text(value: Any, limit: Optional[int] = None) -> str:
    """``value`` as one printable line: control and bidi characters escaped, optionally shortened."""
    text = value if isinstance(value, str) else str(value)
    text = _UNSAFE.sub(_escape_char, text)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 3, 1)] + "..."
    return text


def use_color(stream: Any, env: Dict[str, str]) -> bool:
    """Color only on a terminal, never with ``NO_COLOR`` set (https://no-color.org) or TERM=dumb."""
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
