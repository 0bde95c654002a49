"""``relaxrepro rerun``: a script that is safe to run as printed, and a confirm that refuses rather
than guess. The scripts are really run with ``sh`` against a harmless command."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from relaxrepro.commands import _plan
from tests.helpers.common import clean_env, git, make_repo, run_cli
from tests.helpers.read import SHA_B, head, write_json

# Prints its arguments, cwd and one env var as JSON, then exits with the status in $RERUN_EXIT.
ECHO = ("import json, os, sys; print(json.dumps({'args': sys.argv[1:], 'cwd': os.getcwd(), "
        "'env': os.environ.get('NCCL_TEST_VALUE')})); sys.exit(int(os.environ.get('RERUN_EXIT', '0')))")

NASTY = ["$(touch pwned1)", "`touch pwned2`", "a'b\"c", "two\nlines", "; touch pwned3 #", "$HOME", "*", "-",
         "\\", "--opt=x y", ""]
PLAIN = [a for a in NASTY if "\n" not in a]  # a POSIX sh script holds these as they are

# What a terminal acts on or hides (a screen clear, an OSC title, an 8-bit CSI, CR, a newline, a
# right-to-left override, a tab) and a byte that was not UTF-8 (kept by surrogateescape).
HOSTILE = ["\x1b[2J", "\x1b]0;pwned\x07", "\x9b31m", "a\rb", "two\nlines\n", "\u202eevil", "a\tb",
           "raw\udc80byte", "$'x' \\e \\n '\\''", "$(touch pwned1)\n`touch pwned2`"]


def _manifest(tmp_path, argv, *, env=None, cwd=None, repo=None, commit=None, **extra):
    """A minimal manifest check passes on this machine: real repo at its commit, this interpreter."""
    repo = repo or make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    work = cwd or str(tmp_path / "work")
    os.makedirs(work, exist_ok=True)
    doc = {
        "schema_version": "1.0", "run_id": "20260101_000000_abcdef0", "generated_at": "2026-01-01T00:00:00Z",
        "command": {"argv": argv, "cwd": work, "source": "cli"},
        "code": {"repo": {"path": str(repo), "commit": commit or head(repo), "dirty": False}},
        "config": {"selected_env": env if env is not None else {"NCCL_TEST_VALUE": "$(touch pwned4) `x` 'q'"}},
        "environment": {"python": {"version": "%d.%d.%d" % sys.version_info[:3], "implementation": "CPython",
                                   "executable": sys.executable}},
        "hardware": {}, "runtime": {}, "training": {}, "collection": {},
    }
    doc.update(extra)
    return write_json(tmp_path / "manifest.json", doc), doc


def _script(manifest, *args):
    res = run_cli("rerun", str(manifest), "--dry-run", *args)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _sh(tmp_path, text, **env):
    path = tmp_path / "replay.sh"
    path.write_text(text)
    return subprocess.run(["sh", str(path)], capture_output=True, text=True, env=clean_env(**env),
                          cwd=str(tmp_path), timeout=60)


def test_dry_run_script_keeps_shell_metacharacters_literal(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO] + PLAIN)
    text = _script(m)
    assert text.startswith("#!/bin/sh\n# Replay of run ")
    res = _sh(tmp_path, text)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out == {"args": PLAIN, "cwd": doc["command"]["cwd"], "env": "$(touch pwned4) `x` 'q'"}
    assert not list(tmp_path.rglob("pwned*"))
    assert "exec %s -c " % sys.executable in text  # the recorded interpreter, not python on PATH


def test_control_characters_are_shown_as_bash_escapes_and_replayed_exactly(tmp_path):
    work = tmp_path / ("w\x1b]0;pwned\x07\nx")
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO] + HOSTILE, cwd=str(work),
                       env={"NCCL_TEST_VALUE": "\x1b[2J\r\n\x9b"})
    text = _script(m)
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\ud800-\udfff]", text)
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "export NCCL_TEST_VALUE=$'\\e[2J\\r\\n\\xc2\\x9b'\n" in text
    assert "cd $'%s/w\\e]0;pwned\\x07\\nx'\n" % tmp_path in text
    path = tmp_path / "replay.sh"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True).returncode == 0
    res = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=clean_env(), cwd=str(tmp_path),
                         timeout=60, errors="surrogateescape")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"args": HOSTILE, "cwd": str(work), "env": "\x1b[2J\r\n\x9b"}
    assert not list(tmp_path.rglob("pwned*"))
    # dash would take $'...' for "$" and a quoted word: a plain sh stops before running anything
    if shutil.which("dash"):
        res = subprocess.run(["dash", str(path)], capture_output=True, text=True, cwd=str(tmp_path), timeout=60)
        assert (res.returncode, res.stdout, res.stderr) == (1, "", "relaxrepro: run this replay script with bash\n")


def test_dry_run_script_stops_when_a_repo_is_not_at_its_commit(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO, "ran"])
    repo = tmp_path / "repo"
    (repo / "train.py").write_text("print(2)\n")
    git(repo, "commit", "-qam", "moved on")
    res = _sh(tmp_path, _script(m))
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == "relaxrepro: repo repo at %s is not at commit %s\n" % (repo, doc["code"]["repo"]["commit"])


def test_dry_run_says_where_the_patch_is_and_how_to_apply_it(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "train.py"])
    doc["code"]["repo"].update(dirty=True, patch={"sha256": "1" * 64, "sidecar": "manifest_x.repo.patch",
                                                  "files": ["train.py"], "inline": False})
    write_json(m, doc)
    text = _script(m)
    sidecar = tmp_path / "manifest_x.repo.patch"
    assert "# The run had uncommitted changes (patch sha256 %s): train.py." % ("1" * 64) in text
    assert "# The patch is the sidecar file %s" % sidecar in text
    assert "#   git -C %s apply --binary %s" % (tmp_path / "repo", sidecar) in text
    assert "#   relaxrepro restore %s --into NEW_DIR" % m in text


def test_dry_run_says_a_patch_is_incomplete_and_why(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "train.py"])
    doc["code"]["repo"].update(dirty=True, patch={"stored_sha256": "1" * 64, "text": "", "files": ["train.py"],
                                                  "incomplete": "git diff did not finish in time",
                                                  "incomplete_reason": "timeout"})
    write_json(m, doc)
    text = _script(m)
    assert ("# The run had uncommitted changes (the patch is incomplete: timeout: git diff did not finish in "
            "time): train.py.\n") in text
    assert "apply --binary" not in text


def test_dry_run_with_redacted_values_stops_and_lists_them(tmp_path):
    m, _ = _manifest(tmp_path, ["python", "-c", ECHO, "--wandb-key=wand***", "<HOME>/data"],
                     env={"HF_TOKEN": "<redacted>", "NCCL_TEST_VALUE": "ok"})
    text = _script(m)
    assert "#   argv[3]: --wandb-key=wand***\n" in text
    assert "argv[4]" not in text and ' "${HOME}"/data\n' in text  # the home of whoever runs the script
    assert "#   env HF_TOKEN: <redacted>\n" in text
    assert "# not exported (redacted): HF_TOKEN\n" in text
    assert "HF_TOKEN=" not in text
    res = _sh(tmp_path, text)
    assert res.returncode == 1 and res.stdout == ""
    text = _script(m, "--set", "argv[3]=--wandb-key=k", "--set", "HF_TOKEN=t")
    res = _sh(tmp_path, text, HOME="/h")
    assert json.loads(res.stdout)["args"] == ["--wandb-key=k", "/h/data"]
    text = _script(m, "--set", "argv[3]=--wandb-key=k", "--set", "<HOME>=/elsewhere", "--set", "HF_TOKEN=t")
    res = _sh(tmp_path, text, HOME="/h")
    assert json.loads(res.stdout)["args"] == ["--wandb-key=k", "/elsewhere/data"]  # --set wins


def _recorded_under_home(tmp_path):
    """A real manifest, written by ``generate`` in a child whose HOME holds the repo, the working
    directory and the interpreter: all three are recorded as ``<HOME>/...``."""
    home = tmp_path / "home"
    interp = home / ".pyenv" / "versions" / "3" / "bin" / "python3"
    interp.parent.mkdir(parents=True)
    os.symlink(os.path.realpath(sys.executable), str(interp))
    repo = make_repo(home / "proj", {"train.py": "import os, sys; print('replayed', sys.argv[1:], os.getcwd())\n"})
    m = tmp_path / "m.json"
    res = run_cli("generate", "--output", str(m), "--", str(interp), str(repo / "train.py"), "--out=%s/o" % home,
                  cwd=repo, env=clean_env(HOME=str(home)))
    assert res.returncode == 0, res.stderr
    doc = json.loads(m.read_text())
    assert doc["command"]["argv"] == ["<HOME>/.pyenv/versions/3/bin/python3", "<HOME>/proj/train.py",
                                      "--out=<HOME>/o"]
    assert doc["environment"]["python"]["executable"] == "<HOME>/.pyenv/versions/3/bin/python3"
    return m, home, repo


def test_confirm_resolves_home_to_this_home(tmp_path):
    m, home, repo = _recorded_under_home(tmp_path)
    res = run_cli("rerun", str(m), "--confirm", env=clean_env(HOME=str(home)))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "replayed ['--out=%s/o'] %s\n" % (home, repo)
    # under another home the same manifest names an interpreter that is not there
    other = tmp_path / "other"
    other.mkdir()
    res = run_cli("rerun", str(m), "--confirm", env=clean_env(HOME=str(other)))
    assert res.returncode == 2
    assert res.stderr.startswith("relaxrepro rerun: refused: the recorded interpreter "
                                 "%s/.pyenv/versions/3/bin/python3 is gone" % other)


def test_dry_run_writes_home_as_the_shell_variable(tmp_path):
    m, home, repo = _recorded_under_home(tmp_path)
    text = _script(m)
    assert 'exec "${HOME}"/.pyenv/versions/3/bin/python3 "${HOME}"/proj/train.py --out="${HOME}"/o\n' in text
    assert 'cd "${HOME}"/proj\n' in text
    assert '<HOME>' not in text.replace("# ", "")
    res = _sh(tmp_path, text, HOME=str(home))
    assert (res.returncode, res.stdout) == (0, "replayed ['--out=%s/o'] %s\n" % (home, repo)), res.stderr


def test_comment_lines_cannot_be_broken_by_a_newline_in_a_recorded_value(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO], env={"BAD\nNAME; touch pwned5": "x"})
    doc["run_id"] = "r\ntouch pwned6"
    doc["code"]["repo"].update(dirty=True, patch={"sha256": "1" * 64, "files": ["a\ntouch pwned7"],
                                                  "text": "x"})
    write_json(m, doc)
    text = _script(m)
    res = _sh(tmp_path, text)
    assert res.returncode == 0, res.stderr
    assert not list(tmp_path.rglob("pwned*"))
    assert "# not exported (not a shell variable name): BAD\\nNAME; touch pwned5" in text


def test_confirm_runs_the_command_and_returns_its_status(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO] + NASTY)
    before = m.read_bytes()
    res = run_cli("rerun", str(m), "--confirm", env=clean_env(RERUN_EXIT="3"))
    assert res.returncode == 3, res.stderr
    assert json.loads(res.stdout) == {"args": NASTY, "cwd": doc["command"]["cwd"],
                                      "env": "$(touch pwned4) `x` 'q'"}
    assert not list(tmp_path.rglob("pwned*"))
    assert m.read_bytes() == before


def test_confirm_reports_death_by_signal_as_128_plus_n(tmp_path):
    m, _ = _manifest(tmp_path, ["python", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    res = run_cli("rerun", str(m), "--confirm")
    assert res.returncode == 143, res.stderr


def test_confirm_passes_stdin_through(tmp_path):
    m, _ = _manifest(tmp_path, ["python", "-c", "import sys; print(sys.stdin.read().upper())"])
    res = run_cli("rerun", str(m), "--confirm", stdin="hello\n")
    assert res.returncode == 0 and res.stdout == "HELLO\n\n"


def test_confirm_refuses_a_redacted_argv_and_lists_it(tmp_path):
    m, _ = _manifest(tmp_path, ["python", "-c", ECHO, "--wandb-key=wand***", "--host", "<internal-host>"])
    res = run_cli("rerun", str(m), "--confirm")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (
        "relaxrepro rerun: refused: the command or its env hold redacted values; supply them with --set KEY=VALUE "
        "(KEY: an env var, argv[N], cwd, or a placeholder such as <HOME>):\n"
        "  argv[3]: --wandb-key=wand***\n  argv[5]: <internal-host>\n")
    res = run_cli("rerun", str(m), "--confirm", "--set", "argv[3]=--wandb-key=k", "--set", "<internal-host>=h1")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["args"] == ["--wandb-key=k", "--host", "h1"]


def test_confirm_refuses_a_redacted_env_value(tmp_path):
    m, _ = _manifest(tmp_path, ["python", "-c", ECHO], env={"NCCL_TEST_VALUE": "<redacted>"})
    res = run_cli("rerun", str(m), "--confirm")
    assert res.returncode == 2 and "  env NCCL_TEST_VALUE: <redacted>\n" in res.stderr
    res = run_cli("rerun", str(m), "--confirm", "--set", "NCCL_TEST_VALUE=v")
    assert res.returncode == 0 and json.loads(res.stdout)["env"] == "v"


def test_confirm_refuses_when_no_command_was_recorded(tmp_path):
    m, _ = _manifest(tmp_path, [])
    res = run_cli("rerun", str(m), "--confirm")
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro rerun: refused: the manifest records no command (command.argv is empty): "
                          "nothing to rerun\n")
    assert "echo 'relaxrepro: the manifest records no command' >&2" in _script(m)


def test_confirm_refuses_on_a_check_fail(tmp_path):
    m, _ = _manifest(tmp_path, ["python", "-c", ECHO, "ran"], commit=SHA_B)
    res = run_cli("rerun", str(m), "--confirm")
    assert res.returncode == 2 and "ran" not in res.stdout
    assert "relaxrepro rerun: refused: check found differences that make this run irreproducible here:\n" in res.stderr
    assert "  code repo commit: recorded bbbbbbbbbbbb, here " in res.stderr


def test_confirm_refuses_a_gone_interpreter_and_names_the_closest(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO])
    doc["environment"]["python"]["executable"] = "/nonexistent/venv/bin/python"
    write_json(m, doc)
    res = run_cli("rerun", str(m), "--confirm", env=clean_env(PATH=os.path.dirname(sys.executable)))
    assert res.returncode == 2
    assert res.stderr.startswith("relaxrepro rerun: refused: the recorded interpreter /nonexistent/venv/bin/python "
                                 "is gone; closest match here: %s" % os.path.dirname(sys.executable))


def test_confirm_refuses_a_command_that_names_the_manifest(tmp_path):
    m, _ = _manifest(tmp_path, ["python", "-c", ECHO, "--output=%s" % (tmp_path / "manifest.json")])
    before = m.read_bytes()
    res = run_cli("rerun", str(m), "--confirm")
    assert res.returncode == 2
    assert "names the manifest being replayed in argv[3]" in res.stderr
    assert m.read_bytes() == before


def test_confirm_refuses_a_missing_working_directory(tmp_path):
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO])
    doc["command"]["cwd"] = str(tmp_path / "gone")
    write_json(m, doc)
    res = run_cli("rerun", str(m), "--confirm")
    assert res.returncode == 2 and "does not exist here (--set cwd=DIR)" in res.stderr
    res = run_cli("rerun", str(m), "--confirm", "--set", "cwd=%s" % tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["cwd"] == str(tmp_path)


@pytest.mark.parametrize("value,message", [
    ("argv[9]=x", "--set argv[9]: the recorded command has 3 arguments"),
    ("9bad=x", "--set 9bad: KEY is an env var name, argv[N], cwd, or a placeholder such as <HOME>"),
])
def test_bad_set_values_are_refused(tmp_path, value, message):
    m, _ = _manifest(tmp_path, ["python", "-c", ECHO])
    res = run_cli("rerun", str(m), "--dry-run", "--set", value)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == "relaxrepro rerun: refused: %s\n" % message


def test_dry_run_or_confirm_is_required(tmp_path):
    m, _ = _manifest(tmp_path, ["python"])
    res = run_cli("rerun", str(m))
    assert res.returncode == 2 and "one of the arguments --dry-run --confirm --sbatch is required" in res.stderr


@pytest.mark.parametrize("argv,exe,expected", [
    (["python", "t.py"], "/v/bin/python", ["/v/bin/python", "t.py"]),
    (["python3.11", "-m", "pkg"], "/v/bin/python", ["/v/bin/python", "-m", "pkg"]),
    (["/usr/bin/python3", "t.py"], "/v/bin/python", ["/v/bin/python", "t.py"]),
    (["train.py", "--x"], "/v/bin/python", ["/v/bin/python", "train.py", "--x"]),
    (["torchrun", "t.py"], "/v/bin/python", ["/v/bin/torchrun", "t.py"]),
    (["deepspeed", "t.py"], "/v/bin/python", ["deepspeed", "t.py"]),
    (["/opt/bin/torchrun", "t.py"], "/v/bin/python", ["/opt/bin/torchrun", "t.py"]),
    (["python", "t.py"], None, ["python", "t.py"]),
    ([], "/v/bin/python", []),
])
def test_with_interpreter(argv, exe, expected):
    assert _plan.with_interpreter(argv, exe, is_tool=lambda p: p == "/v/bin/torchrun") == expected


def test_sigterm_to_rerun_reaches_the_command_and_its_status_comes_back(tmp_path):
    # os.write/_exit in the handler: a print there could re-enter the 'ready' print it interrupted
    trap = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (os.write(1, b'got TERM\\n'), os._exit(7)))\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    m, _ = _manifest(tmp_path, ["python", "-c", trap])
    child = subprocess.Popen([sys.executable, "-m", "relaxrepro", "rerun", str(m), "--confirm"], env=clean_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 7
        assert child.stdout.read() == "got TERM\n"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("where", ["argv", "env"])
def test_a_nul_byte_is_refused_for_execution_and_never_written_as_a_truncating_quote(tmp_path, where):
    argv = ["python", "-c", ECHO] + (["a\x00b"] if where == "argv" else [])
    m, _ = _manifest(tmp_path, argv, env={"NCCL_TEST_VALUE": "v\x00w"} if where == "env" else {})
    res = run_cli("rerun", str(m), "--confirm")
    named = "argv[3]" if where == "argv" else "env NCCL_TEST_VALUE"
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("relaxrepro rerun: refused: the recorded %s hold a NUL byte, which no command line or "
                          "environment can carry\n" % named)
    text = _script(m)
    assert "\\x00" not in text and "\x00" not in text
    assert "# so they are not written below: %s\n" % named in text
    res = _sh(tmp_path, text)
    assert res.returncode == 1 and "the command holds NUL bytes" in res.stderr
