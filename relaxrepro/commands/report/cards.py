"""The runs of a many-run page, each manifest read at most once: a *card* per file, what the page shows of the
run and what its sweep compares, kept in the run index beside the file's row.

A card is made from one read of the file (:func:`make`): the sections a run's card on the page shows
(:data:`FIELDS`, less what it never shows: a repository's patch, the trace and the outputs), or why they cannot
be read as ``report`` has always worded it; and, when the strict reader takes the whole document, the run's
:func:`~relaxrepro.analyze.compare.run_facts` (its package table apart, by digest: a tree's runs share a few),
else why it cannot be read as ``compare`` words it. ``report`` stores the cards it made in the run index
(:meth:`~relaxrepro.manifest.runindex.Source.keep_cards`) and the next page reads none of the files; a file
read again by the index, or gone, loses its card. Without the index (``--no-index``, ``RELAXREPRO_NO_CACHE``)
every file is read once for its card. Either way a card goes through the same JSON text, so a page is the same
byte for byte with and without the index.
"""

from __future__ import annotations

import collections
import json
import os

from ...analyze.compare import run_facts
from ...manifest import runindex, scan
from ...manifest.model import READ_LIMIT_BYTES
from ...manifest.numbers import FLOAT_DIGITS, read_int
from ...manifest.reader import ManifestError, parse_manifest, read_bytes, read_manifest_file
from ...manifest.summary import lineage_of
from ...std.cache import cache_dir
from ...std.lazy_re import LazyPattern
from ...std.records import Factory, Record
from ...std.sha import sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

FIELDS = ("schema_version", "run_id", "generated_at", "command", "code", "hardware", "lineage",
          "outcome", "results", "seeds", "training")
"""The sections a run's card in a many-run page shows: not the bulky ``config`` and ``environment`` (a sweep's
values come from the run's facts)."""

FORMAT = '{"v":1,'
"""How every card's text starts: a card of another format (an older relaxrepro's) is made again from its file."""
_UNKEYED = FORMAT + '"key":null,'
"""How a card without its document's key starts: made again where its run id turns out to have two files."""

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
_DECODE = json.JSONDecoder(parse_int=read_int).decode
"""A card's JSON text and back: integers by the reader's rule, so a BigInt metric reads back as one."""
_DECODE_FAST = json.JSONDecoder().decode
_LONG_DIGITS = LazyPattern("[0-9]{%d}" % (FLOAT_DIGITS + 1))
"""Cards without a number of more digits than a float holds are read by json's own int (the same ints)."""


class Runs(Record):
    """What a many-run page reads: ``entries`` (walk order: each file's card sections, or why they cannot be
    read), ``facts`` ({path: the run's facts for its sweep, or why the whole document cannot be read}),
    ``warnings`` (the walk's, the run index's) and ``whole``: documents read whole this time, by path."""

    entries: List[scan.Entry] = Factory(list)
    facts: Dict[str, Any] = Factory(dict)
    warnings: List[str] = Factory(list)
    whole: Dict[str, Any] = Factory(dict)

    def load(self, path: str) -> Dict[str, Any]:
        """The whole document at ``path`` (read at most once); a file that no longer reads gives a document of
        its own with nothing to compare (never another run's copy)."""
        if path not in self.whole:
            try:
                self.whole[path] = read_manifest_file(path)[0]
            except ManifestError as exc:
                self.whole[path] = {"unreadable": str(exc), "path": path}
        return self.whole[path]


def make(path: str, keyed: bool = False, raw: Optional[bytes] = None, parsed: Any = None
         ) -> Tuple[str, Optional[Tuple[str, str]], Optional[Dict[str, Any]], bool]:
    """The card of the file at ``path`` from one read: (its text, the (key, text) of the package table it names,
    the whole document when the strict reader took it, whether the card may be kept: not when the file could
    not be read at all, which is the moment's, not the bytes'). ``keyed``: with the document's
    :func:`~relaxrepro.analyze.compare.doc_key` (asked for a file whose run id another file has too); ``raw``:
    the file's bytes, read already (by the run index, :func:`made_of`), and ``parsed``, their JSON parsed
    (:func:`~relaxrepro.manifest.reader.parse_manifest`'s ``parsed``)."""
    doc: Optional[Dict[str, Any]] = None
    whole_error = None
    try:
        if raw is None:
            raw = read_bytes(path, READ_LIMIT_BYTES)
        doc = parse_manifest(raw, parsed)[0]
    except ManifestError as exc:
        whole_error = str(exc)
    try:
        if doc is not None:
            fields = {k: doc[k] for k in FIELDS if k in doc}
        else:
            fields = scan.read_fields(path, FIELDS, raw=raw)  # its own order of sections: not from `parsed`
    except ManifestError as exc:
        return _text("", {"error": str(exc)}), None, doc, raw is not None
    card: Dict[str, Any] = {"fields": _shown(fields)}
    table = None
    key: Optional[str] = ""
    if doc is None:
        card["whole"] = whole_error
    else:
        facts = run_facts(doc, keyed)
        key = facts.pop("doc")
        table = _table(facts["packages"]) if facts["packages"] else None
        facts["packages"] = table[0] if table else None
        card["facts"] = facts
    return _text(key, card), table, doc, raw is not None


def made_of(path: str, raw: bytes, parsed: Any) -> Optional[Tuple[str, Optional[Tuple[str, str]]]]:
    """The card of ``path`` made of its ``raw`` bytes (and their JSON ``parsed``) as the run index reads them for
    its row, with the package table it names (:func:`runindex.open_roots`'s ``card``, in a forked reader too):
    the file is read and parsed once for both. Without a key (most run ids have one file; a card of one that
    has two is made again, keyed)."""
    text, table, _doc, keep = make(path, False, raw=raw, parsed=parsed)
    return (text, table) if keep else None


def _table(pkgs: Dict[str, Any]) -> Tuple[str, str]:
    """(key, text) of a package table as cards name it, remembered by its items: a tree's runs share a few
    tables, and each would be written out and digested again in every one of its cards."""
    seen: Any = None
    got = None
    # Only tables of text: 1, 1.0 and True are equal keys, and are written differently.
    if all(type(v) is str for v in pkgs.values()):
        seen = tuple(pkgs.items())
        got = _TABLES.get(seen)
    if got is None:
        text = _ENCODE(pkgs)
        got = (sha256_hex(text.encode("utf-8", "surrogatepass"))[:32], text)
        if seen is not None and len(_TABLES) < 2000:
            _TABLES[seen] = got
    return got


_TABLES: Dict[Any, Tuple[str, str]] = {}


def _text(key: Optional[str], card: Dict[str, Any]) -> str:
    """A card as stored: :data:`FORMAT`, then the document's key (None: not made; empty: the card has no
    facts), then the card."""
    return FORMAT + '"key":' + _ENCODE(key) + "," + _ENCODE(card)[1:]


def _shown(fields: Dict[str, Any]) -> Dict[str, Any]:
    """The sections as a card keeps them: of each repository its commit and whether it was dirty (not its patch,
    which may be megabytes), of the results the metrics (not the trace, not the outputs)."""
    out = dict(fields)
    code = out.get("code")
    if isinstance(code, dict):
        out["code"] = {n: {k: r[k] for k in ("commit", "dirty") if k in r} if isinstance(r, dict) else r
                       for n, r in code.items()}
    results = out.get("results")
    if isinstance(results, dict):
        out["results"] = {"metrics": results["metrics"]} if "metrics" in results else {}
    return out


def read(roots: Sequence[str], use_index: bool = True, env: Optional[Mapping[str, str]] = None) -> Runs:
    """Every run below ``roots``: its card from the run index where the index holds one, else from its file
    (then kept there for the next page)."""
    env = os.environ if env is None else env
    cards: List[Tuple[str, Dict[str, Any]]] = []
    made: Dict[str, str] = {}
    runs = Runs()
    if not use_index or cache_dir(env) is None:  # a walk: each file read once, for its card
        walk = scan.Walk.of(roots)
        paths = list(scan.find_manifests(roots, walk))
        texts = [_made(runs, path, False, made)[0] for path in paths]
        cards = list(zip(paths, _parsed(texts)))
        if walk.warning():
            runs.warnings.append(walk.warning())  # type: ignore[arg-type]
        return _decoded(runs, cards, made)
    src = runindex.open_roots(roots, env=env, card=made_of)
    try:
        runs.warnings.extend(src.warnings)
        stored = src.cards()
        fresh: List[Tuple[str, str]] = []
        rows = src.find()
        ids = collections.Counter(r.run_id for r in rows)
        texts: List[Optional[str]] = []
        for row in rows:
            text = stored.get(row.path)
            keyed = row.run_id is None or ids[row.run_id] > 1  # a copy is told by its key, with no read
            texts.append(None if text is None or not text.startswith(FORMAT) or (keyed and text.startswith(_UNKEYED))
                         else text)
        for row, text, card in zip(rows, texts, _parsed(texts)):
            if card is None:  # none kept, of another format, or damaged: the file is the truth
                text, keep = _made(runs, row.path, row.run_id is None or ids[row.run_id] > 1, made)
                if keep:
                    fresh.append((row.path, text))
                card = _DECODE(text)
            cards.append((row.path, card))
        runs = _decoded(runs, cards, made, src)
        if fresh or made:
            src.keep_cards(fresh, sorted(made.items()))
    finally:
        src.close()
    return runs


def _made(runs: Runs, path: str, keyed: bool, made: Dict[str, str]) -> Tuple[str, bool]:
    """:func:`make`'s card text and whether it may be kept, noting what it leaves for later: its package table,
    and a replay's whole document (its sweep verifies it against its original)."""
    text, table, doc, keep = make(path, keyed)
    if table is not None:
        made.setdefault(*table)
    if doc is not None and isinstance(lineage_of(doc).get("replay_of"), str):
        runs.whole[path] = doc
    return text, keep


def _parsed(texts: Sequence[Optional[str]]) -> List[Optional[Dict[str, Any]]]:
    """The cards ``texts`` hold (None where there is none, or it is not a card as :func:`make` writes them), read
    as one JSON text: json's own ints unless a number is longer than a float holds."""
    present = [t for t in texts if t is not None]
    joined = "[%s]" % ",".join(present)
    try:
        got = iter((_DECODE if _LONG_DIGITS.search(joined) else _DECODE_FAST)(joined))
    except ValueError:  # one is damaged: each on its own
        got = iter([_loose(t) for t in present])
    return [None if t is None else _checked(next(got)) for t in texts]


def _loose(text: str) -> Any:
    try:
        return _DECODE(text)
    except ValueError:
        return None


_FACTS = ("run_id", "generated_at", "note", "replay_of", "values", "packages", "metrics", "outputs", "trace")


def _checked(card: Any) -> Optional[Dict[str, Any]]:
    """``card`` when it has the shape :func:`make` gives a card, else None: a database is never trusted over the
    files (a damaged row costs a read of its file, never a wrong page or a crash)."""
    if not isinstance(card, dict) or card.get("v") != 1 or not isinstance(card.get("key"), (str, type(None))):
        return None
    if "error" in card:
        return card if isinstance(card["error"], str) else None
    fields, facts = card.get("fields"), card.get("facts")
    if not isinstance(fields, dict) or not isinstance(fields.get("run_id"), str):
        return None
    if facts is None:
        return card if isinstance(card.get("whole"), str) else None
    if not isinstance(facts, dict) or any(k not in facts for k in _FACTS):
        return None
    if isinstance(facts["values"], dict) and isinstance(facts["packages"], (str, type(None))) and isinstance(
            facts["metrics"], (dict, type(None))):
        return card
    return None


def _decoded(runs: Runs, cards: Sequence[Tuple[str, Dict[str, Any]]], made: Dict[str, str], src: Any = None) -> Runs:
    """``runs`` with the ``cards`` read: entries, and facts whose package tables are one object per table (a sweep
    compares a table its runs share once)."""
    keys = {c["facts"]["packages"] for _, c in cards if "facts" in c and c["facts"]["packages"] is not None}
    tables = dict(made)
    if src is not None and keys - set(tables):
        tables.update(src.card_sets(sorted(keys - set(tables))))
    shared: Dict[Optional[str], Dict[str, Any]] = {None: {}}
    for key in keys:
        table = _loose(tables[key]) if key in tables else None
        if isinstance(table, dict):
            shared[key] = table
    for path, card in cards:
        if "error" in card:
            runs.entries.append(scan.Entry(path, error=card["error"]))
            continue
        runs.entries.append(scan.Entry(path, card["fields"]))
        facts = card.get("facts")
        if facts is None:
            runs.facts[path] = card["whole"]
            continue
        facts["doc"] = card["key"] or None
        if facts["packages"] not in shared:  # the table went missing from the index: the file is the truth
            whole = run_facts(runs.load(path))
            if whole["packages"]:  # kept again (the same document gives the same key)
                made.setdefault(*_table(whole["packages"]))
            runs.facts[path] = dict(whole, doc=facts["doc"])
            continue
        facts["packages"] = shared[facts["packages"]]
        runs.facts[path] = facts
    return runs
