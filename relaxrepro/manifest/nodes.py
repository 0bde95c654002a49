"""Every node, not just rank 0: the per-node fragment format, merged into one cluster view.

A *fragment* is what one node knows about itself (hardware, driver/CUDA/NCCL, interpreter, key
packages, container, OS), written by ``generate --node-report`` under ``srun --ntasks-per-node=1`` or
collected by a zero-CPU Ray task pinned to each alive node (collecting is :mod:`relaxrepro.collect.node`;
here: the format, merging, heterogeneity and node-by-node comparison, as data).
:func:`merge_fragments` folds them into the rank-0 manifest: ``runtime.nodes[*]`` gain each node's data
and ``heterogeneity`` lists every field that differs across nodes, because one node with another driver
or NCCL is a classic cause of hangs and silent differences that rank-0-only records (W&B, Megatron's
logs) never show.
"""

from __future__ import annotations

import json
import os

from ..std.sha import sha256_hex
from .numbers import is_digits, shorten, small_int
from .reader import ManifestError, ReadError, parse_json, read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

FRAGMENT_VERSION = "1.0"
FRAGMENT_MAJOR = 1

FRAGMENT_LIMIT_BYTES = 2 * 1024 * 1024
"""The largest fragment file a merge reads: one node's data is a few KB (its package list the bulk)."""

NODE_FIELDS: Tuple[str, ...] = (
    "hardware.gpu_vendor", "hardware.gpu_model", "hardware.gpu_count", "hardware.gpu_memory_gb",
    "hardware.driver_version", "hardware.cuda_driver_version", "hardware.nvidia_kernel_module",
    "hardware.cuda_version", "hardware.nccl_version", "hardware.cudnn_version",
    "hardware.cpu.model", "hardware.cpu.logical_cpus", "hardware.memory_total_gb",
    "environment.python_version", "environment.python.implementation", "environment.python.executable",
    "environment.packages_digest", "environment.packages_count", "environment.key_packages.*",
    "environment.system.os", "environment.system.kernel", "environment.system.arch",
    "environment.system.distribution", "environment.system.libc.name", "environment.system.libc.version",
    "container.runtime", "container.image.name", "container.image.id", "container.image.digest",
)
"""What a node entry in the merged manifest keeps (the fragment keeps more, e.g. per-GPU data)."""

NOT_COMPARED = frozenset({
    # MemTotal differs by a few MB between identical nodes (firmware and kernel reservations).
    "hardware.memory_total_gb",
    # Follows packages_digest; a second line for the same difference is noise.
    "environment.packages_count",
})

MAX_NODES_KEPT = 32
"""Node entries a merged manifest keeps (every node that differs first): 1,000 entries would blow the
100 KB cap, and the writer's generic shortening would then cut other lists (packages) too."""

MAX_LISTED = 16
"""Node names listed per value in ``heterogeneity``; ``counts`` stays exact (1,000-node clusters)."""

ABSENT = "<absent>"


class FragmentError(ValueError):
    """A fragment that cannot be merged; the message is one line."""


# -- one node ---------------------------------------------------------------------------------

def node_name(run_id: str, hostname: str, ray_node_id: Optional[str] = None) -> str:
    """``node-<8 hex>``: stable for a host within a run, and never the hostname itself.

    The Ray node id joins the hash because several raylets may share one host (and tests run two).
    """
    key = "%s\0%s" % (run_id, hostname) + ("\0%s" % ray_node_id if ray_node_id else "")
    return "node-" + sha256_hex(key.encode("utf-8", "surrogateescape"))[:8]


def fragment_filename(fragment: Dict[str, Any]) -> str:
    return "node_%s.json" % fragment.get("node", {}).get("name", "unknown")


# -- reading fragments ------------------------------------------------------------------------

def slurm_run_id(job_id: str) -> str:
    """The run id every node of SLURM job ``job_id`` agrees on without talking (``generate --node-report``
    in the job, with no ``--run-id`` or ``$RELAXREPRO_RUN_ID``)."""
    return "slurm-" + job_id


def run_ids(manifest: Mapping[str, Any]) -> List[str]:
    """The fragment run ids that belong to ``manifest``: its own, and its SLURM job's (a manifest written by
    ``generate`` in an sbatch script has a run id of its own, while each node's report, written under srun in
    the same job, is named for the job)."""
    ids = [str(manifest.get("run_id"))]
    scheduler = manifest.get("scheduler")
    job = scheduler.get("job_id") if isinstance(scheduler, dict) and scheduler.get("type") == "slurm" else None
    if isinstance(job, str) and job:
        ids.append(slurm_run_id(job))
    return ids


def check_fragment(doc: Any, run_id: Optional[Union[str, Sequence[str]]] = None) -> Dict[str, Any]:
    """Check a parsed fragment; raise :class:`FragmentError` saying what is wrong. ``run_id``: the run id (or
    the run ids, :func:`run_ids`) it must carry."""
    if not isinstance(doc, dict):
        raise FragmentError("not a node fragment: the top level is not an object")
    version = doc.get("fragment_version")
    if not isinstance(version, str) or not is_digits(version.split(".", 1)[0]):
        raise FragmentError("not a node fragment: no fragment_version (is it a manifest?)")
    if small_int(version.split(".", 1)[0]) != FRAGMENT_MAJOR:  # None: too many digits for any major
        raise FragmentError("unsupported fragment_version %s: this relaxrepro reads %d.x"
                            % (shorten(version), FRAGMENT_MAJOR))
    if doc.get("kind") != "node":
        raise FragmentError("not a node fragment: kind is %r" % doc.get("kind"))
    node = doc.get("node")
    if not isinstance(node, dict) or not isinstance(node.get("name"), str) or not node["name"]:
        raise FragmentError("not a node fragment: node.name missing")
    accepted = [run_id] if isinstance(run_id, str) else list(run_id or ())
    if run_id is not None and doc.get("run_id") not in accepted:
        raise FragmentError("run id %r is not the manifest's (%s)" % (doc.get("run_id"), " or ".join(
            repr(i) for i in accepted)))
    for section in ("hardware", "environment", "container"):
        if section in doc and not isinstance(doc[section], dict):
            raise FragmentError("Unexpected type in '%s' (expected object)" % section)
    return doc


def load_fragment(path: str, run_id: Optional[Union[str, Sequence[str]]] = None) -> Dict[str, Any]:
    """Read and check one fragment file; :class:`FragmentError` names what is wrong (not the path)."""
    try:
        raw = read_bytes(path, FRAGMENT_LIMIT_BYTES)
    except ReadError as exc:
        raise FragmentError(exc.short("over %d MB: not a node fragment" % (FRAGMENT_LIMIT_BYTES // 2**20))) from None
    try:
        doc = parse_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise FragmentError("not UTF-8") from None
    except ManifestError as exc:
        raise FragmentError(str(exc)) from None
    return check_fragment(doc, run_id)


def expand_paths(paths: Iterable[str]) -> List[str]:
    """Fragment paths; a directory stands for its ``node_*.json`` files (sorted)."""
    out: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            out.extend(os.path.join(p, n) for n in sorted(os.listdir(p))
                       if n.startswith("node_") and n.endswith(".json"))
        else:
            out.append(p)
    return out


# -- merging ----------------------------------------------------------------------------------

def _get(doc: Dict[str, Any], dotted: str) -> Any:
    node: Any = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _put(doc: Dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = doc
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def node_fields(fragment: Dict[str, Any]) -> Dict[str, Any]:
    """The fragment's :data:`NODE_FIELDS` as ``{dotted path: scalar}`` (wildcards expanded)."""
    out: Dict[str, Any] = {}
    for field in NODE_FIELDS:
        if field.endswith(".*"):
            group = _get(fragment, field[:-2])
            if isinstance(group, dict):
                for k in sorted(group):
                    if not isinstance(group[k], (dict, list)):
                        out["%s.%s" % (field[:-2], k)] = group[k]
            continue
        value = _get(fragment, field)
        if value is not None and not isinstance(value, (dict, list)):
            out[field] = value
    return out


def _node_entry_data(fields: Dict[str, Any]) -> Dict[str, Any]:
    entry: Dict[str, Any] = {}
    for dotted, value in fields.items():
        _put(entry, dotted, value)
    return entry


def heterogeneity(per_node: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """``{node_count, homogeneous, fields: [{field, values: {v: [names]}, counts: {v: n}}]}``.

    A field some nodes lack and others have differs too (value ``<absent>``): a node without NCCL
    among nodes with it is exactly what this section is for.
    """
    names = sorted(per_node)
    all_fields = sorted({f for fields in per_node.values() for f in fields} - NOT_COMPARED)
    entries = []
    for field in all_fields:
        groups: Dict[str, List[str]] = {}
        for name in names:
            value = per_node[name].get(field)
            groups.setdefault(ABSENT if value is None else str(value), []).append(name)
        if len(groups) < 2:
            continue
        entries.append({
            "field": field,
            "values": {v: members[:MAX_LISTED] for v, members in sorted(groups.items())},
            "counts": {v: len(members) for v, members in sorted(groups.items())},
        })
    return {"node_count": len(names), "homogeneous": not entries, "fields": entries}


def merge_fragments(manifest: Dict[str, Any], fragments: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Fold checked fragments into a copy of ``manifest`` (the input is not changed).

    A fragment joins the ``runtime.nodes`` entry with its Ray node id, else its name, else is
    appended. Fragments with ``status: unresponsive|failed`` go to ``runtime.unresponsive_nodes``.
    A second fragment of the same node is ignored with a warning in ``collection.probes.nodes``.
    """
    doc = dict(manifest)
    runtime = dict(doc.get("runtime") or {})
    nodes = [dict(n) for n in (runtime.get("nodes") or []) if isinstance(n, dict)]
    by_id = {n["node_id"]: n for n in nodes if isinstance(n.get("node_id"), str)}
    by_name = {n["name"]: n for n in nodes if isinstance(n.get("name"), str)}
    per_node: Dict[str, Dict[str, Any]] = {}
    unresponsive: List[Dict[str, Any]] = []
    warnings: List[str] = []
    for frag in fragments:
        info = frag.get("node") or {}
        name = str(info.get("name"))
        if frag.get("status") in ("unresponsive", "failed"):
            miss = {k: info[k] for k in ("name", "role", "address") if info.get(k)}
            if info.get("ray_node_id"):
                miss["node_id"] = info["ray_node_id"]
            miss["reason"] = str(frag.get("reason") or frag["status"])
            unresponsive.append(miss)
            continue
        if name in per_node:
            warnings.append("%s reported twice; kept the first report" % name)
            continue
        fields = node_fields(frag)
        per_node[name] = fields
        entry = by_id.get(info.get("ray_node_id")) or by_name.get(name)
        if entry is None:
            entry = {}
            if info.get("role"):
                entry["role"] = info["role"]
            nodes.append(entry)
        entry["name"] = name
        entry.update(_node_entry_data(fields))
    het = heterogeneity(per_node) if per_node else None
    note = ""
    if len(nodes) > MAX_NODES_KEPT:
        runtime["nodes_truncated"] = {"count": len(nodes), "sha256": _digest(nodes)}
        kept = _keep_nodes(nodes, per_node, het)
        note = "runtime.nodes: kept %d of %d nodes (those that differ first); heterogeneity counts all" % (
            len(kept), len(nodes))
        nodes = kept
    runtime["nodes"] = nodes
    if unresponsive:
        runtime["unresponsive_nodes"] = sorted(unresponsive, key=lambda u: u.get("name", ""))
    doc["runtime"] = runtime
    if het is not None:
        doc["heterogeneity"] = het
    collection = dict(doc.get("collection") or {})
    probes = dict(collection.get("probes") or {})
    probes["nodes"] = {"status": "partial" if (unresponsive or warnings) else "ok", "seconds": 0.0,
                       "warnings": warnings + ["%s did not answer: %s" % (u.get("name", u.get("node_id")), u["reason"])
                                               for u in unresponsive]}
    collection["probes"] = probes
    if note:
        collection["truncated"] = list(collection.get("truncated") or []) + [note]
    doc["collection"] = collection
    return doc


def _digest(value: Any) -> str:
    return sha256_hex(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode())


def _common(counts: Dict[str, int]) -> str:
    """The reference value: the most common one (ties: the smallest)."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def _keep_nodes(nodes: List[Dict[str, Any]], per_node: Dict[str, Dict[str, Any]],
                het: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """:data:`MAX_NODES_KEPT` entries, in their order: nodes holding a minority value first."""
    odd = set()
    for entry in (het or {}).get("fields") or []:
        common = _common(entry["counts"])
        for name, fields in per_node.items():
            value = fields.get(entry["field"])
            if (ABSENT if value is None else str(value)) != common:
                odd.add(name)
    ranked = sorted(range(len(nodes)), key=lambda i: (nodes[i].get("name") not in odd, i))
    return [nodes[i] for i in sorted(ranked[:MAX_NODES_KEPT])]


# -- telling it -------------------------------------------------------------------------------

def _short(field: str) -> str:
    for prefix in ("hardware.", "environment.key_packages.", "environment.system.", "environment."):
        if field.startswith(prefix):
            return field[len(prefix):]
    return field


def summarize_heterogeneity(doc: Dict[str, Any]) -> List[str]:
    """One line per minority value, e.g. ``2 of 16 nodes: driver_version 550.54 -> 550.90 (node-…)``.

    The most common value is the reference (ties: the smallest); for ``check`` and ``diff``.
    """
    het = doc.get("heterogeneity") if isinstance(doc, dict) else None
    lines: List[str] = []
    if isinstance(het, dict):
        total = het.get("node_count")
        for entry in het.get("fields") or []:
            counts = entry.get("counts") or {}
            if len(counts) < 2:
                continue
            common = _common(counts)
            for value, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[1:]:
                listed = (entry.get("values") or {}).get(value) or []
                who = " (%s%s)" % (", ".join(listed[:3]), ", ..." if n > 3 else "") if listed else ""
                lines.append("%d of %s nodes: %s %s -> %s%s" % (n, total, _short(entry.get("field", "?")),
                                                                common, value, who))
    runtime = doc.get("runtime") if isinstance(doc, dict) else None
    missing = (runtime or {}).get("unresponsive_nodes") if isinstance(runtime, dict) else None
    if missing:
        names = [str(u.get("name") or u.get("node_id") or "?") for u in missing]
        lines.append("%d node%s did not answer: %s" % (len(names), "" if len(names) == 1 else "s", ", ".join(names)))
    return lines


def node_value_counts(doc: Dict[str, Any]) -> Dict[str, Dict[str, int]]:
    """``{field: {value: nodes}}`` of a merged manifest, exact even when ``runtime.nodes`` was shortened:
    differing fields from ``heterogeneity``, the others from any node entry (they all agree)."""
    het = doc.get("heterogeneity") if isinstance(doc.get("heterogeneity"), dict) else {}
    total = het.get("node_count") or 0
    out: Dict[str, Dict[str, int]] = {}
    for entry in het.get("fields") or []:
        if isinstance(entry, dict) and isinstance(entry.get("counts"), dict):
            out[str(entry.get("field"))] = dict(entry["counts"])
    nodes = (doc.get("runtime") or {}).get("nodes") if isinstance(doc.get("runtime"), dict) else None
    for n in nodes or []:
        if isinstance(n, dict) and n.get("name") and total:
            for field, value in node_fields(n).items():
                if field not in out and field not in NOT_COMPARED:
                    out[field] = {str(value): total}
    return out


def diff_nodes(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """Per-node differences between two merged manifests, compactly, for ``diff``.

    Node names are per run, so nodes are compared as populations: ``2 of 16 nodes: driver_version
    550.54 -> 550.90`` means 16 nodes agreed on 550.54 before and 2 of them have 550.90 now.
    """
    a, b = node_value_counts(old), node_value_counts(new)
    total = (new.get("heterogeneity") or {}).get("node_count") if isinstance(new.get("heterogeneity"), dict) else None
    lines: List[str] = []
    for field in sorted(set(a) | set(b)):
        before, after = a.get(field) or {ABSENT: total or 0}, b.get(field) or {ABSENT: total or 0}
        if before == after:
            continue
        gained = {v: n - before.get(v, 0) for v, n in after.items() if n > before.get(v, 0)}
        lost = {v: n - after.get(v, 0) for v, n in before.items() if n > after.get(v, 0)}
        source = _common(lost) if lost else ABSENT
        for value, n in sorted(gained.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append("%d of %s nodes: %s %s -> %s" % (n, total, _short(field), source, value))
    return lines
