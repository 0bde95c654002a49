"""The world a probe sees: environment, filesystem root, recorded command, clock and deadline.

Probes never read ``os.environ`` or absolute paths such as ``/proc`` directly; they ask the context,
so tests point them at a fixture tree and a one-entry PATH of fake executables instead of patching.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from ..std import proc
from ..std.files import read_regular

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    from ..manifest.redact import Redactor

PROBE_BUDGET = 4.0
"""Seconds one probe may take (each subprocess it starts is capped by what is left of it)."""

DEADLINE = 6.0
"""Seconds the whole collection may take, whatever the probes do."""


def which_on_path(name: str, path: str) -> Optional[str]:
    """``shutil.which(name, path=path)`` for a bare name on POSIX, without importing ``shutil``
    (~3 ms with ``bz2``, ``lzma``, ``fnmatch``): the first existing, executable non-directory
    ``<dir>/<name>``; ``PATH=''`` finds nothing, an empty entry means the current directory."""
    if sys.platform == "win32" or os.path.dirname(name):  # PATHEXT and the current directory: shutil's rules
        import shutil

        return shutil.which(name, path=path)
    if not path:
        return None
    seen = set()
    for directory in path.split(os.pathsep):
        if directory in seen:
            continue
        seen.add(directory)
        candidate = os.path.join(directory, name)
        if os.path.exists(candidate) and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


class Context:
    """Everything a collector may look at. Cheap to build; shared by all probe threads."""

    def __init__(
        self,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        argv: Sequence[str] = (),
        argv_source: str = "none",
        root: str = "/",
        deadline_s: float = DEADLINE,
        probe_budget_s: float = PROBE_BUDGET,
        options: Optional[Dict[str, Any]] = None,
        clock: Callable[[], float] = time.monotonic,
        redactor: Optional[Redactor] = None,
    ) -> None:
        self.env: Dict[str, str] = dict(os.environ if env is None else env)
        self.cwd: str = cwd if cwd is not None else safe_getcwd()
        self.argv: Tuple[str, ...] = tuple(argv)
        self.argv_source = argv_source
        self.root = root
        self.clock = clock
        self.started = clock()
        self.deadline = self.started + deadline_s
        self.probe_budget_s = probe_budget_s
        self.options: Dict[str, Any] = dict(options or {})
        self._memo: Dict[str, Any] = {}
        self._memo_locks: Dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._probe_start = threading.local()
        self._redactor = redactor

    # -- the run's one redaction policy ---------------------------------------------------------
    @property
    def redactor(self) -> Redactor:
        """The policy every probe and the assembly redact with (``--keep-paths``, ``--redact-pattern``
        included): given by the caller, else this environment's default, built once."""
        if self._redactor is None:
            from ..manifest.redact import Redactor

            with self._lock:
                if self._redactor is None:
                    self._redactor = Redactor.for_environment(self.env)
        return self._redactor

    # -- time -------------------------------------------------------------------------------
    def remaining(self) -> float:
        """Seconds left before the hard deadline of the whole collection."""
        return max(self.deadline - self.clock(), 0.0)

    def begin_probe(self) -> None:
        """Called by the runner in a probe's thread: starts that probe's own budget."""
        self._probe_start.value = self.clock()

    def budget(self) -> float:
        """Seconds the calling probe may still spend: its own budget, capped by the deadline."""
        start = getattr(self._probe_start, "value", None)
        own = self.probe_budget_s if start is None else self.probe_budget_s - (self.clock() - start)
        return max(min(own, self.remaining()), 0.0)

    # -- filesystem ---------------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        """An absolute system path (``/proc/meminfo``) under the injectable root."""
        joined = os.path.join(*parts)
        if self.root in ("", "/"):
            return joined
        return os.path.join(self.root, joined.lstrip("/"))

    def read_text(self, *parts: str, limit: int = 1 << 20) -> Optional[str]:
        """Read a small system file under the root (its first ``limit`` bytes); None when absent,
        unreadable or not a regular file (``/proc`` files are regular)."""
        try:
            data = read_regular(self.path(*parts), limit)
        except (OSError, ValueError):
            return None
        return data.decode("utf-8", "replace")

    def which(self, name: str) -> Optional[str]:
        """Find an executable on the context's PATH (not relaxrepro's own)."""
        if os.sep in name:
            return name if os.access(name, os.X_OK) else None
        return which_on_path(name, self.env.get("PATH", os.defpath))

    # -- processes ----------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        text: bool = True,
    ) -> proc.ProcResult:
        """Run a tool found on the context's PATH within the calling probe's budget."""
        argv = list(argv)
        exe = self.which(argv[0]) if argv else None
        if exe is None:
            return proc.ProcResult(argv=argv, error="not found", stdout="" if text else b"")
        limit = self.budget() if timeout is None else min(timeout, self.budget())
        run_env = dict(self.env) if env is None else dict(env)
        run_env.setdefault("LC_ALL", "C")
        return proc.run([exe] + argv[1:], timeout=limit, env=run_env, cwd=cwd or self.cwd, text=text)

    # -- sharing between probes -----------------------------------------------------------------
    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """Compute a shared value once (e.g. the training interpreter's sys.path) across probes."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            lock = self._memo_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._memo:
                    return self._memo[key]
            value = compute()
            with self._lock:
                self._memo[key] = value
            return value


def safe_getcwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the directory was deleted under us
        return os.environ.get("PWD", "/")


def env_list(value: Optional[str]) -> List[str]:
    """Split a PATH-like variable into its non-empty entries."""
    return [p for p in (value or "").split(os.pathsep) if p]
