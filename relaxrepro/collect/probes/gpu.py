"""The ``gpu`` probe: NVIDIA (nvidia-smi, else the driver's ``/proc`` files) first, AMD (amd-smi, else
rocm-smi) when there is no NVIDIA, else absent. The sources are the leaf modules :mod:`.nvidia` and
:mod:`.rocm`; neither knows the other."""

from __future__ import annotations

from ..context import Context
from ..runner import Outcome
from . import nvidia, rocm


def collect(ctx: Context) -> Outcome:
    """The first vendor whose tools or driver files are here answers for the machine."""
    for source in (nvidia.collect, rocm.collect):
        found = source(ctx)
        if found is not None:
            return found
    return Outcome(status="absent", warnings=["no GPU tool found (nvidia-smi, amd-smi, rocm-smi)"])
