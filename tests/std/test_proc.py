"""The one subprocess door: timeouts, process groups, bounded output, children that won't die."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from relaxrepro.std import proc
from tests.helpers.common import MARKER_VAR, ROOT, marked_processes, survivors


def test_captures_stdout_stderr_and_exit_code():
    res = proc.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                   timeout=10)
    assert (res.rc, res.stdout, res.stderr.strip(), res.timed_out, res.error) == (3, "out\n", "err", False, None)
    assert not res.ok
    assert res.describe().endswith("exit 3: err")


def test_missing_executable_is_a_record_not_an_exception():
    res = proc.run(["/nonexistent/tool", "--version"], timeout=5)
    assert res.rc is None and res.error == "not found" and not res.ok


def test_non_executable_file(tmp_path):
    f = tmp_path / "tool"
    f.write_text("#!/bin/sh\necho hi\n")
    res = proc.run([str(f)], timeout=5)
    assert res.error == "not executable (permission denied)"


def test_hang_that_ignores_sigterm_is_killed_with_its_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        "open(%r, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n" % str(pidfile)
    )
    t0 = time.monotonic()
    res = proc.run([sys.executable, "-c", script], timeout=1.0)
    elapsed = time.monotonic() - t0
    assert res.timed_out and not res.ok
    assert elapsed < 5, elapsed
    grandchild = int(pidfile.read_text())
    for _ in range(50):  # the whole group got SIGKILL: the grandchild is gone too
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("grandchild %d survived the group kill" % grandchild)


def test_escaped_grandchild_holding_the_pipe_does_not_block(tmp_path):
    # A daemon that leaves the process group (setsid) but inherits stdout: we must not wait for it.
    script = (
        "import os, subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(30)'])\n"
        "print('parent done')\n"
    )
    t0 = time.monotonic()
    res = proc.run([sys.executable, "-c", script], timeout=8)
    assert res.rc == 0 and res.stdout == "parent done\n"
    assert time.monotonic() - t0 < 5


def test_output_flood_is_bounded():
    res = proc.run([sys.executable, "-c", "import sys; sys.stdout.write('x' * 3000000)"], timeout=20,
                   max_output=1000)
    assert res.rc == 0 and res.truncated and res.stdout == "x" * 1000


def test_binary_stdout_kept_exactly():
    res = proc.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(bytes(range(256)))"], timeout=10,
                   text=False)
    assert res.stdout == bytes(range(256))


def test_no_time_left_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    res = proc.run(["touch", str(marker)], timeout=0)
    assert res.timed_out and not marker.exists()


def test_child_interpreter_crash_is_contained():
    res = proc.run_python(sys.executable, "import os; os.abort()", timeout=10)
    assert res.rc is not None and res.rc < 0 and not res.ok


# ---------------------------------------------------------------- nothing a child started outlives it
needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="scans /proc for the marked processes")


def _marked_env(marker: str) -> dict:
    return dict(os.environ, **{MARKER_VAR: marker})


@needs_proc
@pytest.mark.parametrize("script", [
    "/bin/sleep 1000 & echo ok",  # the background child inherits stdout: the pipe stays open
    "/bin/sleep 1000 >/dev/null 2>&1 & echo ok",  # detached from our pipes: nothing tells us it is there
    "( /bin/sleep 1000 & ) ; echo ok",  # double fork, no setsid: reparented to init, still in the group
    "( ( /bin/sleep 1000 & ) & ) ; echo ok",
], ids=["holds-stdout", "detached", "double-fork", "triple-fork"])
def test_what_a_tool_backgrounds_is_ended_with_it(script: str, request: pytest.FixtureRequest) -> None:
    marker = "%d-%s" % (os.getpid(), request.node.name)
    res = proc.run(["/bin/sh", "-c", script], timeout=60, env=_marked_env(marker))
    # Reading stopped when the shell exited, not when the 60 s ran out.
    assert (res.rc, res.stdout, res.timed_out, res.error) == (0, "ok\n", False, None)
    assert survivors(marker) == []


@needs_proc
def test_output_before_exit_is_kept_whole_when_a_grandchild_holds_the_pipe() -> None:
    # More than a pipe buffer: the shell blocks writing until we read, then exits with the rest still
    # buffered; killing the group must not cut what was already written.
    marker = "drain-%d" % os.getpid()
    res = proc.run(["/bin/sh", "-c", "/bin/sleep 1000 & head -c 300000 /dev/zero | tr '\\0' x"], timeout=60,
                   env=_marked_env(marker))
    assert res.ok and res.stdout == "x" * 300000
    assert survivors(marker) == []


@needs_proc
def test_timeout_ends_the_background_children_too() -> None:
    marker = "timeout-%d" % os.getpid()
    res = proc.run(["/bin/sh", "-c", "/bin/sleep 1000 & /bin/sleep 1000 & wait"], timeout=0.5,
                   env=_marked_env(marker))
    assert res.timed_out and not res.ok
    assert survivors(marker) == []


@needs_proc
def test_end_all_kills_the_group_an_abandoned_thread_waits_on() -> None:
    # What cli.run_main does before os._exit when a probe thread is stuck past the deadline.
    marker = "abandoned-%d" % os.getpid()
    got = []

    def stuck() -> None:
        got.append(proc.run(["/bin/sh", "-c", "/bin/sleep 1000 & /bin/sleep 1000"], timeout=600,
                            env=_marked_env(marker)))

    t = threading.Thread(target=stuck, daemon=True)
    t.start()
    for _ in range(200):
        if len(marked_processes(marker)) >= 3:  # the shell and both sleeps
            break
        time.sleep(0.05)
    assert proc.end_all(final=False) >= 1  # final=False: this test process goes on starting tools
    t.join(30)
    assert not t.is_alive() and got[0].rc == -9 and not got[0].timed_out
    assert survivors(marker) == []
    assert proc.end_all(final=False) == 0  # ended groups are forgotten


def test_after_a_final_end_all_nothing_starts(tmp_path):
    # A SIGTERM handler ends every group, while a probe whose tool was just killed tries the next one on
    # another thread: that one must not start (it would outlive us). Run in a child: the flag is for good.
    code = ("from relaxrepro.std import proc\n"
            "proc.end_all()\n"
            "r = proc.run(['/bin/echo', 'hi'], timeout=5)\n"
            "print(r.rc, r.error, repr(r.stdout))\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.stdout == "None not started: relaxrepro is ending ''\n", res.stderr


def test_on_stdout_is_given_what_is_kept_in_order():
    pieces = []
    code = "import sys\nfor i in range(3000): sys.stdout.write('line %d\\n' % i); sys.stdout.flush()"
    res = proc.run([sys.executable, "-c", code], timeout=30, text=False, on_stdout=pieces.append)
    assert res.ok and b"".join(pieces) == res.stdout and res.stdout.endswith(b"line 2999\n")


def test_on_stdout_of_a_flood_stops_at_the_limit():
    pieces = []
    res = proc.run([sys.executable, "-c", "import sys; sys.stdout.write('x' * 100000)"], timeout=30,
                   text=False, max_output=1000, on_stdout=pieces.append)
    assert res.truncated and b"".join(pieces) == res.stdout == b"x" * 1000


def test_on_stdout_that_raises_is_dropped_and_the_output_kept_whole():
    calls = []

    def broken(piece: bytes) -> None:
        calls.append(piece)
        raise ValueError("a bug in the caller's work")

    code = "import sys\nfor i in range(3000): sys.stdout.write('line %d\\n' % i); sys.stdout.flush()"
    res = proc.run([sys.executable, "-c", code], timeout=30, text=False, on_stdout=broken)
    assert res.ok and len(calls) == 1 and res.stdout.count(b"\n") == 3000
