"""The world a probe sees: environment, filesystem root, recorded command, clock and deadline; the machine's
hostname, login and home, and the run's one redaction policy built from them.

Probes never read ``os.environ`` or absolute paths such as ``/proc`` directly; they ask the context,
so tests point them at a fixture tree and a one-entry PATH of fake executables instead of patching.
The redaction (:mod:`relaxrepro.manifest.redact`) never looks at the machine: the facts it hides come from here.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from ..manifest.redact import Redactor, own_policy
from ..std import proc
from ..std.files import read_regular
from ..std.records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

PROBE_BUDGET = 4.0
"""Seconds one probe may take (each subprocess it starts is capped by what is left of it)."""

DEADLINE = 6.0
"""Seconds the whole collection may take, whatever the probes do."""


class Machine(Record):
    """What redaction hides of the machine a manifest is collected on (None: unknown)."""

    hostname: Optional[str] = None
    login: Optional[str] = None
    home: Optional[str] = None


def machine_hostname() -> Optional[str]:
    """``socket.gethostname()`` without importing ``socket`` (~3.5 ms with ``selectors``): on Linux and
    macOS gethostname(2) is ``uname().nodename``."""
    try:
        return os.uname().nodename
    except AttributeError:  # no os.uname (Windows)
        pass
    import socket  # lazy: ~3.5 ms with selectors, only where there is no os.uname

    try:
        return socket.gethostname()
    except OSError:
        return None


def login_name() -> Optional[str]:
    """``getpass.getuser()`` without importing ``getpass`` and ``termios``: the login variables, else the
    passwd entry of our uid; None when there is none (containers run as an arbitrary uid)."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import pwd  # lazy: ~0.1 ms, and POSIX only: only when no login variable is set

        return pwd.getpwuid(os.getuid())[0]
    except Exception:  # KeyError: no passwd entry; ImportError/AttributeError: not POSIX
        return None


def machine_facts(env: Mapping[str, str]) -> Machine:
    """This machine as ``env`` describes it: its hostname, the login (``$USER``, ``$LOGNAME``, else the process's)
    and the home (``$HOME``, else the process's)."""
    return Machine(
        hostname=machine_hostname(),
        login=env.get("USER") or env.get("LOGNAME") or login_name(),
        home=env.get("HOME") or os.path.expanduser("~"),
    )


def default_policy(
    env: Optional[Mapping[str, str]] = None, *, extra_patterns: Sequence[str] = (), keep_paths: bool = False,
    machine: Optional[Machine] = None,
) -> Redactor:
    """The redaction policy of a collection on this machine: its hostname, login and home (``machine``, else
    :func:`machine_facts` of ``env``, ``os.environ`` when None), ``--redact-pattern`` and ``--keep-paths``.
    ValueError (from :func:`~relaxrepro.manifest.redact.compile_patterns`) names a bad pattern."""
    if machine is None:
        machine = machine_facts(os.environ if env is None else env)
    return Redactor(home=machine.home, hostname=machine.hostname, user=machine.login,
                    extra_patterns=extra_patterns, keep_paths=keep_paths)


def policy_of(doc: Any, env: Optional[Mapping[str, str]] = None) -> Redactor:
    """The policy ``doc`` was collected with (a ``Manifest``'s ``redacted_by``), else this machine's default
    for ``env`` (``os.environ`` when None). A later write of a changed document redacts it again with this."""
    return own_policy(doc) or default_policy(env)


def which_on_path(name: str, path: str) -> Optional[str]:
    """``shutil.which(name, path=path)`` for a bare name on POSIX, without importing ``shutil``
    (~3 ms with ``bz2``, ``lzma``, ``fnmatch``): the first existing, executable non-directory
    ``<dir>/<name>``; ``PATH=''`` finds nothing, an empty entry means the current directory."""
    if sys.platform == "win32" or os.path.dirname(name):  # PATHEXT and the current directory: shutil's rules
        import shutil  # lazy: ~3 ms with bz2, lzma, fnmatch; only on Windows or for a name with a directory

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
        machine: Optional[Machine] = None,
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
        self._machine = machine

    # -- the machine and the run's one redaction policy ----------------------------------------------
    @property
    def machine(self) -> Machine:
        """This machine's hostname, login and home (given by the caller, else read once for this environment)."""
        if self._machine is None:
            with self._lock:
                if self._machine is None:
                    self._machine = machine_facts(self.env)
        return self._machine

    @property
    def redactor(self) -> Redactor:
        """The policy every probe and the assembly redact with (``--keep-paths``, ``--redact-pattern``
        included): given by the caller, else this machine's default, built once."""
        if self._redactor is None:
            machine = self.machine
            with self._lock:
                if self._redactor is None:
                    self._redactor = default_policy(machine=machine)
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
        on_stdout: Optional[Callable[[bytes], None]] = None,
    ) -> proc.ProcResult:
        """Run a tool found on the context's PATH within the calling probe's budget (``on_stdout``: see
        :func:`relaxrepro.std.proc.run`)."""
        argv = list(argv)
        exe = self.which(argv[0]) if argv else None
        if exe is None:
            return proc.ProcResult(argv=argv, error="not found", stdout="" if text else b"")
        limit = self.budget() if timeout is None else min(timeout, self.budget())
        run_env = dict(self.env) if env is None else dict(env)
        run_env.setdefault("LC_ALL", "C")
        return proc.run([exe] + argv[1:], timeout=limit, env=run_env, cwd=cwd or self.cwd, text=text,
                        on_stdout=on_stdout)

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
