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

import re

from .reader import parse_json

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional

SMALL = 128
"""A value of fewer bytes is parsed each time: a run id or a status is cheaper to parse than to look up."""
SEEN_MAX = 2048
HOT_MAX = 1024
"""Values seen once (by their bytes) and values seen again, the only ones kept: a run's own sections (its code
commits, its data digests) pass through the first and never fill the second. Each is emptied when full, so
memory stays bounded (~10 MB of parsed package lists at most) whatever the tree."""

_seen: Dict[bytes, Any] = {}
_hot: Dict[bytes, Any] = {}
_hot_ids: Dict[int, Any] = {}
_MISS = object()
_MEMBER = re.compile(rb'\n "')
"""Where a top-level member starts in our writer's layout (and where nothing else can)."""


def shared(value: Any) -> bool:
    """Whether ``value`` is a section this module hands out again (seen twice, kept): a caller may remember
    what it derives from it by the object itself."""
    return value is not None and _hot_ids.get(id(value)) is value


def parse_manifest_text(raw: bytes) -> Any:
    """``raw`` (UTF-8 bytes) parsed as :func:`reader.parse_json` parses its text; :class:`ManifestError` or
    ``UnicodeDecodeError`` where it does."""
    if raw.startswith(b'{\n "') and raw.endswith(b"\n}\n"):
        doc = _by_section(raw)
        if doc is not None:
            return doc
    return parse_json(raw.decode("utf-8"))


def _by_section(raw: bytes) -> Optional[Sectioned]:
    """The document of ``raw`` (in our writer's layout) from its sections, or None: parse it whole."""
    # b"{", then each b'key": value,' (the last without its comma, with the closing b"\n}\n": no separator
    # ends in it). re's split finds the separators in half of bytes.split's time (~5 us for 8 KB).
    parts = _MEMBER.split(raw)
    if parts[0] != b"{" or len(parts) < 2:
        return None
    parts[-1] = parts[-1][:-3]
    split = [p.partition(b'": ') for p in parts[1:]]
    keys = b'"' + b'","'.join([k for k, _, _ in split]) + b'"'
    if b"\\" in keys or keys.count(b'"') != 2 * len(split):
        return None  # a key with an escape or a quote in it (or none): parsed whole
    values = [v for _, _, v in split]  # each but the last with its comma: a value is known by these bytes
    if [v for v in values if v[-1:] != b","] != values[-1:]:
        return None  # a member not followed by a comma is not JSON, nor a comma after the last
    todo = [keys]  # the keys (each one string: no quote or escape in any), then the values not known
    known: List[Any] = []
    for value in values:
        if len(value) >= SMALL:
            got = _hot.get(value, _MISS)
            if got is _MISS:
                got = _seen.get(value, _MISS)
                if got is not _MISS:
                    if len(_hot) >= HOT_MAX:
                        _hot.clear()
                        _hot_ids.clear()
                    _hot[value] = got
                    _hot_ids[id(got)] = got
            if got is not _MISS:
                known.append(got)
                continue
        known.append(_MISS)
        todo.append(value[:-1] if value[-1:] == b"," else value)
    try:
        got_all = parse_json((b"[" + b",".join(todo) + b"]").decode("utf-8"))
    except (ValueError, UnicodeDecodeError):  # ManifestError is a ValueError: parsed whole, it says why
        return None
    n = len(split)
    if not isinstance(got_all, list) or len(got_all) != n + len(todo) - 1:
        return None  # a value that was not one value
    names = got_all[:n]
    if len(set(names)) != n:
        return None  # a repeated key: parsed whole, json keeps the last
    parsed = iter(got_all[n:])
    doc = Sectioned()
    for name, value, got in zip(names, values, known):
        if got is _MISS:
            got = next(parsed)
            if len(value) >= SMALL:
                if len(_seen) >= SEEN_MAX:
                    _seen.clear()
                _seen[value] = got
        doc[name] = got
    return doc


class Sectioned(dict):
    """A document parsed by its sections: a text in our writer's layout with each top-level key once, which
    ``scan.read_fields`` may take its sections from without counting them again."""

    __slots__ = ()
