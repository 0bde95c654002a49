"""A manifest's text parsed whole, as :func:`reader.parse_json` parses it, but each top-level section's text
parsed once per process: the runs of a tree share most of their bytes (one environment's package list, one
machine's hardware), and a cold index of 100,000 manifests parsed the same 3 KB package list 100,000 times.

Our writer's layout (sorted keys, one-space indent: ``scan`` relies on it too) puts each top-level member on
lines of its own, starting ``\\n "key": ``; nothing nested or inside a string can (nested keys are indented
deeper; a newline in a string is escaped). A text in that layout is cut there into its members; the values
not seen before are parsed together, in one array (so each is exactly one JSON value), with every key; the
others are the values parsed before from the same bytes. Anything else (another layout, a repeated key, a
value that does not parse) is parsed whole, so the answer -- the document or the :class:`ManifestError` -- is
always :func:`parse_json`'s.

The values are shared between the documents returned: read them, never change them.
"""

from __future__ import annotations

from .reader import parse_json

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List

SMALL = 128
"""A value of fewer bytes is parsed each time: a run id or a status is cheaper to parse than to look up."""
SEEN_MAX = 2048
HOT_MAX = 1024
"""Values seen once (by their bytes) and values seen again, the only ones kept: a run's own sections (its code
commits, its data digests) pass through the first and never fill the second. Each is emptied when full, so
memory stays bounded (~10 MB of parsed package lists at most) whatever the tree."""

_seen: Dict[bytes, Any] = {}
_hot: Dict[bytes, Any] = {}
_MISS = object()


def parse_manifest_text(raw: bytes) -> Any:
    """``raw`` (UTF-8 bytes) parsed as :func:`reader.parse_json` parses its text; :class:`ManifestError` or
    ``UnicodeDecodeError`` where it does."""
    if raw.startswith(b'{\n "') and raw.endswith(b"\n}\n"):
        doc = _by_section(raw)
        if doc is not None:
            return doc
    return parse_json(raw.decode("utf-8"))


def _by_section(raw: bytes) -> Any:
    """The document of ``raw`` (in our writer's layout) from its sections, or None: parse it whole."""
    parts = raw[:-3].split(b'\n "')  # b"{", then each b'key": value,' (the last without its comma)
    if parts[0] != b"{":
        return None
    last = len(parts) - 1
    keys: List[bytes] = []
    values: List[Any] = []
    todo: List[bytes] = []  # the values to parse, then the keys
    for i in range(1, last + 1):
        part = parts[i]
        cut = part.find(b'": ')
        if cut < 0:
            return None
        if i < last:
            if not part.endswith(b","):
                return None  # a member not followed by a comma is not JSON
            value = part[cut + 3:-1]
        else:
            value = part[cut + 3:]
        keys.append(b'"' + part[:cut] + b'"')
        got = _MISS
        if len(value) >= SMALL:
            got = _hot.get(value, _MISS)
            if got is _MISS:
                got = _seen.get(value, _MISS)
                if got is not _MISS:
                    if len(_hot) >= HOT_MAX:
                        _hot.clear()
                    _hot[value] = got
        if got is _MISS:
            todo.append(value)
            values.append(value)  # bytes: parsed below
        else:
            values.append(_Known(got))
    n = len(todo)
    todo.extend(keys)
    try:
        got_all = parse_json((b"[" + b",".join(todo) + b"]").decode("utf-8"))
    except (ValueError, UnicodeDecodeError):  # ManifestError is a ValueError: parsed whole, it says why
        return None
    if not isinstance(got_all, list) or len(got_all) != n + len(keys):
        return None  # a value that was not one value, or a key that was not one string
    names = got_all[n:]
    if len(set(names)) != len(names) or not all(isinstance(k, str) for k in names):
        return None  # a repeated key: json keeps the last, as the whole parse does
    parsed = iter(got_all[:n])
    doc = {}
    for name, value in zip(names, values):
        if type(value) is _Known:
            doc[name] = value.value
            continue
        got = next(parsed)
        doc[name] = got
        if len(value) >= SMALL:
            if len(_seen) >= SEEN_MAX:
                _seen.clear()
            _seen[value] = got
    return doc


class _Known:
    """A value parsed before (a bytes value is one still to parse)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value
