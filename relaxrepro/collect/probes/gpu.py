"""The ``gpu`` probe: NVIDIA (nvidia-smi, else the driver's ``/proc`` files) first, AMD (amd-smi, else
rocm-smi) when there is no NVIDIA, else what the machine's driver files say. The sources are the leaf
modules :mod:`.nvidia` and :mod:`.rocm`; neither knows the other."""

from __future__ import annotations

import os
import re
import sys

from ..context import Context
from ..runner import Outcome
from . import nvidia, rocm

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import List

TOOLS = ("nvidia-smi", "amd-smi", "rocm-smi")

DRIVER_PATHS = (
    "/proc/driver/nvidia",  # the NVIDIA kernel module is loaded
    "/dev/nvidiactl",  # NVIDIA's control node: there with the driver, in a container given any GPU
    "/dev/kfd",  # AMD's ROCm compute node (amdgpu with KFD)
    "/dev/dxg",  # WSL 2: GPUs are reached through the Windows driver, whatever the vendor
)
"""A GPU driver's marks besides ``/dev/nvidia<N>``: with none of them and no tool, there is no GPU here."""

NVIDIA_DEVICE = "/dev/nvidia<N>"
"""How the per-GPU nodes are named in the evidence: a container given only GPU 3 has ``/dev/nvidia3``."""


def driver_files(ctx: Context) -> List[str]:
    """The driver paths present under the context's root, as system paths (``/dev/nvidia0``)."""
    found = [p for p in DRIVER_PATHS if os.path.exists(ctx.path(p))]
    try:
        names = os.listdir(ctx.path("/dev"))
    except OSError:
        names = []
    numbered = sorted((int(n[6:]), n) for n in names if re.match(r"^nvidia\d+$", n))
    return found + ["/dev/" + n for _, n in numbered]


def without_tools(found: List[str], *, linux: bool = True) -> Outcome:
    """No GPU tool answered for the machine: zero GPUs when no driver is here either, else unknown.

    Outside Linux the driver files prove nothing (a Mac's GPU has none), so there it stays unknown.
    """
    tools = ", ".join(TOOLS)
    evidence = {"looked_for": list(TOOLS) + list(DRIVER_PATHS) + [NVIDIA_DEVICE], "found": found}
    if found:
        return Outcome(status="absent", data={"hardware": {"gpu_evidence": evidence}},
                       warnings=["no GPU tool found (%s), but a GPU driver is here (%s)" % (tools, ", ".join(found))])
    if not linux:
        return Outcome(status="absent", warnings=["no GPU tool found (%s)" % tools])
    # Nothing to ask and nothing to ask it of: this is an answer (no GPU), not a failure to get one.
    return Outcome(status="absent", data={"hardware": {"gpu_count": 0, "gpus": [], "gpu_evidence": evidence}})


def collect(ctx: Context) -> Outcome:
    """The first vendor whose tools or driver files are here answers for the machine."""
    for source in (nvidia.collect, rocm.collect):
        found = source(ctx)
        if found is not None:
            return found
    return without_tools(driver_files(ctx), linux=sys.platform.startswith("linux"))
