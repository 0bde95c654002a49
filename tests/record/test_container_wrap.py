"""The wrapper that runs a replay in the recorded image: one argv prefix per runtime, pinned by digest."""

from __future__ import annotations

import pytest

from relaxrepro.collect.probes.container_parse import pyxis_name
from relaxrepro.record.container_wrap import WrapError, wrapper

D = "sha256:" + "c" * 64
W = "/scratch/work"


@pytest.mark.parametrize("container,expect", [
    ({"runtime": "apptainer", "image": {"path": "/images/pt.sif", "name": "pt.sif", "digest": D,
                                        "digest_source": "sif"}},
     ["apptainer", "exec", "--bind", W, "/images/pt.sif"]),
    ({"runtime": "singularity", "image": {"path": "/images/pt.sif", "digest": D}},
     ["singularity", "exec", "--bind", W, "/images/pt.sif"]),
    ({"runtime": "apptainer", "image": {"path": "/images/pt.sif", "name": "nvcr.io/nvidia/pytorch:24.05-py3",
                                        "digest": D, "digest_source": "RELAXREPRO_IMAGE"}},
     ["apptainer", "exec", "--bind", W, "docker://nvcr.io/nvidia/pytorch:24.05-py3@" + D]),
    ({"runtime": "docker", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": D}},
     ["docker", "run", "--rm", "-v", W + ":" + W, "-w", W, "nvcr.io/nvidia/pytorch:24.05-py3@" + D]),
    ({"runtime": "podman", "image": {"name": "docker.io/library/python:3.11", "id": "c" * 64, "digest": D,
                                     "digest_source": "podman"}},
     ["podman", "run", "--rm", "-v", W + ":" + W, "-w", W, D]),
    ({"image": {"name": "ghcr.io/team/train", "digest": D, "digest_source": "RELAXREPRO_IMAGE"}},
     ["docker", "run", "--rm", "-v", W + ":" + W, "-w", W, "ghcr.io/team/train@" + D]),
    ({"runtime": "kubernetes", "image": {"name": "ghcr.io/team/train", "digest": D}},
     ["docker", "run", "--rm", "-v", W + ":" + W, "-w", W, "ghcr.io/team/train@" + D]),
    ({"runtime": "enroot", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": D}},
     ["srun", "--container-image=nvcr.io#nvidia/pytorch:24.05-py3@" + D, "--container-mounts=%s:%s" % (W, W),
      "--container-workdir=" + W]),
], ids=["apptainer", "singularity", "apptainer-registry-digest", "docker",
        "podman-image-id", "relaxrepro-image-only", "kubernetes", "enroot"])
def test_wrapper_per_runtime(container, expect):
    assert wrapper(container, W) == expect


def test_more_binds_and_env_for_docker():
    c = {"runtime": "docker", "image": {"name": "img", "digest": D}}
    assert wrapper(c, W, binds=["/out", W], env_names=["RELAXREPRO_RUN_ID"]) == [
        "docker", "run", "--rm", "-v", W + ":" + W, "-v", "/out:/out", "-w", W, "-e", "RELAXREPRO_RUN_ID", "img@" + D]
    a = {"runtime": "apptainer", "image": {"path": "/i.sif", "digest": D}}
    assert wrapper(a, W, binds=["/out"]) == ["apptainer", "exec", "--bind", W, "--bind", "/out", "/i.sif"]


@pytest.mark.parametrize("runtime,vendor,flags", [
    ("apptainer", "nvidia", ["--nv"]),
    ("apptainer", "amd", ["--rocm"]),
    ("docker", "nvidia", ["--gpus", "all"]),
    ("podman", "nvidia", ["--device", "nvidia.com/gpu=all"]),
    ("docker", "amd", ["--device", "/dev/kfd", "--device", "/dev/dri"]),
    ("docker", None, []),
], ids=["apptainer-nv", "apptainer-rocm", "docker-nvidia", "podman-cdi", "docker-amd", "no-gpu"])
def test_the_runs_gpus_are_handed_to_the_container(runtime, vendor, flags):
    c = {"runtime": runtime, "image": {"name": "img", "path": "/i.sif", "digest": D, "digest_source": "sif"}}
    argv = wrapper(c, W, gpus=vendor)
    head = 2 if runtime == "apptainer" else 3  # apptainer exec | docker run --rm
    assert argv[head:head + len(flags)] == flags
    assert wrapper(dict(c, runtime="enroot"), W, gpus=vendor)[0] == "srun"  # pyxis gives the job's own GPUs


@pytest.mark.parametrize("container,message", [
    ({"runtime": "docker", "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3"}},
     "the run's image nvcr.io/nvidia/pytorch:24.05-py3 has no recorded digest, so its name may now give another "
     "image (record runs with RELAXREPRO_IMAGE=NAME@sha256:...); unpinned: docker run --rm -v /scratch/work:"
     "/scratch/work -w /scratch/work nvcr.io/nvidia/pytorch:24.05-py3 python train.py"),
    ({"runtime": "apptainer", "image": {"path": "/images/pt.sif", "size_bytes": 10}},
     "the run's image /images/pt.sif has no recorded digest, so this file may hold another image (`relaxrepro "
     "fingerprint /images/pt.sif` before a run records one); unpinned: apptainer exec --bind /scratch/work "
     "/images/pt.sif python train.py"),
    ({"runtime": "apptainer", "image": {"name": "pt.sif"}}, "the run's apptainer image has no recorded path "
     "(its name: pt.sif)"),
    ({"runtime": "docker", "id": "a" * 64}, "the run's container (docker) names no image"),
    ({"runtime": "lxc", "image": {"name": "x", "digest": D}},
     "the run's container runtime lxc cannot be replayed with --container"),
    ({"runtime": "docker", "image": {"name": "x", "digest": "sha256:zz"}},
     "the recorded image digest 'sha256:zz' is not sha256:<64 hex>"),
    ({"runtime": "docker", "image": {"name": "--privileged", "digest": D}},
     "the recorded image name '--privileged' starts with '-'"),
    ({"runtime": "apptainer", "image": {"path": "--writable", "digest": D, "digest_source": "sif"}},
     "the recorded image path '--writable' starts with '-'"),
], ids=["docker-no-digest", "sif-no-digest", "sif-no-path", "docker-id-only", "unknown-runtime", "bad-digest",
        "name-like-an-option", "path-like-an-option"])
def test_wrapper_refuses(container, message):
    with pytest.raises(WrapError) as info:
        wrapper(container, W, command=["python", "train.py"])
    assert str(info.value) == message


@pytest.mark.parametrize("name,expect", [
    ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io#nvidia/pytorch:24.05-py3"),
    ("localhost:5000/train", "localhost:5000#train"),
    ("nvcr.io#nvidia/pytorch:24.05-py3", "nvcr.io#nvidia/pytorch:24.05-py3"),
    ("ubuntu:22.04", "ubuntu:22.04"),
    ("library/ubuntu", "library/ubuntu"),
], ids=["registry", "registry-port", "already-pyxis", "docker-hub", "docker-hub-namespace"])
def test_pyxis_name(name, expect):
    assert pyxis_name(name) == expect
