"""What differs between two runs, most important first (``diff``, ``report``'s two-run page, ``verify``'s likely
causes). Pure over two documents (:func:`diff_documents`); imports no probe: ``diff`` runs on a laptop with
nothing but Python, and starts fast.
"""

from __future__ import annotations

import re

from ..manifest import fields
from ..manifest.fields import MISSING, get
from ..manifest.flat import flatten
from ..std.records import Factory, Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

CATEGORIES: Tuple[str, ...] = (
    "code", "training", "config", "env", "packages", "environment", "hardware", "runtime", "data", "seeds",
    "other", "unrecorded", "volatile",
)
"""Display order: what most often explains a different result comes first."""

_SHORT = {"env": "selected env", "unrecorded": "not recorded"}
"""Category names in the summary line."""

_VOLATILE_TOP = frozenset({"run_id", "generated_at", "schema_version", "collection"})
_VOLATILE_KEYS = frozenset({"hostname", "job_id", "jobid", "array_job_id", "array_task_id", "step_id", "pid"})
_VOLATILE_ENV = frozenset({
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_STEP_ID", "SLURM_STEPID",
    "SLURM_TASK_PID", "SLURM_SUBMIT_HOST", "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR", "SLURM_JOB_START_TIME",
    "SLURM_JOB_END_TIME",
})
_OUTCOME_TIMES = re.compile(r"(^|_)(at|time|seconds|duration|duration_s)$")

_CODE_RANK = {"commit": 0, "branch": 1, "detached": 1, "dirty": 2, "patch": 3, "untracked": 4, "submodules": 5}
_KIND_RANK = {"added": 0, "removed": 1, "upgraded": 2, "downgraded": 3, "changed": 4}


class Change(Record):
    """One difference. ``old``/``new`` are MISSING when the field is absent on that side."""

    category: str
    path: str
    kind: str
    old: Any = MISSING
    new: Any = MISSING
    extra: Dict[str, Any] = Factory(dict)
    volatile: bool = False
    unrecorded: bool = False
    """One side says nothing (absent, null, empty, a cwd of "."): not a difference unless --all."""

    def __repr__(self) -> str:
        return "Change(%r, %r, %r)" % (self.category, self.path, self.kind)

    def as_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"category": self.category, "path": self.path, "kind": self.kind}
        if self.old is not MISSING:
            out["old"] = self.old
        if self.new is not MISSING:
            out["new"] = self.new
        out.update(self.extra)
        if self.volatile:
            out["volatile"] = True
        if self.unrecorded:
            out["unrecorded"] = True
        return out


# -- the comparison ---------------------------------------------------------------------------

def diff_documents(old: Mapping[str, Any], new: Mapping[str, Any], *, include_volatile: bool = False
                   ) -> Tuple[List[Change], Dict[str, int]]:
    """Every difference between two documents, ordered; and how many were hidden, by why
    (``volatile``: run ids, times; ``unrecorded``: one side says nothing). ``include_volatile`` (--all)
    shows both."""
    changes: List[Change] = []
    changes.extend(_diff_code(old, new))
    changes.extend(_diff_packages(old, new))
    per_node = _has_node_data(old) or _has_node_data(new)
    if per_node:
        # Node names are per run: compare the nodes as populations ("2 of 16 nodes: driver 550.54 -> 550.90").
        from ..manifest.nodes import diff_nodes  # lazy: ~7 ms (and std.sha), only for per-node documents

        for line in diff_nodes(dict(old), dict(new)):
            changes.append(Change("runtime", "runtime.nodes", "nodes", extra={"summary": line}))
    flat_old, flat_new = _flatten_doc(old, per_node), _flatten_doc(new, per_node)
    for path in sorted(set(flat_old) | set(flat_new)):
        a, b = flat_old.get(path, MISSING), flat_new.get(path, MISSING)
        if same(a, b):
            continue
        changes.append(_change(_category(path), path, a, b))
    if fields.is_relax(old) != fields.is_relax(new):
        # One run recorded by Relax's built-in writer, the other by relaxrepro: a field one tool writes and
        # the other never does (relax.path, user, python.executable) says nothing about the runs themselves.
        for c in changes:
            # (packages: _diff_packages knows which ones Relax looks up, and its absence of those is a finding)
            if c.kind != "nodes" and c.category != "packages" and (c.old is MISSING or c.new is MISSING):
                c.unrecorded = True
    hidden = {"volatile": 0, "unrecorded": 0}
    kept: List[Change] = []
    for c in changes:
        c.volatile = _is_volatile(c.path)
        if c.volatile or c.unrecorded:
            why = "volatile" if c.volatile else "unrecorded"
            c.category = why
            if not include_volatile:
                hidden[why] += 1
                continue
        kept.append(c)
    kept.sort(key=_order)
    return kept, hidden


def _change(category: str, path: str, a: Any, b: Any) -> Change:
    kind = "added" if a is MISSING else "removed" if b is MISSING else "changed"
    return Change(category, path, kind, a, b, unrecorded=_not_recorded(path, a, b))


_CWD = ("command.cwd", "command.working_directory")


def _not_recorded(path: str, a: Any, b: Any) -> bool:
    """Whether neither side says anything the other contradicts: absent vs null or empty (Relax writes
    ``null`` for every field it looked for and did not find, relaxrepro leaves it out), or a working
    directory of ``"."`` ("wherever it ran", as Relax always writes it) against any other."""
    if _empty(a) and _empty(b):
        return True
    return path in _CWD and (a == "." or b == ".")


def _empty(value: Any) -> bool:
    return value is MISSING or value is None or (isinstance(value, (str, list, dict)) and not value)


def same(a: Any, b: Any) -> bool:
    """Equal, the placeholders of both tools read alike (``<redacted>`` is ``***``, ``<home>`` is ``<HOME>``)."""
    if a == b and type(a) is type(b):
        return True
    if isinstance(a, str) and isinstance(b, str):
        return fields.placeholder_form(a) == fields.placeholder_form(b)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(same(x, y) for x, y in zip(a, b))
    return False


def _order(c: Change) -> Tuple[Any, ...]:
    rank = CATEGORIES.index(c.category) if c.category in CATEGORIES else len(CATEGORIES)
    if c.category == "code":
        parts = c.path.split(".")
        repo = parts[1] if len(parts) > 1 else ""
        return (rank, repo, _CODE_RANK.get(parts[2] if len(parts) > 2 else "", 6), c.path)
    if c.category == "packages":
        return (rank, _KIND_RANK.get(c.kind, 9), c.path)
    return (rank, 0, c.path)


def _category(path: str) -> str:
    head, _, rest = path.partition(".")
    if head == "config":
        return "env" if rest.startswith("selected_env") else "config"
    if head == "command":
        return "config"
    if head in ("scheduler", "container"):
        return "runtime"
    if head in CATEGORIES:
        return head
    return "other"


def _is_volatile(path: str) -> bool:
    parts = re.split(r"\.|\[", path)
    if parts[0] in _VOLATILE_TOP:
        return True
    last = parts[-1].rstrip("]")
    if last in _VOLATILE_KEYS:
        return True
    if path.startswith("config.selected_env.") and path[len("config.selected_env."):] in _VOLATILE_ENV:
        return True
    if parts[0] == "outcome" and _OUTCOME_TIMES.search(last):
        return True
    return False


# Handled field by field above, so the generic walk skips them.
_SPECIAL = ("code", "environment.packages", "environment.key_packages")
_SKIPPED = frozenset(_SPECIAL[1:])
"""Compared by their own rules (:func:`_diff_packages`), not path by path."""


def _has_node_data(doc: Mapping[str, Any]) -> bool:
    runtime = doc.get("runtime")
    nodes = runtime.get("nodes") if isinstance(runtime, dict) else None
    return isinstance(nodes, list) and any(isinstance(n, dict) and ("hardware" in n or "environment" in n)
                                           for n in nodes)


def _flatten_doc(doc: Mapping[str, Any], per_node: bool = False) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key in doc:
        if key == "code" or (per_node and key == "heterogeneity"):
            continue
        if per_node and key == "runtime" and isinstance(doc[key], dict):
            flatten({k: v for k, v in doc[key].items() if k not in ("nodes", "nodes_truncated")}, "runtime", out,
                    skip=_SKIPPED, label_lists=True)
            continue
        flatten(doc[key], str(key), out, skip=_SKIPPED, label_lists=True)
    for special in _SPECIAL[1:]:
        for path in [p for p in out if p == special or p.startswith(special + ".")]:
            del out[path]
    if fields.is_relax(doc):
        # The reader copied Relax's fields to relaxrepro's names and kept the originals: compare the copy only.
        for path in [p for p in out if fields.relax_twin(doc, p)]:
            del out[path]
    out.pop("command.working_directory", None)  # Relax's name for command.cwd; its own diff skips it too
    return out


def _pair_repos(old: Dict[str, Any], new: Dict[str, Any]) -> List[Tuple[Any, Any]]:
    """Repository names of both sides, paired; ``relax`` and ``Relax`` are one repo when nothing else
    could be (Relax names its checkout ``relax``, relaxrepro after the directory)."""
    pairs = [(name, name) for name in old if name in new]
    only_old = [n for n in old if n not in new]
    only_new = [n for n in new if n not in old]
    for name in only_old:
        folded = str(name).casefold()
        match = [n for n in only_new if str(n).casefold() == folded]
        if len(match) == 1 and sum(str(n).casefold() == folded for n in old) == 1:
            pairs.append((name, match[0]))
            only_new.remove(match[0])
        else:
            pairs.append((name, MISSING))
    pairs.extend((MISSING, n) for n in only_new)
    return sorted(pairs, key=lambda p: str(p[1] if p[0] is MISSING else p[0]).casefold())


def _diff_code(old_doc: Mapping[str, Any], new_doc: Mapping[str, Any]) -> List[Change]:
    old = old_doc.get("code")
    new = new_doc.get("code")
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    out: List[Change] = []
    for name_a, name_b in _pair_repos(old, new):
        name = name_b if name_a is MISSING else name_a
        base = "code.%s" % name
        if name_a is MISSING or name_b is MISSING:
            repo = new[name_b] if name_a is MISSING else old[name_a]
            out.append(Change("code", base, "added" if name_a is MISSING else "removed",
                              extra={"commit": get(repo, "commit", None)}))
            continue
        a = old[name_a] if isinstance(old[name_a], dict) else {}
        b = new[name_b] if isinstance(new[name_b], dict) else {}
        patch = _diff_patch(a.get("patch"), b.get("patch"))
        if patch is not None:
            patch.path = base + ".patch"
            out.append(patch)
        untracked = _diff_untracked(a.get("untracked"), b.get("untracked"))
        if untracked is not None:
            untracked.path = base + ".untracked"
            out.append(untracked)
        flat_a = _flatten_repo(old_doc, name_a, a, base)
        flat_b = _flatten_repo(new_doc, name_b, b, base)
        for path in sorted(set(flat_a) | set(flat_b)):
            x, y = flat_a.get(path, MISSING), flat_b.get(path, MISSING)
            if same(x, y):
                continue
            out.append(_change("code", path, x, y))
    return out


def _flatten_repo(doc: Mapping[str, Any], name: Any, repo: Dict[str, Any], base: str) -> Dict[str, Any]:
    """One repository's fields under ``base`` (the paired name), Relax's originals with a twin left out."""
    flat: Dict[str, Any] = {}
    relax = fields.is_relax(doc)
    for key in repo:
        if key in ("patch", "untracked"):
            continue
        if relax and fields.relax_twin(doc, "code.%s.%s" % (name, key)):
            continue
        flatten(repo[key], "%s.%s" % (base, key), flat, skip=_SKIPPED, label_lists=True)
    return flat


def _diff_patch(a: Any, b: Any) -> Optional[Change]:
    da, db = fields.patch_digest(a, partial=True), fields.patch_digest(b, partial=True)
    # A patch not taken in full (git diff timed out, too big) proves nothing by its digest: two such
    # patches with the same stored part may still differ, so the pair is never called the same.
    why = fields.patch_incomplete(a) or fields.patch_incomplete(b)
    if da == db and not why:
        return None
    fa, fb = fields.untracked_files(a), fields.untracked_files(b)
    kind = "added" if da is None and not why else "removed" if db is None and not why else "changed"
    extra = {
        "files": sorted(set(fa) | set(fb)),
        "files_added": sorted(set(fb) - set(fa)),
        "files_removed": sorted(set(fa) - set(fb)),
    }
    if why:
        extra["incomplete"] = why
    return Change("code", "", kind, da if da is not None else MISSING, db if db is not None else MISSING,
                  extra=extra)


def _diff_untracked(a: Any, b: Any) -> Optional[Change]:
    def count(u: Any) -> Any:
        if isinstance(u, dict):
            return u.get("count", len(fields.untracked_files(u)))
        return u if isinstance(u, int) else MISSING

    ca, cb = count(a), count(b)
    fa, fb = fields.untracked_files(a), fields.untracked_files(b)
    if ca == cb and fa == fb:
        return None
    kind = "added" if ca is MISSING else "removed" if cb is MISSING else "changed"
    return Change("code", "", kind, ca, cb, extra={"files_added": sorted(set(fb) - set(fa)),
                                                   "files_removed": sorted(set(fa) - set(fb))})


def _diff_packages(old: Mapping[str, Any], new: Mapping[str, Any]) -> List[Change]:
    pa, pb = fields.packages(old), fields.packages(new)
    if pa is None and pb is None:
        return []
    if pa is None or pb is None:
        which = pb if pa is None else pa
        return [Change("packages", "environment.packages", "added" if pa is None else "removed",
                       extra={"count": len(which or {})})]
    # Relax looks up seven distributions only: another one it lacks was never looked for.
    looked_a = None if not fields.is_relax(old) else fields.RELAX_PACKAGES
    looked_b = None if not fields.is_relax(new) else fields.RELAX_PACKAGES
    out = []
    for name in sorted(set(pa) | set(pb)):
        a, b = pa.get(name, MISSING), pb.get(name, MISSING)
        if a == b:
            continue
        unlooked = (a is MISSING and looked_a is not None and name not in looked_a) or (
            b is MISSING and looked_b is not None and name not in looked_b)
        if a is MISSING:
            kind = "added"
        elif b is MISSING:
            kind = "removed"
        else:
            order = fields.version_order(a, b)
            kind = "upgraded" if order > 0 else "downgraded" if order < 0 else "changed"
        out.append(Change("packages", "environment.packages." + name, kind, a, b, unrecorded=unlooked))
    return out


# -- in one line -------------------------------------------------------------------------------

def summary_line(changes: List[Change], hidden: Mapping[str, int], how: str = "; --all shows them") -> str:
    """One line: ``3 differences: code 1, packages 2`` and what was hidden (``how``: how to see it, where the
    reader can; a page cannot take ``--all``)."""
    counts: Dict[str, int] = {}
    for c in changes:
        counts[c.category] = counts.get(c.category, 0) + 1
    notes = []
    volatile, unrecorded = hidden.get("volatile", 0), hidden.get("unrecorded", 0)
    if volatile:
        notes.append("%d volatile field%s hidden" % (volatile, "" if volatile == 1 else "s"))
    if unrecorded:
        notes.append("%d field%s not recorded on one side" % (unrecorded, "" if unrecorded == 1 else "s"))
    note = " (%s%s)" % (", ".join(notes), how) if notes else ""
    if not changes:
        return "identical" + note
    parts = ", ".join("%s %d" % (_SHORT.get(k, k), counts[k]) for k in CATEGORIES if k in counts)
    return "%d difference%s: %s%s" % (len(changes), "" if len(changes) == 1 else "s", parts, note)
