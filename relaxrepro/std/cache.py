"""A small per-user cache of facts that depend only on a file's bytes: a library's version, a tool's
``--version`` text.

Why: loading libcudart/libnccl in a child interpreter to ask their versions is most of a generate's wall
time (35-150 ms, on every run of every rank), yet the answer only changes when the file does. A fact is
stored under the file's real path and identity (device, inode, size, mtime, ctime): any reinstall,
rebuild or replacement changes the key, so a stale answer cannot be returned for a changed file.

Where: ``$RELAXREPRO_CACHE_DIR``, else ``$XDG_CACHE_HOME/relaxrepro``, else ``~/.cache/relaxrepro``, in
``facts-v1.json`` (the same base directory the .pyz unpacks into). ``RELAXREPRO_NO_CACHE=1`` turns it
off. A directory or file owned by someone else, or writable by group/others, is never trusted. Only
successful answers are stored; failures are asked again every time. Any problem (read-only home, no
home, a corrupt file, a full disk) means: no cache, never an error or a warning, because the cache only
saves time.
"""

from __future__ import annotations

import json
import os
import threading

from .files import read_regular

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional

FILENAME = "facts-v1.json"
MAX_ENTRIES = 256  # a node sees a handful of CUDA installs; bound the file anyway (~40 KB)
MAX_FILE_BYTES = 1 << 20  # far above MAX_ENTRIES' worth: a larger file is not ours


def cache_dir(env: Mapping[str, str]) -> Optional[str]:
    """The cache directory for ``env``, or None when caching is off or no home is known."""
    if env.get("RELAXREPRO_NO_CACHE"):
        return None
    return base_dir(env)


def base_dir(env: Mapping[str, str]) -> Optional[str]:
    """relaxrepro's per-user directory (also of the fingerprint cache, which RELAXREPRO_NO_CACHE leaves
    alone: it holds digests a user computed on purpose), or None when no home is known or it does not exist."""
    if env.get("RELAXREPRO_CACHE_DIR"):
        return env["RELAXREPRO_CACHE_DIR"]
    base = env.get("XDG_CACHE_HOME")
    if not base:
        home = env.get("HOME")
        if not home or not os.path.isdir(home):
            return None  # a home that is not there is no home: a cache must never create one (HOME=/nonexistent)
        base = os.path.join(home, ".cache")
    return os.path.join(base, "relaxrepro")


def file_key(path: str) -> Optional[str]:
    """A key naming this exact file: its real path and identity; None when it cannot be stat'ed."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    return "%s|%d|%d|%d|%d|%d" % (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _trusted(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return False
    return not st.st_mode & 0o022


class Facts:
    """Facts loaded once per collection; ``put`` marks them dirty and ``save`` writes them back."""

    def __init__(self, directory: Optional[str]) -> None:
        self.directory = directory
        self._data: Dict[str, Any] = {}
        self._dirty = False
        self._lock = threading.Lock()
        if directory is None:
            return
        path = os.path.join(directory, FILENAME)
        if not (_trusted(directory) and _trusted(path)):
            return
        try:
            raw = read_regular(path, MAX_FILE_BYTES + 1)
            data = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_FILE_BYTES else None
        except (OSError, ValueError):  # a FIFO or device is an OSError: no cache
            return
        if isinstance(data, dict):
            self._data = data

    def get(self, namespace: str, key: Optional[str]) -> Any:
        """The fact stored for ``key`` under ``namespace`` ("libversion", "tool-output"), or None."""
        if key is None:
            return None
        with self._lock:
            return self._data.get(namespace + "|" + key)

    def put(self, namespace: str, key: Optional[str], value: Any) -> None:
        if key is None or self.directory is None:
            return
        with self._lock:
            full = namespace + "|" + key
            if self._data.get(full) != value:
                self._data.pop(full, None)
                self._data[full] = value  # insertion order = age: the oldest go first past MAX_ENTRIES
                self._dirty = True

    def save(self) -> bool:
        """Write the facts back atomically (temp file + rename) if anything changed; True when written."""
        with self._lock:
            if not self._dirty or self.directory is None:
                return False
            items: List[Any] = list(self._data.items())[-MAX_ENTRIES:]
            self._dirty = False
        directory = self.directory
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            if not _trusted(directory):
                return False
            tmp = os.path.join(directory, ".%s.%d.tmp" % (FILENAME, os.getpid()))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(dict(items), f, separators=(",", ":"))
                os.replace(tmp, os.path.join(directory, FILENAME))
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except (OSError, ValueError):
            return False
        return True


def for_context(ctx: Any) -> Facts:
    """The collection's shared Facts (loaded once across probe threads)."""
    return ctx.memo("facts", lambda: Facts(cache_dir(ctx.env)))
