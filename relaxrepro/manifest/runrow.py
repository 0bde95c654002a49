"""One manifest as the listing commands see it: a :class:`Row` (what ``ls`` shows, what ``lineage`` and
``compare`` look up, what a query asks), read from the file or from the run index.

Both ways give the same row for the same bytes (the index stores the rows this module makes), which is
why ``--no-index`` and the index print the same. Query facts are pulled from the whole document
(packages, data digests, metrics); a listing without a query skips them, as ``ls`` always has.
"""

from __future__ import annotations

import json

from ..std.sha import sha256_hex
from .fields import RELAX_ALIASES, get, packages, patch_digest, patch_incomplete, recorded, scalar
from .flat import ARG_DEPTH, flatten
from .model import READ_LIMIT_BYTES
from .numbers import read_int
from .query import terms
from .reader import ManifestError, ReadError, read_bytes, read_whole
from .scan import Entry, read_fields
from .sections import HOT_MAX, parse_manifest_text, shared
from .summary import LS_FIELDS, algorithm, gpu_cell, gpus, lineage_of, ls_cells, parent_id, run_id_of

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

    Card = Callable[[str, bytes, Any], Optional[Tuple[str, Optional[Tuple[str, str]]]]]
    """A card maker: (path, its bytes, what parse_json gives of them or None) -> (the card's text, the (key,
    text) of a part it names) or None (no card)."""

_DECODE = json.JSONDecoder(parse_int=read_int).decode
"""How a row's stored JSON texts are read back: integers by the reader's rule (numbers.read_int), so a count
of 10**400 is the same BigInt from the index as from the file. One decoder: ``json.loads(parse_int=...)``
would build one per call (5 us, a listing of 100,000 rows makes 200,000 calls)."""

STORED = ("path", "run_id", "generated_at", "group", "parent", "error", "cells", "doc_json", "facts_json", "pkgkey")
"""The fields of a :class:`Row` that the run index stores, in the order :class:`Row` takes them."""


class Row:
    """A listed manifest: where it is, what a listing sorts and looks up by, ``cells`` (the ``ls`` cells,
    tab-joined), ``doc_json`` (the :func:`slim` document as JSON text, read by :attr:`doc` when asked),
    ``facts_json`` (what a query asks, as JSON text; None when not gathered), ``pkgkey`` (its package set's
    key, :func:`package_key`) and whether the run index may store it (``cacheable``).

    A plain ``__slots__`` class, not a :class:`~relaxrepro.std.records.Record`: a listing makes one per run
    (100,000 of them), and this ``__init__`` costs a tenth of a record's (0.8 us against 8.5 us).
    """

    __slots__ = STORED + ("cacheable", "terms", "card", "_doc", "_facts")

    def __init__(self, path: str, run_id: Optional[str], generated_at: str, group: Optional[str],
                 parent: Optional[str], error: Optional[str], cells: str, doc_json: Optional[str],
                 facts_json: Optional[str] = None, pkgkey: Optional[str] = None, cacheable: bool = True) -> None:
        self.path, self.run_id, self.generated_at, self.group, self.parent = path, run_id, generated_at, group, parent
        self.error, self.cells, self.doc_json, self.facts_json, self.pkgkey = error, cells, doc_json, facts_json, pkgkey
        self.cacheable = cacheable
        self.terms = None  # (keys, values) the index looks the facts up by (query.terms), when read
        self.card = None  # what a caller's card maker made of the bytes read (read_row's ``card``), when asked
        self._doc = self._facts = None  # the JSON texts parsed, on first use

    @property
    def doc(self) -> Dict[str, Any]:
        if self._doc is None and self.doc_json is not None:
            self._doc = _DECODE(self.doc_json)
        return self._doc or {}

    @property
    def facts(self) -> Dict[str, Any]:
        if self._facts is None and self.facts_json is not None:
            self._facts = _DECODE(self.facts_json)
        return self._facts or {}

    def entry(self) -> Entry:
        return Entry(self.path, self.doc if self.error is None else {}, self.error)

    def trimmed(self, want: Sequence[str]) -> Row:
        """A copy without what ``want`` (of ``cells``, ``doc``, ``facts``) leaves out: a source's rows are
        shared by its finds."""
        return Row(self.path, self.run_id, self.generated_at, self.group, self.parent, self.error,
                   self.cells if "cells" in want else "", self.doc_json if "doc" in want else None,
                   self.facts_json if "facts" in want else None, self.pkgkey, self.cacheable)


def slim(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The parts of a listing's document that ``ls`` (table and ``--json``), ``lineage`` and ``compare``
    read (``ls``'s summary, :func:`summary.ls_cells`): a few hundred bytes of a 50 KB manifest."""
    out = {k: doc[k] for k in ("schema_version", "run_id", "generated_at", "lineage", "outcome") if k in doc}
    code = doc.get("code")
    if isinstance(code, dict):
        out["code"] = {n: {k: r[k] for k in ("commit", "dirty") if k in r} for n, r in code.items()
                       if isinstance(r, dict)}
    if isinstance(doc.get("hardware"), dict):
        out["hardware"] = _by_part("hardware", doc, _slim_hardware)  # shared: slim's answer is only written out
    training = doc.get("training")
    if isinstance(training, dict):
        out["training"] = {k: training[k] for k in ("algorithm", "algo") if k in training}
    return out


def _slim_hardware(doc: Dict[str, Any]) -> Dict[str, Any]:
    hw = doc["hardware"]
    keep = {k: hw[k] for k in ("gpu_count", "gpu_model", "gpu") if k in hw}
    if isinstance(hw.get("gpus"), list):
        keep["gpus"] = [{k: g[k] for k in ("model", "name") if k in g} if isinstance(g, dict) else None
                        for g in hw["gpus"]]
    return keep


def read_row(path: str, *, facts: bool = False, card: Optional[Card] = None) -> Tuple[Row, Optional[Dict[str, str]]]:
    """The row of the manifest at ``path`` and, with ``facts``, its packages (None when not recorded).

    A file that cannot be read (gone, no permission, over the size limit) gives a row not to be
    cached: its error depends on the moment and the reader, not on the bytes. ``card``: a caller's maker of
    what it keeps of a file beside its row (``report``'s card), given the path, the bytes read here and their
    parse (with ``facts``; else None), so the file is read and parsed once for both; its answer is the row's
    ``card`` (none for a file that could not be read).
    """
    raw = read_whole(path, READ_LIMIT_BYTES)
    if raw is None:
        try:
            raw = read_bytes(path, READ_LIMIT_BYTES)
        except ReadError:
            pass
    whole = _parse_whole(raw) if facts and raw is not None else None
    try:
        doc = read_fields(path, LS_FIELDS, raw=raw, parsed=whole)
    except ManifestError as exc:
        try:  # lineage and compare read these alone: a run they can find with an error for ls
            link = read_fields(path, LINK_FIELDS, raw=raw) if raw is not None else None
        except ManifestError:
            link = None
        row = _row(path, link or {}, str(exc), "", cacheable=raw is not None)
        if link is None:
            row.run_id = None
        if card is not None and raw is not None:
            row.card = card(path, raw, whole)
        return row, None
    cells = ls_cells(doc, run_id_of(doc), gpu=_by_part("hardware", doc, gpu_cell))
    row = _row(path, doc, None, "\t".join(cells), cacheable=raw is not None)
    pkgs = None
    if facts and raw is not None:
        found, pkgs, row.pkgkey = gather_facts(whole if isinstance(whole, dict) else doc)
        row.facts_json = _text(found)
        row.terms = terms(found, {"run": row.run_id, "group": row.group, "parent": row.parent})  # (keys, values)
    if card is not None and raw is not None:
        row.card = card(path, raw, whole)
    return row, pkgs


def _parse_whole(raw: bytes) -> Any:
    """``raw`` parsed by the reader's rules, once for the listing's sections and the facts; None when it does
    not parse (the listing's reader then says why, or reads what it can)."""
    try:
        return parse_manifest_text(raw)
    except (ManifestError, UnicodeDecodeError):
        return None


LINK_FIELDS = ("schema_version", "run_id", "generated_at", "lineage")
"""What lineage and compare read of every manifest: a row with these has a ``run_id`` even where the
listing's fields could not be read (``error``), and those commands name the reason when they reach it."""


def _row(path: str, doc: Dict[str, Any], error: Optional[str], cells: str, cacheable: bool) -> Row:
    group = lineage_of(doc).get("group")
    return Row(path, run_id_of(doc), str(doc.get("generated_at") or ""), group if isinstance(group, str) else None,
               parent_id(doc), error, cells, None if error is not None else _text(slim(doc)), cacheable=cacheable)


def _text(value: Any) -> str:
    """JSON as the index stores it: a row read from a file goes through the same text as one read back. Keys in
    the order they were made (the file's): the text is only ever read back, never compared."""
    return _ENCODE(value)


def _compiled_encoder() -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":")).encode``, its C encoder made once: ``encode`` makes one per call
    (~1.5 us; a cold index encodes three values a run). No circular check: what it encodes was parsed from JSON
    or built from that, never circular. The plain encoder where there is no C one (or it writes otherwise)."""
    encoder = json.JSONEncoder(separators=(",", ":"))
    plain = encoder.encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain
    try:  # its default too: a value json cannot write raises the same TypeError
        once = make(None, encoder.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    except TypeError:  # another interpreter's signature
        return plain

    def encode(value: Any) -> str:
        return "".join(once(value, 0))
    probe = [{"a\u00e9\n": [1.5, float("nan"), -float("inf"), 10**30, True, None, "\ud800"]}, "x", 3]
    return encode if encode(probe) == plain(probe) else plain


_ENCODE = _compiled_encoder()


def package_key(pkgs: Optional[Dict[str, str]]) -> Optional[str]:
    """A digest of a package set (its normalised names and versions): runs share a few hundred sets."""
    if pkgs is None:
        return None
    return sha256_hex(json.dumps(pkgs, sort_keys=True, separators=(",", ":")).encode())[:32]


def package_set(doc: Dict[str, Any]) -> Tuple[Optional[Dict[str, str]], Optional[str]]:
    """(:func:`fields.packages` of ``doc``, its :func:`package_key`), remembered by the recorded tables' items:
    the runs of a tree share a few hundred package sets, and a cold index would normalise and digest the same
    hundred names in each of 100,000 manifests. The set returned is shared: read it, never change it."""
    env = doc.get("environment")
    same = _BY_SECTION.get(id(env))
    if same is not None and same[0] is env:  # the very section of a run before (sections.py shares them)
        return same[1]
    tables = [env.get(k) for k in ("key_packages", "packages")] if isinstance(env, dict) else []
    seen, got = None, None
    # Only tables of text: 1, 1.0 and True are equal keys, and different versions ("1", "1.0", none).
    if all(not isinstance(t, dict) or set(map(type, t.values())) <= _TEXT_ONLY for t in tables):
        seen = tuple(tuple(t.items()) if isinstance(t, dict) else None for t in tables)
        got = _SETS.get(seen)
    if got is None:
        pkgs = packages(doc)
        got = (pkgs, package_key(pkgs))
        if seen is not None and len(_SETS) < 2000:
            _SETS[seen] = got
    if shared(env):
        if len(_BY_SECTION) >= 1024:
            _BY_SECTION.clear()
        _BY_SECTION[id(env)] = (env, got)  # held: its id is not another's while the entry lives
    return got


_SETS: Dict[Any, Tuple[Optional[Dict[str, str]], Optional[str]]] = {}
_BY_SECTION: Dict[int, Tuple[Dict[str, Any], Tuple[Optional[Dict[str, str]], Optional[str]]]] = {}
"""The same by the ``environment`` object itself: the cold index's documents share a section parsed before
(:mod:`sections`), and its items need not be hashed again (~10 us a run). Only those: a section of one
document may be changed by its reader, a shared one never is."""
_TEXT_ONLY = {str}


def gather_facts(doc: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[Dict[str, str]], Optional[str]]:
    """What a query asks of one manifest, from the whole document (or, when it does not parse whole, the
    sections the listing read): (facts, packages, their :func:`package_key`)."""
    lin = lineage_of(doc)
    code = doc.get("code") if isinstance(doc.get("code"), dict) else {}
    commits = {n: r.get("commit") for n, r in code.items() if isinstance(r, dict) and isinstance(r.get("commit"), str)}
    count, model, driver, cuda, nccl = _machine(doc)
    out = doc.get("outcome") if isinstance(doc.get("outcome"), dict) else {}
    pkgs, key = package_set(doc)
    f: Dict[str, Any] = {
        "run": doc.get("run_id"), "group": lin.get("group"), "parent": parent_id(doc),
        "note": lin.get("note"), "time": doc.get("generated_at"), "algo": algorithm(doc),
        "status": out.get("status"), "exit": out.get("exit_code"),
        "dirty": any(isinstance(r, dict) and bool(r.get("dirty")) for r in code.values()),
        "commit": commits, "gpu": model, "gpus": count,
        "driver": driver, "cuda": cuda, "nccl": nccl,
        "world_size": get(doc, "training.world_size", None),
        "config": scalar(get(doc, "config.hash", None)),
        "packages": scalar(get(doc, "environment.packages_digest", None)),
        "data": _by_part("data", doc, _data_digests), "metric": _metrics(doc), "arg": _by_part("config", doc, _args),
    }
    f["same"] = _same_key(code, f["config"], key)
    return f, pkgs, key


def _machine(doc: Dict[str, Any]) -> Tuple[Any, ...]:
    """(GPU count, GPU model, driver, CUDA and NCCL versions) of ``doc``, remembered by the sections they are
    read from (:data:`_MACHINE_FROM`) when :mod:`sections` shares them: a tree's runs come from a few machines."""
    parts = tuple(doc.get(name) for name in _MACHINE_FROM)
    key = tuple(map(id, parts))
    got = _BY_MACHINE.get(key)
    if got is not None and all(a is b for a, b in zip(got[0], parts)):
        return got[1]
    value = gpus(doc) + tuple(scalar(recorded(doc, "hardware.%s_version" % name, None))
                              for name in ("driver", "cuda", "nccl"))
    if all(p is None or shared(p) for p in parts):
        if len(_BY_MACHINE) >= HOT_MAX:  # as many as sections shared: the bench tree cycles through 300 venvs
            _BY_MACHINE.clear()
        _BY_MACHINE[key] = (parts, value)  # the sections held: their ids are no other's while it lives
    return value


_MACHINE_FROM = tuple(sorted({"hardware"} | {source.split(".")[0] for source, target in RELAX_ALIASES.items()
                                            if target.startswith("hardware.")}))
"""The top-level sections :func:`_machine` reads: ``hardware``, and where Relax records the same facts."""
_BY_MACHINE: Dict[Tuple[int, ...], Tuple[Tuple[Any, ...], Tuple[Any, ...]]] = {}


def _by_part(name: str, doc: Dict[str, Any], make: Callable[[Dict[str, Any]], Any]) -> Any:
    """``make(doc)``, which reads only the top-level section ``name``, remembered by ``make`` and that section
    when :mod:`sections` shares it (a sweep's runs share their config, a tree's its data inputs and machines). The
    value is shared: the rows holding it are only ever written out as text (:func:`read_row`)."""
    part = doc.get(name)
    if part is None or not shared(part):
        return make(doc)
    got = _BY_PART.get((make, id(part)))
    if got is not None and got[0] is part:
        return got[1]
    value = make(doc)
    if len(_BY_PART) >= HOT_MAX:
        _BY_PART.clear()
    _BY_PART[(make, id(part))] = (part, value)  # the section held: its id is no other's while it lives
    return value


_BY_PART: Dict[Tuple[Callable[[Dict[str, Any]], Any], int], Tuple[Any, Any]] = {}


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


def _args(doc: Dict[str, Any]) -> Dict[str, Any]:
    """``config.resolved_args`` flat, named as ``compare`` names them (``arg.optim.lr`` is ``optim.lr`` here)."""
    node = get(doc, "config.resolved_args", None)
    return flatten(node, max_depth=ARG_DEPTH) if isinstance(node, dict) else {}


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
    return sha256_hex(_ENCODE([parts, config, pkgkey]).encode())[:32]  # json.dumps's text, without a new encoder
