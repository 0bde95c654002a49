"""``relaxrepro run -- COMMAND``: manifest first, the command in the foreground, its outcome after."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from relaxrepro.std import proc
from tests.helpers.common import clean_env, fake_tool, run_cli, validate_manifest
from tests.helpers.recording import load, manifests


def _only_manifest(directory: Path) -> dict:
    found = manifests(directory)
    assert len(found) == 1, found
    doc = load(found[0])
    validate_manifest(doc)
    return doc


def test_exit_status_stdio_and_outcome_pass_through(tmp_path):
    code = "import sys; data = sys.stdin.read(); print(data.upper()); print('oops', file=sys.stderr); sys.exit(3)"
    res = run_cli("run", "--output-dir", str(tmp_path / "out"), "--", sys.executable, "-c", code,
                  cwd=tmp_path, stdin="hello")
    assert res.returncode == 3
    assert res.stdout == "HELLO\n"  # stdout is the command's alone
    assert "oops" in res.stderr
    assert "relaxrepro: manifest %s" % (tmp_path / "out") in res.stderr
    doc = _only_manifest(tmp_path / "out")
    assert doc["command"]["argv"][1:] == ["-c", code]
    assert doc["outcome"]["status"] == "exit"
    assert doc["outcome"]["exit_code"] == 3


def test_a_command_that_succeeds(tmp_path):
    res = run_cli("run", "--output-dir", str(tmp_path), "--group", "g", "--", "true", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = _only_manifest(tmp_path)
    assert doc["outcome"]["status"] == "ok" and doc["outcome"]["exit_code"] == 0
    assert doc["lineage"]["group"] == "g"


def test_a_command_that_cannot_start_exits_127_with_the_reason(tmp_path):
    res = run_cli("run", "--output-dir", str(tmp_path), "--", "no-such-trainer-xyz", "--lr", "1",
                  cwd=tmp_path)
    assert res.returncode == 127
    assert "relaxrepro run: cannot start no-such-trainer-xyz: not found" in res.stderr
    doc = _only_manifest(tmp_path)
    assert doc["outcome"]["status"] == "not_started"
    assert doc["outcome"]["exit_code"] == 127
    assert doc["outcome"]["error"] == "not found"


def test_a_command_that_is_not_executable_exits_127(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o644)
    res = run_cli("run", "--output-dir", str(tmp_path / "out"), "--", str(script), cwd=tmp_path)
    assert res.returncode == 127
    assert "cannot start %s: not executable (permission denied)" % script in res.stderr
    assert "never" not in res.stdout


def test_a_command_killed_by_a_signal_exits_128_plus_n(tmp_path):
    res = run_cli("run", "--output-dir", str(tmp_path), "--", "sh", "-c", "kill -KILL $$", cwd=tmp_path)
    assert res.returncode == 128 + 9
    out = _only_manifest(tmp_path)["outcome"]
    assert out == dict(out, status="signal", exit_code=137, signal=9, signal_name="SIGKILL")


def test_no_command_is_a_usage_error(tmp_path):
    res = run_cli("run", "--output-dir", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 2
    assert "relaxrepro run: error: give the command to run after --" in res.stderr
    assert manifests(tmp_path) == []


def test_other_ranks_run_the_command_without_writing(tmp_path):
    res = run_cli("run", "--output-dir", str(tmp_path), "--", "sh", "-c", "echo rank-one; exit 4",
                  env=clean_env(RANK="1"), cwd=tmp_path)
    assert res.returncode == 4
    assert res.stdout == "rank-one\n"
    assert manifests(tmp_path) == []


_HANDLER = """
import signal, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
def handler(signum, frame):
    out.with_suffix('.got').write_text(signal.Signals(signum).name)
    sys.exit(40 + signum % 20)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
    signal.signal(s, handler)
out.write_text('ready')
time.sleep(30)
sys.exit(99)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1], ids=lambda s: s.name)
def test_signals_are_forwarded_to_the_command(tmp_path, sig):
    ready = tmp_path / "child.txt"
    child = subprocess.Popen(
        [sys.executable, "-m", "relaxrepro", "run", "--output-dir", str(tmp_path / "out"), "--",
         sys.executable, "-c", _HANDLER, str(ready)],
        env=clean_env(), cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), child.stderr.read() if child.poll() is not None else "child not ready"
        os.kill(child.pid, sig)  # to relaxrepro only, as Slurm's scancel --signal or a supervisor would
        rc = child.wait(30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert ready.with_suffix(".got").read_text() == sig.name
    assert rc == 40 + sig % 20
    out = _only_manifest(tmp_path / "out")["outcome"]
    assert (out["status"], out["exit_code"]) == ("exit", 40 + sig % 20)


def test_run_foreground_reports_what_happened(tmp_path):
    started = []
    res = proc.run_foreground(["sh", "-c", "exit 5"], on_start=started.append)
    assert (res.rc, proc.exit_status(res), res.error) == (5, 5, None)
    assert len(started) == 1 and started[0] > 0
    res = proc.run_foreground(["sh", "-c", "kill -TERM $$"])
    assert (res.rc, proc.exit_status(res), res.extra["signal"]) == (-15, 143, 15)
    res = proc.run_foreground([str(tmp_path / "missing")])
    assert (res.rc, proc.exit_status(res), res.error) == (None, 127, "not found")
    res = proc.run_foreground([])
    assert (proc.exit_status(res), res.error) == (127, "no command given")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # our forwarders are gone afterwards


def test_run_foreground_keeps_the_child_in_our_process_group(tmp_path):
    out = tmp_path / "pgid"
    proc.run_foreground(["sh", "-c", "ps -o pgid= -p $$ > %s" % out])
    assert int(out.read_text().strip()) == os.getpgrp()  # so a terminal's Ctrl-C reaches it directly


def test_the_command_learns_its_run_id_and_manifest(tmp_path):
    res = run_cli("run", "--output-dir", str(tmp_path), "--", "sh", "-c",
                  'echo "$RELAXREPRO_RUN_ID $RELAXREPRO_MANIFEST"', cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = _only_manifest(tmp_path)
    assert res.stdout.split() == [doc["run_id"], str(manifests(tmp_path)[0])]


def test_the_command_still_runs_when_recording_fails(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_cli("run", "--output-dir", str(blocker / "sub"), "--", "sh", "-c", "echo trained; exit 0",
                  cwd=tmp_path)
    assert res.returncode == 0
    assert res.stdout == "trained\n"
    assert "relaxrepro: warning: could not write" in res.stderr


def test_strict_does_not_start_the_command_when_a_probe_failed(tmp_path, repo):
    bindir = tmp_path / "bin"
    fake_tool(bindir, "nvidia-smi", "echo 'NVIDIA-SMI has failed because it couldn'\\''t communicate with the "
              "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.'; exit 9\n")
    marker = tmp_path / "ran"
    res = run_cli("run", "--strict", "--output-dir", str(tmp_path / "out"), "--", "/bin/sh", "-c",
                  "/usr/bin/touch %s" % marker, env=clean_env(PATH=str(bindir)), cwd=repo)
    assert res.returncode == 1
    assert "relaxrepro: warning: probe gpu failed: " in res.stderr
    assert "relaxrepro run: error: a probe failed; not running the command (--strict)" in res.stderr
    assert not marker.exists()


def test_a_bad_run_id_is_a_usage_error_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    res = run_cli("run", "--run-id", "a b", "--", "touch", str(marker), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro run: error: --run-id 'a b': ' ' is not allowed: use letters, digits, '.', '_' "
                          "and '-' only\n")
    assert not marker.exists()


@pytest.mark.parametrize("run_id, said", [
    pytest.param("a" * 300, "--run-id '%s...: too long (300 > 128 characters)" % ("a" * 59), id="too-long"),
    pytest.param("-x", "--run-id '-x': must start with a letter or a digit", id="leading-dash"),
    pytest.param("", "--run-id '': empty", id="empty"),
])
def test_a_bad_run_id_is_told_the_rule_it_breaks(tmp_path, run_id, said):
    res = run_cli("run", "--run-id=" + run_id, "--", "true", cwd=tmp_path)
    assert (res.returncode, res.stderr) == (2, "relaxrepro run: error: %s\n" % said)
    res = run_cli("generate", "--output-dir", str(tmp_path), cwd=tmp_path,
                  env=clean_env(RELAXREPRO_RUN_ID=run_id or "a/b"))
    assert res.returncode == 2 and res.stderr.startswith("relaxrepro generate: error: $RELAXREPRO_RUN_ID '")
    assert list(tmp_path.iterdir()) == []


_COUNT_SIGINT = """
import signal, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
got = []
def handler(signum, frame):
    got.append(signum)
    out.with_suffix('.count').write_text(str(len(got)))
signal.signal(signal.SIGINT, handler)
out.write_text('ready')
end = time.monotonic() + 30
while not got and time.monotonic() < end:
    time.sleep(0.02)
time.sleep(1.0)  # a second, forwarded SIGINT would arrive in here
sys.exit(7)
"""


def test_ctrl_c_on_a_terminal_reaches_the_command_once(tmp_path):
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    ready = tmp_path / "child.txt"

    def take_terminal() -> None:  # like a login shell: the tty becomes our controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    child = subprocess.Popen(
        [sys.executable, "-m", "relaxrepro", "run", "--output-dir", str(tmp_path / "out"), "--",
         sys.executable, "-c", _COUNT_SIGINT, str(ready)],
        env=clean_env(), cwd=str(tmp_path), stdin=slave, stdout=slave, stderr=slave,
        start_new_session=True, preexec_fn=take_terminal)
    os.close(slave)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), "child not ready"
        os.write(master, b"\x03")  # Ctrl-C: the terminal signals its whole foreground process group
        rc = child.wait(30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        os.close(master)
    assert ready.with_suffix(".count").read_text() == "1"  # from the terminal, not again from us
    assert rc == 7


@pytest.mark.parametrize("where", ["argv", "env", "cwd"])
def test_bytes_that_are_not_utf8_are_recorded_as_visible_escapes(tmp_path, where):
    odd = "v\udcff"  # b"v\xff" as Python reads it from the OS (surrogateescape)
    cwd = tmp_path / ("d\udcff" if where == "cwd" else "d")
    cwd.mkdir()
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    if where == "env":
        env["NCCL_DEBUG"] = odd  # a recorded variable
    argv = [sys.executable, "-c", "import sys; sys.exit(0)"] + ([odd] if where == "argv" else [])
    res = run_cli("run", "--output-dir", "out", "--", *argv, env=env, cwd=cwd)  # below the odd cwd
    assert res.returncode == 0
    # the one warning is that no repository is recorded here: nothing about the bytes
    assert [line for line in res.stderr.splitlines() if "warning" in line] == [
        "relaxrepro: warning: no git repository recorded (the working directory is not inside one; add one with "
        "--repo NAME=PATH): check, restore and rerun will have no code to go by"], res.stderr
    manifests(cwd / "out")[0].read_bytes().decode("utf-8")  # UTF-8 throughout
    doc = _only_manifest(cwd / "out")
    assert doc["outcome"]["exit_code"] == 0
    seen = {"argv": lambda: doc["command"]["argv"][-1], "env": lambda: doc["config"]["selected_env"]["NCCL_DEBUG"],
            "cwd": lambda: doc["command"]["cwd"]}[where]()
    assert seen.endswith("d\\xff") if where == "cwd" else seen == "v\\xff", seen

    res = run_cli("generate", "--output-dir", "gen", "--", *argv, env=env, cwd=cwd)
    assert res.returncode == 0, res.stderr
    assert "\\\\xff" in manifests(cwd / "gen")[0].read_text(encoding="utf-8")
    for _ in range(2):  # the index built, then read
        listed = run_cli("ls", str(tmp_path), env=env)
        assert (listed.returncode, listed.stderr) == (0, "")
        assert len(listed.stdout.splitlines()) == 3  # the header, the run and the generated manifest
    listed = run_cli("ls", str(cwd), env=env)  # a root that is not UTF-8
    assert (listed.returncode, listed.stderr, len(listed.stdout.splitlines())) == (0, "", 3)


def test_sigterm_while_outputs_are_hashed_keeps_the_commands_outcome(tmp_path):
    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:
        fh.truncate(8 << 30)  # 8 GiB, sparse: seconds of sha256, no disk
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = "import sys; open('ended', 'w').close(); sys.exit(3)"
    child = subprocess.Popen([sys.executable, "-m", "relaxrepro", "run", "--output-dir", "out", "--outputs", "big.bin",
                              "--", sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ended").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # hashing the 8 GiB now
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM
    doc = _only_manifest(tmp_path / "out")
    assert (doc["outcome"]["status"], doc["outcome"]["exit_code"]) == ("exit", 3)
    assert doc["results"]["outputs"] == {
        "big.bin": {"kind": "file", "error": "not hashed: relaxrepro ended before the digest was taken"}}


def test_outputs_hashed_after_the_outcome_replace_the_mark(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"w")
    res = run_cli("run", "--output-dir", "out", "--outputs", "w.bin", "--", "true", cwd=tmp_path,
                  env=clean_env(XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert res.returncode == 0, res.stderr
    doc = _only_manifest(tmp_path / "out")
    assert doc["results"]["outputs"]["w.bin"] == {"kind": "file", "size": 1, "sha256": hashlib.sha256(b"w").hexdigest()}
    assert doc["outcome"]["status"] == "ok"


def test_output_tree_of_symlinks_and_a_fifo_is_hashed_and_the_fifo_named(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a").symlink_to("/etc/hostname")
    os.mkfifo(str(out / "pipe"))
    res = run_cli("run", "--output-dir", "runs", "--outputs", "out", "--", "true", cwd=tmp_path,
                  env=clean_env(XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert res.returncode == 0, res.stderr
    assert "relaxrepro run: warning: output out: 1 special file(s) not read: pipe (fifo)\n" in res.stderr
    entry = _only_manifest(tmp_path / "runs")["results"]["outputs"]["out"]
    lines = "a\0link\0/etc/hostname\npipe\0special\0fifo\n"
    assert entry == {"kind": "directory", "files": 0, "symlinks": 1, "size": 0,
                     "sha256": hashlib.sha256(lines.encode()).hexdigest()}
