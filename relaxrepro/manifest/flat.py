"""The one flatten-and-compare behind ``diff``, ``lineage`` and ``compare``: nested values as dotted paths.

``{"optim": {"lr": 3e-4}}`` becomes ``{"optim.lr": 3e-4}``; two flat views are compared key by key.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Container, Dict, List, Optional, Tuple

ARG_DEPTH = 4
"""Resolved arguments and environments are flattened this deep (``optim.lr``); deeper is one value."""


def flatten(node: Any, prefix: str = "", out: Optional[Dict[str, Any]] = None, *, max_depth: Optional[int] = None,
            skip: Container[str] = (), label_lists: bool = False) -> Dict[str, Any]:
    """``node`` as ``{dotted path: leaf}`` (into ``out`` when given, which is returned).

    ``max_depth``: dicts nested deeper stay whole leaves (an argument's value is one cell, however
    nested). ``skip``: paths whose dict is left out (compared elsewhere, e.g. ``environment.packages``).
    ``label_lists``: lists holding dicts or lists are walked too, each item named by a stable key
    (``files[path=a.yaml]``) so that an insertion shifts nothing; otherwise a list is one leaf.
    """
    if out is None:
        out = {}
    _walk(node, prefix, out, 0, max_depth, skip, label_lists)
    return out


def _walk(node: Any, prefix: str, out: Dict[str, Any], depth: int, max_depth: Optional[int],
          skip: Container[str], label_lists: bool) -> None:
    if isinstance(node, dict) and (max_depth is None or depth < max_depth):
        if prefix in skip:
            return
        for k, v in node.items():
            _walk(v, "%s.%s" % (prefix, k) if prefix else str(k), out, depth + 1, max_depth, skip, label_lists)
        return
    if label_lists and isinstance(node, list) and node and any(isinstance(x, (dict, list)) for x in node):
        for label, item in label_items(node):
            _walk(item, prefix + label, out, depth + 1, max_depth, skip, label_lists)
        return
    if prefix:
        out[prefix] = node


def label_items(items: List[Any]) -> List[Tuple[str, Any]]:
    """Name list items by a stable key (``[path=a.yaml]``, else ``[id=...]``, ``[name=...]``, else ``[3]``)."""
    for key in ("path", "id", "name"):
        labels = [item.get(key) if isinstance(item, dict) else None for item in items]
        if all(isinstance(x, str) and x for x in labels) and len(set(labels)) == len(labels):
            return [("[%s=%s]" % (key, lab), item) for lab, item in zip(labels, items)]
    return [("[%d]" % i, item) for i, item in enumerate(items)]


def changed(a: Dict[str, Any], b: Dict[str, Any]) -> List[Tuple[str, Any, Any]]:
    """``(path, value in a, value in b)`` for every path whose values differ, sorted; absent reads as None."""
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def cell(value: Any, width: int = 40) -> str:
    """A value in one short table cell: ``-`` for None, JSON for the rest, cut to ``width``."""
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[:width - 3] + "..."
