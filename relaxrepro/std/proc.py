"""The one door to the OS for child processes.

Every subprocess relaxrepro starts goes through :func:`run`: a timeout, its own process group
(killed as a whole once the child exits or times out, so nothing it backgrounded outlives it;
:func:`end_all` for groups an abandoned thread still waits on), bounded captured output, and no
unbounded wait on a child that ignores signals or on a grandchild that keeps our pipes open. No other module imports
``subprocess``. Native code (ctypes lookups of NCCL/CUDA) runs in a child interpreter through
:func:`run_python`, so a library that crashes on load kills the child, never us.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time

from .records import Factory, Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

MAX_OUTPUT = 4 * 1024 * 1024
"""Bytes kept per stream; the rest is read and dropped so the child never blocks on a full pipe."""

_GRACE_AFTER_KILL = 0.3
"""Seconds to keep reading after the group was killed: only a descendant that left the group
(``setsid``) can still hold the pipe open then, and we do not wait for it."""


class ProcResult(Record):
    """What one child process did. ``rc`` is None when it never started or was abandoned."""

    argv: List[str]
    rc: Optional[int] = None
    stdout: Union[str, bytes] = ""
    stderr: str = ""
    seconds: float = 0.0
    timed_out: bool = False
    error: Optional[str] = None
    truncated: bool = False
    extra: dict = Factory(dict)

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out and self.error is None

    def describe(self) -> str:
        """One line for a warning: what ran and how it ended."""
        name = os.path.basename(self.argv[0]) if self.argv else "?"
        # An argument can be a whole ``python -c`` program: the warning shows only its start.
        cmd = " ".join([name] + [a if len(a) <= 40 else a[:37] + "..." for a in map(str, self.argv[1:3])])
        if self.error:
            return "%s: %s" % (cmd, self.error)
        if self.timed_out:
            return "%s: timed out after %.1f s" % (cmd, self.seconds)
        tail = _last_line(self.stderr) or _last_line(self.stdout if isinstance(self.stdout, str) else "")
        return "%s: exit %s%s" % (cmd, self.rc, (": " + tail[:200]) if tail else "")


def _last_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            return line.strip()
    return ""


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    text: bool = True,
    max_output: int = MAX_OUTPUT,
    stdin_data: Optional[bytes] = None,
    on_stdout: Optional[Callable[[bytes], None]] = None,
) -> ProcResult:
    """Run ``argv`` for at most ``timeout`` seconds and return what it printed.

    Never raises for anything the child does: a missing executable, a crash, a hang or a flood of
    output all end up in the returned record. ``text=False`` keeps stdout as bytes (patches must
    round-trip exactly); stderr is always decoded. ``on_stdout`` is given each piece of stdout as it is
    kept, in order (their sum is ``stdout``), so that a caller can work on a long output while the child
    prints the rest; one that raises is not called again.
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    result = ProcResult(argv=argv)
    if timeout <= 0:
        result.timed_out = True
        result.error = "no time left in the collection budget"
        result.stdout = "" if text else b""
        return result
    error = "not started: relaxrepro is ending"
    with _LIVE_LOCK:  # starting and registering are one step: end_all never misses a group
        proc = None
        if not _ENDING[0]:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=dict(env) if env is not None else None,
                    close_fds=True,
                    start_new_session=(os.name == "posix"),
                )
            except (OSError, ValueError) as exc:
                error = _start_error(exc)
            else:
                _LIVE[proc.pid] = proc
    if proc is None:
        result.error = error
        result.seconds = time.monotonic() - start
        result.stdout = "" if text else b""
        return result

    if os.name == "posix":
        out, err, truncated, timed_out = _pump_posix(proc, start + timeout, max_output, stdin_data, on_stdout)
    else:  # pragma: no cover - exercised on Windows laptops only
        out, err, truncated, timed_out = _pump_portable(proc, timeout, max_output, stdin_data)
        if on_stdout is not None and out:
            try:
                on_stdout(out)
            except Exception:
                pass
    result.truncated = truncated
    result.timed_out = timed_out
    result.rc = proc.poll()
    if timed_out and result.rc is None:
        result.error = None
    result.seconds = time.monotonic() - start
    result.stdout = out.decode("utf-8", "replace") if text else out
    result.stderr = err.decode("utf-8", "replace")
    return result


def _start_error(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "not found"
    if isinstance(exc, PermissionError):
        return "not executable (permission denied)"
    return "could not start: %s" % (exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)


def _kill_group(proc: "subprocess.Popen[bytes]") -> None:
    """SIGKILL the child's whole process group (a tool's ``sleep 1000 &`` included).

    Called before the child is reaped, so its pid (the group's id) cannot have been reused yet.
    """
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass  # the group is empty already, or holds only what we may not signal
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass


def _exited(proc: "subprocess.Popen[bytes]") -> bool:
    """Whether the child has ended, without reaping it (``WNOWAIT``): until :func:`_end` kills its
    group, the zombie keeps the group's id from being given to an unrelated process."""
    if proc.returncode is not None:
        return True
    waitid = getattr(os, "waitid", None)  # absent on macOS: poll() reaps, a race we accept there
    if waitid is None:
        return proc.poll() is not None
    try:
        return waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
    except OSError:
        return proc.poll() is not None


_LIVE: Dict[int, "subprocess.Popen[bytes]"] = {}
"""Groups started by :func:`run` and not yet ended, by pid: what :func:`end_all` kills."""
_LIVE_LOCK = threading.Lock()
_ENDING = [False]
"""Set by :func:`end_all`: from then on :func:`run` starts nothing."""


def _end(proc: "subprocess.Popen[bytes]") -> None:
    """Kill the child's group (whatever it left running) and forget it."""
    _kill_group(proc)
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


def end_all(*, final: bool = True) -> int:
    """Kill every process group :func:`run` started that has not ended yet; how many.

    For the exits that skip a thread's own cleanup: a probe thread abandoned at the deadline is a
    daemon, and ``os._exit`` (or interpreter shutdown, or a SIGTERM) would leave its child running.
    ``final``: nothing may start afterwards either (a probe whose tool was just killed tries the next
    one at once, on another thread).
    """
    # In a signal handler the interrupted main thread may hold the lock itself: wait a little, not forever.
    locked = _LIVE_LOCK.acquire(timeout=2)
    try:
        if final:
            _ENDING[0] = True
        live = list(_LIVE.values())
        _LIVE.clear()
    finally:
        if locked:
            _LIVE_LOCK.release()
    for child in live:
        _kill_group(child)
    return len(live)


atexit.register(end_all)


class ending_all_on_termination:
    """``with ending_all_on_termination(): ...``: a SIGTERM or SIGHUP meanwhile (a job's time limit, a closed
    terminal) first ends every process group :func:`run` started, then kills us with that same signal, as
    before. Without it the signal's default action skips atexit and leaves a hung tool running.

    A signal the parent set to be ignored (``nohup``) stays ignored; only the main thread may set handlers.
    """

    def __enter__(self) -> ending_all_on_termination:
        self._previous = {}
        if threading.current_thread() is not threading.main_thread():
            return self
        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
                self._previous[sig] = signal.signal(sig, _end_all_and_die)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _end_all_and_die(signum: int, _frame: object) -> None:
    end_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _pump_posix(proc, deadline: float, max_output: int, stdin_data: Optional[bytes],
                on_stdout: Optional[Callable[[bytes], None]] = None):
    import selectors  # lazy: ~2 ms, only once a child runs (reading commands never start one)

    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    truncated = False
    timed_out = False
    sel = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        sel.register(stream, selectors.EVENT_READ)
    if stdin_data is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin_data)
        except OSError:
            pass
        try:
            proc.stdin.close()
        except OSError:
            pass
    # The group is killed as soon as the child exits (or time is up): a background grandchild that
    # inherited stdout would otherwise keep the pipe open until the deadline. Its last output is in
    # the pipe already; we read on until EOF, or briefly when something outside the group holds it.
    ended_at: Optional[float] = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if ended_at is None:
                if now >= deadline:
                    timed_out = True
                if timed_out or _exited(proc):
                    _end(proc)
                    ended_at = now
            elif now - ended_at > _GRACE_AFTER_KILL:
                break  # a descendant that left the group (setsid) keeps the pipe open: not ours to wait for
            wait = 0.05 if ended_at is not None else min(0.05, max(deadline - now, 0.0))
            for key, _ in sel.select(timeout=max(wait, 0.001)):
                try:
                    chunk = os.read(key.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = bufs[key.fileobj]
                room = max_output - len(buf)
                if room > 0:
                    buf += chunk[:room]
                    if on_stdout is not None and key.fileobj is proc.stdout:
                        try:
                            on_stdout(chunk[:room])
                        except Exception:  # the caller's work, never the reading: it goes on without it
                            on_stdout = None
                if len(chunk) > room:
                    truncated = True
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    if ended_at is None:
        # Both pipes closed first (the usual end: they close as the child exits): wait for the exit
        # itself, still unreaped, within the deadline; then end the group either way.
        delay = 0.0005
        while not _exited(proc):
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.02)
        _end(proc)
    # Reap: a SIGKILLed child goes at once unless it is in uninterruptible sleep; never wait long.
    try:
        proc.wait(timeout=_GRACE_AFTER_KILL)
    except subprocess.TimeoutExpired:
        timed_out = True
    return bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), truncated, timed_out


def _pump_portable(proc, timeout: float, max_output: int, stdin_data: Optional[bytes]):  # pragma: no cover
    timed_out = False
    try:
        out, err = proc.communicate(input=stdin_data, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=_GRACE_AFTER_KILL)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)
    truncated = len(out) > max_output or len(err) > max_output
    return out[:max_output], err[:max_output], truncated, timed_out


def run_python(
    python: str,
    code: str,
    *,
    timeout: float,
    args: Sequence[str] = (),
    env: Optional[Mapping[str, str]] = None,
    isolated: bool = True,
) -> ProcResult:
    """Run ``code`` in a child interpreter ``python`` (``-I`` unless ``isolated=False``).

    Used for everything that loads native code or needs another interpreter's view of the
    world: a crash or hang there costs one probe, never relaxrepro's own process.
    """
    argv = [python] + (["-I"] if isolated else []) + ["-c", code] + list(args)
    return run(argv, timeout=timeout, env=env)


def current_python() -> str:
    """The interpreter running relaxrepro (for child-interpreter helpers)."""
    return sys.executable or "python3"


FORWARDED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
"""Signals a foreground child gets from us. Slurm sends SIGTERM at the time limit and, with
``--signal=USR1@120``, SIGUSR1 ahead of it so a trainer can checkpoint: both must reach the trainer."""


def run_foreground(
    argv: Sequence[str],
    *,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    on_start: Optional[Callable[[int], None]] = None,
) -> ProcResult:
    """Run ``argv`` in the foreground until it ends: stdio inherited, our signals forwarded.

    This is the training itself, so there is no timeout and nothing is captured. The child stays in
    our process group so a terminal's Ctrl-C and job control reach it as they would without us.
    Inherited descriptors stay open (``close_fds=False``): MPI launchers hand the rank its PMI socket
    as an inherited fd (MPICH hydra's ``PMI_FD``), and we must be transparent in an sbatch line.
    ``rc`` is the raw status (negative N when killed by signal N); ``error`` says why it never
    started. :func:`exit_status` turns the record into a shell exit code. Never raises.
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    result = ProcResult(argv=argv, stdout="")
    if not argv:
        result.error = "no command given"
        return result
    try:
        child = subprocess.Popen(argv, cwd=cwd, env=dict(env) if env is not None else None, close_fds=False)
    except (OSError, ValueError) as exc:
        result.error = _start_error(exc)
        result.seconds = time.monotonic() - start
        return result
    previous = _install_forwarders(child)
    try:
        if on_start is not None:
            try:
                on_start(child.pid)
            except Exception:  # a caller's bookkeeping must not orphan the training
                pass
        while True:
            try:
                result.rc = child.wait()
                break
            except KeyboardInterrupt:  # only when we could not install handlers (not the main thread)
                continue
    finally:
        _restore_handlers(previous)
    result.seconds = time.monotonic() - start
    if result.rc is not None and result.rc < 0:
        result.extra["signal"] = -result.rc
    return result


def exit_status(result: ProcResult) -> int:
    """The shell's convention: the child's code, 128+N when killed by signal N, 127 if it never ran."""
    if result.rc is None:
        return 127
    if result.rc < 0:
        return 128 - result.rc
    return result.rc


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 77`` for a number this platform does not name."""
    try:
        return signal.Signals(number).name
    except (ValueError, AttributeError):
        return "signal %d" % number


_TERMINAL_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGQUIT") if hasattr(signal, n))


def _install_forwarders(child: "subprocess.Popen[bytes]") -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}  # Python lets only the main thread set handlers; the child still gets terminal signals
    previous = {}

    def forward(signum: int, _frame: object) -> None:
        if signum in _TERMINAL_SIGNALS and _terminal_sent_to_group():
            return  # Ctrl-C already reached the child through the terminal: a second one would cut its cleanup
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for name in FORWARDED_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            previous[sig] = signal.signal(sig, forward)
        except (OSError, ValueError):
            pass
    return previous


def _restore_handlers(previous: dict) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            pass


def _terminal_sent_to_group() -> bool:
    """Whether we run in the terminal's foreground process group (so its Ctrl-C hit the child too)."""
    if os.name != "posix":
        return False
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False
