"""The command line's own manners: an error names the subcommand's usage, a typo gets "did you mean", a command
without ``--`` is explained, and ``completion`` prints a script the shell really loads. Each runs the real CLI,
on this interpreter and on the oldest and newest CPython whose argparse words its errors differently."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers.common import ROOT, clean_env, pyenv_python, run_cli

PYTHONS = ["this", "3.8", "3.13"]


def _python(which: str) -> str:
    return sys.executable if which == "this" else pyenv_python(which)


def _cli(which: str, *args: str) -> subprocess.CompletedProcess:
    env = clean_env()
    env["PYTHONPATH"] = str(ROOT)
    return run_cli(*args, python=_python(which), env=env, cwd=ROOT)


@pytest.mark.parametrize("which", PYTHONS)
def test_a_mistyped_option_shows_the_subcommands_usage_and_the_close_option(which):
    out = _cli(which, "generate", "--outptu-dir", "x")
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert lines[0].startswith("usage: relaxrepro generate "), out.stderr
    assert "relaxrepro generate: error: unrecognized arguments: --outptu-dir x" in out.stderr
    assert "did you mean --output-dir?" in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("which", PYTHONS)
def test_a_mistyped_command_gets_did_you_mean(which):
    out = _cli(which, "genrate", "--print")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: relaxrepro "), out.stderr
    assert "did you mean 'generate'?" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("which", PYTHONS)
def test_a_command_without_the_double_dash_is_explained(which):
    out = _cli(which, "run", "--output-dir", "runs", "python", "train.py", "--lr", "3e-4")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: relaxrepro run "), out.stderr
    assert "put -- before the command: relaxrepro run [options] -- python train.py --lr 3e-4" in out.stderr
    assert not (ROOT / "runs").exists()


def test_far_off_words_get_no_suggestion():
    out = run_cli("zzzzqq")
    assert out.returncode == 2
    assert "did you mean" not in out.stderr
    out = run_cli("diff", "a.json", "b.json", "--qqqqq")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: relaxrepro diff "), out.stderr
    assert "did you mean" not in out.stderr


def test_bash_completion_is_loaded_by_bash_and_completes_commands_and_options(tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    out = run_cli("completion", "bash")
    assert out.returncode == 0, out.stderr
    script = tmp_path / "relaxrepro.bash"
    script.write_text(out.stdout)
    probe = (
        'source "%s" || exit 9\n'
        "complete -p relaxrepro\n"
        "f=$(complete -p relaxrepro | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p')\n"
        "COMP_WORDS=(relaxrepro ge); COMP_CWORD=1; $f; echo \"cmds: ${COMPREPLY[*]}\"\n"
        "COMP_WORDS=(relaxrepro generate --output-d); COMP_CWORD=2; $f; echo \"opts: ${COMPREPLY[*]}\"\n"
        "COMP_WORDS=(relaxrepro completion ''); COMP_CWORD=2; $f; echo \"shells: ${COMPREPLY[*]}\"\n"
    ) % script
    res = subprocess.run([bash, "--norc", "-c", probe], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert " -F _relaxrepro " in res.stdout and res.stdout.splitlines()[0].endswith(" relaxrepro")
    assert "cmds: generate" in res.stdout
    assert "opts: --output-dir" in res.stdout
    assert "shells: bash fish zsh" in res.stdout


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion_name_every_command_and_parse(shell, tmp_path):
    out = run_cli("completion", shell)
    assert out.returncode == 0, out.stderr
    for name in ("generate", "run", "check", "restore", "completion"):
        assert name in out.stdout
    assert ("-l output-dir" if shell == "fish" else "'--output-dir'") in out.stdout
    exe = shutil.which(shell)
    if exe is None:
        return  # the script's words are checked; the shell's own syntax check needs the shell
    script = tmp_path / ("relaxrepro." + shell)
    script.write_text(out.stdout)
    res = subprocess.run([exe, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    if shell == "zsh":  # after compinit, sourcing the script registers its function for relaxrepro
        probe = "autoload -U compinit; compinit -u -D; source %s; print -r -- ${_comps[relaxrepro]}" % script
        res = subprocess.run([exe, "-f", "-c", probe], capture_output=True, text=True, timeout=30,
                             env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
        assert res.returncode == 0 and res.stdout == "_relaxrepro\n", res.stderr
    if shell == "fish":  # fish completes a command line on request: the script really loads and answers
        probe = "source %s; complete -C'relaxrepro gen'; complete -C'relaxrepro generate --output-d'" % script
        res = subprocess.run([exe, "--no-config", "-c", probe], capture_output=True, text=True, timeout=30)
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[0].startswith("generate\t") and "--output-dir" in res.stdout.splitlines()


def test_completion_for_an_unknown_shell_is_a_usage_error():
    out = run_cli("completion", "tcsh")
    assert out.returncode == 2
    assert "invalid choice" in out.stderr and out.stdout == ""


@pytest.mark.parametrize("which", PYTHONS)
def test_a_mistyped_top_level_option_gets_did_you_mean(which):
    out = _cli(which, "--verison")
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == ("relaxrepro: error: unrecognized arguments: --verison; "
                                           "did you mean --version?")


def _into_a_pipe_that_closes(argv, cwd, read_first_line: bool) -> "tuple[int, str]":
    """Run the CLI with stdout a real pipe whose reader leaves: at once, or after one line (``| head -1``)."""
    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", "relaxrepro", *argv], stdout=w, stderr=subprocess.PIPE,
                             env=clean_env(), cwd=str(cwd))
    os.close(w)
    if read_first_line:
        with os.fdopen(r, "rb") as reader:
            reader.readline()
    else:
        os.close(r)
    err = child.stderr.read().decode()
    child.stderr.close()
    return child.wait(timeout=60), err


def test_a_reader_that_stops_reading_ends_every_command_quietly_and_the_file_is_whole(tmp_path):
    import json

    made = []
    # A manifest larger than the pipe (a long command line) meets the closed pipe while it is being written,
    # a small one when it is flushed at exit; the reader leaves before the first write, or after one line.
    long_command = ["--", "train.py"] + ["--flag%d=value" % i for i in range(1500)]
    for i in range(6):
        out = tmp_path / ("manifest_%d.json" % i)
        argv = ["generate", "--print", "-o", str(out)] + (long_command if i < 4 else [])
        code, err = _into_a_pipe_that_closes(argv, tmp_path, i % 2 == 1)
        assert code == 0, err
        assert "Traceback" not in err and "internal error" not in err and "Exception ignored" not in err, err
        made.append(json.loads(out.read_text()))  # written completely, whatever the pipe did
    assert all(doc["schema_version"] == made[0]["schema_version"] for doc in made)
    for argv in (["show", str(tmp_path / "manifest_0.json")], ["show", "--json", str(tmp_path / "manifest_0.json")],
                 ["ls", str(tmp_path)], ["ls", "--json", str(tmp_path)], ["--help"]):
        for first_line in (False, True):
            code, err = _into_a_pipe_that_closes(argv, tmp_path, first_line)
            assert (code, err) == (0, ""), argv
