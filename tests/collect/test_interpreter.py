"""The training interpreter: found from --python, the recorded command, a launcher's shebang, else current."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from relaxrepro.collect import interpreter
from relaxrepro.collect.probes import python as python_probe
from tests.helpers.common import clean_env, fake_tool, generate
from tests.helpers.env import cuda_python, make_ctx


def _launcher(bindir: Path, name: str, shebang: str) -> Path:
    path = bindir / name
    bindir.mkdir(parents=True, exist_ok=True)
    path.write_text(shebang + "\nimport sys\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def venv_python(tmp_path: Path) -> str:
    return cuda_python()


@pytest.mark.parametrize("argv", [
    ["{py}", "train.py", "--lr", "3e-4"],
    ["{py}", "-m", "torch.distributed.run", "train.py"],
    ["env", "CUDA_VISIBLE_DEVICES=0", "-u", "OMP_NUM_THREADS", "{py}", "train.py"],
    ["OMP_NUM_THREADS=4", "nohup", "{py}", "train.py"],
    ["numactl", "--cpunodebind=0", "{py}", "train.py"],
    ["srun", "-N", "2", "--gpus-per-node=8", "{py}", "train.py"],
    ["mpirun", "-np", "8", "-x", "NCCL_DEBUG=INFO", "{py}", "-u", "train.py"],
], ids=["python-script", "python-m", "env-assignments", "bare-assignment-nohup", "numactl", "srun", "mpirun"])
def test_interpreter_named_by_the_command(tmp_path, venv_python, argv):
    ctx = make_ctx(tmp_path, argv=[a.format(py=venv_python) for a in argv])
    got = interpreter.resolve(ctx)
    assert got.source == "command"
    assert got.prefix.endswith(".venv-cuda")
    assert any(p.endswith("site-packages") and ".venv-cuda" in p for p in got.site_dirs)


def test_bare_python_name_is_looked_up_on_the_commands_path(tmp_path, venv_python):
    bindir = str(Path(venv_python).parent)  # an activated venv: its bin first on PATH
    got = interpreter.resolve(make_ctx(tmp_path, argv=["python3", "train.py"], env={"PATH": bindir}))
    assert (got.source, got.executable) == ("command", bindir + "/python3")
    assert got.venv is True


@pytest.mark.parametrize("shebang", ["#!{py}", "#!/usr/bin/env python3", "#!/bin/sh\n'''exec' \"{py}\" \"$0\" \"$@\""],
                         ids=["absolute", "env", "pip-long-path-trick"])
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate", "deepspeed"])
def test_launchers_shebang_names_the_interpreter(tmp_path, venv_python, launcher, shebang):
    bindir = tmp_path / "bin"
    _launcher(bindir, launcher, shebang.format(py=venv_python))
    path = "%s:%s" % (bindir, Path(venv_python).parent)
    got = interpreter.resolve(make_ctx(tmp_path, argv=[launcher, "--nproc-per-node", "8", "train.py"],
                                       env={"PATH": path}))
    assert (got.source, got.launcher) == ("launcher", launcher)
    assert got.prefix.endswith(".venv-cuda")


def test_ray_job_submit_uses_the_entrypoints_python(tmp_path, venv_python):
    _launcher(tmp_path / "bin", "ray", "#!" + sys.executable)
    argv = ["ray", "job", "submit", "--address", "http://127.0.0.1:8265", "--", venv_python, "train.py"]
    got = interpreter.resolve(make_ctx(tmp_path, argv=argv))
    assert got.source == "command" and got.prefix.endswith(".venv-cuda")


def test_option_wins_over_the_command(tmp_path, venv_python):
    ctx = make_ctx(tmp_path, argv=[sys.executable, "train.py"], options={"python": venv_python})
    got = interpreter.resolve(ctx)
    assert got.source == "option" and got.prefix.endswith(".venv-cuda")


@pytest.mark.parametrize("argv,note", [
    (["python3.99", "train.py"], "python3.99 was not found on PATH"),
    (["bash", "run.sh"], None),
    (["./not-there", "x"], None),
    ([], None),
], ids=["python-missing", "shell-script", "missing-file", "no-command"])
def test_falls_back_to_the_current_interpreter(tmp_path, argv, note):
    fake_tool(tmp_path / "bin", "bash", "exit 0\n")
    got = interpreter.resolve(make_ctx(tmp_path, argv=argv))
    assert got.source == "current" and got.executable == sys.executable
    assert any(note in w for w in got.warnings) if note else not got.warnings


@pytest.mark.parametrize("body,expect", [
    ("exit 3\n", "exit 3"),
    ("echo 'not json'\n", "printed no usable answer"),
    ("", "printed no usable answer"),
    ("exec %s 30\n" % shutil.which("sleep"), "timed out"),
], ids=["non-zero", "garbage", "empty", "hanging"])
def test_a_broken_python_on_the_command_costs_a_warning(tmp_path, body, expect):
    fake = fake_tool(tmp_path / "bin", "python3", body)
    ctx = make_ctx(tmp_path, argv=["python3", "train.py"], probe_budget_s=1.0)
    ctx.begin_probe()
    got = interpreter.resolve(ctx)
    assert got.source == "current"
    assert any(expect in w and str(fake) in w for w in got.warnings), got.warnings
    out = python_probe.collect(ctx)
    assert out.status == "partial" and out.data["environment"]["python"]["source"] == "current"


def test_conda_env_and_venv_are_read_from_the_prefix(tmp_path):
    root = tmp_path / "miniconda3"
    (root / "conda-meta").mkdir(parents=True)
    (root / "envs" / "train" / "conda-meta").mkdir(parents=True)
    base = interpreter.Interpreter(executable="x", prefix=str(root), base_prefix=str(root))
    env = interpreter.Interpreter(executable="x", prefix=str(root / "envs" / "train"), base_prefix=str(root))
    plain = interpreter.Interpreter(executable="x", prefix="/usr", base_prefix="/usr")
    assert (base.conda_env, base.venv) == ("base", False)
    assert (env.conda_env, env.venv) == ("train", True)
    assert (plain.conda_env, plain.venv) == (None, False)


def test_generate_records_the_training_interpreter(tmp_path, venv_python):
    doc = generate(tmp_path, "--python", venv_python, env=clean_env())
    py = doc["environment"]["python"]
    assert py["source"] == "option" and py["venv"] is True and py["venv_name"] == ".venv-cuda"
    assert doc["environment"]["python_version"] == py["version"]
    assert py["base_prefix"] != py["prefix"]


def test_generate_with_a_missing_python_option_still_writes(tmp_path):
    doc = generate(tmp_path, "--python", str(tmp_path / "nope" / "python"), env=clean_env())
    py = doc["environment"]["python"]
    assert py["source"] == "option" and "version" not in py
    assert doc["collection"]["probes"]["python"]["status"] == "partial"
    assert "not found" in doc["collection"]["probes"]["python"]["warnings"][0]


def test_an_old_training_interpreter_is_described_too(tmp_path):
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    old = next(iter(sorted(pyenv.glob("versions/2.7*/bin/python2.7"))), None) or shutil.which("python2.7")
    if old is None:
        pytest.skip("no Python 2.7 here to stand in for a legacy training interpreter")
    got = interpreter.resolve(make_ctx(tmp_path, argv=[str(old), "train.py"]))
    assert (got.source, got.version, got.implementation) == ("command", "2.7.18", "cpython")
    assert got.site_dirs


def _siblings_of_current() -> list:
    here = os.path.abspath(sys.executable)
    d = os.path.dirname(here)
    return [os.path.join(d, n) for n in sorted(os.listdir(d))
            if os.path.join(d, n) != here and os.path.realpath(os.path.join(d, n)) == os.path.realpath(here)]


def test_a_sibling_name_of_the_current_binary_is_the_current_interpreter(tmp_path, monkeypatch):
    siblings = _siblings_of_current()
    if not siblings:
        pytest.skip("no python/python3 link beside %s" % sys.executable)

    def no_child(*a, **k):
        raise AssertionError("asked a child interpreter for the current one")

    monkeypatch.setattr("relaxrepro.std.proc.run_python", no_child)
    got = interpreter.resolve(make_ctx(tmp_path, argv=[siblings[0], "train.py"]))
    assert (got.source, got.executable) == ("command", siblings[0])
    assert got.version == "%d.%d.%d" % sys.version_info[:3] and got.prefix == sys.prefix


def test_the_same_binary_from_another_directory_is_still_asked(tmp_path, monkeypatch):
    # A venv's bin/python is a link to the base binary, yet its prefix and packages are the venv's.
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.realpath(sys.executable))
    from relaxrepro.std import proc

    asked = []
    real = proc.run_python

    def spy(python, *a, **k):
        asked.append(python)
        return real(python, *a, **k)

    monkeypatch.setattr("relaxrepro.std.proc.run_python", spy)
    got = interpreter.resolve(make_ctx(tmp_path, argv=[str(link), "train.py"]))
    assert asked == [str(link)] and got.source == "command" and got.version
