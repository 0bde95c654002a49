"""The container the run is in, if any: Apptainer/Singularity, Docker, Podman, Kubernetes, enroot/pyxis.

Only marks a container leaves where its process can see them (environment variables, marker files,
cgroup and mount paths) are read; nothing is asked of a container engine (the parsers are in
:mod:`.container_parse`). The image is identified by content digest wherever one is really there:

- ``RELAXREPRO_IMAGE=NAME@sha256:HEX``, set by the user (or the image's own ``ENV``), always wins;
- an Apptainer SIF is hashed through the fingerprint cache: the first launch hashes it when that fits
  the probe's budget (or ``relaxrepro fingerprint SIF`` did), every later one reads the cache;
- podman's ``/run/.containerenv`` names the image id (the sha256 of the image's configuration), in a
  ``--privileged`` container only: elsewhere podman leaves the file empty;
- a Kubernetes pod spec can hand its image to the container (``env: CONTAINER_IMAGE``, often from the
  same value as ``image:``); with an ``@sha256:`` in it, that is the digest;
- a pyxis ``--container-image`` that names a digest.

Docker exposes no image digest inside a container; the cgroup's container id is never taken for one.
"""

from __future__ import annotations

import os
import time

from .. import fingerprint
from ..context import Context
from ..runner import Outcome
from .container_parse import parse_cgroup, parse_containerenv, parse_image_ref, parse_labels, parse_mountinfo

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional

_MAX_LABELS = 40
SIF_HASH_S = 1.0
"""At most this many seconds of a launch go to hashing an uncached SIF (one of up to ~250 MB, see
:data:`~relaxrepro.collect.fingerprint.HASH_RATE`): a larger image costs a lookup, and gets its digest from
``relaxrepro fingerprint`` ahead of time."""
IMAGE_ENV = "RELAXREPRO_IMAGE"
K8S_IMAGE_ENV = ("CONTAINER_IMAGE", "POD_IMAGE")
"""What a pod spec sets to hand its image to the container (the downward API has no field for it)."""


def _image_file(ctx: Context, path: str, warnings: List[str], *, digest_given: bool) -> Dict[str, Any]:
    """A SIF by path, size, mtime and (unless ``RELAXREPRO_IMAGE`` gives the digest) its sha256."""
    info: Dict[str, Any] = {"path": path}
    full = ctx.path(path)
    try:
        st = os.stat(full)
    except OSError:  # the host path is often not bound into the container
        warnings.append("container image %s is not visible inside the container: no digest (bind its directory, "
                        "or set %s=NAME@sha256:...)" % (path, IMAGE_ENV))
        return info
    info["size_bytes"] = st.st_size
    info["mtime"] = int(st.st_mtime)
    if digest_given:
        return info
    budget = min(ctx.budget() - 0.5, SIF_HASH_S)
    digest, why = fingerprint.file_digest(full, fingerprint.default_cache_path(ctx.env),
                                          deadline=time.monotonic() + max(budget, 0.0))
    if digest:
        info["digest"] = digest
        info["digest_source"] = "sif"
    else:
        warnings.append("container image %s: no digest (%s); `relaxrepro fingerprint %s` hashes it once "
                        "into the cache, or set %s=NAME@sha256:..." % (path, why, path, IMAGE_ENV))
    return info


def _apptainer(ctx: Context, warnings: List[str], *, digest_given: bool) -> Optional[Dict[str, Any]]:
    env = ctx.env
    name = "apptainer" if env.get("APPTAINER_CONTAINER") or env.get("APPTAINER_NAME") else None
    if name is None and (env.get("SINGULARITY_CONTAINER") or env.get("SINGULARITY_NAME")):
        name = "singularity"
    labels_text = ctx.read_text("/.singularity.d/labels.json")
    if name is None and labels_text is None and not os.path.isdir(ctx.path("/.singularity.d")):
        return None
    out: Dict[str, Any] = {"runtime": name or "apptainer"}
    image_path = env.get("APPTAINER_CONTAINER") or env.get("SINGULARITY_CONTAINER")
    image: Dict[str, Any] = _image_file(ctx, image_path, warnings, digest_given=digest_given) if image_path else {}
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
        out["image"] = _named(image, "enroot")
    return out


def _named(reference: str, source: str) -> Dict[str, Any]:
    """An image named by a runtime: its digest when the name pins one (``NAME@sha256:HEX``)."""
    try:
        ref = parse_image_ref(reference)
    except ValueError:
        return {"name": reference}
    if "digest" not in ref:
        return {"name": reference}
    return {"name": ref["name"], "digest": ref["digest"], "digest_source": source}


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


def _podman(info: Dict[str, str], container: Dict[str, Any]) -> None:
    container.setdefault("runtime", "podman")
    if info.get("id"):
        container.setdefault("id", info["id"])
    if info.get("image") or info.get("imageid"):
        img = container.setdefault("image", {})
        img.setdefault("name", info.get("image"))
        imageid = (info.get("imageid") or "").lower()
        if imageid:
            img.setdefault("id", imageid)
            if "digest" not in img and len(imageid) == 64 and all(c in "0123456789abcdef" for c in imageid):
                # podman's image id is the sha256 of the image's configuration: a content digest of
                # the image itself (not of the manifest a registry serves), which `podman run` accepts.
                img["digest"], img["digest_source"] = "sha256:" + imageid, "podman"
    if info.get("engine"):
        container["engine"] = info["engine"]
    if info.get("rootless"):
        container["rootless"] = info["rootless"] == "1"


def _explicit(ctx: Context, container: Dict[str, Any], evidence: List[str], notes: List[str],
              warnings: List[str]) -> None:
    """``RELAXREPRO_IMAGE`` replaces whatever the runtime said about the image, and says so (in ``notes``)."""
    value = ctx.env.get(IMAGE_ENV)
    if not value:
        return
    try:
        ref = parse_image_ref(value)
    except ValueError as exc:
        warnings.append("%s ignored: %s" % (IMAGE_ENV, exc))
        return
    img = container.get("image") if isinstance(container.get("image"), dict) else {}
    replaced = [("%s %s" % (k, img[k])) for k in ("name", "digest") if img.get(k) and img[k] != ref.get(k)]
    new = {k: v for k, v in img.items() if k in ("path", "size_bytes", "mtime", "labels", "id")}
    new.update(ref)
    new["digest_source"] = IMAGE_ENV if "digest" in ref else None
    container["image"] = new
    evidence.append(IMAGE_ENV)
    notes.append("container image from %s=%s%s" % (
        IMAGE_ENV, value.strip(), " (the runtime said %s)" % ", ".join(replaced) if replaced else ""))
    if "digest" not in ref:
        warnings.append("%s names no digest: the image is recorded by name only" % IMAGE_ENV)


def collect(ctx: Context) -> Outcome:
    container: Dict[str, Any] = {}
    evidence: List[str] = []
    warnings: List[str] = []

    try:
        digest_given = "digest" in parse_image_ref(ctx.env.get(IMAGE_ENV) or "")
    except ValueError:
        digest_given = False
    app = _apptainer(ctx, warnings, digest_given=digest_given)
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
        _podman(parse_containerenv(containerenv), container)
    if os.path.exists(ctx.path("/.dockerenv")):
        evidence.append("/.dockerenv")
        container.setdefault("runtime", "docker")

    cgroup = parse_cgroup(ctx.read_text("/proc/self/cgroup") or "")
    if cgroup:
        evidence.append("/proc/self/cgroup")
        container.setdefault("runtime", cgroup["runtime"])
        if cgroup.get("id"):
            container.setdefault("id", cgroup["id"])
    if "id" not in container and container.get("runtime") in ("docker", "podman", "kubernetes", None):
        mounted = parse_mountinfo(ctx.read_text("/proc/self/mountinfo", limit=4 << 20) or "")
        if mounted:
            evidence.append("/proc/self/mountinfo")
            container.setdefault("runtime", mounted["runtime"])
            container["id"] = mounted["id"]

    k8s = _kubernetes(ctx)
    if k8s is not None:
        evidence.append("kubernetes environment or service account")
        container["kubernetes"] = k8s
        container.setdefault("runtime", "kubernetes")
        image = next((ctx.env[k] for k in K8S_IMAGE_ENV if ctx.env.get(k)), None)
        if image and "digest" not in (container.get("image") or {}):
            container["image"] = dict(container.get("image") or {}, **_named(image, "kubernetes"))

    notes: List[str] = []
    _explicit(ctx, container, evidence, notes, warnings)
    if not container:
        return Outcome(status="absent", warnings=["no container detected"])
    container["evidence"] = evidence
    if isinstance(container.get("image"), dict):
        container["image"] = {k: v for k, v in container["image"].items() if v is not None}
    return Outcome(data={"container": container}, warnings=notes + warnings, status="partial" if warnings else "ok")
