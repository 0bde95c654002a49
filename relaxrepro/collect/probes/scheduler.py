"""The batch scheduler (SLURM) and the process launcher (torchrun, accelerate, deepspeed, mpirun), from env.

Everything here is read from ``ctx.env``: no ``scontrol``/``squeue`` call, so it costs nothing and
works inside containers where the SLURM tools are absent.
"""

from __future__ import annotations

import re

from ..context import Context
from ..runner import Outcome
from .units import to_int

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

# (manifest key, variables in order of preference). Names per sbatch(1) "OUTPUT ENVIRONMENT VARIABLES";
# the older aliases (SLURM_JOBID, SLURM_NNODES, SLURM_NPROCS) are still set by SLURM 23/24.
_SLURM_TEXT: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("job_id", ("SLURM_JOB_ID", "SLURM_JOBID")),
    ("array_job_id", ("SLURM_ARRAY_JOB_ID",)),
    ("array_task_id", ("SLURM_ARRAY_TASK_ID",)),
    ("job_name", ("SLURM_JOB_NAME",)),
    ("partition", ("SLURM_JOB_PARTITION",)),
    ("account", ("SLURM_JOB_ACCOUNT",)),
    ("qos", ("SLURM_JOB_QOS",)),
    ("nodelist", ("SLURM_JOB_NODELIST", "SLURM_NODELIST")),
    ("gpus_per_node_spec", ("SLURM_GPUS_PER_NODE",)),
    ("step_id", ("SLURM_STEP_ID",)),
    ("cluster_name", ("SLURM_CLUSTER_NAME",)),
)
_SLURM_INT: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("node_count", ("SLURM_JOB_NUM_NODES", "SLURM_NNODES")),
    ("ntasks", ("SLURM_NTASKS", "SLURM_NPROCS")),
    ("cpus_per_task", ("SLURM_CPUS_PER_TASK",)),
    # a job that asked with --gres=gpu:N (or --gpus) has no SLURM_GPUS_PER_NODE, only this
    ("gpus_on_node", ("SLURM_GPUS_ON_NODE",)),
    ("procid", ("SLURM_PROCID",)),
    ("localid", ("SLURM_LOCALID",)),
)


def _first(env: Mapping[str, str], names: Tuple[str, ...]) -> Optional[str]:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def count_nodelist(nodelist: str) -> Optional[int]:
    """Hosts in a SLURM hostlist: ``gpu-[001-004,007],cpu01`` -> 6; None when it cannot be read.

    Several bracket groups multiply (``rack[1-2]-n[01-04]`` -> 8), as in ``scontrol show hostnames``.
    """
    total = 0
    for item in _split_top(nodelist.strip()):
        if not item:
            continue
        count = 1
        for group in re.findall(r"\[([^\]]*)\]", item):
            n = 0
            for part in group.split(","):
                bounds = part.split("-")
                if len(bounds) == 1 and bounds[0].isdigit():
                    n += 1
                elif len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
                    lo, hi = int(bounds[0]), int(bounds[1])
                    if hi < lo:
                        return None
                    n += hi - lo + 1
                else:
                    return None
            count *= n
        if item.count("[") != item.count("]"):
            return None
        total += count
    return total or None


def _split_top(text: str) -> List[str]:
    """Split on commas outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_gpus_per_node(spec: str) -> Optional[int]:
    """``SLURM_GPUS_PER_NODE``: ``8``, ``h100:8`` or ``gpu:a100:4`` -> the count."""
    m = re.search(r"(?:^|:)(\d+)(?:\(|$)", spec.strip())
    return int(m.group(1)) if m else None


def parse_tasks_per_node(spec: str) -> Optional[int]:
    """``SLURM_TASKS_PER_NODE``: ``8``, ``8(x2)`` -> 8; None when the nodes run unequal counts (``2(x3),1``).

    sbatch sets it for every job, also one that asked for no task count (and so has no ``SLURM_NTASKS``,
    as a real ``sbatch --wrap`` under SLURM 22.05 shows)."""
    counts = set()
    for part in spec.strip().split(","):
        m = re.match(r"^(\d+)(?:\(x\d+\))?$", part.strip())
        if not m:
            return None
        counts.add(int(m.group(1)))
    return counts.pop() if len(counts) == 1 else None


def parse_slurm(env: Mapping[str, str]) -> Dict[str, Any]:
    """The SLURM job as seen by one of its tasks; ``{}`` outside SLURM."""
    if _first(env, ("SLURM_JOB_ID", "SLURM_JOBID")) is None:
        return {}
    out: Dict[str, Any] = {"type": "slurm"}
    for key, names in _SLURM_TEXT:
        value = _first(env, names)
        if value is not None:
            out[key] = value
    for key, names in _SLURM_INT:  # counts and ranks: a negative one is a lie, left out like a word
        value = _count(_first(env, names))
        if value is not None:
            out[key] = value
    per_node = _count(_first(env, ("SLURM_NTASKS_PER_NODE",)))
    if per_node is None and _first(env, ("SLURM_TASKS_PER_NODE",)) is not None:
        per_node = parse_tasks_per_node(env["SLURM_TASKS_PER_NODE"])
    if per_node is not None:
        out["ntasks_per_node"] = per_node
    spec = out.pop("gpus_per_node_spec", None)
    if spec is not None:
        gpus = parse_gpus_per_node(spec)
        if gpus is not None:
            out["gpus_per_node"] = gpus
    if out.get("nodelist"):
        n = count_nodelist(out["nodelist"])
        if n is not None:
            out["nodelist_count"] = n
    return out


def _count(text: Optional[str]) -> Optional[int]:
    value = to_int(text)
    return value if value is not None and value >= 0 else None


def _launcher_name(env: Mapping[str, str]) -> Optional[str]:
    # accelerate launch runs torchrun underneath, so its own variables are looked at first.
    if any(k.startswith("ACCELERATE_") for k in env) and "LOCAL_RANK" in env:
        return "accelerate"
    # deepspeed's launcher (deepspeed/launcher/launch.py) exports CROSS_RANK/CROSS_SIZE/LOCAL_SIZE.
    if "CROSS_RANK" in env and "LOCAL_SIZE" in env:
        return "deepspeed"
    if "TORCHELASTIC_RUN_ID" in env or "TORCHELASTIC_RESTART_COUNT" in env:
        return "torchrun"
    if "OMPI_COMM_WORLD_SIZE" in env or "PMI_SIZE" in env or "PMIX_RANK" in env:
        return "mpirun"
    if "SLURM_STEP_ID" in env and "SLURM_PROCID" in env:
        return "srun"
    return None


# Launchers that do not set the torch.distributed names: where the same facts are (Open MPI / MPICH /
# PMIx, and srun starting one process per GPU, as Megatron-LM and Lightning read them).
_FALLBACK = {
    "mpirun": {
        "WORLD_SIZE": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
        "RANK": ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"),
        "LOCAL_RANK": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"),
        "LOCAL_WORLD_SIZE": ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
    },
    "srun": {
        "WORLD_SIZE": ("SLURM_NTASKS", "SLURM_NPROCS"),
        "RANK": ("SLURM_PROCID",),
        "LOCAL_RANK": ("SLURM_LOCALID",),
        "LOCAL_WORLD_SIZE": ("SLURM_NTASKS_PER_NODE",),
    },
}


def parse_launcher(env: Mapping[str, str]) -> Dict[str, Any]:
    """torch.distributed-style variables and the launcher that set them; ``{}`` when none is set."""
    out: Dict[str, Any] = {}
    name = _launcher_name(env)
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        names = (key,) + _FALLBACK.get(name or "", {}).get(key, ())
        value = to_int(_first(env, names))
        if value is not None:
            out[key] = value
    # torchrun takes every option from PET_<OPTION> too: a job script may export the node and process
    # counts instead of passing --nnodes/--nproc-per-node (an elastic "1:4" is not a count: left out).
    for key in ("PET_NNODES", "PET_NPROC_PER_NODE"):
        value = to_int(env.get(key))
        if value is not None:
            out[key] = value
    if env.get("MASTER_ADDR", "").strip():
        out["MASTER_ADDR"] = env["MASTER_ADDR"].strip()
    if name is not None and out:
        out["name"] = name
    return out


def collect(ctx: Context) -> Outcome:
    slurm = parse_slurm(ctx.env)
    launcher = parse_launcher(ctx.env)
    data: Dict[str, Any] = {}
    if slurm:
        data["scheduler"] = slurm
    if launcher:
        data["runtime"] = {"launcher": launcher}
    return Outcome(data=data, status="ok" if data else "absent")
