"""The command line that runs a replay inside the image a run was recorded in.

:func:`wrapper` is pure: the recorded ``container`` section and the directory to share in, the argv
prefix out (``rerun --container`` puts the replayed command after it; a SLURM batch script writes it on
its run line). :func:`unavailable` then says whether that image can be had on this machine.
"""

from __future__ import annotations

import os
import time

from ..collect import fingerprint
from ..collect.context import which_on_path
from ..collect.probes.container_parse import DIGEST, pyxis_name
from ..std.text import shell_quote

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, List, Mapping, Optional, Sequence

APPTAINER = ("apptainer", "singularity")
OCI = ("docker", "podman", "kubernetes", "cri-o", "containerd")
"""Runtimes whose images a registry serves: replayed with ``podman run`` (podman) or ``docker run``."""
_GPU_FLAGS = {
    # What gives a container the host's GPUs, per runtime family and vendor (pyxis passes the job's own).
    ("apptainer", "nvidia"): ["--nv"], ("apptainer", "amd"): ["--rocm"],
    ("docker", "nvidia"): ["--gpus", "all"], ("podman", "nvidia"): ["--device", "nvidia.com/gpu=all"],
    ("docker", "amd"): ["--device", "/dev/kfd", "--device", "/dev/dri"],
    ("podman", "amd"): ["--device", "/dev/kfd", "--device", "/dev/dri"],
}


class WrapError(ValueError):
    """The recorded container cannot be named exactly; the message is one line and ends with the command
    the user would run instead (unpinned), when there is one."""


def _image(container: Mapping[str, Any]) -> Mapping[str, Any]:
    image = container.get("image")
    return image if isinstance(image, dict) else {}


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _command(argv: Sequence[str]) -> str:
    return " ".join(shell_quote(a) for a in argv)


def wrapper(container: Mapping[str, Any], workspace: str, *, binds: Sequence[str] = (),
            env_names: Sequence[str] = (), gpus: Optional[str] = None, command: Sequence[str] = ()) -> List[str]:
    """The argv prefix that runs a command in the recorded image, ``workspace`` shared at the same path
    (and the working directory); ``binds``: more directories shared the same way; ``env_names``: variables
    passed on from the caller's environment where the runtime does not pass them all (docker, podman);
    ``gpus``: the run's GPU vendor (``hardware.gpu_vendor``: ``nvidia``, ``amd``) when it used GPUs, to
    hand them to the container (``--nv``, ``--gpus all``, ...).

    - apptainer/singularity: ``apptainer exec --bind WORKSPACE SIF`` (the SIF the run recorded, its own sha256
      the digest); with a registry digest (``RELAXREPRO_IMAGE``) ``apptainer exec ... docker://NAME@sha256:...``,
      which apptainer pulls by that digest;
    - docker, podman (and an image of a registry recorded by Kubernetes or ``RELAXREPRO_IMAGE``):
      ``docker run --rm -v WORKSPACE:WORKSPACE -w WORKSPACE NAME@sha256:...``; a podman image id as
      ``sha256:...`` itself;
    - enroot/pyxis: ``srun --container-image=NAME@sha256:... --container-mounts=... --container-workdir=...``.

    Raises :class:`WrapError` when the record does not pin the image by digest (or names no image); its
    message ends with the unpinned command line, ``command`` (the replayed one) included.
    ``container.image.path`` must already be a path of this machine (``<HOME>`` resolved).
    """
    image = _image(container)
    runtime = _text(container.get("runtime"))
    name, digest, path = _text(image.get("name")), _text(image.get("digest")), _text(image.get("path"))
    shared = [workspace] + [b for b in binds if b != workspace]
    if digest and not DIGEST.match(digest):
        raise WrapError("the recorded image digest %r is not sha256:<64 hex>" % digest)
    for what, value in (("name", name), ("path", path)):
        if value and value.startswith("-"):  # the runtime would read it as one of its options
            raise WrapError("the recorded image %s %r starts with '-'" % (what, value))
    family = "apptainer" if runtime in APPTAINER else "podman" if runtime == "podman" else "docker"
    gpu_flags = _GPU_FLAGS.get((family, gpus or ""), [])
    if runtime in APPTAINER and digest and name and image.get("digest_source") not in ("sif", None):
        argv = [runtime, "exec"] + gpu_flags
        for d in shared:
            argv += ["--bind", d]
        return argv + ["docker://%s@%s" % (name, digest)]
    if runtime in APPTAINER:
        if not path:
            raise WrapError("the run's %s image has no recorded path%s" % (
                runtime, " (its name: %s)" % name if name else ""))
        argv = [runtime, "exec"] + gpu_flags
        for d in shared:
            argv += ["--bind", d]
        argv.append(path)
        if not digest:
            raise WrapError("the run's image %s has no recorded digest, so this file may hold another image "
                            "(`relaxrepro fingerprint %s` before a run records one); unpinned: %s"
                            % (path, path, _command(list(argv) + list(command))))
        return argv
    if not name and not digest:
        raise WrapError("the run's container (%s) names no image" % (runtime or "runtime unknown"))
    if runtime == "enroot":
        ref = pyxis_name(name or "") + ("@" + digest if digest else "")
        argv = ["srun", "--container-image=" + ref, "--container-mounts=" + ",".join("%s:%s" % (d, d) for d in shared),
                "--container-workdir=" + workspace]
    else:
        if runtime not in OCI and runtime is not None:
            raise WrapError("the run's container runtime %s cannot be replayed with --container" % runtime)
        if image.get("digest_source") == "podman" or not name:
            ref = digest or ""
        else:
            ref = name + ("@" + digest if digest else "")
        argv = [family, "run", "--rm"] + gpu_flags
        for d in shared:
            argv += ["-v", "%s:%s" % (d, d)]
        argv += ["-w", workspace]
        for n in env_names:
            argv += ["-e", n]
        argv.append(ref)
    if not digest:
        raise WrapError("the run's image %s has no recorded digest, so its name may now give another image "
                        "(record runs with RELAXREPRO_IMAGE=NAME@sha256:...); unpinned: %s"
                        % (name, _command(list(argv) + list(command))))
    return argv


def unavailable(container: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str],
                command: Sequence[str] = ()) -> Optional[str]:
    """Why the image :func:`wrapper` named (``argv``) cannot be had here (its runtime is not on PATH, the SIF
    is missing or holds other content), as one line ending with the command needed (``argv`` + ``command``);
    None when it can. A SIF's digest is read from the fingerprint cache, else hashed once and stored there."""
    needed = _command(list(argv) + list(command))
    if which_on_path(argv[0], env.get("PATH", os.defpath)) is None:
        return "%s is not on PATH here; the replay needs: %s" % (argv[0], needed)
    image = _image(container)
    path = _text(image.get("path"))
    if _text(container.get("runtime")) in APPTAINER and path and path in argv:
        if not os.path.isfile(path):
            return "the run's image %s is not here; the replay needs it at that path: %s" % (path, needed)
        cache = fingerprint.default_cache_path(env)
        digest, why = fingerprint.file_digest(path, cache, deadline=time.monotonic() + 1e9)
        if digest != image.get("digest"):
            return "%s holds %s, the run's image was %s; the replay needs that image: %s" % (
                path, digest or "content that could not be read (%s)" % why, image.get("digest"), needed)
    return None
