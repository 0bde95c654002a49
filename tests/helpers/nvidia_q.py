"""``nvidia-smi -q`` text, parsed: a third witness for the cross-check tests of the nvidia parsers.

relaxrepro never runs ``nvidia-smi -q`` (the XML and ``--query-gpu`` say the same, faster), so this parser lives
with the tests that compare the three forms of one capture; it reuses the product's field cleaners.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from relaxrepro.collect.probes.nvidia_parse import (  # the product's cleaners, so the forms are judged alike
    BUS_ID_RE,
    _clean,
    _driver_fields,
    _int_of,
    _mib_of,
    _mode,
    _put,
    strip_ansi,
    uuid_hash,
)


def q_tree(text: str) -> List[Tuple[str, Any]]:
    """``-q`` text as nested (key, value-or-children) lists, by indentation."""
    root: List[Tuple[str, Any]] = []
    stack: List[Tuple[int, List[Tuple[str, Any]]]] = [(-1, root)]
    for raw in strip_ansi(text or "").splitlines():
        if not raw.strip() or raw.lstrip().startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        m = re.match(r"^\s*(.+?)\s+:(?:\s(.*))?$", raw)
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        if m:
            stack[-1][1].append((m.group(1).strip(), (m.group(2) or "").strip()))
        else:
            children: List[Tuple[str, Any]] = []
            stack[-1][1].append((raw.strip(), children))
            stack.append((indent, children))
    return root


def q_get(node: List[Tuple[str, Any]], *path: str) -> Any:
    for key in path:
        found = next((v for k, v in node if k.lower() == key.lower()), None)
        if found is None:
            return None
        node = found
    return node


def parse_q(text: str) -> Dict[str, Any]:
    """``nvidia-smi -q`` (or ``-a``): the same facts as the XML, from the text form."""
    tree = q_tree(text)
    out = _driver_fields(q_get(tree, "KMD Version"), q_get(tree, "CUDA UMD Version"),
                         q_get(tree, "Driver Version"), q_get(tree, "CUDA Version"))
    attached = _int_of(q_get(tree, "Attached GPUs"))
    gpus = []
    for key, node in tree:
        if not (isinstance(node, list) and key.startswith("GPU ") and BUS_ID_RE.search(key)):
            continue
        gpu: Dict[str, Any] = {"index": len(gpus)}
        _put(gpu, "model", _clean(q_get(node, "Product Name")))
        _put(gpu, "architecture", _clean(q_get(node, "Product Architecture")))
        _put(gpu, "memory_total_mib", _mib_of(q_get(node, "FB Memory Usage", "Total")))
        _put(gpu, "uuid_hash", uuid_hash(q_get(node, "GPU UUID")))
        _put(gpu, "pci_bus_id", _clean(q_get(node, "PCI", "Bus Id")) or BUS_ID_RE.search(key).group(0))
        mig_mode = q_get(node, "MIG Mode", "Current")
        _put(gpu, "mig_mode", _mode(mig_mode) if isinstance(mig_mode, str) else None)
        migs = []
        for k, dev_node in node:
            if k != "MIG Device" or not isinstance(dev_node, list):
                continue
            dev: Dict[str, Any] = {}
            _put(dev, "index", _int_of(q_get(dev_node, "Index")))
            _put(dev, "gpu_instance_id", _int_of(q_get(dev_node, "GPU Instance ID")))
            _put(dev, "compute_instance_id", _int_of(q_get(dev_node, "Compute Instance ID")))
            _put(dev, "multiprocessor_count", _int_of(q_get(dev_node, "Device Attributes", "Shared",
                                                          "Multiprocessor count")))
            mem = q_get(dev_node, "Shared FB Memory Usage", "Total") or q_get(dev_node, "FB Memory Usage", "Total")
            _put(dev, "memory_total_mib", _mib_of(mem if isinstance(mem, str) else None))
            migs.append(dev)
        if migs:
            gpu["mig_devices"] = migs
        gpus.append(gpu)
    if gpus or attached is not None:
        out["gpus"] = gpus
        out["gpu_count"] = max(attached or 0, len(gpus))
    return out
