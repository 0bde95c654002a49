"""The redaction of a whole document: every string through the run's :class:`Redactor`, the rule counts under
``collection.redactions``; and which policy a document was collected with."""

from __future__ import annotations

from ..model import CONFIG_FILE_MAPS
from .placeholders import MASK, REDACTED, RULES
from .redactor import Redactor

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Optional, Tuple


def own_policy(doc: Any) -> Optional[Redactor]:
    """The policy ``doc`` was collected with (a ``Manifest``'s ``redacted_by``: ``--keep-paths``, ``--redact-pattern``
    and the collecting machine's home, hostname and login), None when it carries none. A later write of a changed
    document redacts it again with this; the machine's default, when it has none, comes from
    :func:`relaxrepro.collect.context.policy_of`."""
    red = getattr(doc, "redacted_by", None)
    return red if isinstance(red, Redactor) else None


def _path_map(redactor: Redactor, node: Dict[Any, Any]) -> Dict[Any, Any]:
    """A map keyed by paths: each key redacted as text, not judged as a name."""
    out: Dict[Any, Any] = {}
    for k, v in node.items():
        nk = redactor.text(k) if isinstance(k, str) else k
        if nk in out:  # two paths redacted to the same text: keep both
            n = 2
            while "%s#%d" % (nk, n) in out:
                n += 1
            nk = "%s#%d" % (nk, n)
        out[nk] = redactor.value(v)
    return out


def _argv_for_relax(doc: Dict[str, Any]) -> None:
    """The recorded command line with each mask spelled ``<redacted>`` (``--key=wand***`` becomes
    ``--key=wand<redacted>``): the Relax trainer's ``rerun`` refuses an argument holding ``<redacted>`` but
    would replay ``***`` literally. Our readers take both spellings as redacted."""
    command = doc.get("command")
    argv = command.get("argv") if isinstance(command, dict) else None
    if isinstance(argv, list) and any(isinstance(a, str) and MASK in a for a in argv):
        command["argv"] = [a.replace(MASK, REDACTED) if isinstance(a, str) else a for a in argv]


def _hold_counts(doc: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[Tuple[str, ...], Dict[str, int]]]:
    """``doc`` without the rule counts of ``collection.redactions`` (and the API's, ``collection.api.redactions``),
    and those counts: numbers under ``private-key`` or ``url-credentials`` count rules, they hold no secret.
    ``doc`` itself is left as it is."""
    held: Dict[Tuple[str, ...], Dict[str, int]] = {}
    collection = doc.get("collection")
    if not isinstance(collection, dict):
        return doc, held
    doc, collection = dict(doc), dict(collection)
    doc["collection"] = collection
    api = collection.get("api")
    if isinstance(api, dict):
        api = collection["api"] = dict(api)
    for where, node in (((), collection), (("api",), api)):
        counts = node.get("redactions") if isinstance(node, dict) else None
        if isinstance(counts, dict):
            held[where] = {k: v for k, v in counts.items() if k in RULES and type(v) is int}
            node["redactions"] = {k: v for k, v in counts.items() if k not in held[where]}
    return doc, held


def _restore_counts(doc: Dict[str, Any], held: Dict[Tuple[str, ...], Dict[str, int]]) -> None:
    for where, counts in held.items():
        node: Any = doc.get("collection")
        for step in where:
            node = node.get(step) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get("redactions"), dict):
            node["redactions"].update(counts)


def _patch_texts(doc: Any) -> Dict[str, str]:
    """Each repository's patch text in ``doc`` (``code.<repo>.patch.text``), by repository."""
    code = doc.get("code") if isinstance(doc, dict) else None
    out = {}
    for name, repo in (code.items() if isinstance(code, dict) else ()):
        patch = repo.get("patch") if isinstance(repo, dict) else None
        if isinstance(patch, dict) and isinstance(patch.get("text"), str):
            out[name] = patch["text"]
    return out


def _rehash_scrubbed(redactor: Redactor, doc: Dict[str, Any], before: Dict[str, str]) -> None:
    """A patch that :meth:`Redactor.scrub` changed (a value masked elsewhere, copied into it) gets the digest of what
    is stored now and its changed lines: ``restore`` checks ``stored_sha256`` against the body it reads."""
    for name, text in _patch_texts(doc).items():
        old = before.get(name)
        if old is None or text is old or text == old:
            continue
        import hashlib  # lazy: OpenSSL's ~4 ms, only for a patch a remembered value was found in

        patch = doc["code"][name]["patch"]
        patch["stored_sha256"] = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
        lines = patch.get("redacted_lines")
        patch["redacted_lines"] = sorted(set(lines if isinstance(lines, list) else ()) | set(
            redactor.scrubbed_lines(old, text)))
        patch["restores_exactly"] = False


def redact_document(doc: Dict[str, Any], redactor: Redactor) -> Dict[str, Any]:
    """Return the redacted copy of ``doc`` with the rule counts under ``collection.redactions``."""
    before = dict(redactor.counts)
    doc, counts_held = _hold_counts(doc) if isinstance(doc, dict) else (doc, {})
    config = doc.get("config") if isinstance(doc, dict) else None
    # The maps keyed by a file's path: there a key is a path, never a name, so ``token.json``'s digest is not
    # masked as a token's value (its content is still scanned).
    held = {k: config[k] for k in CONFIG_FILE_MAPS if isinstance(config, dict) and isinstance(config.get(k), dict)}
    if held:
        doc = dict(doc)
        doc["config"] = {k: v for k, v in config.items() if k not in held}  # type: ignore[union-attr]
    out = redactor.value(doc)
    if held and isinstance(out, dict) and isinstance(out.get("config"), dict):
        out["config"].update((k, _path_map(redactor, v)) for k, v in held.items())
    patches = _patch_texts(out)
    out = redactor.scrub(out)
    if not isinstance(out, dict):
        out = {}
    _rehash_scrubbed(redactor, out, patches)
    _restore_counts(out, counts_held)
    _argv_for_relax(out)
    fired = {k: v - before.get(k, 0) for k, v in redactor.counts.items() if v - before.get(k, 0)}
    collection = out.setdefault("collection", {})
    if isinstance(collection, dict):
        counts = dict(collection.get("redactions") or {})
        for rule, n in fired.items():
            counts[rule] = counts.get(rule, 0) + n
        collection["redactions"] = counts
    return out
