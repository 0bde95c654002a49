"""The pure parsers of what a container leaves where its process can see it: the cgroup and mountinfo
paths, podman's ``/run/.containerenv``, Apptainer's labels and an image reference ``NAME@sha256:HEX``."""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict

_CGROUP_RUNTIMES = (
    # (pattern in /proc/self/cgroup, runtime); ids are 64 hex chars.
    (re.compile(r"/kubepods[/.]"), "kubernetes"),
    (re.compile(r"(?:/docker/|docker-)([0-9a-f]{64})"), "docker"),
    (re.compile(r"libpod-([0-9a-f]{64})"), "podman"),
    # With the systemd cgroup driver the id follows a colon: `...pod<uid>.slice:cri-containerd:<id>`.
    (re.compile(r"crio[-:]([0-9a-f]{64})"), "cri-o"),
    (re.compile(r"cri-containerd[-:]([0-9a-f]{64})"), "containerd"),
)
_MOUNTINFO_IDS = (
    # Under cgroup v2 the cgroup path is just ``0::/``; the files a runtime bind-mounts (/etc/hostname,
    # /etc/hosts, /run/.containerenv) or the cgroup v1 mounts of the container still name its id.
    (re.compile(r"/(?:docker|containers)/containers/([0-9a-f]{64})/"), "docker"),
    (re.compile(r"/overlay-containers/([0-9a-f]{64})/userdata/"), "podman"),
    (re.compile(r"cri-containerd[-:]([0-9a-f]{64})"), "containerd"),
    (re.compile(r"crio[-:]([0-9a-f]{64})"), "cri-o"),
)

def parse_cgroup(text: str) -> Dict[str, str]:
    """``/proc/self/cgroup`` -> {runtime, id} from the first line that names a container runtime (its innermost id)."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        for pattern, runtime in _CGROUP_RUNTIMES:
            # The last match: docker in docker (RancherOS) nests ``/docker/OUTER/docker/INNER``, and we are INNER.
            matches = list(pattern.finditer(line))
            if not matches:
                continue
            found.setdefault("runtime", runtime)
            if matches[-1].groups() and "id" not in found:
                found["id"] = matches[-1].group(1)
    return found


def parse_mountinfo(text: str) -> Dict[str, str]:
    """``/proc/self/mountinfo`` -> {runtime, id} from the first runtime whose mounts name a container id."""
    for pattern, runtime in _MOUNTINFO_IDS:
        m = pattern.search(text)
        if m:
            return {"runtime": runtime, "id": m.group(1)}
    return {}


def parse_containerenv(text: str) -> Dict[str, str]:
    """Podman's ``/run/.containerenv``: ``key="value"`` lines (engine, name, id, image, imageid, rootless)."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip().strip('"')
    return out


def parse_labels(text: str) -> Dict[str, str]:
    """Apptainer's ``/.singularity.d/labels.json``: a flat JSON object of strings; {} when unusable."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in sorted(data.items()) if isinstance(v, (str, int, float))}


DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
"""A content digest as the manifest records it."""


def pyxis_name(name: str) -> str:
    """``nvcr.io/nvidia/pytorch:24.05-py3`` as pyxis spells it (``nvcr.io#nvidia/pytorch:24.05-py3``): the
    registry host ends at ``#``, not ``/``."""
    head, slash, rest = name.partition("/")
    if "#" in name or not slash or not ("." in head or ":" in head or head == "localhost"):
        return name
    return head + "#" + rest


def registry_name(name: str) -> str:
    """An image name as a registry client reads it: ``docker://`` dropped, and pyxis/enroot's
    ``[USER@][REGISTRY#]IMAGE`` (``nvcr.io#nvidia/pytorch:24.05-py3``) back to ``nvcr.io/nvidia/pytorch:24.05-py3``
    (the inverse of :func:`pyxis_name`)."""
    ref = name[len("docker://"):] if name.startswith("docker://") else name
    if "#" in ref:
        ref = ref.split("#", 1)[0].rpartition("@")[2] + "/" + ref.split("#", 1)[1]
    return ref


def parse_image_ref(text: str) -> Dict[str, str]:
    """``NAME@sha256:<64 hex>`` (or a bare ``NAME``) -> {name, digest}; ValueError names what is wrong.

    The digest is the image's content digest as a registry gives it (``docker inspect --format
    '{{index .RepoDigests 0}}'``); an id of a running container is not one.
    """
    text = text.strip()
    name, at, digest = text.rpartition("@") if "@" in text else (text, "", "")
    if not name or any(c.isspace() for c in name):
        raise ValueError("%r is not an image reference (expected NAME@sha256:<64 hex>)" % text)
    if not at:
        return {"name": name}
    digest = digest.lower()
    if not DIGEST.match(digest):
        raise ValueError("%r: the digest must be sha256:<64 hex>" % text)
    return {"name": name, "digest": digest}
