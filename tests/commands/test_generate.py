"""`relaxrepro generate` as a user runs it: output, exit codes, ranks, strictness, hanging tools."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from relaxrepro.collect.probes.config import select_env
from relaxrepro.manifest.model import CAP_BYTES
from tests.helpers.common import (
    MARKER_VAR,
    clean_env,
    fake_tool,
    generate,
    git,
    marked_processes,
    run_cli,
    survivors,
    validate_manifest,
)
from tests.helpers.gpu import fake_smi


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
    (tmp_path / "file").write_text("not a directory\n")
    beneath = tmp_path / "file" / "runs"
    res = run_cli("generate", "--output-dir", str(beneath), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == ""
    assert "could not write %s/manifest_" % beneath in res.stderr
    assert "a path component is not a directory" in res.stderr
    res = run_cli("generate", "--output-dir", str(beneath), "--strict")
    assert res.returncode == 1 and (tmp_path / "file").read_text() == "not a directory\n"


def test_output_dir_is_created_with_its_parents(tmp_path):
    # The README's sbatch line: --output-dir runs/$SLURM_JOB_ID, a directory no one made before the job.
    res = run_cli("generate", "--output-dir", "runs/4242", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert os.path.dirname(res.stdout.strip()) == "runs/4242"
    validate_manifest(json.loads((tmp_path / res.stdout.strip()).read_text()))


def test_output_file_gets_its_folder_created_too(tmp_path):
    res = run_cli("generate", "--output", "runs/4243/m.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "runs/4243/m.json"
    validate_manifest(json.loads((tmp_path / "runs/4243/m.json").read_text()))
    (tmp_path / "file").write_text("")
    res = run_cli("generate", "--output", "file/m.json", cwd=tmp_path)  # a folder that cannot be made
    assert res.returncode == 0 and res.stdout == ""
    assert "relaxrepro: warning: could not write" in res.stderr and "file/m.json" in res.stderr


def test_node_report_creates_its_output_dir(tmp_path):
    res = run_cli("generate", "--node-report", "--run-id", "slurm-7", "--output-dir", str(tmp_path / "d" / "nodes"),
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert os.path.dirname(res.stdout.strip()) == str(tmp_path / "d" / "nodes")
    assert json.loads(open(res.stdout.strip()).read())["run_id"] == "slurm-7"


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


# ------------------------------------------------------------------ what the user hears, and what survives


NO_GIT = ("relaxrepro: warning: no git repository recorded (the working directory is not inside one; add one with "
          "--repo NAME=PATH): check, restore and rerun will have no code to go by")


def test_a_taken_run_id_is_said_naming_the_file_written(tmp_path):
    first = run_cli("generate", "--output-dir", str(tmp_path), "--run-id", "exp-1", cwd=tmp_path)
    taken = tmp_path / "manifest_exp-1.json"
    assert first.stdout.strip() == str(taken)
    before = taken.read_bytes()
    for how in (["--run-id", "exp-1"], []):
        res = run_cli("generate", "--output-dir", str(tmp_path), *how, env=clean_env(RELAXREPRO_RUN_ID="exp-1"),
                      cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        written = res.stdout.strip()
        run_id = json.loads(open(written).read())["run_id"]
        assert written == str(tmp_path / ("manifest_%s.json" % run_id)) and run_id != "exp-1"
        assert res.stderr.splitlines() == [NO_GIT, (
            "relaxrepro: warning: run id exp-1 is taken (%s exists): wrote %s under run id %s instead"
            % (taken, written, run_id))]
    assert taken.read_bytes() == before


def test_a_taken_run_id_fails_under_strict(tmp_path):
    assert run_cli("generate", "--output-dir", str(tmp_path), "--run-id", "exp-2").returncode == 0
    res = run_cli("generate", "--output-dir", str(tmp_path), "--run-id", "exp-2", "--strict", cwd=tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == "relaxrepro generate: error: run id exp-2 is taken (--strict)"
    assert len(list(tmp_path.glob("manifest_*.json"))) == 2  # written all the same, as the warning says
    res = run_cli("run", "--output-dir", str(tmp_path), "--run-id", "exp-2", "--strict", "--",
                  "touch", str(tmp_path / "ran"), cwd=tmp_path)
    assert res.returncode == 1 and not (tmp_path / "ran").exists()
    assert res.stderr.splitlines()[-1] == ("relaxrepro run: error: run id exp-2 is taken (--strict); "
                                           "not running the command")


def test_a_probe_that_is_not_ok_says_why_one_line_each(tmp_path):
    res = run_cli("generate", "--output", str(tmp_path / "m.json"), "--data", "/nonexistent",
                  "--data", "/gone\x1b[2J\nFAKE", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("relaxrepro: warning: probe data")]
    assert lines == ["relaxrepro: warning: probe data partial: option /nonexistent: not found",
                     "relaxrepro: warning: probe data partial: option /gone\\x1b[2J\\nFAKE: not found"]
    quiet = run_cli("generate", "--output", str(tmp_path / "q.json"), "--data", "/nonexistent", "-q", cwd=tmp_path)
    assert quiet.returncode == 0 and "probe" not in quiet.stderr and (tmp_path / "q.json").exists()


def test_a_node_report_says_its_partial_probes_too(tmp_path):
    args = ("generate", "--node-report", "--run-id", "n1", "--output-dir", str(tmp_path / "nodes"), "--python",
            "/bin/false")
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == ["relaxrepro: warning: probe python partial: could not query /bin/false: false "
                                       "-c import json, platform, sys; print(jso...: exit 1"]
    quiet = run_cli(*args, "-q", "--run-id", "n2", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "" and len(os.listdir(tmp_path / "nodes")) == 2


def test_a_hanging_python_is_said_not_only_recorded(tmp_path):
    hang = fake_tool(tmp_path / "bin", "python3", "exec /bin/sleep 30\n")
    res = run_cli("generate", "--output", str(tmp_path / "m.json"), "--python", str(hang), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["collection"]["probes"]["python"]["status"] == "partial" and not doc["environment"].get("packages")
    (line,) = [line for line in res.stderr.splitlines() if "probe python" in line]
    # One line: the -c program shows only its start.
    assert re.fullmatch(r"relaxrepro: warning: probe python partial: could not query %s: python3 -c import json, "
                        r"platform, sys; print\(jso\.\.\.: timed out after [0-9.]+ s" % re.escape(str(hang)), line)


def _baseline_packages(tmp_path: Path) -> dict:
    packages = generate(tmp_path)["environment"]["packages"]
    assert len(packages) > 10 and "pytest" in packages
    return packages


def _fitted(tmp_path: Path, *args: str, env: dict) -> dict:
    out = tmp_path / "big.json"
    res = run_cli("generate", "--output", str(out), *args, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = out.read_bytes()
    assert len(data) <= CAP_BYTES
    doc = json.loads(data)
    validate_manifest(doc)
    return doc


def test_one_huge_variable_costs_only_itself(tmp_path):
    packages = _baseline_packages(tmp_path)
    doc = _fitted(tmp_path, env=clean_env(NCCL_DEBUG="INFO " * 24000, NCCL_ALGO="Ring", CUDA_VISIBLE_DEVICES="0,1"))
    assert doc["environment"]["packages"] == packages
    selected = doc["config"]["selected_env"]
    assert selected["NCCL_ALGO"] == "Ring" and selected["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert selected["NCCL_DEBUG"] == "INFO " * 51 + "I<cut 119744 of 120000 bytes, sha256:%s>" % hashlib.sha256(
        ("INFO " * 24000).encode()).hexdigest()
    assert doc["collection"]["truncated"] == ["config.selected_env.NCCL_DEBUG: kept the first 256 of 120000 bytes"]


def test_ten_thousand_selected_variables_keep_the_few_that_matter(tmp_path):
    packages = _baseline_packages(tmp_path)
    env = clean_env(CUDA_VISIBLE_DEVICES="0,1", NCCL_ALGO="Ring", NCCL_PROTO="Simple", SLURM_JOB_ID="4242",
                    **{"MYVAR_%05d" % i: "value-%d" % i for i in range(10000)})
    doc = _fitted(tmp_path, "--env-prefix", "MYVAR_", env=env)
    assert doc["environment"]["packages"] == packages
    selected = doc["config"]["selected_env"]
    assert {k: selected.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NCCL_ALGO", "NCCL_PROTO", "SLURM_JOB_ID")} == {
        "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "SLURM_JOB_ID": "4242"}
    assert 0 < sum(k.startswith("MYVAR_") for k in selected) <= 32
    count = len(select_env(env, ["MYVAR_"]))  # 10,004 and clean_env's RAY_USAGE_STATS_ENABLED
    assert doc["config"]["selected_env_truncated"]["count"] == count
    (note,) = doc["collection"]["truncated"]
    assert note.startswith("config.selected_env: kept %d of %d entries" % (len(selected), count))


def test_a_5000_gpu_nvidia_smi_costs_only_the_gpu_list(tmp_path):
    packages = _baseline_packages(tmp_path)
    csv = tmp_path / "gpus.csv"
    csv.write_text("".join(
        "%d, NVIDIA H100 80GB HBM3, GPU-%08x-1111-2222-3333-444455556666, 81559, 00000000:%02X:%02X.0, 550.54.15, "
        "9.0, Disabled\n" % (i, i, i >> 8 & 255, i & 255) for i in range(5000)))
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"--query-gpu=*": csv})
    doc = _fitted(tmp_path, env=clean_env(PATH=str(bindir), CUDA_VISIBLE_DEVICES="0,1"))
    assert doc["environment"]["packages"] == packages
    hw = doc["hardware"]
    assert (hw["gpu_count"], hw["gpu_model"], hw["driver_version"]) == (5000, "NVIDIA H100 80GB HBM3", "550.54.15")
    assert [g["index"] for g in hw["gpus"]] == list(range(16)) and hw["gpus_truncated"]["count"] == 5000
    assert doc["config"]["selected_env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert doc["collection"]["truncated"] == [
        "hardware.gpus: kept the first 16 of 5000 items (count and digest of all in gpus_truncated)"]


def test_a_sidecar_that_cannot_be_written_does_not_cost_the_manifest(tmp_path, repo):
    (repo / "gen.py").write_text("".join("value_%05d = %d\n" % (n, n) for n in range(8000)))
    git(repo, "add", "gen.py")
    git(repo, "commit", "-qm", "gen")
    (repo / "gen.py").write_text("".join("value_%05d = %d  # changed\n" % (n, n) for n in range(8000)))
    control, out = tmp_path / "control", tmp_path / "out"
    res = run_cli("generate", "--output-dir", str(control), "--run-id", "r1", cwd=repo)
    whole = json.loads(open(res.stdout.strip()).read())["code"]["repo"]["patch"]
    assert (control / whole["sidecar"]).stat().st_size > 130_000  # the patch; the manifest is far smaller
    # Files over 64 KB cannot be written (EFBIG), as on a disk nearly full: the sidecar fails, the manifest fits.
    limited = fake_tool(tmp_path / "bin", "python", 'exec %s -c "import os, resource, sys; '
                        'resource.setrlimit(resource.RLIMIT_FSIZE, (64000, 64000)); '
                        'os.execv(sys.executable, [sys.executable] + sys.argv[1:])" "$@"\n' % sys.executable)
    res = run_cli("generate", "--output-dir", str(out), "--run-id", "r1", cwd=repo, python=str(limited),
                  env=clean_env(PYTHONDONTWRITEBYTECODE="1"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(out / "manifest_r1.json") and sorted(os.listdir(out)) == ["manifest_r1.json"]
    assert ("relaxrepro: warning: patch of repo repo not stored: could not write %s: file too large (file-size "
            "limit); the manifest keeps its sha256" % (out / "manifest_r1.repo.patch")) in res.stderr.splitlines()
    doc = json.loads((out / "manifest_r1.json").read_text())
    validate_manifest(doc)
    patch = doc["code"]["repo"]["patch"]
    assert patch["not_stored"] == "file too large (file-size limit)" and "sidecar" not in patch
    assert (patch["sha256"], patch["stored_sha256"]) == (whole["sha256"], whole["stored_sha256"])
    assert patch["stored_sha256"] == hashlib.sha256((control / whole["sidecar"]).read_bytes()).hexdigest()
    assert "code.repo.patch not stored: file too large (file-size limit)" in doc["collection"]["truncated"]


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


@needs_proc
@pytest.mark.parametrize("how", ["generate", "node-report"])
def test_a_generate_killed_by_sigterm_ends_the_tools_it_started(tmp_path, how):
    # A job's time limit (SLURM sends SIGTERM) while nvidia-smi hangs: the tool must not outlive us.
    import signal
    import subprocess
    import sys as _sys
    import time

    bindir = tmp_path / "bin"
    fake_tool(bindir, "nvidia-smi", "/bin/sleep 1000\n")
    marker = "%d-sigterm-%s" % (os.getpid(), how)
    args = ["generate", "--output-dir", str(tmp_path / "out")] + (["--node-report", "--run-id", "n1"]
                                                                   if how == "node-report" else [])
    child = subprocess.Popen([_sys.executable, "-m", "relaxrepro"] + args, cwd=tmp_path,
                             env=clean_env(PATH=str(bindir), **{MARKER_VAR: marker}),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while len(marked_processes(marker)) < 2 and time.monotonic() < deadline:  # us and the hung tool
            time.sleep(0.02)
        assert len(marked_processes(marker)) >= 2
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGTERM  # still dies of the signal, as a job's accounting expects
    assert survivors(marker) == []


def test_outside_any_git_repository_says_so_once_on_stderr(tmp_path, repo):
    bare = tmp_path / "bare"
    bare.mkdir()
    res = run_cli("generate", "--output-dir", str(tmp_path / "o"), "--", "python", "train.py", cwd=bare)
    assert res.returncode == 0, res.stderr
    assert json.loads(Path(res.stdout.strip()).read_text())["code"] == {}
    lines = [line for line in res.stderr.splitlines() if "git repository" in line]
    assert lines == ["relaxrepro: warning: no git repository recorded (the working directory is not inside one; "
                     "add one with --repo NAME=PATH): check, restore and rerun will have no code to go by"], res.stderr
    quiet = run_cli("generate", "-q", "--output-dir", str(tmp_path / "o"), "--", "python", "train.py", cwd=bare)
    assert quiet.returncode == 0 and "git repository" not in quiet.stderr
    inside = run_cli("generate", "--output-dir", str(tmp_path / "o"), "--", "python", "train.py", cwd=repo)
    assert inside.returncode == 0 and "git repository" not in inside.stderr
