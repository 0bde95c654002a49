"""`relaxrepro generate` as a user runs it: output, exit codes, ranks, strictness, hanging tools."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.helpers.common import MARKER_VAR, clean_env, fake_tool, generate, run_cli, survivors, validate_manifest


def test_generate_in_a_repo_writes_and_prints_the_path(tmp_path, repo):
    res = run_cli("generate", "--output-dir", str(tmp_path), "--", "python", "train.py", "--lr", "3e-4", cwd=repo)
    assert res.returncode == 0, res.stderr
    path = res.stdout.strip()
    assert os.path.basename(path).startswith("manifest_") and path.endswith(".json")
    doc = json.loads(open(path).read())
    validate_manifest(doc)
    assert doc["command"]["argv"] == ["python", "train.py", "--lr", "3e-4"]
    (name, repo_doc), = doc["code"].items()
    assert name == "repo" and len(repo_doc["commit"]) == 40 and repo_doc["branch"] == "main"
    assert repo_doc["dirty"] is False
    assert doc["collection"]["probes"]["git"]["status"] == "ok"


def test_dirty_flag_follows_tracked_changes(tmp_path, repo):
    (repo / "README.md").write_text("changed\n")
    doc = generate(tmp_path, cwd=repo)
    assert doc["code"]["repo"]["dirty"] is True


def test_default_directory_is_env_then_cwd(tmp_path, repo):
    out = tmp_path / "runs"
    out.mkdir()
    res = run_cli("generate", env=clean_env(RELAXREPRO_OUTPUT_DIR=str(out)), cwd=repo)
    assert res.returncode == 0 and os.path.dirname(res.stdout.strip()) == str(out)
    res = run_cli("generate", cwd=tmp_path)
    assert res.returncode == 0 and os.path.dirname(os.path.abspath(os.path.join(tmp_path, res.stdout.strip()))) \
        == str(tmp_path)


def test_run_id_option_names_the_file(tmp_path):
    res = run_cli("generate", "--output-dir", str(tmp_path), "--run-id", "exp-42", cwd=tmp_path)
    assert res.stdout.strip().endswith("manifest_exp-42.json")
    assert json.loads(open(res.stdout.strip()).read())["run_id"] == "exp-42"


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", ".hidden"])
def test_unsafe_run_id_is_a_usage_error(tmp_path, bad):
    res = run_cli("generate", "--output-dir", str(tmp_path), "--run-id", bad)
    assert res.returncode == 2 and "--run-id" in res.stderr and os.listdir(tmp_path) == []


@pytest.mark.parametrize("var", ["RANK", "SLURM_PROCID"])
def test_only_rank_zero_writes(tmp_path, var):
    res = run_cli("generate", "--output-dir", str(tmp_path), env=clean_env(**{var: "3"}), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "" and res.stderr == "" and os.listdir(tmp_path) == []
    res = run_cli("generate", "--output-dir", str(tmp_path), env=clean_env(**{var: "0"}), cwd=tmp_path)
    assert res.returncode == 0 and len(os.listdir(tmp_path)) == 1


def test_rank_precedence_and_all_ranks(tmp_path):
    res = run_cli("generate", "--output-dir", str(tmp_path), env=clean_env(RANK="0", SLURM_PROCID="5"), cwd=tmp_path)
    assert len(os.listdir(tmp_path)) == 1, res.stderr
    res = run_cli("generate", "--output-dir", str(tmp_path), "--all-ranks", env=clean_env(RANK="2"), cwd=tmp_path)
    files = os.listdir(tmp_path)
    assert res.returncode == 0 and len(files) == 2
    assert json.loads(open(res.stdout.strip()).read())["runtime"]["rank"] == 2


def test_unwritable_directory_is_best_effort_unless_strict(tmp_path):
    missing = tmp_path / "no" / "such"
    res = run_cli("generate", "--output-dir", str(missing), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == ""
    assert "could not write" in res.stderr and "directory does not exist" in res.stderr
    res = run_cli("generate", "--output-dir", str(missing), "--strict")
    assert res.returncode == 1 and not missing.exists()


def test_output_path_that_is_a_directory(tmp_path):
    res = run_cli("generate", "--output", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 0 and "is a directory" in res.stderr
    assert run_cli("generate", "--output", str(tmp_path), "--strict", cwd=tmp_path).returncode == 1


def test_hanging_git_that_ignores_sigterm_cannot_block_generate(tmp_path, repo):
    bindir = tmp_path / "bin"
    fake_tool(bindir, "git", """
        trap '' TERM
        /bin/sleep 60
    """)
    env = clean_env(PATH=str(bindir))
    t0 = time.monotonic()
    res = run_cli("generate", "--output", str(tmp_path / "m.json"), env=env, cwd=repo, timeout=30)
    elapsed = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    assert elapsed < 10, elapsed
    doc = json.loads((tmp_path / "m.json").read_text())
    validate_manifest(doc)
    git = doc["collection"]["probes"]["git"]
    assert git["status"] in ("failed", "timeout") and "timed out" in " ".join(git["warnings"])
    assert "probe git" in res.stderr
    res = run_cli("generate", "--strict", "--output", str(tmp_path / "m2.json"), env=env, cwd=repo, timeout=30)
    assert res.returncode == 1 and (tmp_path / "m2.json").exists()


def test_garbage_printing_git_gives_a_partial_manifest(tmp_path, repo):
    bindir = tmp_path / "bin"
    fake_tool(bindir, "git", "printf '\\377\\376garbage\\n'; exit 0\n")
    doc = generate(tmp_path, env=clean_env(PATH=str(bindir)), cwd=repo)
    real = (repo / ".git" / "refs" / "heads" / "main").read_text().strip()
    # The lying tool is not believed: the commit comes from .git itself, the dirty state is unknown.
    assert doc["code"]["repo"]["commit"] == real and doc["code"]["repo"]["dirty"] is None


def test_help_has_examples_and_version_is_plain():
    res = run_cli("generate", "--help")
    assert res.returncode == 0 and "examples:" in res.stdout and "--output-dir" in res.stdout
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("relaxrepro ") and res.stdout.count("\n") == 1


def test_command_after_double_dash_is_recorded_not_run(tmp_path):
    marker = tmp_path / "ran"
    doc = generate(tmp_path, command=["touch", str(marker)])
    assert not marker.exists()
    assert doc["command"]["argv"] == ["touch", str(marker)] and doc["command"]["source"] == "cli"


def test_process_exits_promptly_when_a_probe_thread_is_stuck(tmp_path):
    # A probe stuck in pure Python (no subprocess to kill) must not keep the process alive at exit:
    # this fails if probes ever run in non-daemon or concurrent.futures threads (joined at exit).
    code = (
        "import sys, threading\n"
        "import relaxrepro.collect.registry as reg\n"
        "from relaxrepro.collect.runner import Probe, Outcome\n"
        "def stuck(ctx):\n"
        "    threading.Event().wait()\n"
        "reg.PROBES = reg.PROBES + (Probe('stuck', stuck),)\n"
        "from relaxrepro.cli import run_main\n"
        "sys.argv = ['relaxrepro', 'generate', '--output', sys.argv[1]]\n"
        "run_main()\n"
    )
    import subprocess
    import sys as _sys

    t0 = time.monotonic()
    res = subprocess.run([_sys.executable, "-c", code, str(tmp_path / "m.json")], env=clean_env(),
                         capture_output=True, text=True, timeout=30)
    assert time.monotonic() - t0 < 10
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["collection"]["probes"]["stuck"]["status"] == "timeout"


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="scans /proc for the marked processes")


@needs_proc
@pytest.mark.parametrize("script", [
    "/bin/sleep 1000 & echo ok",
    "/bin/sleep 1000 >/dev/null 2>&1 & echo ok",
    "( /bin/sleep 1000 & ) ; echo ok",
], ids=["holds-stdout", "detached", "double-fork"])
def test_no_process_a_tool_started_outlives_generate(tmp_path, script, request):
    # Every nvidia-smi call backgrounds a sleep and exits; none of them may still run afterwards.
    bindir = tmp_path / "bin"
    fake_tool(bindir, "nvidia-smi", script + "\n")
    marker = "%d-%s" % (os.getpid(), request.node.name)
    doc = generate(tmp_path, env=clean_env(PATH=str(bindir), **{MARKER_VAR: marker}))
    assert doc["collection"]["probes"]["gpu"]["status"] != "timeout"
    assert survivors(marker) == []


@needs_proc
def test_no_process_outlives_generate_when_a_probe_thread_is_abandoned(tmp_path):
    # A probe stuck waiting on a child past the deadline: generate exits without its thread (os._exit),
    # and ends that child's group first.
    code = (
        "import sys\n"
        "import relaxrepro.collect.registry as reg\n"
        "from relaxrepro.collect.runner import Probe\n"
        "from relaxrepro.std import proc\n"
        "def stuck(ctx):\n"
        "    proc.run(['/bin/sh', '-c', '/bin/sleep 1000 & /bin/sleep 1000'], timeout=1000)\n"
        "reg.PROBES = reg.PROBES + (Probe('stuck', stuck),)\n"
        "from relaxrepro.cli import run_main\n"
        "sys.argv = ['relaxrepro', 'generate', '--output', sys.argv[1]]\n"
        "run_main()\n"
    )
    import subprocess
    import sys as _sys

    marker = "%d-abandoned" % os.getpid()
    res = subprocess.run([_sys.executable, "-c", code, str(tmp_path / "m.json")],
                         env=clean_env(**{MARKER_VAR: marker}), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "m.json").read_text())["collection"]["probes"]["stuck"]["status"] == "timeout"
    assert survivors(marker) == []
