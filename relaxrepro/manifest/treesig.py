"""A run tree's signatures, as the run index compares them: each directory's manifests with the packed
size, mtime_ns and inode of each (its signature), and one digest of all of them in walk order."""

from __future__ import annotations

import os
import struct
import sys
import time

from ..std.sha import sha256
from .scan import walk_dirs

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

    from .scan import Listing, Walk

    Walked = List[Tuple[str, List[str], List[Optional[bytes]]]]

KEY = struct.Struct("<QqQ")  # size, mtime_ns, inode of one manifest


KEPT_AFTER_NS = 3 * 10**9
"""A directory's listing is kept (:func:`walk`'s ``kept``) only when it and its manifests were last changed this
long before it was listed: a change within the same timestamp tick would leave its stat as it was (the index's
"racy" rule, indexdb.RACY_NS), and a clock ahead of ours (a file server's) only means listing it again."""


def walk(root: str, rule: Walk, kept: Optional[Dict[str, Any]] = None) -> Walked:
    """Each directory below ``root`` that holds manifests (relative, in walk order) with their names and
    packed keys (None: the file vanished or cannot be stat'ed); ``rule``: the walk's (:class:`scan.Walk`).

    ``kept``: a dictionary kept between walks (``Runs(check="dirs")``), where each directory's listing is
    remembered with the directory's own stat: a directory whose device, inode, mtime and ctime are as they
    were is not listed again, nor its manifests stat'ed. A manifest added, removed, renamed or replaced there
    (every write of ours replaces) changes the directory; one rewritten in place does not."""
    prefix = os.path.join(root, "")
    listed = None
    if kept is not None:  # it ends up holding the directories of this walk only
        last = dict(kept)
        kept.clear()
        listed = lambda d, listing: _kept_listing(d, listing, root, rule, last, kept)  # noqa: E731
    dirs = walk_dirs(root, rule, key=KEY.pack, listed=listed)
    return [(d[len(prefix):] if d != root else "", names, keys) for d, names, keys in dirs if names]


class _Links:
    """Stands for the walk's rule while a directory is listed: the links met there, to tell the rule again
    each time the listing is taken from ``kept``."""

    def __init__(self) -> None:
        self.links: List[str] = []

    def note(self, link: str) -> None:
        self.links.append(link)


def _kept_listing(d: str, listing: Listing, root: str, rule: Walk, last: Dict[str, Any], kept: Dict[str, Any]
                  ) -> Tuple[List[str], List[str], List[bytes]]:
    """The directory ``d`` as ``listing`` lists it, or as ``last`` holds it when its stat is unchanged (see
    :func:`walk`); kept in ``kept`` when it may be taken from there next time."""
    try:  # the stat before the listing: a change while it is listed shows at the next walk
        st = os.stat(d) if d == root else os.lstat(d)  # a root that is a link is followed, as walk_dirs does
        mark: Optional[Tuple[int, int, int, int]] = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        mark = None
    got = last.get(d)
    if got is not None and got[0] == mark:
        kept[d] = got
        for link in got[4]:
            rule.note(link)
        return got[1], got[2], got[3]
    now = time.time_ns()
    seen = _Links()
    subdirs, names, keys = listing(d, seen)
    for link in seen.links:
        rule.note(link)
    if mark is not None and now - max(mark[2], mark[3]) > KEPT_AFTER_NS and None not in keys and all(
            now - KEY.unpack(k)[1] > KEPT_AFTER_NS for k in keys):
        kept[d] = (mark, subdirs, names, keys, seen.links)
    return subdirs, names, keys


def signature(names: Sequence[str], keys: Sequence[bytes]) -> bytes:
    """One directory's stored manifests: their names, then each one's packed size, mtime_ns, inode."""
    return "\0".join(names).encode("utf-8", "surrogateescape") + b"\0\0" + b"".join(keys)


def unsign(sig: Optional[bytes]) -> Dict[str, bytes]:
    """The packed key of each manifest a :func:`signature` names, by name."""
    if not sig:
        return {}
    cut = sig.index(b"\0\0") if sig[:2] != b"\0\0" else 0
    names = sig[:cut].decode("utf-8", "surrogateescape").split("\0") if cut else []
    keys = sig[cut + 2:]
    size = KEY.size
    return {n: keys[i * size:(i + 1) * size] for i, n in enumerate(names)}


OPENSSL_FROM = 1 << 20
"""The signatures' size from which :func:`tree_digest` loads OpenSSL's sha256 (``hashlib``): ~6x faster per byte
than the builtin one here (0.35 ms against 2.1 ms for the 640 KB of 10,000 manifests) but ~3.3 ms to import, so
one listing gains from about 1.2 MB (18,000 manifests). Once it is imported (a long-lived process), always."""


def tree_digest(sigs: Iterable[Tuple[str, bytes]]) -> bytes:
    """The digest of a tree's directory signatures, in walk order (the same sha256 whichever code computes it)."""
    parts = []
    for rel, sig in sigs:
        name = rel.encode("utf-8", "surrogateescape")
        parts.append(b"%d:%d:" % (len(name), len(sig)))
        parts.append(name)
        parts.append(sig)
    data = b"".join(parts)
    if len(data) >= OPENSSL_FROM or "hashlib" in sys.modules:
        import hashlib  # lazy: ~3.3 ms (OpenSSL); it pays for itself only over a large tree or many calls

        return hashlib.sha256(data).digest()
    return sha256(data).digest()


def stored_signatures(walked: Walked, uncached: Set[str], base: Optional[List[Tuple[str, bytes]]] = None
                      ) -> List[Tuple[str, bytes]]:
    """The directory signatures a database that holds this walk has (files in ``uncached`` left out);
    ``base``: those with nothing left out, to take the directories without such files from."""
    out = []
    odd = {p[:max(p.rfind(os.sep), 0)] for p in uncached}
    if base is not None:
        if not odd:
            return base
        keep = dict(base)
    for rel, names, keys in walked:
        if base is not None and rel not in odd:
            if rel in keep:
                out.append((rel, keep[rel]))
            continue
        if rel in odd:
            pairs = [(n, k) for n, k in zip(names, keys) if k is not None and join(rel, n) not in uncached]
            names, keys = [n for n, _ in pairs], [k for _, k in pairs]  # type: ignore[misc]
        elif None in keys:
            names, keys = [n for n, k in zip(names, keys) if k is not None], [k for k in keys if k is not None]
        if names:
            out.append((rel, signature(names, keys)))  # type: ignore[arg-type]
    return out


def join(rel: str, name: str) -> str:
    """The path of ``name`` relative to the root, in the directory ``rel`` (the root itself: "")."""
    return rel + os.sep + name if rel else name
