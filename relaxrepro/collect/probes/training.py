"""The training layout: algorithm, parallel topology and batch sizes, derived after collection.

A pure step over the merged document (``runner.Deriver``): it reads ``config.resolved_args`` (keys in
snake_case) or, failing that, the recorded command through ``arguments.parse_argv_args``, and the
world size from the launcher, the training args, the launcher's options, the scheduler or Ray's GPUs.
Where each number came from is kept (``world_size_from``, ``topology_from``). Values that do not fit
together are listed in ``training.inconsistencies``; nothing is "fixed".
"""

from __future__ import annotations

import re

from ..arguments import parse_argv_args, parse_launcher_args
from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

# Megatron-LM / Relax (Megatron-based) names first, then the short spellings of other launchers' CLIs.
ALIASES: Dict[str, Tuple[str, ...]] = {
    "tensor": ("tensor_model_parallel_size", "tensor_parallel_size", "tp_size", "tp"),
    "pipeline": ("pipeline_model_parallel_size", "pipeline_parallel_size", "pp_size", "pp"),
    "context": ("context_parallel_size", "cp_size", "cp"),
    "expert": ("expert_model_parallel_size", "expert_parallel_size", "ep_size", "ep"),
    "data": ("data_parallel_size", "dp_size", "dp"),
}
BATCH_ALIASES: Dict[str, Tuple[str, ...]] = {
    "global_batch_size": ("global_batch_size", "train_batch_size", "gbs"),
    "micro_batch_size": ("micro_batch_size", "train_micro_batch_size_per_gpu", "per_device_train_batch_size",
                         "mbs"),
}
OWNED_KEYS = ("algorithm", "parallel_topology", "global_batch_size", "micro_batch_size", "world_size",
              "world_size_source", "world_size_from", "data_parallel_source", "topology_from", "args_source",
              "inconsistencies")
"""The ``training`` keys this deriver writes (``update_manifest`` re-derives exactly these)."""
ALGORITHM_KEYS = ("algorithm", "advantage_estimator", "rl_algorithm", "algo", "loss_type")
WORLD_KEYS = ("world_size",)
"""Training args that give the world size itself (``--world-size``, ``--world_size``)."""
# Nodes x processes per node, as training args: Relax/slime-style Ray trainers size the training actor
# themselves; verl's Hydra ``trainer.nnodes``; NeMo/Lightning ``trainer.num_nodes`` x ``trainer.devices``;
# scripts that take torchrun's own names.
ACTOR_KEYS = (("actor_num_nodes", "actor_num_gpus_per_node"), ("trainer_nnodes", "trainer_n_gpus_per_node"),
              ("trainer.nnodes", "trainer.n_gpus_per_node"), ("trainer.num_nodes", "trainer.devices"),
              ("nnodes", "nproc_per_node"))


def _as_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.match(r"^\s*\d+\s*$", value):
        return int(value)
    return None


def _lookup(args: Mapping[str, Any], names: Sequence[str]) -> Tuple[Optional[int], Optional[str]]:
    for name in names:
        if name in args:
            value = _as_int(args[name])
            if value is not None:
                return value, name
    return None, None


def launcher_world_size(argv: Sequence[str], launcher_env: Mapping[str, Any]
                        ) -> Tuple[Optional[int], Optional[str]]:
    """World size from the launcher's own options in the recorded command (and torchrun's ``PET_*``
    variables, which stand for its options): ``(size, how)``, or ``(None, None)``. Pure."""
    name, opts = parse_launcher_args(argv)
    if name == "torchrun":
        nproc = _as_int(opts.get("nproc_per_node"))
        nproc_from = "--nproc-per-node"
        if nproc is None and "nproc_per_node" not in opts:
            nproc, nproc_from = _as_int(launcher_env.get("PET_NPROC_PER_NODE")), "PET_NPROC_PER_NODE"
        if "nnodes" in opts:  # "2", or "1:4" (elastic: the size is only known at run time)
            nnodes, nnodes_from = _as_int(opts["nnodes"]), "--nnodes"
        elif opts.get("standalone") is True:
            nnodes, nnodes_from = 1, "--standalone"
        elif "PET_NNODES" in launcher_env:
            nnodes, nnodes_from = _as_int(launcher_env["PET_NNODES"]), "PET_NNODES"
        else:
            nnodes, nnodes_from = 1, "--nnodes default 1"
        if nproc and nnodes:
            return nnodes * nproc, "torchrun %s x %s" % (nnodes_from, nproc_from)
    elif name == "deepspeed":
        nodes, gpus = _as_int(opts.get("num_nodes")), _as_int(opts.get("num_gpus"))
        if nodes and gpus and nodes > 0 and gpus > 0:
            return nodes * gpus, "deepspeed --num_nodes x --num_gpus"
    elif name == "accelerate":  # --num_processes is the total over all machines
        total = _as_int(opts.get("num_processes"))
        if total:
            return total, "accelerate --num_processes"
    elif name == "mpirun":  # one rank per process
        for key in ("np", "n"):
            total = _as_int(opts.get(key))
            if total:
                return total, "mpirun -%s" % key
    elif name is None:
        nnodes, nproc = _as_int(launcher_env.get("PET_NNODES")), _as_int(launcher_env.get("PET_NPROC_PER_NODE"))
        if nnodes and nproc:
            return nnodes * nproc, "PET_NNODES x PET_NPROC_PER_NODE"
    return None, None


def _world_size(doc: Mapping[str, Any], args: Mapping[str, Any]) -> Tuple[Optional[int], Optional[str], str]:
    """World size, its source (``launcher``, ``args``, ``scheduler``, ``ray``) and the exact field(s) it
    was read from, most direct source first: this process's own ``WORLD_SIZE``, the training args,
    the launcher's options, then what the job or the cluster offers (which may be more than the run
    uses, so they come last)."""
    runtime = doc.get("runtime") if isinstance(doc.get("runtime"), dict) else {}
    launcher = runtime.get("launcher") if isinstance(runtime.get("launcher"), dict) else {}
    if _as_int(launcher.get("WORLD_SIZE")):
        return _as_int(launcher["WORLD_SIZE"]), "launcher", "WORLD_SIZE"
    value, name = _lookup(args, WORLD_KEYS)
    if value:
        return value, "args", name or ""
    for nodes_key, gpus_key in ACTOR_KEYS:
        nodes, gpus = _as_int(args.get(nodes_key)), _as_int(args.get(gpus_key))
        if nodes and gpus and nodes > 0 and gpus > 0:  # Lightning's devices=-1 means "all": unknown here
            return nodes * gpus, "args", "%s x %s" % (nodes_key, gpus_key)
    command = doc.get("command") if isinstance(doc.get("command"), dict) else {}
    argv = command.get("argv") if isinstance(command.get("argv"), list) else []
    world, how = launcher_world_size([str(a) for a in argv], launcher)
    if world:
        return world, "launcher", how or ""
    scheduler = doc.get("scheduler") if isinstance(doc.get("scheduler"), dict) else {}
    nodes, gpus = _as_int(scheduler.get("node_count")), _as_int(scheduler.get("gpus_per_node"))
    if nodes and gpus:
        return nodes * gpus, "scheduler", "node_count x gpus_per_node"
    totals = runtime.get("totals") if isinstance(runtime.get("totals"), dict) else {}
    gpus = _as_int(totals.get("GPU"))
    if gpus:
        return gpus, "ray", "totals.GPU"
    return None, None, ""


def derive_training(doc: Mapping[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """The ``training`` section (possibly empty) and warnings, from a merged document."""
    warnings: List[str] = []
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    resolved = config.get("resolved_args")
    if isinstance(resolved, dict):
        args: Dict[str, Any] = dict(resolved)
        args_source = "resolved_args"
    else:
        command = doc.get("command") if isinstance(doc.get("command"), dict) else {}
        argv = command.get("argv") if isinstance(command.get("argv"), list) else []
        args = parse_argv_args([str(a) for a in argv])
        args_source = "argv"

    training: Dict[str, Any] = {}
    topology: Dict[str, int] = {}
    topology_from: Dict[str, str] = {}
    for axis, names in ALIASES.items():
        value, name = _lookup(args, names)
        if value is not None:
            topology[axis] = value
            topology_from[axis] = name or ""
    for key, names in BATCH_ALIASES.items():
        value, _ = _lookup(args, names)
        if value is not None:
            training[key] = value
    for key in ALGORITHM_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            training["algorithm"] = value
            break

    world, world_source, world_from = _world_size(doc, args)
    inconsistencies: List[str] = []
    if topology or training:
        for axis, value in topology.items():
            if value < 1:
                inconsistencies.append("%s parallel size is %d; it must be at least 1" % (axis, value))
        # Megatron's layout: world = TP x PP x CP x DP. Expert parallelism is carved out of DP x CP for
        # the MoE layers only (expert-data-parallel = world / (ETP x EP x PP)), so EP divides nothing here.
        tp, pp, cp = (max(topology.get(a, 1), 1) for a in ("tensor", "pipeline", "context"))
        model = tp * pp * cp
        if world is not None:
            training["world_size"] = world
            training["world_size_source"] = world_source
            training["world_size_from"] = world_from
            if world % model:
                inconsistencies.append(
                    "world size %d is not divisible by TP*PP*CP = %d*%d*%d = %d" % (world, tp, pp, cp, model))
            elif "data" in topology:
                if topology["data"] * model != world:
                    inconsistencies.append(
                        "data parallel %d x TP*PP*CP %d = %d, but the world size is %d (%s)"
                        % (topology["data"], model, topology["data"] * model, world, world_source))
            else:
                topology["data"] = world // model
                topology_from["data"] = "world_size / (tensor x pipeline x context)"
                training["data_parallel_source"] = "derived"
        if "data" in topology and "data_parallel_source" not in training:
            training["data_parallel_source"] = "args"
        gbs, mbs, dp = training.get("global_batch_size"), training.get("micro_batch_size"), topology.get("data")
        if gbs is not None and mbs and dp and gbs % (mbs * dp):
            inconsistencies.append(
                "global batch size %d is not divisible by micro batch size x data parallel = %d x %d"
                % (gbs, mbs, dp))
        if topology:
            training["parallel_topology"] = topology
            training["topology_from"] = topology_from
        training["args_source"] = args_source
    if inconsistencies:
        training["inconsistencies"] = inconsistencies
    return training, warnings


def derive(doc: Dict[str, Any], ctx: Context) -> Optional[Outcome]:
    training, warnings = derive_training(doc)
    if not training:
        return Outcome(status="absent")
    return Outcome(data={"training": training}, warnings=warnings)
