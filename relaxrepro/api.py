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

    ``per_node=True``: one zero-CPU Ray task per alive node collects that node's fragment, merged
    into ``runtime.nodes`` and ``heterogeneity`` (``deadline_s``, default 10 s, bounds the wait).
    """
    if m is not None and options.get("per_node"):
        try:
            from . import node

            m = node.update_per_node(m, options.get("deadline_s"))
        except Exception as exc:
            log.warning("relaxrepro: per-node collection failed: %s: %s", type(exc).__name__, exc)
    return m


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
