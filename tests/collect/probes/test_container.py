"""System (C library, CPU, NUMA, memory) and container detection on fixture roots and fake tools."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from relaxrepro.collect.probes import container, system
from tests.helpers.common import FIXTURES, clean_env, fake_tool, generate
from tests.helpers.env import make_ctx

SYS = FIXTURES / "system"

CPUINFO_2S = "".join(
    "processor\t: %d\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nphysical id\t: %d\ncore id\t\t: %d\n\n"
    % (i, i // 4, (i % 4) // 2) for i in range(8))  # 2 sockets x 2 cores x 2 threads


def test_parse_cpuinfo_counts_sockets_cores_threads():
    assert system.parse_cpuinfo(CPUINFO_2S) == {"model": "Intel(R) Xeon(R) Platinum 8480+", "logical_cpus": 8,
                                                "sockets": 2, "cores": 4}


@pytest.mark.parametrize("name,expect", [
    ("ldd-debian12-glibc-2.36.txt", {"name": "glibc", "version": "2.36"}),
    ("ldd-alpine-musl-1.2.4.txt", {"name": "musl", "version": "1.2.4"}),
], ids=["debian12-glibc", "alpine-musl"])
def test_parse_ldd_version(name, expect):
    assert system.parse_ldd_version((SYS / name).read_text()) == expect


def test_parse_ldd_version_garbage():
    assert system.parse_ldd_version("") == {}
    assert system.parse_ldd_version("Segmentation fault\n") == {}


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "cpuinfo").write_text(CPUINFO_2S)
    (root / "proc" / "meminfo").write_text("MemTotal:       2113245184 kB\n")
    for n in ("node0", "node1", "possible", "online"):
        (root / "sys" / "devices" / "system" / "node" / n).mkdir(parents=True)
    return root


@pytest.mark.parametrize("script,expect", [
    ("exec %s '%s'\n" % (shutil.which("cat"), SYS / "ldd-debian12-glibc-2.36.txt"),
     {"name": "glibc", "version": "2.36"}),
    # musl prints its banner on stderr and exits 1
    ("%s '%s' >&2; exit 1\n" % (shutil.which("cat"), SYS / "ldd-alpine-musl-1.2.4.txt"),
     {"name": "musl", "version": "1.2.4"}),
], ids=["glibc", "musl-stderr-exit-1"])
def test_system_on_a_fixture_root(tmp_path, script, expect):
    fake_tool(tmp_path / "bin", "ldd", script)
    out = system.collect(make_ctx(tmp_path, root=str(_root(tmp_path))))
    assert out.status == "ok", out.warnings
    assert out.data["environment"]["system"]["libc"] == expect
    cpu = out.data["hardware"]["cpu"]
    assert (cpu["sockets"], cpu["cores"], cpu["logical_cpus"], cpu["numa_nodes"]) == (2, 4, 8, 2)
    assert out.data["hardware"]["memory_total_gb"] == 2015.35


@pytest.mark.parametrize("script,expect", [
    (None, None),
    ("exit 2\n", "ldd --version: exit 2"),
    ("", "ldd --version unrecognised"),
    ("echo garbage\n", "ldd --version unrecognised"),
    ("exec %s 30\n" % shutil.which("sleep"), "timed out"),
], ids=["missing", "non-zero", "empty", "garbage", "hanging"])
def test_ldd_failures(tmp_path, script, expect):
    if script is not None:
        fake_tool(tmp_path / "bin", "ldd", script)
    ctx = make_ctx(tmp_path, root=str(_root(tmp_path)), probe_budget_s=2.0)
    ctx.begin_probe()
    out = system.collect(ctx)
    assert "libc" not in out.data["environment"]["system"]
    assert out.data["hardware"]["cpu"]["sockets"] == 2  # the rest is still there
    if expect is None:
        assert out.status == "ok"
    else:
        assert out.status == "partial" and any(expect in w for w in out.warnings), out.warnings


def test_unreadable_proc_entries(tmp_path):
    root = tmp_path / "root"
    (root / "proc" / "cpuinfo").mkdir(parents=True)  # reads fail like an unreadable file (root ignores modes)
    (root / "proc" / "meminfo").symlink_to(root / "nowhere")
    out = system.collect(make_ctx(tmp_path, root=str(root)))
    assert out.status == "partial"
    assert "/proc/cpuinfo unreadable: CPU model, cores and sockets not recorded" in out.warnings
    assert "/proc/meminfo unreadable: memory total not recorded" in out.warnings
    assert "memory_total_gb" not in out.data["hardware"]
    assert "numa_nodes" not in out.data["hardware"]["cpu"]


# -- container ----------------------------------------------------------------------------------------------

DOCKER_V1_CGROUP = "12:pids:/docker/" + "a" * 64 + "\n1:name=systemd:/docker/" + "a" * 64 + "\n"
K8S_CGROUP = "11:memory:/kubepods/burstable/pod1234/" + "b" * 64 + "\n"
V2_MOUNTINFO = ("612 600 0:50 / / rw - overlay overlay rw\n"
                "630 612 254:1 /var/lib/docker/containers/%s/hostname /etc/hostname rw - ext4 /dev/vda1 rw\n"
                % ("c" * 64))


def test_no_container(tmp_path):
    (tmp_path / "root" / "proc" / "self").mkdir(parents=True)
    (tmp_path / "root" / "proc" / "self" / "cgroup").write_text("0::/\n")
    out = container.collect(make_ctx(tmp_path, root=str(tmp_path / "root")))
    assert (out.status, out.data) == ("absent", {})


def _files(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.mark.parametrize("files,env,expect", [
    ({"/.dockerenv": "", "/proc/self/cgroup": DOCKER_V1_CGROUP}, {},
     {"runtime": "docker", "id": "a" * 64, "evidence": ["/.dockerenv", "/proc/self/cgroup"]}),
    ({"/.dockerenv": "", "/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": V2_MOUNTINFO}, {},
     {"runtime": "docker", "id": "c" * 64, "evidence": ["/.dockerenv", "/proc/self/mountinfo"]}),
    ({"/run/.containerenv": (SYS / "containerenv-podman.txt").read_text()}, {},
     {"runtime": "podman", "engine": "podman-4.9.3", "rootless": True,
      "id": "3f1c0b6a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a",
      "image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3",
                "id": "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"},
      "evidence": ["/run/.containerenv"]}),
    ({"/proc/self/cgroup": K8S_CGROUP,
      "/var/run/secrets/kubernetes.io/serviceaccount/namespace": "ml-team\n"},
     {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "trainer-0"},
     {"runtime": "kubernetes", "kubernetes": {"pod": "trainer-0", "namespace": "ml-team"},
      "evidence": ["/proc/self/cgroup", "kubernetes environment or service account"]}),
    ({}, {"PYXIS_CONTAINER_IMAGE": "nvcr.io#nvidia/pytorch:24.05-py3"},
     {"runtime": "enroot", "image": {"name": "nvcr.io#nvidia/pytorch:24.05-py3"},
      "evidence": ["enroot/pyxis environment"]}),
], ids=["docker-cgroup-v1", "docker-cgroup-v2-mountinfo", "podman-containerenv", "kubernetes", "pyxis"])
def test_container_runtimes(tmp_path, files, env, expect):
    root = _files(tmp_path / "root", files)
    out = container.collect(make_ctx(tmp_path, root=str(root), env=env))
    assert out.status == "ok" and out.data == {"container": expect}


def test_apptainer_image_is_described_not_hashed(tmp_path):
    root = _files(tmp_path / "root", {
        "/.singularity.d/labels.json": '{"org.label-schema.build-date": "2024-05-01", "maintainer": "ml"}',
        "/images/pytorch.sif": "x" * 1000,
    })
    env = {"APPTAINER_CONTAINER": "/images/pytorch.sif", "APPTAINER_NAME": "pytorch.sif"}
    c = container.collect(make_ctx(tmp_path, root=str(root), env=env)).data["container"]
    assert c["runtime"] == "apptainer"
    assert c["image"]["path"] == "/images/pytorch.sif" and c["image"]["size_bytes"] == 1000
    assert c["image"]["name"] == "pytorch.sif" and isinstance(c["image"]["mtime"], int)
    assert c["image"]["labels"] == {"maintainer": "ml", "org.label-schema.build-date": "2024-05-01"}


def test_singularity_with_unbound_image_and_broken_labels(tmp_path):
    root = _files(tmp_path / "root", {"/.singularity.d/labels.json": "{broken"})
    env = {"SINGULARITY_CONTAINER": "/scratch/img.sif"}
    c = container.collect(make_ctx(tmp_path, root=str(root), env=env)).data["container"]
    assert c["runtime"] == "singularity" and c["image"] == {"path": "/scratch/img.sif"}


def test_generate_validates_with_container_and_environment(tmp_path):
    doc = generate(tmp_path, env=clean_env(APPTAINER_CONTAINER="/images/x.sif", APPTAINER_NAME="x.sif"))
    assert doc["container"]["runtime"] == "apptainer"
    assert doc["collection"]["probes"]["container"]["status"] == "ok"
    assert doc["environment"]["system"]["libc"]["name"] in ("glibc", "musl")
