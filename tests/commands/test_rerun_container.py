"""``rerun --container``: the replay wrapped in the recorded image, shown whole by ``--dry-run`` and run by
``--confirm``. No container runtime exists here: fake ``apptainer``/``docker``/``podman``/``srun`` on a
one-entry PATH record their argv and run the rest of it."""

from __future__ import annotations

import hashlib
import json
import os
import sys

import pytest

from tests.commands.test_rerun import ECHO, _manifest
from tests.helpers.common import clean_env, fake_tool, run_cli

D = "sha256:" + "e" * 64

# Logs its arguments one a line, then skips the runtime's own options and the image, and runs the rest.
FAKES = {
    "apptainer": """
        printf '%s\\n' "$@" > "$FAKE_LOG"
        shift  # exec
        while [ "$1" = --bind ]; do shift 2; done
        shift  # the SIF
        exec "$@"
    """,
    "docker": """
        printf '%s\\n' "$@" > "$FAKE_LOG"
        shift 2  # run --rm
        while case "$1" in -v|-w|-e) true;; *) false;; esac; do shift 2; done
        shift  # the image
        exec "$@"
    """,
    "srun": """
        printf '%s\\n' "$@" > "$FAKE_LOG"
        while case "$1" in --container-*) true;; *) false;; esac; do shift; done
        exec "$@"
    """,
}
FAKES["podman"] = FAKES["docker"]


@pytest.fixture
def fakes(tmp_path_factory):
    where = tmp_path_factory.mktemp("fakes")
    for name, script in FAKES.items():
        fake_tool(where / "bin", name, script)
    return where


def _sif(tmp_path_factory):
    sif = tmp_path_factory.mktemp("images") / "pytorch.sif"
    sif.write_bytes(os.urandom(1 << 16))
    return sif, "sha256:" + hashlib.sha256(sif.read_bytes()).hexdigest()


def _env(fakes, bindir=None, **extra):
    return clean_env(PATH=str(bindir or fakes / "bin"), FAKE_LOG=str(fakes / "argv.log"),
                     RELAXREPRO_CACHE_DIR=str(fakes / "cache"), **extra)


def _exec_line(stdout):
    lines = [line for line in stdout.splitlines() if line.startswith("exec ")]
    assert len(lines) == 1, stdout
    return lines[0]


def test_dry_run_shows_the_apptainer_wrapper_whole(tmp_path, tmp_path_factory, fakes):
    sif, digest = _sif(tmp_path_factory)
    m, doc = _manifest(tmp_path, ["python", "-c", "print(1)"], env={},
                       container={"runtime": "apptainer", "image": {"path": str(sif), "name": sif.name,
                                                                   "digest": digest, "digest_source": "sif"}})
    res = run_cli("rerun", str(m), "--dry-run", "--container", env=_env(fakes))
    assert res.returncode == 0, res.stderr
    work = doc["command"]["cwd"]
    assert _exec_line(res.stdout) == "exec apptainer exec --bind %s %s %s -c 'print(1)'" % (work, sif, sys.executable)
    assert "# -- inside the recorded container image, pinned by its digest (--container)" in res.stdout


@pytest.mark.parametrize("container,wrap", [
    ({"runtime": "docker", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": D,
                                     "digest_source": "RELAXREPRO_IMAGE"}},
     "docker run --rm -v {w}:{w} -w {w} nvcr.io/nvidia/pytorch:24.05-py3@" + D),
    ({"runtime": "podman", "image": {"name": "docker.io/library/python:3.11", "id": "e" * 64, "digest": D,
                                     "digest_source": "podman"}},
     "podman run --rm -v {w}:{w} -w {w} " + D),
    ({"runtime": "enroot", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": D,
                                     "digest_source": "RELAXREPRO_IMAGE"}},
     "srun '--container-image=nvcr.io#nvidia/pytorch:24.05-py3@%s' --container-mounts={w}:{w} "
     "--container-workdir={w}" % D),
], ids=["docker", "podman", "enroot-pyxis"])
def test_dry_run_shows_each_runtimes_wrapper(tmp_path, fakes, container, wrap):
    m, doc = _manifest(tmp_path, ["python", "-c", "print(1)"], env={}, container=container)
    res = run_cli("rerun", str(m), "--dry-run", "--container", env=_env(fakes))
    assert res.returncode == 0, res.stderr
    w = doc["command"]["cwd"]
    assert _exec_line(res.stdout) == "exec %s %s -c 'print(1)'" % (wrap.format(w=w), sys.executable)


@pytest.mark.parametrize("hardware,flags", [
    ({"gpu_count": 8, "gpu_vendor": "nvidia", "gpu_model": "NVIDIA H100 80GB HBM3"}, "--gpus all "),
    ({"gpu_count": 8, "gpu_model": "NVIDIA A100-SXM4-80GB"}, "--gpus all "),  # Relax records no vendor
    ({"gpu_count": 0, "gpu_vendor": "nvidia"}, ""),
], ids=["nvidia", "nvidia-by-model", "no-gpu"])
def test_dry_run_hands_the_runs_gpus_to_the_container(tmp_path, fakes, hardware, flags):
    m, doc = _manifest(tmp_path, ["python", "-c", "print(1)"], env={}, hardware=hardware,
                       container={"runtime": "docker", "image": {"name": "img", "digest": D}})
    res = run_cli("rerun", str(m), "--dry-run", "--container", env=_env(fakes))
    w = doc["command"]["cwd"]
    assert _exec_line(res.stdout) == "exec docker run --rm %s-v %s:%s -w %s img@%s %s -c 'print(1)'" % (
        flags, w, w, w, D, sys.executable)


def _refused(res):
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_refuses_when_the_runtime_is_not_on_path(tmp_path, fakes):
    m, doc = _manifest(tmp_path, ["python", "-c", "print(1)"], env={},
                       container={"runtime": "docker", "image": {"name": "img", "digest": D}})
    empty = fakes / "empty"
    empty.mkdir()
    res = run_cli("rerun", str(m), "--dry-run", "--container", env=_env(fakes, bindir=empty))
    w = doc["command"]["cwd"]
    assert _refused(res) == ("relaxrepro rerun: refused: --container: docker is not on PATH here; the replay needs: "
                             "docker run --rm -v %s:%s -w %s img@%s %s -c 'print(1)'" % (w, w, w, D, sys.executable))


def test_refuses_a_missing_sif(tmp_path, fakes):
    m, doc = _manifest(tmp_path, ["python", "-c", "print(1)"], env={},
                       container={"runtime": "apptainer", "image": {"path": "/nowhere/pt.sif", "digest": D}})
    res = run_cli("rerun", str(m), "--dry-run", "--container", env=_env(fakes))
    w = doc["command"]["cwd"]
    assert _refused(res) == ("relaxrepro rerun: refused: --container: the run's image /nowhere/pt.sif is not here; the "
                             "replay needs it at that path: apptainer exec --bind %s /nowhere/pt.sif %s -c 'print(1)'"
                             % (w, sys.executable))


def test_refuses_a_sif_that_holds_another_image(tmp_path, tmp_path_factory, fakes):
    sif, digest = _sif(tmp_path_factory)
    m, _ = _manifest(tmp_path, ["python", "-c", "print(1)"], env={},
                     container={"runtime": "apptainer", "image": {"path": str(sif), "digest": D}})
    res = run_cli("rerun", str(m), "--dry-run", "--container", env=_env(fakes))
    assert _refused(res).startswith("relaxrepro rerun: refused: --container: %s holds %s, the run's image was %s; "
                                    "the replay needs that image: apptainer exec" % (sif, digest, D))


def test_refuses_an_image_without_digest(tmp_path, fakes):
    m, _ = _manifest(tmp_path, ["python", "-c", "print(1)"], env={},
                     container={"runtime": "docker", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3"}})
    res = run_cli("rerun", str(m), "--confirm", "--container", env=_env(fakes))
    assert _refused(res).startswith("relaxrepro rerun: refused: --container: the run's image "
                                    "nvcr.io/nvidia/pytorch:24.05-py3 has no recorded digest")


def test_refuses_a_manifest_without_container(tmp_path, fakes):
    m, _ = _manifest(tmp_path, ["python", "-c", "print(1)"], env={})
    res = run_cli("rerun", str(m), "--dry-run", "--container", env=_env(fakes))
    assert _refused(res) == ("relaxrepro rerun: refused: --container: the manifest records no container; "
                             "replay without --container")


def _log(fakes):
    return (fakes / "argv.log").read_text().splitlines()


def test_confirm_runs_the_command_inside_apptainer(tmp_path, tmp_path_factory, fakes):
    sif, digest = _sif(tmp_path_factory)
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO, "a b"], env={"NCCL_TEST_VALUE": "7"},
                       container={"runtime": "apptainer", "image": {"path": str(sif), "digest": digest,
                                                                   "digest_source": "sif"}})
    res = run_cli("rerun", str(m), "--confirm", "--container", env=_env(fakes))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"args": ["a b"], "cwd": doc["command"]["cwd"], "env": "7"}
    log = _log(fakes)
    replay_dir = log[4]  # the replay's own new directory, shared too
    assert log == ["exec", "--bind", doc["command"]["cwd"], "--bind", replay_dir, str(sif), sys.executable, "-c",
                   ECHO, "a b"]
    assert os.path.isdir(replay_dir)
    assert "relaxrepro rerun: running apptainer exec --bind" in res.stderr


def test_the_hosts_python_does_not_refuse_a_replay_inside_the_image(tmp_path, tmp_path_factory, fakes):
    sif, digest = _sif(tmp_path_factory)
    container = {"runtime": "apptainer", "image": {"path": str(sif), "digest": digest, "digest_source": "sif"}}
    m, doc = _manifest(tmp_path, ["python", "-c", "print('ran')"], env={}, container=container)
    doc["environment"]["python"]["version"] = "2.7.18"  # the image's Python, not this host's
    m.write_text(json.dumps(doc))
    refused = run_cli("rerun", str(m), "--confirm", env=_env(fakes))
    assert refused.returncode == 2 and "python: recorded 2.7.18" in refused.stderr
    res = run_cli("rerun", str(m), "--confirm", "--container", env=_env(fakes))
    assert (res.returncode, res.stdout) == (0, "ran\n"), res.stderr


def test_confirm_runs_the_command_inside_docker_with_its_env_passed_on(tmp_path, fakes):
    m, doc = _manifest(tmp_path, ["python", "-c", ECHO], env={"NCCL_TEST_VALUE": "8"},
                       container={"runtime": "docker", "image": {"name": "ghcr.io/team/train", "digest": D,
                                                                "digest_source": "RELAXREPRO_IMAGE"}})
    res = run_cli("rerun", str(m), "--confirm", "--container", env=_env(fakes))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["env"] == "8"
    log = _log(fakes)
    w = doc["command"]["cwd"]
    image = log.index("ghcr.io/team/train@" + D)
    assert log[:5] == ["run", "--rm", "-v", "%s:%s" % (w, w), "-v"]
    assert log[image - 12:image] == ["-w", w, "-e", "RELAXREPRO_RUN_ID", "-e", "RELAXREPRO_MANIFEST",
                                     "-e", "RELAXREPRO_OUTPUT_DIR", "-e", "RELAXREPRO_MAX_STEPS",
                                     "-e", "NCCL_TEST_VALUE"]
    assert log[image + 1:] == [sys.executable, "-c", ECHO]


SLURM = {"type": "slurm", "job_id": "41", "node_count": 1, "ntasks_per_node": 1}


def test_sbatch_with_container_replays_the_command_in_the_image_on_the_node(tmp_path, fakes):
    m, doc = _manifest(tmp_path, ["python", "-c", "print(1)"], env={}, scheduler=SLURM,
                       container={"runtime": "enroot", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3",
                                                                 "digest": D, "digest_source": "enroot"}})
    empty = fakes / "empty"
    empty.mkdir()  # no srun where the script is written: the node that runs it decides
    res = run_cli("rerun", str(m), "--sbatch", "--container", env=_env(fakes, bindir=empty))
    assert res.returncode == 0, res.stderr
    w = doc["command"]["cwd"]
    assert ("# The recorded command runs inside the recorded image, pinned by its digest (rerun --container):\n"
            "#   srun '--container-image=nvcr.io#nvidia/pytorch:24.05-py3@%s' --container-mounts=%s:%s "
            "--container-workdir=%s ...\n" % (D, w, w, w)) in res.stdout
    assert '\n  --confirm \\\n  --container \\\n  --output-dir "${replay}"' in res.stdout


def test_sbatch_without_container_says_how_to_replay_inside_it(tmp_path, fakes):
    m, _ = _manifest(tmp_path, ["python", "-c", "print(1)"], env={}, scheduler=SLURM,
                     container={"runtime": "enroot", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3",
                                                               "digest": D}})
    res = run_cli("rerun", str(m), "--sbatch", env=_env(fakes))
    assert res.returncode == 0, res.stderr
    assert "this script replays on the host (rerun --sbatch\n# --container writes one" in res.stdout
    assert "--container \\" not in res.stdout


def test_sbatch_with_container_refuses_an_image_without_digest(tmp_path, fakes):
    m, _ = _manifest(tmp_path, ["python", "-c", "print(1)"], env={}, scheduler=SLURM,
                     container={"runtime": "enroot", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3"}})
    res = run_cli("rerun", str(m), "--sbatch", "--container", env=_env(fakes))
    assert _refused(res).startswith("relaxrepro rerun: refused: --container: the run's image "
                                    "nvcr.io/nvidia/pytorch:24.05-py3 has no recorded digest")
