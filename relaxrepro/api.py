"""The Python API for a trainer's entry point. These functions never raise and never block past
the deadline: whatever fails, the trainer gets ``None`` or a partial manifest and one log warning.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Dict, Mapping, Optional, Sequence

from .manifest import Manifest

log = logging.getLogger("relaxrepro")


def collect_manifest(
    args: Any = None,
    *,
    argv: Optional[Sequence[str]] = None,
    env: Optional[Mapping[str, str]] = None,
    deadline_s: Optional[float] = None,
    **options: Any,
) -> Optional[Manifest]:
    """Collect a manifest of the calling process's run. Call after parsing arguments."""
    try:
        from . import manifest
        from .context import DEADLINE, Context

        if argv is None:
            argv = [sys.executable] + list(sys.argv)
        if args is not None:
            options["args"] = args
        ctx = Context(env=env, argv=argv, argv_source="api", deadline_s=deadline_s or DEADLINE, options=options)
        return manifest.build(ctx)
    except Exception as exc:
        log.warning("relaxrepro: could not collect a manifest: %s: %s", type(exc).__name__, exc)
        return None


def update_manifest(m: Optional[Manifest], **options: Any) -> Optional[Manifest]:
    """Add what only the running trainer can see (live Ray topology after ``ray.init()``).

    Uses ``ray.nodes()`` and ``ray.cluster_resources()`` of the trainer's own driver: no subprocess,
    no second driver. Ray is never imported here; without an initialised Ray, ``m`` comes back as is.

    ``per_node=True``: then one zero-CPU Ray task per alive node collects that node's fragment, merged
    into ``runtime.nodes`` and ``heterogeneity`` (``deadline_s``, default 10 s, bounds the wait).
    """
    if m is None:
        return None
    try:
        ray = sys.modules.get("ray")
        if ray is None or not callable(getattr(ray, "is_initialized", None)) or not ray.is_initialized():
            return m
        from . import redact
        from .probes import ray as ray_probe
        from .probes import training

        live = ray_probe.runtime_from_ray_nodes(
            ray.nodes(), ray.cluster_resources(), str(getattr(ray, "__version__", "") or "") or None)
        doc: Dict[str, Any] = dict(m)
        runtime = dict(doc.get("runtime") or {})
        old_ray = runtime.get("ray") if isinstance(runtime.get("ray"), dict) else {}
        for key in ("mode", "node_count", "nodes", "dead_nodes", "totals", "local_nodes"):
            runtime.pop(key, None)
        live_ray = live.pop("ray")
        for key in ("cli_version", "address", "address_source"):
            if old_ray.get(key) is not None:
                live_ray[key] = old_ray[key]
        if live_ray.get("cli_version") and live_ray.get("version"):
            live_ray["mismatch"] = live_ray["cli_version"] != live_ray["version"]
        runtime.update(live)
        runtime["ray"] = live_ray
        doc["runtime"] = runtime
        derived, _ = training.derive_training(doc)
        kept = {k: v for k, v in (doc.get("training") or {}).items() if k not in training.OWNED_KEYS}
        kept.update(derived)
        doc["training"] = kept
        collection = dict(doc.get("collection") or {})
        probes = dict(collection.get("probes") or {})
        probes["update_manifest"] = {"status": "ok", "seconds": 0.0, "warnings": []}
        collection["probes"] = probes
        doc["collection"] = collection
        out = Manifest(redact.redact_document(doc, redact.Redactor.for_environment(os.environ)))
        out.path = getattr(m, "path", None)
    except Exception as exc:
        log.warning("relaxrepro: could not update the manifest from Ray: %s: %s", type(exc).__name__, exc)
        return m
    if options.get("per_node"):
        try:
            from . import node

            out = node.update_per_node(out, options.get("deadline_s"))
        except Exception as exc:
            log.warning("relaxrepro: per-node collection failed: %s: %s", type(exc).__name__, exc)
    return out


def write_manifest(m: Optional[Dict[str, Any]], directory: "os.PathLike[str] | str" = ".") -> Optional[str]:
    """Write ``manifest_<run-id>.json`` into ``directory`` atomically; the path, or None."""
    if m is None:
        return None
    try:
        from . import manifest

        result = manifest.write(m, directory=os.fspath(directory))
        for w in result.warnings:
            log.warning("relaxrepro: %s", w)
        return result.path
    except Exception as exc:
        log.warning("relaxrepro: could not write the manifest: %s: %s", type(exc).__name__, exc)
        return None
