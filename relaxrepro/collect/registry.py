"""The probe registry: one named collector per source; the name is its key under ``collection.probes``.

Each probe module pairs pure ``parse_*`` functions (tested on real captured output) with a thin
``collect(ctx) -> Outcome`` that only gathers the text and hands it over.
"""

from __future__ import annotations

from .probes import (
    command,
    config,
    container,
    cuda,
    data,
    git,
    gpu,
    lineage,
    packages,
    python,
    ray,
    scheduler,
    seeds,
    system,
    training,
)
from .runner import Deriver, Probe

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Tuple

PROBES: Tuple[Probe, ...] = (
    Probe("command", command.collect),
    Probe("python", python.collect),
    Probe("system", system.collect),
    Probe("git", git.collect),
    Probe("gpu", gpu.collect),
    Probe("packages", packages.collect),
    Probe("cuda", cuda.collect),
    Probe("container", container.collect),
    Probe("config", config.collect),
    Probe("data", data.collect),
    Probe("ray", ray.collect),
    Probe("scheduler", scheduler.collect),
)

DERIVERS: Tuple[Deriver, ...] = (
    Deriver("cuda-consistency", cuda.derive),
    Deriver("seeds", seeds.derive),
    Deriver("training", training.derive),
    Deriver("lineage", lineage.derive),
)


def _check_unique() -> None:
    names = [p.name for p in PROBES] + [d.name for d in DERIVERS]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:  # pragma: no cover - guards the registry against a copy-paste clash
        raise RuntimeError("duplicate probe names: %s" % ", ".join(dupes))


_check_unique()
