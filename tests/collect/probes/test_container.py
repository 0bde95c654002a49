"""System (C library, CPU, NUMA, memory) and container detection on fixture roots and fake tools."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest

from relaxrepro.collect import fingerprint
from relaxrepro.collect.probes import container, container_parse, system
from tests.helpers.common import FIXTURES, clean_env, fake_tool, generate, run_cli
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
                "id": "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b",
                "digest": "sha256:9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b",
                "digest_source": "podman"},
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


def test_apptainer_sif_is_hashed_once_then_read_from_the_cache(tmp_path):
    root = _files(tmp_path / "root", {
        "/.singularity.d/labels.json": '{"org.label-schema.build-date": "2024-05-01", "maintainer": "ml"}'})
    sif = root / "images" / "pytorch.sif"
    sif.parent.mkdir(parents=True)
    sif.write_bytes(os.urandom(3 << 20))
    os.utime(sif, (1e9, 1e9))  # its ctime is now: the first digest is stored, but trusted only DOUBT_NS later
    env = {"APPTAINER_CONTAINER": "/images/pytorch.sif", "APPTAINER_NAME": "pytorch.sif",
           "RELAXREPRO_CACHE_DIR": str(tmp_path / "cache")}
    want = "sha256:" + hashlib.sha256(sif.read_bytes()).hexdigest()
    out = container.collect(make_ctx(tmp_path, root=str(root), env=env))
    c = out.data["container"]
    assert out.status == "ok", out.warnings
    assert c["runtime"] == "apptainer"
    assert c["image"]["path"] == "/images/pytorch.sif" and c["image"]["size_bytes"] == 3 << 20
    assert (c["image"]["digest"], c["image"]["digest_source"]) == (want, "sif")
    assert c["image"]["name"] == "pytorch.sif" and isinstance(c["image"]["mtime"], int)
    assert c["image"]["labels"] == {"maintainer": "ml", "org.label-schema.build-date": "2024-05-01"}
    assert (tmp_path / "cache" / "fingerprints.sqlite").is_file()
    # A later launch with no time to hash at all still records it: from the cache, once the hash is trusted.
    time.sleep(fingerprint.DOUBT_NS / 1e9 + 0.1)
    container.collect(make_ctx(tmp_path, root=str(root), env=env))  # this one's digest is past all doubt
    ctx = make_ctx(tmp_path, root=str(root), env=env, probe_budget_s=0.01)
    ctx.begin_probe()
    again = container.collect(ctx)
    assert again.data["container"]["image"]["digest"] == want, again.warnings


def test_a_sif_too_large_for_the_budget_says_how_to_get_its_digest(tmp_path):
    root = tmp_path / "root"
    (root / "images").mkdir(parents=True)
    sif = root / "images" / "big.sif"
    with open(sif, "wb") as fh:
        fh.truncate(300 << 20)  # sparse: 300 MB that read as zeros
    os.utime(sif, (1e9, 1e9))
    env = {"APPTAINER_CONTAINER": str(sif), "RELAXREPRO_CACHE_DIR": str(tmp_path / "cache")}
    ctx = make_ctx(tmp_path, env=env, probe_budget_s=0.7)
    ctx.begin_probe()
    out = container.collect(ctx)
    assert "digest" not in out.data["container"]["image"]
    assert out.status == "partial"
    assert out.warnings == ["container image %s: no digest (300 MB cannot be hashed within the launch budget); "
                            "`relaxrepro fingerprint %s` hashes it once into the cache, or set "
                            "RELAXREPRO_IMAGE=NAME@sha256:..." % (sif, sif)]
    time.sleep(fingerprint.DOUBT_NS / 1e9 + 0.1)
    res = run_cli("fingerprint", str(sif), env=clean_env(RELAXREPRO_CACHE_DIR=str(tmp_path / "cache")))
    assert res.returncode == 0, res.stderr
    ctx = make_ctx(tmp_path, env=env, probe_budget_s=0.7)
    ctx.begin_probe()
    c = container.collect(ctx).data["container"]
    assert c["image"]["digest"] == "sha256:" + hashlib.sha256(bytes(300 << 20)).hexdigest()


def test_singularity_with_unbound_image_and_broken_labels(tmp_path):
    root = _files(tmp_path / "root", {"/.singularity.d/labels.json": "{broken"})
    env = {"SINGULARITY_CONTAINER": "/scratch/img.sif"}
    out = container.collect(make_ctx(tmp_path, root=str(root), env=env))
    c = out.data["container"]
    assert c["runtime"] == "singularity" and c["image"] == {"path": "/scratch/img.sif"}
    assert out.status == "partial" and out.warnings == [
        "container image /scratch/img.sif is not visible inside the container: no digest (bind its directory, "
        "or set RELAXREPRO_IMAGE=NAME@sha256:...)"]


def test_generate_validates_with_container_and_environment(tmp_path):
    doc = generate(tmp_path, env=clean_env(APPTAINER_CONTAINER="/images/x.sif", APPTAINER_NAME="x.sif"))
    assert doc["container"]["runtime"] == "apptainer"
    probe = doc["collection"]["probes"]["container"]
    assert probe["status"] == "partial"  # the SIF is not visible here: recorded by path, without a digest
    assert probe["warnings"][0].startswith("container image /images/x.sif is not visible inside the container")
    assert doc["environment"]["system"]["libc"]["name"] in ("glibc", "musl")


CONT = FIXTURES / "container"


@pytest.mark.parametrize("name,expect", [
    ("cgroup-v1-docker-elastic.txt",
     {"runtime": "docker", "id": "051e2ee0bce99116029a13df4a9e943137f19f957f38ac02d6bad96f9b700f76"}),
    ("cgroup-v1-docker-systemd-scope-elastic.txt",
     {"runtime": "docker", "id": "cde7c2bab394630a42d73dc610b9c57415dced996106665d427f6d0566594411"}),
    ("cgroup-v1-crio-kubepods-elastic.txt",
     {"runtime": "kubernetes", "id": "2227daf62df6694645fee5df53c1f91271546a9560e8600a525690ae252b7f63"}),
    ("cgroup-v1-docker-centos-neuvector.txt",
     {"runtime": "docker", "id": "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"}),
    ("cgroup-v1-docker-ubuntu-neuvector.txt",
     {"runtime": "docker", "id": "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30"}),
    ("cgroup-v1-docker-in-docker-rancheros-neuvector.txt",
     {"runtime": "docker", "id": "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a"}),
    ("cgroup-v1-kubepods-docker-neuvector.txt",
     {"runtime": "kubernetes", "id": "b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70"}),
    ("cgroup-v1-host-neuvector.txt", {}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_parse_cgroup_captures(name, expect):
    assert container_parse.parse_cgroup((CONT / name).read_text()) == expect


def test_found_some_cgroup_captures():
    assert len(list(CONT.glob("cgroup-*.txt"))) >= 8


@pytest.mark.parametrize("name,expect", [
    ("mountinfo-docker-otel.txt",
     {"runtime": "docker", "id": "be522444b60caf2d3934b8b24b916a8a314f4b68d4595aa419874657e8d103f2"}),
    ("mountinfo-podman-otel.txt",
     {"runtime": "podman", "id": "2a33efc76e519c137fe6093179653788bed6162d4a15e5131c8e835c968afbe6"}),
    ("mountinfo-containerd-kubernetes-otel.txt",
     {"runtime": "containerd", "id": "f2a44bc8e090f93a2b4d7f510bdaff0615ad52906e3287ee956dcf5aa5012a91"}),
], ids=["docker-cgroup-v2", "podman-rootless", "containerd-kubernetes-systemd-driver"])
def test_parse_mountinfo_captures(name, expect):
    assert container_parse.parse_mountinfo((CONT / name).read_text()) == expect


def test_podman_under_cgroup_v2_is_found_by_its_mounts(tmp_path):
    root = _files(tmp_path / "root", {"/run/.containerenv": "", "/proc/self/cgroup": "0::/\n",
                                      "/proc/self/mountinfo": (CONT / "mountinfo-podman-otel.txt").read_text()})
    c = container.collect(make_ctx(tmp_path, root=str(root))).data["container"]
    assert c == {"runtime": "podman", "id": "2a33efc76e519c137fe6093179653788bed6162d4a15e5131c8e835c968afbe6",
                 "evidence": ["/run/.containerenv", "/proc/self/mountinfo"]}


DIGEST = "sha256:" + "d" * 64


@pytest.mark.parametrize("value,expect", [
    ("nvcr.io/nvidia/pytorch:24.05-py3@" + DIGEST, {"name": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": DIGEST}),
    ("localhost:5000/train@" + DIGEST.upper().replace("SHA256", "sha256"), {"name": "localhost:5000/train",
                                                                             "digest": DIGEST}),
    ("pytorch.sif", {"name": "pytorch.sif"}),
], ids=["registry-tag-digest", "port-upper-hex", "name-only"])
def test_parse_image_ref(value, expect):
    assert container_parse.parse_image_ref(value) == expect


@pytest.mark.parametrize("value,message", [
    ("img@sha256:abc", "'img@sha256:abc': the digest must be sha256:<64 hex>"),
    ("img@md5:" + "a" * 32, "'img@md5:%s': the digest must be sha256:<64 hex>" % ("a" * 32)),
    ("@" + DIGEST, "'@%s' is not an image reference (expected NAME@sha256:<64 hex>)" % DIGEST),
    ("two words", "'two words' is not an image reference (expected NAME@sha256:<64 hex>)"),
], ids=["short-hex", "md5", "no-name", "space"])
def test_parse_image_ref_refuses(value, message):
    with pytest.raises(ValueError) as info:
        container_parse.parse_image_ref(value)
    assert str(info.value) == message


def test_relaxrepro_image_wins_over_the_runtime_and_says_so(tmp_path):
    root = _files(tmp_path / "root", {"/run/.containerenv": (SYS / "containerenv-podman.txt").read_text()})
    ref = "registry.example.com/team/train:7@" + DIGEST
    out = container.collect(make_ctx(tmp_path, root=str(root), env={"RELAXREPRO_IMAGE": ref}))
    c = out.data["container"]
    assert c["runtime"] == "podman" and c["evidence"] == ["/run/.containerenv", "RELAXREPRO_IMAGE"]
    assert {k: c["image"][k] for k in ("name", "digest", "digest_source")} == {
        "name": "registry.example.com/team/train:7", "digest": DIGEST, "digest_source": "RELAXREPRO_IMAGE"}
    assert out.status == "ok"
    assert out.warnings == [
        "container image from RELAXREPRO_IMAGE=%s (the runtime said name nvcr.io/nvidia/pytorch:24.05-py3, "
        "digest sha256:9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b)" % ref]


def test_relaxrepro_image_alone_records_the_image(tmp_path):
    (tmp_path / "root").mkdir()
    out = container.collect(make_ctx(tmp_path, root=str(tmp_path / "root"),
                                     env={"RELAXREPRO_IMAGE": "train@" + DIGEST}))
    assert out.data == {"container": {"image": {"name": "train", "digest": DIGEST,
                                                "digest_source": "RELAXREPRO_IMAGE"},
                                      "evidence": ["RELAXREPRO_IMAGE"]}}


def test_a_bad_relaxrepro_image_is_ignored_with_a_warning(tmp_path):
    root = _files(tmp_path / "root", {"/.dockerenv": ""})
    out = container.collect(make_ctx(tmp_path, root=str(root), env={"RELAXREPRO_IMAGE": "train@sha256:123"}))
    assert out.data == {"container": {"runtime": "docker", "evidence": ["/.dockerenv"]}}
    assert out.status == "partial"
    assert out.warnings == ["RELAXREPRO_IMAGE ignored: 'train@sha256:123': the digest must be sha256:<64 hex>"]


@pytest.mark.parametrize("env,expect", [
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "trainer-0", "POD_NAMESPACE": "ml",
      "CONTAINER_IMAGE": "ghcr.io/team/train@" + DIGEST},
     {"name": "ghcr.io/team/train", "digest": DIGEST, "digest_source": "kubernetes"}),
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "POD_NAMESPACE": "ml", "CONTAINER_IMAGE": "ghcr.io/team/train:1"},
     {"name": "ghcr.io/team/train:1"}),
    ({"PYXIS_CONTAINER_IMAGE": "nvcr.io#nvidia/pytorch@" + DIGEST},
     {"name": "nvcr.io#nvidia/pytorch", "digest": DIGEST, "digest_source": "enroot"}),
], ids=["kubernetes-image-with-digest", "kubernetes-image-by-tag", "pyxis-digest"])
def test_images_named_by_the_runtime(tmp_path, env, expect):
    (tmp_path / "root").mkdir()
    out = container.collect(make_ctx(tmp_path, root=str(tmp_path / "root"), env=env))
    assert out.data["container"]["image"] == expect


def test_an_empty_containerenv_is_podman_without_an_image(tmp_path):
    # podman writes the key="value" lines only for --privileged; otherwise the file is empty (podman's own
    # test/e2e/run_test.go, "podman run check /run/.containerenv", asserts exactly that).
    root = _files(tmp_path / "root", {"/run/.containerenv": ""})
    out = container.collect(make_ctx(tmp_path, root=str(root)))
    assert out.data == {"container": {"runtime": "podman", "evidence": ["/run/.containerenv"]}}


def test_a_docker_container_id_is_never_taken_for_a_digest(tmp_path):
    cgroup = (CONT / "cgroup-v1-docker-ubuntu-neuvector.txt").read_text()
    root = _files(tmp_path / "root", {"/.dockerenv": "", "/proc/self/cgroup": cgroup})
    c = container.collect(make_ctx(tmp_path, root=str(root))).data["container"]
    assert c == {"runtime": "docker", "id": "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30",
                 "evidence": ["/.dockerenv", "/proc/self/cgroup"]}
