"""Collecting a node's fragment: on this node (``generate --node-report``) or on every alive Ray node
from inside the trainer (``update_manifest(per_node=True)``). The format and the merge are
:mod:`relaxrepro.manifest.nodes`.
"""

from __future__ import annotations

import importlib
import sys
import time

from .._version import __version__
from ..manifest.model import RUN_ID_ENV, Manifest
from ..manifest.nodes import FRAGMENT_VERSION, check_fragment, merge_fragments, node_name, slurm_run_id
from ..manifest.redact import redact_document
from . import registry, runner
from .context import DEADLINE, Context, policy_of

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Tuple

NODE_PROBES: Tuple[str, ...] = ("python", "system", "gpu", "packages", "cuda", "container")
"""Registry probes that describe a node. Names not registered (yet) are skipped; command, git and
config describe the run, which rank 0 records once."""

PER_NODE_DEADLINE = 10.0
"""Seconds ``update_manifest(per_node=True)`` waits for all nodes: a Ray worker process has to start
on each node first (1-2 s each on a busy 2-core machine), then the probes' own 6 s deadline."""


def run_id_from_env(env: Dict[str, str]) -> Optional[str]:
    """The run id every node agrees on without talking: RELAXREPRO_RUN_ID, else the SLURM job."""
    if env.get(RUN_ID_ENV):
        return env[RUN_ID_ENV]
    if env.get("SLURM_JOB_ID"):
        return slurm_run_id(env["SLURM_JOB_ID"])
    return None


def collect_fragment(ctx: Context) -> Manifest:
    """Run the node-level probes and return this node's fragment, redacted once with ``ctx.redactor``.

    Like :func:`relaxrepro.collect.assemble.build`, the result's ``redacted_by`` names that policy, so
    ``generate --node-report`` writes it without a second pass. ``ctx.options``: ``run_id`` (required
    to merge later), ``ray_node_id``, ``role``, ``source``.
    """
    run_id = str(ctx.options.get("run_id") or run_id_from_env(ctx.env) or "")
    probes = [p for p in registry.PROBES if p.name in NODE_PROBES]
    sections, collection = runner.run_probes(probes, ctx)
    hostname = ctx.machine.hostname or "unknown"
    ray_node_id = ctx.options.get("ray_node_id")
    node: Dict[str, Any] = {"name": node_name(run_id, hostname, ray_node_id),
                            "source": str(ctx.options.get("source") or "cli")}
    if ray_node_id:
        node["ray_node_id"] = str(ray_node_id)
    if ctx.options.get("role"):
        node["role"] = str(ctx.options["role"])
    for var, key in (("SLURM_NODEID", "slurm_node_index"), ("SLURM_PROCID", "slurm_procid")):
        if str(ctx.env.get(var, "")).isdigit():
            node[key] = int(ctx.env[var])
    environment = dict(sections.get("environment") or {})
    environment.pop("packages", None)  # the digest and key packages say enough; rank 0 has the full list
    system = environment.get("system")
    if isinstance(system, dict):
        system = dict(system)
        system.pop("hostname", None)  # the node's name stands for it
        environment["system"] = system
    doc: Dict[str, Any] = {
        "fragment_version": FRAGMENT_VERSION,
        "kind": "node",
        "run_id": run_id,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "node": node,
        "hardware": sections.get("hardware") or {},
        "environment": environment,
        "collection": {"probes": collection, "seconds": round(ctx.clock() - ctx.started, 4),
                       "tool": {"name": "relaxrepro", "version": __version__}},
    }
    if sections.get("container"):
        doc["container"] = sections["container"]
    red = ctx.redactor
    frag = Manifest(redact_document(doc, red))
    frag.redacted_by = red
    return frag



# -- over Ray, from inside the trainer ----------------------------------------------------------

def _ray_task(run_id: str, node_id: str, role: str, deadline_s: float) -> Dict[str, Any]:
    """Body of the per-node Ray task: collect in the worker's own environment."""
    ctx = Context(deadline_s=min(DEADLINE, max(deadline_s, 0.5)),
                  options={"run_id": run_id, "ray_node_id": node_id, "role": role, "source": "ray"})
    return dict(collect_fragment(ctx))  # a plain dict over the wire: the node's policy stays on the node


def _alive_nodes(ray: Any) -> List[Dict[str, Any]]:
    out = []
    for n in ray.nodes():
        if not isinstance(n, dict) or not n.get("Alive") or not n.get("NodeID"):
            continue
        # ray.nodes() has no IsHeadNode key (2.9-2.60); Ray's autoscaler tests this resource instead.
        head = "node:__internal_head__" in (n.get("Resources") or {})
        out.append({"node_id": str(n["NodeID"]), "role": "head" if head else "worker",
                    "address": str(n.get("NodeManagerAddress") or "")})
    return out


def _stub(run_id: str, node: Dict[str, Any], status: str, reason: str) -> Dict[str, Any]:
    info = {"name": "ray-" + node["node_id"][:12], "ray_node_id": node["node_id"], "role": node["role"],
            "source": "ray"}
    return {"fragment_version": FRAGMENT_VERSION, "kind": "node", "run_id": run_id, "node": info,
            "status": status, "reason": reason}


def collect_over_ray(
    ray: Any,
    deadline_s: float = PER_NODE_DEADLINE,
    run_id: str = "",
    task: Callable[..., Dict[str, Any]] = _ray_task,
) -> List[Dict[str, Any]]:
    """One zero-CPU task pinned to each alive node, gathered until ``deadline_s``.

    Nodes that don't answer in time come back as fragments with ``status: unresponsive`` (their
    tasks are cancelled); a task that raised (e.g. relaxrepro not importable there) as ``failed``.
    ``ray`` is the trainer's already initialised module: this never imports it.
    """
    affinity = _node_affinity(ray)
    start = time.monotonic()
    remote = ray.remote(num_cpus=0, max_retries=0)(task)
    pending: Dict[Any, Dict[str, Any]] = {}
    for node in _alive_nodes(ray):
        strategy = affinity(node["node_id"], soft=False)
        ref = remote.options(scheduling_strategy=strategy, name="relaxrepro-node-report").remote(
            run_id, node["node_id"], node["role"], deadline_s)
        pending[ref] = node
    out: List[Dict[str, Any]] = []
    refs = list(pending)
    ready: List[Any] = []
    if refs:
        left = max(deadline_s - (time.monotonic() - start), 0.0)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=left)
    done = set(ready)
    for ref in refs:
        node = pending[ref]
        if ref not in done:
            try:
                ray.cancel(ref)
            except Exception:  # cancelling is a courtesy; the task is num_cpus=0 either way
                pass
            out.append(_stub(run_id, node, "unresponsive", "no answer within %.1f s" % deadline_s))
            continue
        try:
            frag = ray.get(ref, timeout=1.0)
            out.append(check_fragment(frag, run_id))
        except Exception as exc:
            first = (str(exc).splitlines() or [""])[0][:200]
            out.append(_stub(run_id, node, "failed", "%s: %s" % (type(exc).__name__, first)))
    return out


def _node_affinity(ray: Any) -> Any:
    """``NodeAffinitySchedulingStrategy`` of the trainer's ray (a submodule of the imported package)."""
    module = getattr(getattr(ray, "util", None), "scheduling_strategies", None)
    if module is None:
        module = importlib.import_module("ray.util.scheduling_strategies")
    return module.NodeAffinitySchedulingStrategy


def update_per_node(m: Dict[str, Any], deadline_s: Optional[float] = None) -> Dict[str, Any]:
    """``update_manifest(per_node=True)``: collect over the trainer's Ray and merge; ``m`` when no Ray."""
    ray = sys.modules.get("ray")
    if ray is None or not callable(getattr(ray, "is_initialized", None)) or not ray.is_initialized():
        return m
    run_id = str(m.get("run_id") or "")
    fragments = collect_over_ray(ray, PER_NODE_DEADLINE if deadline_s is None else deadline_s, run_id)
    merged = merge_fragments(m, fragments)
    red = policy_of(m)  # each fragment was redacted on its node; the whole, with the run's policy
    out = Manifest(redact_document(merged, red))
    out.path = getattr(m, "path", None)
    out.redacted_by = red
    return out
