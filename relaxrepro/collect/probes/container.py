"""The container the run is in, if any: Apptainer/Singularity, Docker, Podman, Kubernetes, enroot/pyxis.

Only marks a container leaves where its process can see them (environment variables, marker files,
cgroup and mount paths) are read; nothing is asked of a container engine. An Apptainer image is
described by path, size and mtime: hashing a multi-GB SIF at every launch would cost seconds.
"""

from __future__ import annotations

import json
import os
import re

from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional

_CGROUP_RUNTIMES = (
    # (pattern in /proc/self/cgroup, runtime); ids are 64 hex chars.
    (re.compile(r"/kubepods[/.]"), "kubernetes"),
    (re.compile(r"(?:/docker/|docker-)([0-9a-f]{64})"), "docker"),
    (re.compile(r"libpod-([0-9a-f]{64})"), "podman"),
    (re.compile(r"crio-([0-9a-f]{64})"), "cri-o"),
    (re.compile(r"cri-containerd-([0-9a-f]{64})"), "containerd"),
)
_MOUNTINFO_ID = re.compile(r"/(?:docker|containers)/containers/([0-9a-f]{64})/")
"""Under cgroup v2 the cgroup path is just ``0::/``; Docker's bind mounts of /etc/hostname etc. still name the id."""

_MAX_LABELS = 40


def parse_cgroup(text: str) -> Dict[str, str]:
    """``/proc/self/cgroup`` -> {runtime, id} from the first line that names a container runtime."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        for pattern, runtime in _CGROUP_RUNTIMES:
            m = pattern.search(line)
            if not m:
                continue
            found.setdefault("runtime", runtime)
            if m.groups() and "id" not in found:
                found["id"] = m.group(1)
    return found


def parse_mountinfo_id(text: str) -> Optional[str]:
    m = _MOUNTINFO_ID.search(text)
    return m.group(1) if m else None


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


def _image_file(ctx: Context, path: str) -> Dict[str, Any]:
    info: Dict[str, Any] = {"path": path}
    try:
        st = os.stat(ctx.path(path))
    except OSError:
        return info  # the host path is often not bound into the container
    info["size_bytes"] = st.st_size
    info["mtime"] = int(st.st_mtime)
    return info


def _apptainer(ctx: Context) -> Optional[Dict[str, Any]]:
    env = ctx.env
    name = "apptainer" if env.get("APPTAINER_CONTAINER") or env.get("APPTAINER_NAME") else None
    if name is None and (env.get("SINGULARITY_CONTAINER") or env.get("SINGULARITY_NAME")):
        name = "singularity"
    labels_text = ctx.read_text("/.singularity.d/labels.json")
    if name is None and labels_text is None and not os.path.isdir(ctx.path("/.singularity.d")):
        return None
    out: Dict[str, Any] = {"runtime": name or "apptainer"}
    image_path = env.get("APPTAINER_CONTAINER") or env.get("SINGULARITY_CONTAINER")
    image: Dict[str, Any] = _image_file(ctx, image_path) if image_path else {}
    image_name = env.get("APPTAINER_NAME") or env.get("SINGULARITY_NAME")
    if image_name:
        image["name"] = image_name
    if labels_text:
        labels = parse_labels(labels_text)
        if labels:
            image["labels"] = dict(list(labels.items())[:_MAX_LABELS])
    if image:
        out["image"] = image
    return out


def _pyxis(ctx: Context) -> Optional[Dict[str, Any]]:
    # pyxis exports its SPANK options to the job (`_SLURM_SPANK_OPTION_pyxis_container_image`);
    # PYXIS_CONTAINER_IMAGE is its environment form of --container-image.
    env = ctx.env
    image = env.get("PYXIS_CONTAINER_IMAGE")
    for key in sorted(env):
        if key.endswith("SPANK_OPTION_pyxis_container_image") and env[key]:
            image = image or env[key]
    rootfs = env.get("ENROOT_ROOTFS")
    if not image and not rootfs:
        return None
    out: Dict[str, Any] = {"runtime": "enroot"}
    if image:
        out["image"] = {"name": image}
    return out


def _kubernetes(ctx: Context) -> Optional[Dict[str, Any]]:
    env = ctx.env
    ns_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    namespace = env.get("POD_NAMESPACE") or (ctx.read_text(ns_file) or "").strip() or None
    if not env.get("KUBERNETES_SERVICE_HOST") and namespace is None:
        return None
    out: Dict[str, Any] = {}
    # The pod name is the hostname unless the pod spec sets one; downward-API variables win.
    pod = env.get("POD_NAME") or env.get("HOSTNAME")
    if pod:
        out["pod"] = pod
    if namespace:
        out["namespace"] = namespace
    if env.get("NODE_NAME"):
        out["node"] = env["NODE_NAME"]
    return out


def collect(ctx: Context) -> Outcome:
    container: Dict[str, Any] = {}
    evidence: List[str] = []

    app = _apptainer(ctx)
    if app:
        container.update(app)
        evidence.append("apptainer environment or /.singularity.d")
    pyx = _pyxis(ctx) if not container else None
    if pyx:
        container.update(pyx)
        evidence.append("enroot/pyxis environment")

    containerenv = ctx.read_text("/run/.containerenv")
    if containerenv is not None:
        evidence.append("/run/.containerenv")
        info = parse_containerenv(containerenv)
        container.setdefault("runtime", "podman")
        if info.get("id"):
            container.setdefault("id", info["id"])
        image = {k: info[k] for k in ("image", "imageid") if info.get(k)}
        if image:
            img = container.setdefault("image", {})
            img.setdefault("name", image.get("image"))
            if image.get("imageid"):
                img.setdefault("id", image["imageid"])
        if info.get("engine"):
            container["engine"] = info["engine"]
        if info.get("rootless"):
            container["rootless"] = info["rootless"] == "1"
    if os.path.exists(ctx.path("/.dockerenv")):
        evidence.append("/.dockerenv")
        container.setdefault("runtime", "docker")

    cgroup = parse_cgroup(ctx.read_text("/proc/self/cgroup") or "")
    if cgroup:
        evidence.append("/proc/self/cgroup")
        container.setdefault("runtime", cgroup["runtime"])
        if cgroup.get("id"):
            container.setdefault("id", cgroup["id"])
    if "id" not in container and container.get("runtime") in ("docker", "podman", None):
        cid = parse_mountinfo_id(ctx.read_text("/proc/self/mountinfo", limit=4 << 20) or "")
        if cid:
            evidence.append("/proc/self/mountinfo")
            container.setdefault("runtime", "docker")
            container["id"] = cid

    k8s = _kubernetes(ctx)
    if k8s is not None:
        evidence.append("kubernetes environment or service account")
        container["kubernetes"] = k8s
        container.setdefault("runtime", "kubernetes")

    if not container:
        return Outcome(status="absent", warnings=["no container detected"])
    container["evidence"] = evidence
    if isinstance(container.get("image"), dict):
        container["image"] = {k: v for k, v in container["image"].items() if v is not None}
    return Outcome(data={"container": container})
