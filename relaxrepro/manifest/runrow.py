"""One manifest as the listing commands see it: a :class:`Row` (what ``ls`` shows, what ``lineage`` and
``compare`` look up, what a query asks), read from the file or from the run index.

Both ways give the same row for the same bytes (the index stores the rows this module makes), which is
why ``--no-index`` and the index print the same. Query facts are pulled from the whole document
(packages, data digests, metrics); a listing without a query skips them, as ``ls`` always has.
"""

from __future__ import annotations

import json

from ..std.sha import sha256_hex
from . import index
from .fields import get, packages, patch_digest, patch_incomplete, recorded, scalar
from .model import READ_LIMIT_BYTES
from .reader import ManifestError, ReadError, parse_json, read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Tuple


class Row:
    """A listed manifest. ``doc`` (JSON text until asked), ``cells`` (the ``ls`` cells, tab-joined),
    ``facts`` (JSON text, None when not gathered), ``packages`` key (``pkgkey``) into the package sets."""

    __slots__ = ("path", "run_id", "gen", "group", "parent", "error", "_doc", "cells", "_facts", "pkgkey",
                 "cacheable")

    def __init__(self, path: str, run_id: Optional[str], gen: str, group: Optional[str], parent: Optional[str],
                 error: Optional[str], doc: Any, cells: str, facts: Any = None, pkgkey: Optional[str] = None,
                 cacheable: bool = True) -> None:
        self.path, self.run_id, self.gen, self.group, self.parent = path, run_id, gen, group, parent
        self.error, self._doc, self.cells, self._facts, self.pkgkey = error, doc, cells, facts, pkgkey
        self.cacheable = cacheable

    @property
    def doc(self) -> Dict[str, Any]:
        if isinstance(self._doc, str):
            self._doc = json.loads(self._doc)
        return self._doc or {}

    @property
    def facts(self) -> Dict[str, Any]:
        if isinstance(self._facts, str):
            self._facts = json.loads(self._facts)
        return self._facts or {}

    def entry(self) -> index.Entry:
        return index.Entry(self.path, None if self.error is not None else self.doc, self.error)


def slim(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The parts of a listing's document that ``ls`` (table and ``--json``), ``lineage`` and ``compare``
    read (:func:`index.summary`, :func:`index.ls_cells`): a few hundred bytes of a 50 KB manifest."""
    out = {k: doc[k] for k in ("schema_version", "run_id", "generated_at", "lineage", "outcome") if k in doc}
    code = doc.get("code")
    if isinstance(code, dict):
        out["code"] = {n: {k: r[k] for k in ("commit", "dirty") if k in r} for n, r in code.items()
                       if isinstance(r, dict)}
    hw = doc.get("hardware")
    if isinstance(hw, dict):
        keep = {k: hw[k] for k in ("gpu_count", "gpu_model", "gpu") if k in hw}
        if isinstance(hw.get("gpus"), list):
            keep["gpus"] = [{k: g[k] for k in ("model", "name") if k in g} if isinstance(g, dict) else None
                            for g in hw["gpus"]]
        out["hardware"] = keep
    training = doc.get("training")
    if isinstance(training, dict):
        out["training"] = {k: training[k] for k in ("algorithm", "algo") if k in training}
    return out


def read_row(path: str, *, facts: bool = False) -> Tuple[Row, Optional[Dict[str, str]]]:
    """The row of the manifest at ``path`` and, with ``facts``, its packages (None when not recorded).

    A file that cannot be read (gone, no permission, over the size limit) gives a row not to be
    cached: its error depends on the moment and the reader, not on the bytes.
    """
    try:
        raw: Optional[bytes] = read_bytes(path, READ_LIMIT_BYTES)
    except ReadError:
        raw = None
    try:
        doc = index.read_fields(path, index.LS_FIELDS, raw=raw)
    except ManifestError as exc:
        try:  # lineage and compare read these alone: a run they can find with an error for ls
            link = index.read_fields(path, LINK_FIELDS, raw=raw) if raw is not None else None
        except ManifestError:
            link = None
        row = _row(path, link or {}, str(exc), "", cacheable=raw is not None)
        if link is None:
            row.run_id = None
        return row, None
    row = _row(path, doc, None, "\t".join(index.ls_cells(doc, index.Entry(path, doc).run_id)),
               cacheable=raw is not None)
    pkgs = None
    if facts and raw is not None:
        found, pkgs = gather_facts(raw, doc)
        row._facts, row.pkgkey = _text(found), package_key(pkgs)
    return row, pkgs


LINK_FIELDS = ("schema_version", "run_id", "generated_at", "lineage")
"""What lineage and compare read of every manifest: a row with these has a ``run_id`` even where the
listing's fields could not be read (``error``), and those commands name the reason when they reach it."""


def _row(path: str, doc: Dict[str, Any], error: Optional[str], cells: str, cacheable: bool) -> Row:
    run_id = index.Entry(path, doc).run_id
    group = index.lineage_of(doc).get("group")
    return Row(path, run_id, str(doc.get("generated_at") or ""), group if isinstance(group, str) else None,
               index.parent_id(doc), error, None if error is not None else _text(slim(doc)), cells,
               cacheable=cacheable)


def _text(value: Any) -> str:
    """JSON as the index stores it: a row read from a file goes through the same text as one read back."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def package_key(pkgs: Optional[Dict[str, str]]) -> Optional[str]:
    """A digest of a package set (its normalised names and versions): runs share a few hundred sets."""
    if pkgs is None:
        return None
    return sha256_hex(json.dumps(pkgs, sort_keys=True, separators=(",", ":")).encode())[:32]


def gather_facts(raw: bytes, listed: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[Dict[str, str]]]:
    """What a query asks of one manifest, from its whole text: (facts, packages). A document that does not
    parse whole (the listing read its ends only) has the listing's facts alone."""
    try:
        doc = parse_json(raw.decode("utf-8"))
    except (ManifestError, UnicodeDecodeError):
        doc = None
    if not isinstance(doc, dict):
        doc = listed
    lin = index.lineage_of(doc)
    code = doc.get("code") if isinstance(doc.get("code"), dict) else {}
    commits = {n: r.get("commit") for n, r in code.items() if isinstance(r, dict) and isinstance(r.get("commit"), str)}
    count, model = index.gpus(doc)
    out = doc.get("outcome") if isinstance(doc.get("outcome"), dict) else {}
    pkgs = packages(doc)
    f: Dict[str, Any] = {
        "run": doc.get("run_id"), "group": lin.get("group"), "parent": index.parent_id(doc),
        "note": lin.get("note"), "time": doc.get("generated_at"), "algo": index.algorithm(doc),
        "status": out.get("status"), "exit": out.get("exit_code"),
        "dirty": any(isinstance(r, dict) and bool(r.get("dirty")) for r in code.values()),
        "commit": commits, "gpu": model, "gpus": count,
        "driver": scalar(recorded(doc, "hardware.driver_version", None)),
        "cuda": scalar(recorded(doc, "hardware.cuda_version", None)),
        "nccl": scalar(recorded(doc, "hardware.nccl_version", None)),
        "world_size": get(doc, "training.world_size", None),
        "config": scalar(get(doc, "config.hash", None)),
        "packages": scalar(get(doc, "environment.packages_digest", None)),
        "data": _data_digests(doc), "metric": _metrics(doc),
    }
    f["same"] = _same_key(code, f["config"], package_key(pkgs))
    return f, pkgs


def _data_digests(doc: Dict[str, Any]) -> List[str]:
    found = []
    inputs = get(doc, "data.inputs", None)
    for item in inputs if isinstance(inputs, list) else []:
        if isinstance(item, dict):
            for part in ("full", "quick"):
                digest = get(item, part + ".sha256", None)
                if isinstance(digest, str) and digest not in found:
                    found.append(digest)
    return found


def _metrics(doc: Dict[str, Any]) -> Dict[str, float]:
    """``results.metrics`` as floats ("NaN", "Infinity" read back as such; anything else left out)."""
    out = {}
    table = get(doc, "results.metrics", None)
    for name, value in (table.items() if isinstance(table, dict) else ()):
        if isinstance(value, bool):
            continue
        try:
            out[str(name)] = float(value)
        except (TypeError, ValueError):
            continue
    return out  # a NaN goes into the index as json writes it, and reads back as one


def _same_key(code: Dict[str, Any], config: Optional[str], pkgkey: Optional[str]) -> Optional[str]:
    """What ``--same-as`` compares: every repo's commit (and patch digest when dirty), the config hash and
    the package set; None when any of it is not fully recorded, so no run is "the same" by omission."""
    if not code or config is None or pkgkey is None:
        return None
    parts = []
    for name in sorted(code):
        repo = code[name]
        if not isinstance(repo, dict) or not isinstance(repo.get("commit"), str):
            return None
        patch = None
        if repo.get("dirty"):
            patch = patch_digest(repo.get("patch"))
            if patch is None or patch_incomplete(repo.get("patch")):
                return None
        parts.append([name, repo["commit"], patch])
    text = json.dumps([parts, config, pkgkey], separators=(",", ":"))
    return sha256_hex(text.encode())[:32]
