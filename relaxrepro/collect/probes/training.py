"""The training layout: algorithm, parallel topology and batch sizes, derived after collection.

A pure step over the merged document (``runner.Deriver``): it reads ``config.resolved_args`` (keys in
snake_case) or, failing that, the recorded command through ``argparse_record.parse_argv_args``, and the
world size from the launcher, the scheduler, the training args or Ray's GPUs. Values that do not
fit together are listed in ``training.inconsistencies``; nothing is "fixed".
"""

from __future__ import annotations

import re

from ..arguments import parse_argv_args
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
              "world_size_source", "data_parallel_source", "args_source", "inconsistencies")
"""The ``training`` keys this deriver writes (``update_manifest`` re-derives exactly these)."""
ALGORITHM_KEYS = ("algorithm", "advantage_estimator", "rl_algorithm", "algo", "loss_type")
# Relax/slime-style Ray trainers size the training actor themselves: nodes x GPUs per node.
ACTOR_KEYS = (("actor_num_nodes", "actor_num_gpus_per_node"), ("trainer_nnodes", "trainer_n_gpus_per_node"))


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


def _world_size(doc: Mapping[str, Any], args: Mapping[str, Any]) -> Tuple[Optional[int], Optional[str]]:
    """World size and where it came from, most direct source first."""
    runtime = doc.get("runtime") if isinstance(doc.get("runtime"), dict) else {}
    launcher = runtime.get("launcher") if isinstance(runtime.get("launcher"), dict) else {}
    if _as_int(launcher.get("WORLD_SIZE")):
        return _as_int(launcher["WORLD_SIZE"]), "launcher"
    for nodes_key, gpus_key in ACTOR_KEYS:
        nodes, gpus = _as_int(args.get(nodes_key)), _as_int(args.get(gpus_key))
        if nodes and gpus:
            return nodes * gpus, "args"
    scheduler = doc.get("scheduler") if isinstance(doc.get("scheduler"), dict) else {}
    nodes, gpus = _as_int(scheduler.get("node_count")), _as_int(scheduler.get("gpus_per_node"))
    if nodes and gpus:
        return nodes * gpus, "scheduler"
    totals = runtime.get("totals") if isinstance(runtime.get("totals"), dict) else {}
    gpus = _as_int(totals.get("GPU"))
    if gpus:
        return gpus, "ray"
    return None, None


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
    for axis, names in ALIASES.items():
        value, name = _lookup(args, names)
        if value is not None:
            topology[axis] = value
    for key, names in BATCH_ALIASES.items():
        value, _ = _lookup(args, names)
        if value is not None:
            training[key] = value
    for key in ALGORITHM_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            training["algorithm"] = value
            break

    world, world_source = _world_size(doc, args)
    inconsistencies: List[str] = []
    if topology or training:
        for axis, value in topology.items():
            if value < 1:
                inconsistencies.append("%s parallel size is %d; it must be at least 1" % (axis, value))
        tp, pp, cp = (max(topology.get(a, 1), 1) for a in ("tensor", "pipeline", "context"))
        model = tp * pp * cp
        if world is not None:
            training["world_size"] = world
            training["world_size_source"] = world_source
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
        training["args_source"] = args_source
    if inconsistencies:
        training["inconsistencies"] = inconsistencies
    return training, warnings


def derive(doc: Dict[str, Any], ctx: Context) -> Optional[Outcome]:
    training, warnings = derive_training(doc)
    if not training:
        return Outcome(status="absent")
    return Outcome(data={"training": training}, warnings=warnings)
