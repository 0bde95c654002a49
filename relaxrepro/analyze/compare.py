"""A sweep side by side: the runs of one ``lineage.group`` and only what varies across them (``compare``,
``report``'s sweep sections).

What is compared: resolved arguments (``arg.*``), selected environment (``env.*``), installed
packages (``pkg.*``) and code (``code.<repo>``: short commit, ``*`` when dirty, plus the patch
digest so two dirty runs with different edits differ). Everything equal in all runs is left out.
"""

from __future__ import annotations

import json
import math
import os

from ..manifest import runindex, summary
from ..manifest.fields import patch_incomplete
from ..manifest.flat import ARG_DEPTH, flatten
from ..manifest.reader import ManifestError, load_manifest
from ..std.sha import sha256_hex
from .verify import DIVERGED, REPRODUCED, verify

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple


_NOT_FULLY_RECORDED = " patch:not fully recorded"
_TEXT_ONLY = {str}


def value_parts(doc: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The comparable values of one run, flat, in two parts with no key in common: (``arg.lr``,
    ``env.NCCL_ALGO``, ``code.repo``; ``pkg.torch``). The package table is most of a run's values and most runs
    of a tree share it: a sweep from stored facts (:func:`compare_facts`) keeps one copy of each table, and
    compares a table all its runs share once."""
    own: Dict[str, Any] = {}
    pkgs: Dict[str, Any] = {}
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
    for prefix, node, out in (("arg", config.get("resolved_args"), own), ("env", config.get("selected_env"), own),
                              ("pkg", env.get("packages"), pkgs)):
        if isinstance(node, dict):
            if set(map(type, node.values())) <= _TEXT_ONLY:  # a package list, flat: flatten's answer, directly
                out.update({"%s.%s" % (prefix, k): v for k, v in node.items() if k})
                continue
            flat = flatten(node, max_depth=ARG_DEPTH)
            out.update({"%s.%s" % (prefix, k): v for k, v in flat.items()})
    code = doc.get("code")
    if isinstance(code, dict):
        for name, repo in code.items():
            if isinstance(repo, dict):
                cell = summary.short(repo.get("commit")) + ("*" if repo.get("dirty") else "")
                patch = repo.get("patch")
                if repo.get("dirty") and patch_incomplete(patch):
                    cell += _NOT_FULLY_RECORDED
                elif repo.get("dirty") and isinstance(patch, dict) and isinstance(patch.get("sha256"), str):
                    cell += " patch:" + patch["sha256"][:7]
                own["code.%s" % name] = cell
    return own, pkgs


def run_facts(doc: Dict[str, Any], keyed: bool = False) -> Dict[str, Any]:
    """What a sweep (:func:`compare_facts`) needs of one run, as JSON: ``run_id``, ``generated_at``, ``note``,
    ``replay_of`` (a run id or None), ``values`` and ``packages`` (:func:`value_parts`), ``metrics`` (the
    recorded table, None when there is none) and ``outputs``/``trace``: the keys its reproducibility is told by
    (:func:`repro_keys`), ``doc``: the document's :func:`doc_key` with ``keyed``, else None (what tells a copy
    of the run from another file of its id; without it, the two documents are compared). Small next to the
    document: the trace, the outputs and the patches are digests here."""
    lin = summary.lineage_of(doc)
    replay_of = lin.get("replay_of")
    results = doc.get("results") if isinstance(doc.get("results"), dict) else {}
    own, pkgs = value_parts(doc)
    outputs, trace = repro_keys(results)
    return {"run_id": doc.get("run_id"), "generated_at": doc.get("generated_at"), "note": lin.get("note"),
            "replay_of": replay_of if isinstance(replay_of, str) else None, "values": own, "packages": pkgs,
            "metrics": results.get("metrics") if isinstance(results.get("metrics"), dict) else None,
            "outputs": outputs, "trace": trace, "doc": doc_key(doc) if keyed else None}


def doc_key(doc: Any) -> str:
    """A digest two documents share exactly when Python finds them equal (``==``): a number reads the same
    whether written ``1``, ``1.0`` or ``true``, keys in any order (a reader's document holds no NaN). Made
    from the values themselves, each string as it is (a 3 MB patch is not escaped again as JSON text)."""
    import hashlib  # lazy: OpenSSL's sha256 (~5 ms to load), 5x the builtin's speed on a whole document

    parts: List[str] = []
    _key_parts(doc, parts)
    return hashlib.sha256("".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _key_parts(value: Any, out: List[str]) -> None:
    """``value`` as text, each piece told apart by a tag and each string by its length."""
    kind = type(value)
    if kind is dict:
        out.append("{%d" % len(value))
        for k in sorted(value, key=str):
            v = value[k]
            if type(v) is str:  # most of a document: a package table, an environment
                out.append("%d:%s%d:%s" % (len(str(k)), k, len(v), v))
            else:
                out.append("%d:%s" % (len(str(k)), k))
                _key_parts(v, out)
    elif kind is str:
        out.append("%d:%s" % (len(value), value))
    elif kind is list:
        out.append("[%d" % len(value))
        for v in value:
            _key_parts(v, out)
    elif value is None:
        out.append("z")
    elif kind is float and not value.is_integer():
        out.append("f%r" % value)
    elif isinstance(value, (int, float)):  # bool, int, BigInt, a float that is a whole number: equal as numbers
        out.append("n%d" % int(value))
    else:
        out.append("?%r" % (value,))


def compare_group(group: str, roots: Sequence[str], *, use_index: bool = True,
                  warnings: Optional[List[str]] = None) -> Dict[str, Any]:
    """``{group, runs: [{run_id, path, generated_at, note, replay_of}], varying: {key: [value per run]}, compared,
    unreadable: [...], copies: [paths of identical copies of a run's manifest, counted once], metrics,
    reproducibility, replays}``; runs ordered by time. ``warnings``: where to add what the run index says.

    A replay (``lineage.replay_of``, ``rerun --confirm``) is listed with the group's runs but kept out of its
    metrics and reproducibility: it is judged against its own original instead (:func:`replays`)."""
    src = runindex.open_roots(roots, use_index=use_index)
    try:
        if warnings is not None:
            warnings.extend(src.warnings)
        members = [e for e in src.lookup("group", group) if e.run_id is not None]
        lost = src.lookup("run_id", None)
    finally:
        src.close()
    members.sort(key=lambda e: (e.generated_at, e.run_id or ""))
    # A file that cannot be read may be of the group: say so rather than compare without it in silence.
    unreadable: List[str] = ["%s: %s" % (e.path, e.error) for e in lost]
    loaded: List[Tuple[str, Dict[str, Any]]] = []
    for e in members:
        try:
            loaded.append((e.path, load_manifest(e.path)))
        except ManifestError as exc:
            unreadable.append("%s: %s" % (e.path, exc))
    return compare_docs(group, loaded, unreadable)


def compare_docs(group: str, loaded: Sequence[Tuple[str, Dict[str, Any]]], unreadable: List[str]) -> Dict[str, Any]:
    """:func:`compare_group`'s result for documents already read: ``loaded``, the group's (path, whole document)
    in time order; ``unreadable``: lines about the files that could not be read."""
    whole = dict(loaded)
    return compare_facts(group, [(path, run_facts(doc)) for path, doc in loaded], unreadable, whole.__getitem__)


def compare_facts(group: str, facts: Sequence[Tuple[str, Dict[str, Any]]], unreadable: List[str],
                  load: Callable[[str], Dict[str, Any]]) -> Dict[str, Any]:
    """:func:`compare_docs` from each run's :func:`run_facts` (``facts``: (path, facts) in time order), as a run
    index stores them; ``load(path)`` gives a whole document, asked only where the facts cannot tell: two files
    of one run id without both their :func:`doc_key` (a copy, or another run?), a replay and its original
    (verified on their outputs and traces). Runs whose ``packages`` are one object are compared on them once."""
    runs: List[Dict[str, Any]] = []
    parts: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []
    results: List[Tuple[Any, Any, Any]] = []
    seen: Dict[Any, Tuple[str, Dict[str, Any]]] = {}  # run id -> (path, facts) of the last file of it counted
    copies: List[str] = []
    for path, f in facts:
        # A tracker's copy (TensorBoard's log dir, MLflow's local artifact store) is the same run again:
        # counted twice it would skew the group's statistics and reproducibility.
        rid = f["run_id"]
        if rid in seen and _same(seen[rid], (path, f), load):
            copies.append(path)
            continue
        seen[rid] = (path, f)
        runs.append({"run_id": rid, "path": path, "generated_at": f["generated_at"], "note": f["note"],
                     "replay_of": f["replay_of"]})
        parts.append((f["values"], f["packages"]))
        results.append((f["metrics"], f["outputs"], f["trace"]))
    varying, compared = _varying(parts)
    own = [r for r, run in zip(results, runs) if not run["replay_of"]]
    return {"group": group, "runs": runs, "varying": varying, "compared": compared, "unreadable": sorted(unreadable),
            "metrics": metric_stats([{"metrics": m} for m, _, _ in own]),
            "reproducibility": reproducibility([(o, t) for _, o, t in own]),
            "copies": copies, "replays": replays(runs, load)}


def _same(a: Tuple[str, Dict[str, Any]], b: Tuple[str, Dict[str, Any]], load: Callable[[str], Dict[str, Any]]
          ) -> bool:
    """Whether two files of a run id hold equal documents: by their :func:`doc_key` when both have one."""
    if a[1]["doc"] is not None and b[1]["doc"] is not None:
        return bool(a[1]["doc"] == b[1]["doc"])
    return load(a[0]) == load(b[0])


def _varying(parts: Sequence[Tuple[Dict[str, Any], ...]]) -> Tuple[Dict[str, List[Any]], int]:
    """({key: [value per run]} of the keys whose values differ, sorted; how many keys were compared), ``parts``
    being each run's values in parts with no key in common. A part that is one object in every run is
    compared once: its values are the same in each run."""
    if not parts:
        return {}, 0
    n, width = len(parts), len(parts[0])
    shared = [all(p[i] is parts[0][i] for p in parts) for i in range(width)]
    same: Dict[str, Any] = {}
    for i in range(width):
        if shared[i]:
            same.update(parts[0][i])
    flat = [{k: v for i, part in enumerate(p) if not shared[i] for k, v in part.items()} for p in parts]
    own = set().union(*flat)
    found = {}
    # Patches not taken in full cannot be told apart: such a row is always shown, never "the same" (the values
    # are all equal when that is asked: the first one says it for all).
    if n > 1:
        for k, first in same.items():
            if isinstance(first, str) and first.endswith(_NOT_FULLY_RECORDED):
                found[k] = [first] * n
    for k in own.difference(same):
        column = [f.get(k) for f in flat]
        first = column[0]
        if column.count(first) != n or (n > 1 and isinstance(first, str) and first.endswith(_NOT_FULLY_RECORDED)):
            found[k] = column
    return {k: found[k] for k in sorted(found)}, len(own.union(same))


def replays(runs: Sequence[Dict[str, Any]], load: Callable[[str], Dict[str, Any]]) -> Dict[str, Any]:
    """``{runs, reproduced, diverged, unverified}``: each replay verified against its original (bit-exact; a
    ``--quick`` replay on the trace steps it ran), outputs matched by their place in each run's directory.
    A replay whose original is not in the group, or that recorded nothing to compare, is unverified; each
    run's entry in ``runs`` gets its ``verdict``. ``load(path)``: a run's whole document."""
    by_id = {str(run["run_id"]): run for run in runs}
    out = {"runs": 0, "reproduced": 0, "diverged": 0, "unverified": 0}
    for run in runs:
        if not run["replay_of"]:
            continue
        out["runs"] += 1
        original = by_id.get(run["replay_of"])
        verdict = _judge(load(original["path"]), original["path"], load(run["path"]), run["path"]) \
            if original else None
        run["verdict"] = verdict
        key = "unverified" if verdict is None else "reproduced" if verdict == REPRODUCED else "diverged"
        out[key] += 1
    return out


def _judge(old: Dict[str, Any], old_path: str, new: Dict[str, Any], new_path: str) -> Optional[str]:
    trace_old = ((old.get("results") or {}).get("trace") or {}) if isinstance(old.get("results"), dict) else {}
    trace_new = ((new.get("results") or {}).get("trace") or {}) if isinstance(new.get("results"), dict) else {}
    steps_old, steps_new = trace_old.get("steps"), trace_new.get("steps")
    steps = None
    if isinstance(steps_old, list) and isinstance(steps_new, list) and 0 < len(steps_new) < len(steps_old):
        steps = len(steps_new)  # a --quick replay: stopped after its first steps
    result = verify(_by_place(old, old_path), _by_place(new, new_path), steps=steps)
    return None if result.get("verdict") not in (REPRODUCED, DIVERGED) else str(result["verdict"])


def _by_place(doc: Dict[str, Any], path: str) -> Dict[str, Any]:
    """``doc`` with its outputs keyed by where they lie in its own run directory (``runs/a/w.pt`` and
    ``runs/a.replay-1/w.pt`` are both ``w.pt``), else by their file name."""
    results = doc.get("results")
    if not isinstance(results, dict) or not isinstance(results.get("outputs"), dict):
        return doc
    cwd = (doc.get("command") or {}).get("cwd") if isinstance(doc.get("command"), dict) else None
    directory = os.path.dirname(os.path.abspath(path))
    keyed = {}
    for key, value in results["outputs"].items():
        full = os.path.normpath(os.path.join(cwd, key)) if isinstance(cwd, str) and os.path.isabs(cwd) else key
        rel = os.path.relpath(full, directory) if full.startswith(directory + os.sep) else os.path.basename(key)
        keyed[rel] = value
    return dict(doc, results=dict(results, outputs=keyed))


def replays_line(result: Dict[str, Any]) -> Optional[str]:
    """``replays: 3, reproduced 3`` (and how many diverged or could not be verified), or None without one."""
    r = result.get("replays") or {}
    if not r.get("runs"):
        return None
    text = "replays: %d, reproduced %d" % (r["runs"], r["reproduced"])
    if r.get("diverged"):
        text += ", diverged %d" % r["diverged"]
    if r.get("unverified"):
        text += ", %d not verified (original not in the group, or nothing to compare)" % r["unverified"]
    return text


def metric_stats(results: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per metric across the runs that recorded it: ``{runs, mean, std, min, max}`` over the finite values
    (``std``: the sample standard deviation, 0 for one run), ``non_finite``: how many were NaN or infinite."""
    columns: Dict[str, List[float]] = {}
    odd: Dict[str, int] = {}
    for r in results:
        metrics = r.get("metrics") if isinstance(r.get("metrics"), dict) else {}
        for name, value in metrics.items():
            try:
                x = float(value)  # "NaN", "Infinity" read back as the contract says
            except (TypeError, ValueError):
                continue
            if math.isfinite(x) and not isinstance(value, bool):
                columns.setdefault(name, []).append(x)
            else:
                odd[name] = odd.get(name, 0) + 1
    out: Dict[str, Dict[str, Any]] = {}
    for name in sorted(set(columns) | set(odd)):
        xs = columns.get(name, [])
        entry: Dict[str, Any] = {"runs": len(xs) + odd.get(name, 0)}
        if xs:
            mean = math.fsum(xs) / len(xs)
            std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
            entry.update(mean=mean, std=std, min=min(xs), max=max(xs))
        if odd.get(name):
            entry["non_finite"] = odd[name]
        out[name] = entry
    return out


def reproducibility(keys: Sequence[Tuple[Optional[str], Optional[str]]]) -> Dict[str, Dict[str, Any]]:
    """How alike the runs came out, from each run's :func:`repro_keys`: ``outputs`` (the weight-hash match rate:
    runs whose output digests all equal the most common set's, wherever each run wrote them) and ``trace``
    (runs whose trace is bit-identical to the most common one), each ``{runs, matching, rate}`` over the runs
    that recorded it in full."""
    return {"outputs": _share([o for o, _ in keys if o is not None]),
            "trace": _share([t for _, t in keys if t is not None])}


def repro_keys(results: Dict[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """What :func:`reproducibility` tells one run's ``results`` by: (a digest of its output digests, None when
    not all were taken in full; a digest of its trace, None without one). Runs match where the keys are equal."""
    outputs = trace_key = None
    out = results.get("outputs")
    if isinstance(out, dict) and out:
        # By content alone: each run of a sweep writes its weights into its own directory, so the paths
        # always differ (runs/a/weights.pt, runs/b/weights.pt) where the files may not.
        digests = [e.get("sha256") if isinstance(e, dict) else None for e in out.values()]
        if all(isinstance(d, str) for d in digests):  # a digest not taken in full matches nothing
            outputs = _digest(json.dumps(sorted(digests)))
    trace = results.get("trace")
    if isinstance(trace, dict) and trace.get("steps"):
        trace_key = _digest(json.dumps({k: trace.get(k) for k in ("steps", "names", "values", "last_step", "calls")},
                                       sort_keys=True))
    return outputs, trace_key


def _digest(text: str) -> str:
    return sha256_hex(text.encode())  # ASCII: json.dumps escapes the rest


def _share(keys: List[str]) -> Dict[str, Any]:
    if not keys:
        return {"runs": 0, "matching": 0, "rate": None}
    top = max(keys.count(k) for k in set(keys))
    return {"runs": len(keys), "matching": top, "rate": top / len(keys)}
