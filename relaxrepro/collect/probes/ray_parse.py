"""Ray's answers as data: pure parsers of what ``ray`` prints, what its dashboard and ``ray.nodes()`` return,
and a raylet's command line. Nothing here runs a command or reads a file; :mod:`.ray` collects.

Tested on captures from real clusters under ``tests/fixtures/ray/``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from ...std.lazy_re import LazyPattern

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Sequence, Tuple

HEAD_RESOURCE = "node:__internal_head__"
"""How Ray itself tells the head (``autoscaler/v2/utils.py``); ``ray.nodes()`` has no IsHeadNode key."""

_GIB = float(1 << 30)
_UNITS = {"B": 1.0, "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": _GIB, "TiB": 1024.0 ** 4, "PiB": 1024.0 ** 5}
_MEMORY_KEYS = {"memory": "memory_gb", "object_store_memory": "object_store_memory_gb"}
_DROPPED_LABELS = ("ray.io/node-id", "ray.io/node_id")  # the node id again (2.60 / 2.9.3 spelling)


# -- resource normalisation -------------------------------------------------------------------------

def parse_size(value: Any) -> Optional[float]:
    """``"16.043 GiB"`` / ``"16.30GiB"`` / raw bytes -> GiB, two decimals; None when unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return round(float(value) / _GIB, 2)
    m = re.match(r"^\s*([0-9.]+)\s*([KMGTP]?i?B)\s*$", str(value))
    if not m or m.group(2) not in _UNITS:
        return None
    try:
        return round(float(m.group(1)) * _UNITS[m.group(2)] / _GIB, 2)
    except ValueError:
        return None


def _number(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def normalize_resources(raw: Mapping[str, Any]) -> Tuple[Dict[str, Any], bool]:
    """Ray resources -> manifest resources, and whether the head marker was among them.

    ``node:<ip>`` entries are dropped (one per node, they only repeat the address); memory becomes GiB.
    """
    out: Dict[str, Any] = {}
    head = False
    for key, value in raw.items():
        key = str(key)
        if key == HEAD_RESOURCE:
            head = True
            continue
        if key.startswith("node:"):
            continue
        if key in _MEMORY_KEYS:
            size = parse_size(value)
            if size is not None:
                out[_MEMORY_KEYS[key]] = size
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = _number(value)
    return out, head


def _labels(raw: Any) -> Dict[str, str]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): str(v) for k, v in sorted(raw.items()) if k not in _DROPPED_LABELS}


def sort_nodes(nodes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    order = {"head": 0, "worker": 1, "unknown": 2}
    return sorted(nodes, key=lambda n: (order.get(n.get("role"), 3), str(n.get("node_id") or "")))


def _summary(nodes: List[Dict[str, Any]], dead: List[Dict[str, Any]]) -> Dict[str, Any]:
    totals: Dict[str, Any] = {}
    for node in nodes:
        for key, value in (node.get("resources") or {}).items():
            if isinstance(value, (int, float)):
                totals[key] = _number(round(totals.get(key, 0) + value, 2))
    out: Dict[str, Any] = {"node_count": len(nodes), "nodes": sort_nodes(nodes), "totals": totals}
    if dead:
        out["dead_nodes"] = sort_nodes(dead)
    return out


# -- pure parsers ---------------------------------------------------------------------------------

def parse_list_nodes(text: str) -> Dict[str, Any]:
    """``ray list nodes --format json`` (same schema in 2.9.3 and 2.60.0) -> node summary.

    Raises ``ValueError`` when the text is not that JSON list.
    """
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("ray list nodes: expected a JSON list, got %s" % type(data).__name__)
    return summary_from_state_nodes(data)


def parse_dashboard_nodes(text: str) -> Dict[str, Any]:
    """The dashboard's ``GET /api/v0/nodes`` (what ``ray list nodes`` itself asks): the same node
    records, wrapped in ``data.result.result``, memory in raw bytes. Raises ``ValueError``."""
    obj = json.loads(text)
    try:
        data = obj["data"]["result"]["result"]
    except (KeyError, TypeError):
        raise ValueError("dashboard /api/v0/nodes: no data.result.result in the answer") from None
    if not isinstance(data, list):
        raise ValueError("dashboard /api/v0/nodes: expected a list of nodes")
    return summary_from_state_nodes(data)


def parse_dashboard_version(text: str) -> Optional[str]:
    """The cluster's Ray version from the dashboard's ``GET /api/version``."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    value = obj.get("ray_version") if isinstance(obj, dict) else None
    return str(value) if value else None


def summary_from_state_nodes(data: Sequence[Any]) -> Dict[str, Any]:
    """Node records of Ray's state API (``NodeState``: CLI and dashboard alike) -> node summary."""
    nodes: List[Dict[str, Any]] = []
    dead: List[Dict[str, Any]] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        resources, head_marker = normalize_resources(item.get("resources_total") or {})
        head = item.get("is_head_node") is True or head_marker
        node = {
            "node_id": item.get("node_id"),
            "address": item.get("node_ip"),
            "role": "head" if head else ("worker" if "is_head_node" in item or resources else "unknown"),
            "resources": resources,
            "labels": _labels(item.get("labels")),
        }
        _file(node, str(item.get("state", "ALIVE")).upper() == "ALIVE", item.get("state_message"), nodes, dead)
    return _summary(nodes, dead)


def _file(node: Dict[str, Any], alive: bool, why: Any, nodes: List[Dict[str, Any]], dead: List[Dict[str, Any]]
          ) -> None:
    """Put ``node`` among the alive ``nodes`` or the ``dead`` (with Ray's reason ``why``, when it gave one)."""
    node["alive"] = alive
    if alive:
        nodes.append(node)
        return
    if why:
        node["state_message"] = str(why)
    dead.append(node)


def mode_of(node_count: int) -> str:
    """``runtime.mode`` for a cluster of ``node_count`` alive nodes."""
    if node_count <= 0:
        return "local"
    return "single_node_ray" if node_count == 1 else "multi_node_ray"


def runtime_from_ray_nodes(
    nodes: Sequence[Mapping[str, Any]], cluster_resources: Optional[Mapping[str, Any]] = None,
    version: Optional[str] = None,
) -> Dict[str, Any]:
    """``ray.nodes()`` + ``ray.cluster_resources()`` (in the trainer's process) -> ``runtime`` data.

    The head is the node holding ``node:__internal_head__`` (no ``IsHeadNode`` key exists in 2.9-2.60).
    """
    alive: List[Dict[str, Any]] = []
    dead: List[Dict[str, Any]] = []
    for item in nodes:
        if not isinstance(item, Mapping):
            continue
        resources, head = normalize_resources(item.get("Resources") or {})
        node = {
            "node_id": item.get("NodeID"),
            "address": item.get("NodeManagerAddress"),
            "role": "head" if head or item.get("IsHeadNode") is True else "worker",
            "resources": resources,
            "labels": _labels(item.get("Labels")),
        }
        _file(node, item.get("Alive", item.get("alive")) is not False, item.get("DeathReasonMessage"), alive, dead)
    out = _summary(alive, dead)
    if cluster_resources:
        out["totals"], _ = normalize_resources(cluster_resources)
    out["mode"] = mode_of(len(alive))
    out["ray"] = {"version": version, "source": "api"}
    return out


_USAGE_RE = LazyPattern(r"^\s*(\S+)/(\S+)\s+(\S+)\s*$")  # only for a live cluster's `ray status`


def _usage_line(line: str) -> Optional[Tuple[str, Any]]:
    """``0.0/2.0 CPU`` or ``0B/16.30GiB memory`` -> (name, total)."""
    m = _USAGE_RE.match(line)
    if not m:
        return None
    name, total = m.group(3), m.group(2)
    if name in _MEMORY_KEYS:
        size = parse_size(total)
        return (_MEMORY_KEYS[name], size) if size is not None else None
    try:
        return name, _number(float(total))
    except ValueError:
        return None


def parse_status_text(text: str) -> Dict[str, Any]:
    """``ray status [-v]`` text of 2.9.x (``Usage:``/``Demands:``) and 2.6x (``Total Usage:``...).

    Node count from the ``Active:``/``Idle:`` lines, cluster totals from the usage block, and with
    ``-v`` each ``Node: <id>`` block's resources. The text shows no roles and no addresses.
    Parsed leniently: unknown lines are skipped, since the format changes between versions.
    """
    count = 0
    active_ids: List[str] = []
    totals: Dict[str, Any] = {}
    per_node: Dict[str, Dict[str, Any]] = {}
    block = None
    current: Optional[str] = None
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if not line.startswith(" "):
            current = None
            if stripped in ("Active:", "Idle:"):
                block = "nodes"
            elif stripped in ("Usage:", "Total Usage:"):  # 2.9.x / 2.6x
                block = "totals"
            elif stripped.startswith("Node: "):
                current = stripped[len("Node: "):].split()[0]
                per_node.setdefault(current, {})
                block = "node"
            elif stripped == "Resources":
                block = "resources"
            else:
                block = "other"
            continue
        if block == "nodes":
            m = re.match(r"^(\d+)\s+(\S+)", stripped)
            if m:
                count += int(m.group(1))
                if m.group(2).startswith("node_"):
                    active_ids.append(m.group(2)[len("node_"):])
        elif block == "totals":
            got = _usage_line(stripped)
            if got:
                totals[got[0]] = got[1]
        elif block == "node" and current is not None:
            got = _usage_line(stripped)
            if got:
                per_node[current][got[0]] = got[1]
    nodes = [{"node_id": nid, "role": "unknown", "resources": per_node.get(nid, {}), "labels": {}, "alive": True}
             for nid in (active_ids if len(active_ids) == count else sorted(per_node))]
    for node in nodes:
        acc = [k.split(":", 1)[1] for k in node["resources"] if k.startswith("accelerator_type:")]
        if acc:
            node["labels"] = {"ray.io/accelerator-type": acc[0]}
    out = _summary(nodes, [])
    out["node_count"] = count
    out["totals"] = totals
    return out


def parse_cli_version(text: str) -> Optional[str]:
    """What ``ray --version`` prints: ``ray, version 2.60.0`` -> ``2.60.0``."""
    m = re.search(r"version\s+([0-9][0-9A-Za-z.+-]*)", text or "")
    return m.group(1) if m else None


def parse_version_mismatch(stderr: str) -> Optional[Tuple[str, str]]:
    """(cluster version, CLI version) from either version's mismatch error, else None."""
    m = re.search(r"cluster has Ray version (\S+) but local Ray version is (\S+)", stderr or "")
    if m:  # 2.60 CLI against a 2.9.3 cluster
        return m.group(1), m.group(2).rstrip(".")
    m = re.search(r"has version (\S+), but this process\s*is running Ray version (\S+)", stderr or "")
    if m:  # 2.9.3 CLI against a 2.60 cluster ("this processis" is Ray's own typo)
        return m.group(1).rstrip(",."), m.group(2).rstrip(".")
    return None


def parse_static_resource_list(value: str) -> Dict[str, float]:
    """raylet ``--static_resource_list=CPU,2,node:__internal_head__,1.0,...`` -> {name: amount}."""
    parts = value.split(",")
    out: Dict[str, float] = {}
    for name, amount in zip(parts[0::2], parts[1::2]):
        try:
            out[name] = float(amount)
        except ValueError:
            continue
    return out


def parse_raylet_cmdline(args: Sequence[str]) -> Optional[Dict[str, Any]]:
    """A raylet's argv (from ``/proc/<pid>/cmdline``) -> its node; None if it is not a raylet."""
    if not args or os.path.basename(args[0]) != "raylet":
        return None
    flags: Dict[str, str] = {}
    for arg in args[1:]:
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg[2:].partition("=")
            flags.setdefault(key.replace("-", "_"), value)
    if "static_resource_list" not in flags and "gcs_address" not in flags:
        return None
    resources, head = normalize_resources(parse_static_resource_list(flags.get("static_resource_list", "")))
    return {
        "node_id": flags.get("node_id"),
        "address": flags.get("node_ip_address"),
        "gcs_address": flags.get("gcs_address"),
        "role": "head" if head else "worker",
        "resources": resources,
        "executable": args[0],
    }
