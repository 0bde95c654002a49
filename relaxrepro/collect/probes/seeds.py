"""Seeds and determinism switches, and a plain answer: was this run set up to rerun bit for bit?

A :class:`runner.Deriver` over the merged document rather than a probe: it reads the resolved
arguments exactly as ``config`` recorded them (API, ``--args-json`` or the parsed command), so the
verdict always matches what the manifest shows, and :func:`assess` can be re-run on an old manifest.
Only the environment and an already-imported torch are read from the live process.
"""

from __future__ import annotations

import sys

from ...manifest.fields import find_seeds
from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional

ENV_SWITCHES = (
    "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "NCCL_ALGO", "NCCL_PROTO",
    "TORCH_DETERMINISTIC", "TORCH_USE_DETERMINISTIC_ALGORITHMS", "CUDNN_DETERMINISTIC", "TF_DETERMINISTIC_OPS",
    "TORCH_CUDNN_V8_API_DISABLED", "NVTE_ALLOW_NONDETERMINISTIC_ALGO", "SGLANG_ENABLE_DETERMINISTIC_INFERENCE",
    "CUDA_LAUNCH_BLOCKING",
)
# cuBLAS documents these two workspace settings as the ones that make its reductions deterministic.
CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")
_DETERMINISTIC_FLAGS = ("deterministic", "use_deterministic_algorithms", "deterministic_mode", "torch_deterministic",
                        "deterministic_algorithms", "full_determinism", "enable_deterministic_inference",
                        "deterministic_inference")
_CUDNN_DETERMINISTIC_FLAGS = ("cudnn_deterministic",)
_CUDNN_BENCHMARK_FLAGS = ("cudnn_benchmark", "benchmark_cudnn")


def _leaf(key: str) -> str:
    return key.split(".")[-1].lower().replace("-", "_")


def _flags(args: Mapping[str, Any], names: tuple, prefix: str = "", depth: int = 0) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if depth > 8:
        return out
    for key, value in args.items():
        name = prefix + str(key)
        if isinstance(value, dict):
            out.update(_flags(value, names, name + ".", depth + 1))
        elif _leaf(str(key)) in names and (value is None or isinstance(value, (bool, int, str))):
            out[name] = value
    return out


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def torch_state(modules: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """Determinism settings of an already-imported torch; None when torch is not imported.

    Never imports torch: a CLI run or a trainer that has not imported it yet gets None.
    """
    torch = modules.get("torch")
    if torch is None:
        return None
    state: Dict[str, Any] = {}
    for name, read in (
        ("deterministic_algorithms", lambda: torch.are_deterministic_algorithms_enabled()),
        ("deterministic_algorithms_warn_only", lambda: torch.is_deterministic_algorithms_warn_only_enabled()),
        ("cudnn_deterministic", lambda: torch.backends.cudnn.deterministic),
        ("cudnn_benchmark", lambda: torch.backends.cudnn.benchmark),
        ("tf32_matmul", lambda: torch.backends.cuda.matmul.allow_tf32),
        ("tf32_cudnn", lambda: torch.backends.cudnn.allow_tf32),
    ):
        try:
            value = read()
        except Exception:  # a half-imported or stubbed torch: record what can be read
            continue
        if isinstance(value, bool):
            state[name] = value
    return state


def assess(
    args: Mapping[str, Any],
    env: Mapping[str, str],
    torch: Optional[Mapping[str, Any]] = None,
    world_size: Optional[int] = None,
) -> Dict[str, Any]:
    """The ``seeds`` section: seeds, switches and ``bit_reproducible`` with what is ``missing``."""
    seeds = find_seeds(args)
    switches = {k: env[k] for k in ENV_SWITCHES if k in env}
    det_flags = _flags(args, _DETERMINISTIC_FLAGS)
    cudnn_det = _flags(args, _CUDNN_DETERMINISTIC_FLAGS)
    cudnn_bench = _flags(args, _CUDNN_BENCHMARK_FLAGS)
    flags = dict(det_flags, **cudnn_det, **cudnn_bench)
    missing: List[str] = []

    if not seeds:
        missing.append("no seed in the resolved arguments (seed, random_seed, data_seed, *_seed)")
    elif any(v is None for v in seeds.values()):
        missing.append("seed argument left unset: %s" % ", ".join(sorted(k for k, v in seeds.items() if v is None)))
    phs = env.get("PYTHONHASHSEED")
    if phs is None or phs == "random":
        missing.append("PYTHONHASHSEED is not set: str hashes (set order, hash-based sharding) differ per process")
    if env.get("CUBLAS_WORKSPACE_CONFIG") not in CUBLAS_DETERMINISTIC:
        missing.append("CUBLAS_WORKSPACE_CONFIG is not :4096:8 or :16:8: cuBLAS may reduce in a varying order")

    torch_det = torch.get("deterministic_algorithms") if torch else None
    deterministic = (torch_det is True) or any(_truthy(v) for v in det_flags.values()) or \
        _truthy(env.get("TORCH_DETERMINISTIC")) or _truthy(env.get("TORCH_USE_DETERMINISTIC_ALGORITHMS"))
    if not deterministic:
        missing.append("deterministic algorithms not enabled (torch.use_deterministic_algorithms(True) "
                       "or a --deterministic flag)")
    bench = (torch or {}).get("cudnn_benchmark") is True or any(_truthy(v) for v in cudnn_bench.values())
    if bench:
        missing.append("cuDNN benchmark mode is on: autotuning may pick different kernels each run")
    cudnn_off = (torch or {}).get("cudnn_deterministic") is False and torch_det is not True and \
        not any(_truthy(v) for v in cudnn_det.values())
    if cudnn_off and deterministic:
        missing.append("torch.backends.cudnn.deterministic is False")
    if world_size is not None and world_size > 1 and not (env.get("NCCL_ALGO") and env.get("NCCL_PROTO")):
        missing.append("NCCL_ALGO and NCCL_PROTO are not both pinned: with %d ranks NCCL may pick another "
                       "reduction order on another topology" % world_size)

    section: Dict[str, Any] = {
        "values": seeds,
        "env": switches,
        "flags": flags,
        "bit_reproducible": not missing,
        "missing": missing,
    }
    if torch is not None:
        section["torch"] = dict(torch)
    return section


def _world_size(doc: Dict[str, Any], env: Mapping[str, str]) -> Optional[int]:
    training = doc.get("training") if isinstance(doc.get("training"), dict) else {}
    for value in (training.get("world_size"), env.get("WORLD_SIZE"), env.get("SLURM_NTASKS")):
        try:
            if value is not None:
                return int(value)
        except (TypeError, ValueError):
            continue
    return None


def derive(doc: Dict[str, Any], ctx: Context) -> Optional[Outcome]:
    """Runs after the probes; adds ``seeds`` unless nothing about the run's setup is known."""
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    args = config.get("resolved_args")
    args = args if isinstance(args, dict) else {}
    # Only the API runs inside the trainer; a CLI's own sys.modules says nothing about the trainer.
    torch = torch_state(sys.modules) if ctx.argv_source == "api" else None
    if not args and torch is None and not any(k in ctx.env for k in ENV_SWITCHES):
        return None
    return Outcome(data={"seeds": assess(args, ctx.env, torch, _world_size(doc, ctx.env))})
