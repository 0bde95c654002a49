"""A run's ancestry (its parents back to the root, and what changed at each step) and its descendants, from
the manifests under some directories (``lineage``, ``report``'s run page)."""

from __future__ import annotations

import os

from ..manifest import runindex
from ..manifest.fields import patch_digest, patch_incomplete
from ..manifest.flat import ARG_DEPTH, cell, changed, flatten
from ..manifest.reader import ManifestError, load_manifest
from ..manifest.runrow import read_row
from ..manifest.summary import gpu_cell, repos, short

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Sequence


def descendants(run: str, roots: Sequence[str], *, use_index: bool = True,
                warnings: Optional[List[str]] = None, src: Any = None) -> Dict[str, Any]:
    """The runs descended from ``run`` (a run id or a manifest path), as a tree.

    Returns ``{"root": node | None, "cycle": [...] | None, "error": str | None, "unreadable": ["path: why",
    ...]}``; a node is ``{run_id, path, generated_at, children: [node, ...]}``, children by time. A run met
    twice is listed once, under the first parent found; when it is met below itself, ``cycle`` names the loop
    as :func:`ancestry` does (``A -> B -> A``). Walked with a stack, not recursion: a chain of any length.
    ``warnings``: where to add what the run index says (a database bypassed or rebuilt). ``src``: the roots
    opened already (``runindex.open_roots``, left open), so that a command that found the run there walks once.
    """
    own = src is None
    src = runindex.open_roots(roots, use_index=use_index) if own else src
    try:
        if warnings is not None:
            warnings.extend(src.warnings)
        unreadable = sorted("%s: %s" % (r.path, r.error) for r in src.lookup("run_id", None))
        start = None
        if os.path.isfile(run):  # this file, however it is spelled (./runs/x.json), else its run id's first
            rid = read_row(run)[0].run_id
            rows = src.lookup("run_id", rid) if rid else []
            real = os.path.realpath(run)
            start = next((r for r in rows if os.path.realpath(r.path) == real), None) or next(iter(rows), None)
        start = start or next(iter(src.lookup("run_id", run)), None)
        if start is None:
            return {"root": None, "cycle": None, "error": "run %s not found under %s" % (run, ", ".join(roots)),
                    "unreadable": unreadable}
        up: Dict[Any, Any] = {start.run_id: None}  # each run listed -> the run it is listed under
        cycle: Optional[List[str]] = None
        root = _node(start)
        stack = [(start, root)]
        while stack:
            r, here = stack.pop()
            found = sorted((c for c in src.lookup("parent", r.run_id) if c.run_id is not None),
                           key=lambda c: (c.generated_at, c.run_id or ""))
            kids = []
            for c in found:
                if c.run_id not in up:
                    up[c.run_id] = r.run_id
                    kids.append(c)
                elif cycle is None and _above(up, r.run_id, c.run_id):
                    cycle = _loop(up, r.run_id, c.run_id)
            here["children"] = [_node(c) for c in kids]
            stack.extend(reversed(list(zip(kids, here["children"]))))
        return {"root": root, "cycle": cycle, "error": None, "unreadable": unreadable}
    finally:
        if own:
            src.close()


def _node(r: Any) -> Dict[str, Any]:
    return {"run_id": r.run_id, "path": r.path, "generated_at": r.generated_at or None, "children": []}


def _above(up: Dict[Any, Any], run_id: Any, other: Any) -> bool:
    """Whether ``other`` is ``run_id`` or listed above it (its parent's parent ...)."""
    while run_id is not None:
        if run_id == other:
            return True
        run_id = up[run_id]
    return False


def _loop(up: Dict[Any, Any], run_id: Any, back_to: Any) -> List[str]:
    """The loop ``back_to`` closes as a child of ``run_id``, each run followed by its parent as
    :func:`ancestry` names it: ``back_to -> run_id -> run_id's parent ... -> back_to``."""
    path = [run_id]
    while path[-1] != back_to:
        path.append(up[path[-1]])
    return [str(back_to)] + [str(x) for x in path[:-1]] + [str(back_to)]


def ancestry(run: str, roots: Sequence[str], *, use_index: bool = True,
             warnings: Optional[List[str]] = None, src: Any = None) -> Dict[str, Any]:
    """The chain of ``run`` (a run id or a manifest path) back to its root, oldest first.

    Returns ``{"chain": [...], "steps": [...], "cycle": [...] | None, "missing": run id | None,
    "error": str | None, "unreadable": ["path: why", ...]}``. Each chain item is ``{run_id, path,
    generated_at}`` (``missing: True`` for a parent that was recorded but not found); each step says
    how a run differs from its parent. ``warnings``, ``src``: as :func:`descendants` says.
    """
    own = src is None
    src = runindex.open_roots(roots, use_index=use_index) if own else src
    try:
        if warnings is not None:
            warnings.extend(src.warnings)
        unreadable = sorted("%s: %s" % (e.path, e.error) for e in src.lookup("run_id", None))
        return _ancestry(run, roots, unreadable,
                         lambda rid: next((r.path for r in src.lookup("run_id", rid)), None) if rid else None)
    finally:
        if own:
            src.close()


def _parent(doc: Dict[str, Any]) -> Any:
    lin = doc.get("lineage")
    return lin.get("parent") if isinstance(lin, dict) else None


def _ancestry(run: str, roots: Sequence[str], unreadable: List[str], by_id: Callable[[str], Optional[str]]
              ) -> Dict[str, Any]:
    """Walked from ``run`` up, one manifest in memory at a time: each step is summarised as soon as the
    parent is read (a chain of 10,000 runs does not hold 10,000 documents), and a run is known as seen by
    a set, not by a search of the chain so far."""
    result: Dict[str, Any] = {"chain": [], "steps": [], "cycle": None, "missing": None, "error": None,
                              "unreadable": unreadable}
    if os.path.isfile(run):
        start_path: Optional[str] = run
    else:
        start_path = by_id(run)
    if start_path is None:
        result["error"] = "run %s not found under %s" % (run, ", ".join(roots))
        return result
    chain: List[Dict[str, Any]] = []  # newest first, as walked; reversed at the end
    steps: List[Dict[str, Any]] = []
    order: List[str] = []
    seen: Dict[str, int] = {}  # run id -> its place in order
    child: Optional[Dict[str, Any]] = None  # the document read just before, whose parent this one is
    child_views: List[Dict[str, Any]] = []  # its flat views (_views): each document is flattened once
    path: Optional[str] = start_path
    while path is not None:
        try:
            doc = load_manifest(path)
        except ManifestError as exc:
            result["error"] = "%s: %s" % (path, exc)
            break
        run_id = str(doc.get("run_id"))
        if run_id in seen:
            result["cycle"] = order[seen[run_id]:] + [run_id]
            break
        seen[run_id] = len(order)
        order.append(run_id)
        views = _views(doc)
        if child is not None:
            steps.append({"from": doc.get("run_id"), "to": child.get("run_id"),
                          "reason": str(_parent(child).get("reason") or "explicit"),
                          "summary": _summary(doc, child, views, child_views)})
        chain.append({"run_id": doc.get("run_id"), "path": path, "generated_at": doc.get("generated_at"),
                      "missing": False})
        child, child_views = doc, views
        parent = _parent(doc)
        if not isinstance(parent, dict):
            break
        pid = parent.get("run_id")
        path = by_id(pid) if pid else None
        if path is None and isinstance(parent.get("path"), str) and os.path.isfile(parent["path"]):
            path = parent["path"]  # recorded outside the directories searched, and still there
        if path is None:
            result["missing"] = pid or parent.get("given") or "?"
            break
    oldest = _parent(child) if child is not None else None
    if isinstance(oldest, dict) and (result["missing"] or result["cycle"]):
        text = "parent missing, nothing to compare" if result["missing"] else \
            "parent %s is also its descendant: cycle" % oldest.get("run_id")
        steps.append({"from": oldest.get("run_id"), "to": child.get("run_id"),
                      "reason": str(oldest.get("reason") or "explicit"), "summary": text})
    if result["missing"]:
        chain.append({"run_id": result["missing"], "path": None, "generated_at": None, "missing": True})
    chain.reverse()
    steps.reverse()
    result["chain"], result["steps"] = chain, steps
    return result


_VIEWS = (("args", ("config", "resolved_args")), ("env", ("config", "selected_env")),
          ("packages", ("environment", "packages")))


def _views(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The flat args, env and packages of ``doc``, as :func:`_summary` compares them."""
    return [_flat(doc, where) for _label, where in _VIEWS]


def _summary(old: Dict[str, Any], new: Dict[str, Any], old_views: List[Dict[str, Any]],
             new_views: List[Dict[str, Any]]) -> str:
    """One line: what changed from ``old`` to ``new`` in code, args, env, packages and GPUs (``*_views``:
    their :func:`_views`).

    More specific than ``diff``'s summary line (which counts changes per category): an ancestry
    reads best with the values themselves, ``lr 0.001 -> 0.0003``.
    """
    parts = []
    old_code = {r["name"]: r for r in repos(old)}
    new_code = {r["name"]: r for r in repos(new)}
    code = []
    for name in sorted(set(old_code) | set(new_code)):
        a, b = old_code.get(name), new_code.get(name)
        if a is None or b is None:
            code.append("%s %s" % (name, "added" if a is None else "removed"))
        elif a["commit"] != b["commit"] or bool(a["dirty"]) != bool(b["dirty"]):
            code.append("%s %s%s -> %s%s" % (name, short(a["commit"]), "*" if a["dirty"] else "",
                                           short(b["commit"]), "*" if b["dirty"] else ""))
        elif a["dirty"]:
            pa, pb = _patch(old, name), _patch(new, name)
            if patch_incomplete(pa) or patch_incomplete(pb):
                code.append("%s uncommitted changes not fully recorded" % name)
            elif patch_digest(pa) != patch_digest(pb):
                code.append("%s uncommitted changes differ" % name)
    if code:
        parts.append("code: " + ", ".join(code))
    for (label, _where), a_view, b_view in zip(_VIEWS, old_views, new_views):
        diffs = changed(a_view, b_view)
        if diffs:
            shown = ["%s %s -> %s" % (k, cell(a), cell(b)) for k, a, b in diffs[:3]]
            more = " (+%d more)" % (len(diffs) - 3) if len(diffs) > 3 else ""
            parts.append("%s: %s%s" % (label, ", ".join(shown), more))
    if gpu_cell(old) != gpu_cell(new):
        parts.append("gpus: %s -> %s" % (gpu_cell(old), gpu_cell(new)))
    return "; ".join(parts) if parts else "no change in code, args, env, packages or GPUs"


def _patch(doc: Dict[str, Any], name: str) -> Any:
    repo = doc["code"][name]  # present: repos() listed it
    return repo.get("patch")


def _flat(doc: Dict[str, Any], where: Sequence[str]) -> Dict[str, Any]:
    node: Any = doc
    for key in where:
        node = node.get(key) if isinstance(node, dict) else None
    return flatten(node, max_depth=ARG_DEPTH) if isinstance(node, dict) else {}
