"""The UTF-8 bytes of a big text, encoded once.

A patch's text is encoded where its digest is taken (the git probe's ``stored_sha256``, the document pass after
a copy of a secret was masked in it) and again where the writer puts it in its sidecar: 3.5 MB holding one
non-ASCII character, two bytes a character in memory, costs ~4 ms an encoding. The first encoding is kept here
by the identity of the text; the writer takes it instead of encoding again.
"""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict, Tuple

KEPT_MIN_CHARS = 65536
"""Shorter texts are encoded again: keeping them would cost more than it saves."""
_KEPT_MAX = 2
"""Encodings kept at once, the oldest going first: a process that collects without writing (the API) holds at
most two texts of the 4 MiB capture limit and their bytes; more dirty repositories encode again."""

_kept: Dict[int, Tuple[str, bytes]] = {}
_lock = threading.Lock()


def keep(text: str, data: bytes) -> None:
    """Note that ``data`` is ``text.encode("utf-8", "surrogateescape")``, for :func:`take`."""
    if len(text) < KEPT_MIN_CHARS:
        return
    with _lock:
        while len(_kept) >= _KEPT_MAX:
            del _kept[next(iter(_kept))]
        _kept[id(text)] = (text, data)


def forget(text: str) -> None:
    """Drop what :func:`keep` was given for ``text`` (a patch changed since: its old text is not written)."""
    with _lock:
        kept = _kept.get(id(text))
        if kept is not None and kept[0] is text:
            del _kept[id(text)]


def take(text: str) -> bytes:
    """``text.encode("utf-8", "surrogateescape")``: the bytes :func:`keep` was given for this very text (and
    forgotten now), else encoded here."""
    with _lock:
        kept = _kept.get(id(text))
        if kept is not None and kept[0] is text:
            del _kept[id(text)]
            return kept[1]
    return text.encode("utf-8", "surrogateescape")
