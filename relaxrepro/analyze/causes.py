"""Why two runs may have come out differently (``verify``'s likely causes), the difference that matters first.

Pure over two documents, from :func:`relaxrepro.analyze.diff.diff_documents`. Ranked by how likely each is to
change the numbers: code, packages, arguments and environment that are not paths, data (and paths that are not
the run's own), seeds and determinism settings, hardware; then determinism switched off in both runs (it lets
two identical runs part, but explains no difference); last, paths that merely point at each run's own
directory (``--log-dir runs/a`` against ``runs/b``, the other run's outputs among the untracked files). A
run's own directories are where its outputs (``results.outputs``) and its manifest (``manifest_<run id>.json``
among a repository's files) lie. A changed argv is shown where the two differ (``command.argv[3]``), an
element that a resolved argument already names not again.
"""

from __future__ import annotations

import json

from ..manifest import fields
from ..manifest.fields import MISSING
from .diff import diff_documents

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

MAX_CAUSES = 8
"""Lines of likely causes at most."""

OWN = "paths into each run's own directory"
BOTH_OFF = "determinism switches off in both runs"

_HARDWARE = (("gpu", "another GPU model"), ("driver", "another GPU driver"), ("cudnn", "another cuDNN"),
             ("nccl", "another NCCL"), ("cuda", "another CUDA"))
_ORDER = ("other code", "other packages", "other arguments or environment", "other data",
          "determinism switches off", "another seed", "generators in another state", "other determinism settings",
          "another GPU model", "another GPU driver", "another cuDNN", "another NCCL", "another CUDA",
          "another world size", BOTH_OFF, OWN)
"""The buckets, most likely to change the numbers first."""

_PATH_KEYS = ("dir", "path", "file", "root", "folder", "prefix")
"""An argument named ``*dir``, ``*_path``... holds a path even where its value has no slash."""


def likely_causes(old: Mapping[str, Any], new: Mapping[str, Any]) -> List[str]:
    """What in the two manifests most likely explains a different result, one line per kind, most likely first
    (see the module docstring); at most :data:`MAX_CAUSES` lines, three items each."""
    buckets: Dict[str, List[str]] = {}
    _determinism_off(old, new, buckets)
    own_a, own_b = _own_dirs(old), _own_dirs(new)
    own = own_a | own_b
    # the results are what differs, not why: left out, and a trace of a million rows is not walked again
    changes, _hidden = diff_documents({k: v for k, v in old.items() if k != "results"},
                                      {k: v for k, v in new.items() if k != "results"})
    named: Set[Tuple[str, str]] = set()  # (old, new) of the resolved arguments listed: argv does not repeat them
    seeded = set(_leaf_change(c) for c in changes if c.path.startswith("seeds.values."))
    for c in changes:
        if c.path.startswith("config.resolved_args.") and c.old is not MISSING and c.new is not MISSING:
            named.add((str(c.old), str(c.new)))
    for c in changes:
        path = c.path.lower()
        if c.path.startswith("config.resolved_args.") and _leaf_change(c) in seeded:
            continue  # the seed argument is the recorded seed: said once, as a seed
        if c.path == "command.argv" and isinstance(c.old, list) and isinstance(c.new, list):
            for where, x, y in _argv_changes(c.old, c.new):
                if isinstance(x, str) and isinstance(y, str) and (x, y) in named:
                    continue
                text = "%s %s -> %s" % (where, _one(x), _one(y))
                bucket = OWN if _own_pair(x, y, own_a, own_b) else "other arguments or environment"
                buckets.setdefault(bucket, []).append(text)
            continue
        what = _bucket(c, path)
        if what is None:
            continue
        if what == "other code" and _only_own_files(c, old, new, own):
            buckets.setdefault(OWN, []).append(_files_text(c))
            continue
        if what == "other arguments or environment" and _is_path(c.path, c.old, c.new):
            what = OWN if _own_pair(c.old, c.new, own_a, own_b) else "other data"
        buckets.setdefault(what, []).append(_change_text(c))
    if OWN in buckets:  # the arguments first, then the files they explain
        buckets[OWN].sort(key=lambda text: text.startswith("code."))
    causes = []
    for what in _ORDER:
        items = buckets.get(what)
        if what == BOTH_OFF and items:
            causes.append("%s: %s" % (what, items[0]))
        elif what == "determinism switches off" and items:
            causes.extend(items)
        elif items:
            causes.append("%s: %s%s" % (what, ", ".join(items[:3]), " (+%d more)" % (len(items) - 3)
                                        if len(items) > 3 else ""))
    return causes[:MAX_CAUSES]


def _leaf_change(c: Any) -> Tuple[str, str, str]:
    """(the last name of the change's path, old, new): a seed argument and the seed it recorded match on it."""
    return (c.path.rsplit(".", 1)[-1].lower(), str(c.old), str(c.new))


def _determinism_off(old: Mapping[str, Any], new: Mapping[str, Any], buckets: Dict[str, List[str]]) -> None:
    """The seeds verdict: switches off in both runs alike (BOTH_OFF) or in one (a line of its own)."""
    off = {}
    for doc, side in ((old, "old"), (new, "new")):
        seeds = doc.get("seeds") if isinstance(doc.get("seeds"), dict) else {}
        missing = seeds.get("missing") if isinstance(seeds.get("missing"), list) else []
        if seeds.get("bit_reproducible") is False and missing:
            # each reason up to its explanation: "PYTHONHASHSEED is not set: str hashes ..." -> the first part
            reasons = [str(m).split(": ")[0] for m in missing]
            off[side] = "; ".join(reasons[:3]) + (" (+%d more)" % (len(reasons) - 3) if len(reasons) > 3 else "")
    if off.get("old") and off.get("old") == off.get("new"):
        buckets[BOTH_OFF] = [off["old"]]
    else:
        buckets["determinism switches off"] = ["determinism switches off in the %s run: %s" % (side, off[side])
                                               for side in ("old", "new") if side in off]


def _bucket(c: Any, path: str) -> Optional[str]:
    if path.startswith("seeds.values"):
        return "another seed"
    if path.startswith(("seeds.generators", "seeds.observed")):  # unseeded: each process starts its own way
        return "generators in another state"
    if path.startswith("training.world_size") or path.endswith("world_size"):
        return "another world size"
    if c.category == "hardware":
        return next((label for key, label in _HARDWARE if key in path), None)
    if c.category == "packages":
        return "other packages"
    if c.category == "code":
        return "other code"
    if c.category == "seeds":
        return "other determinism settings"
    if c.category == "data":
        return "other data"
    if path == "config.hash":  # a digest of the arguments: each changed one is named itself
        return None
    if c.category in ("env", "config") and not path.startswith("results"):
        return "other arguments or environment"
    return None


def _own_dirs(doc: Mapping[str, Any]) -> Set[str]:
    """The directories a run wrote into: those of its outputs and of its own manifest."""
    dirs: Set[str] = set()
    results = doc.get("results") if isinstance(doc.get("results"), dict) else {}
    outputs = results.get("outputs") if isinstance(results.get("outputs"), dict) else {}
    for p in outputs:
        dirs.add(_parent(str(p)))
    mine = "manifest_%s.json" % doc.get("run_id")
    code = doc.get("code") if isinstance(doc.get("code"), dict) else {}
    for repo in code.values():
        if not isinstance(repo, dict):
            continue
        patch = repo.get("patch") if isinstance(repo.get("patch"), dict) else {}
        listed = patch.get("relaxrepro_outputs") if isinstance(patch.get("relaxrepro_outputs"), list) else []
        for p in [str(x) for x in listed] + fields.untracked_files(repo.get("untracked")):
            if p.replace("\\", "/").rsplit("/", 1)[-1] == mine:
                dirs.add(_parent(p))
    dirs.discard("")
    return dirs


def _parent(path: str) -> str:
    path = path.replace("\\", "/").rstrip("/")
    while path.startswith("./"):
        path = path[2:]
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _under(path: str, dirs: Set[str]) -> bool:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return any(path == d or path.startswith(d + "/") for d in dirs)


def _own_pair(x: Any, y: Any, own_a: Set[str], own_b: Set[str]) -> bool:
    """Whether ``x`` (old) becomes ``y`` (new) by putting new's own directory where old's was."""
    if not isinstance(x, str) or not isinstance(y, str):
        return False
    return any(a != b and a in x and x.replace(a, b) == y for a in own_a for b in own_b)


def _only_own_files(c: Any, old: Mapping[str, Any], new: Mapping[str, Any], own: Set[str]) -> bool:
    """A patch or untracked-files change made only of files in the runs' own directories (the other run's
    weights, its manifest): for a patch, its text the same once their sections are left out."""
    if not own or c.kind not in ("changed", "added", "removed"):
        return False
    files = list(c.extra.get("files_added") or ()) + list(c.extra.get("files_removed") or ())
    if c.path.endswith(".untracked"):
        return bool(files) and all(_under(f, own) for f in files)
    if not c.path.endswith(".patch") or not files or not all(_under(f, own) for f in files):
        return False
    repo = c.path[len("code."):-len(".patch")]
    texts = [_patch_text(doc, repo) for doc in (old, new)]
    return None not in texts and _without(texts[0], own) == _without(texts[1], own)


def _patch_text(doc: Mapping[str, Any], repo: str) -> Optional[str]:
    code = doc.get("code") if isinstance(doc.get("code"), dict) else {}
    entry = code.get(repo) if isinstance(code.get(repo), dict) else {}
    patch = entry.get("patch")
    if patch is None:
        return ""
    if not isinstance(patch, dict) or fields.patch_incomplete(patch) or not isinstance(patch.get("text"), str):
        return None  # not kept in full here: nothing to tell its parts apart by
    return patch["text"]


def _without(text: str, own: Set[str]) -> List[str]:
    """A patch's ``diff --git`` sections but those of files in ``own``."""
    sections = ("\n" + text).split("\ndiff --git a/")
    kept = [sections[0].strip()] if sections[0].strip() else []
    for s in sections[1:]:
        if not _under(s.split(" b/", 1)[0], own):
            kept.append(s)
    return kept


def _is_path(path: str, *values: Any) -> bool:
    """An argument that names a place: a value with a slash, or a name like ``log_dir``, ``output_path``."""
    key = path.rsplit(".", 1)[-1].lower()
    if any(key.endswith(k) for k in _PATH_KEYS):
        return all(isinstance(v, str) or v is MISSING for v in values)
    return all(isinstance(v, str) and ("/" in v or "\\" in v) for v in values)


def _argv_changes(a: List[Any], b: List[Any]) -> List[Tuple[str, Any, Any]]:
    """Where two argv differ: ``(command.argv[i], old, new)`` for an element put in another's place, and
    ``(command.argv[i:j], [old...], [new...])`` for elements only one side has; the elements both keep in order
    (their longest common run, past the same start and end) are left out."""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    x, y = a[start:len(a) - end], b[start:len(b) - end]
    out: List[Tuple[str, Any, Any]] = []
    i0 = j0 = 0
    for i, j in _kept_in_order(x, y) + [(len(x), len(y))]:
        n = min(i - i0, j - j0)
        out.extend(("command.argv[%d]" % (start + i0 + k), x[i0 + k], y[j0 + k]) for k in range(n))
        if i - i0 > n or j - j0 > n:
            out.append(("command.argv[%d:%d]" % (start + i0 + n, start + i), x[i0 + n:i], y[j0 + n:j]))
        i0, j0 = i + 1, j + 1
    return out


def _kept_in_order(x: List[Any], y: List[Any]) -> List[Tuple[int, int]]:
    """The pairs ``(i, j)`` of a longest common subsequence of ``x`` and ``y``; none past 200 x 200 elements
    (an argv that long is shown as one window)."""
    if len(x) * len(y) > 40000:
        return []
    table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i in range(len(x) - 1, -1, -1):
        for j in range(len(y) - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if x[i] == y[j] else max(table[i + 1][j], table[i][j + 1])
    pairs = []
    i = j = 0
    while i < len(x) and j < len(y):
        if x[i] == y[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _one(v: Any) -> str:
    text = "absent" if v is MISSING else json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _files_text(c: Any) -> str:
    """A patch or untracked-files change by the files that came and went: ``code.proj.untracked +runs/a/w.pt``."""
    files = ["+" + f for f in c.extra.get("files_added") or ()] + ["-" + f for f in c.extra.get("files_removed") or ()]
    return "%s %s%s" % (c.path, " ".join(files[:2]), " (+%d more)" % (len(files) - 2) if len(files) > 2 else "")


def _change_text(c: Any) -> str:
    if c.kind == "nodes":
        return str(c.extra.get("summary"))
    return "%s %s -> %s" % (c.path, _one(c.old), _one(c.new))
