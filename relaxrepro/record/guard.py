"""What a replay must leave as it found it: the original run's manifest, its patch sidecars, its recorded
outputs and every file of its run directory, fingerprinted before ``rerun`` starts the command and compared
afterwards (:func:`changes`), so that a replay which wrote over the original cannot pass unnoticed."""

from __future__ import annotations

import hashlib
import os

from ..manifest.fields import scalar, section
from .results import fingerprint_outputs

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

MAX_FILES = 10000
"""Files of the run directory stamped at most: a run directory holds a manifest, logs and checkpoints, not a
dataset; past this many (a directory written to by everything) the rest go unwatched."""


def _digest(path: str) -> Optional[str]:
    """sha256 of a regular file (streamed), None when it is absent or unreadable."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def _stamp(path: str) -> Optional[Tuple[int, int, int]]:
    """(inode, size, mtime in ns): a file written again gets a new mtime, a file replaced a new inode."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _walk(directory: str) -> List[str]:
    found: List[str] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            found.append(os.path.join(root, name))
            if len(found) >= MAX_FILES:
                return found
    return found


def snapshot(rec: Mapping[str, Any], manifest_path: str, outputs: Iterable[str], run_dir: Optional[str], *,
             env: Mapping[str, str]) -> Dict[str, Any]:
    """{absolute path: its fingerprint}: the manifest and its sidecars by sha256, each recorded output as
    ``results.outputs`` records it (full digests, read through the fingerprint cache), and every other file
    of ``run_dir`` (None: the original was written into a project, not a run directory) by its stamp."""
    manifest = os.path.abspath(manifest_path)
    prints: Dict[str, Any] = {manifest: _digest(manifest)}
    for repo in section(rec, "code").values():
        patch = repo.get("patch") if isinstance(repo, dict) else None
        sidecar = scalar(patch.get("sidecar")) if isinstance(patch, dict) else None
        if sidecar and "/" not in sidecar:
            path = os.path.join(os.path.dirname(manifest), sidecar)
            prints[path] = _digest(path)
    for path in sorted(set(outputs)):
        entry, _ = fingerprint_outputs([path], cwd=os.path.dirname(path), env=env)
        prints[path] = next(iter(entry.values()), None)
    if run_dir and os.path.isdir(run_dir):
        for path in _walk(run_dir):
            prints.setdefault(path, _stamp(path))
    return prints


def changes(before: Mapping[str, Any], rec: Mapping[str, Any], manifest_path: str, outputs: Iterable[str],
            run_dir: Optional[str], *, env: Mapping[str, str]) -> List[str]:
    """The original's files that are not as :func:`snapshot` found them (``before``): written over, removed,
    or new in its run directory; sorted."""
    after = snapshot(rec, manifest_path, outputs, run_dir, env=env)
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
