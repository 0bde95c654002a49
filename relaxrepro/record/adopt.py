"""One run, one manifest: a trainer started by ``relaxrepro run`` records into run's manifest.

``relaxrepro run -- python train.py`` writes the manifest before the command starts and tells the
command which one it is (``RELAXREPRO_RUN_ID``, ``RELAXREPRO_MANIFEST``). When ``train.py`` itself
calls the API (``recorded()``, ``collect_manifest``/``write_manifest``), the API adopts that run id
and folds what it saw into that file instead of writing a second manifest with a second run id.

Who wins in the fold (:func:`fold`): the trainer for what only the running process knows (its
resolved ``args``, the live Ray ``runtime`` and the ``training`` topology derived from it, ``seeds``,
the API's ``data=``/``repos=``), key by key inside every other section so that what only ``run``
was told (``--repo``, ``--data``, ``--config``) survives; ``run`` for the ``command`` it launched
and its own ``collection``, which keeps the API's probe statuses under ``collection.api``.
"""

from __future__ import annotations

import os

from ..collect.context import policy_of
from ..manifest import reader, redact, writer
from ..manifest.model import ADOPT_LIMIT_BYTES, RUN_ID_ENV
from ..std.records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

ENV_MANIFEST = "RELAXREPRO_MANIFEST"

PROCESS_SECTIONS = ("runtime", "training", "seeds")
"""Replaced whole by the trainer's: ``update_manifest`` removes stale keys of the outside view (a
``ray status`` taken before the trainer started its own cluster), which a key-by-key fold would bring back."""

OUTER_SECTIONS = ("command",)
"""Kept from run's manifest: the command line as launched (``torchrun ... train.py``), not as the
trainer's ``sys.argv`` sees it."""

LINEAGE_KEYS = ("parent", "group", "note")


class Outer(Record):
    """The manifest ``relaxrepro run`` wrote for this run: where it is, its run id, its content then."""

    path: str
    run_id: str
    doc: Dict[str, Any]


def read(path: str) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(the manifest at ``path``, None) or (None, why not)."""
    try:
        data = reader.read_bytes(path, ADOPT_LIMIT_BYTES)  # a FIFO (`RELAXREPRO_MANIFEST=<(...)`): refused unread
    except reader.ReadError as exc:
        if exc.reason == "too_large":
            return None, "not a manifest (over %d bytes)" % ADOPT_LIMIT_BYTES
        if exc.os_error is None:
            return None, "not a regular file"
        return None, "cannot read it (%s)" % (exc.os_error.strerror or type(exc.os_error).__name__)
    try:
        doc = reader.parse_json(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and ManifestError both
        return None, "not a manifest (%s)" % exc
    if not isinstance(doc, dict) or not isinstance(doc.get("run_id"), str):
        return None, "not a manifest (no run_id)"
    return doc, None


def find(env: Mapping[str, str]) -> Tuple[Optional[Outer], Optional[str]]:
    """The run's manifest named by the environment, and a warning line when it names a bad one.

    Nothing set, or only ``RELAXREPRO_RUN_ID`` (an sbatch script exports it for ``generate``): no
    outer manifest, no warning. A manifest another process of this run already recorded into (a
    pipeline running train.py, then eval.py) is not adopted twice: no warning either.
    """
    path = env.get(ENV_MANIFEST)
    if not path:
        return None, None
    run_id = env.get(RUN_ID_ENV) or ""
    doc, problem = read(path)
    if doc is None:
        return None, "%s=%s: %s; this process writes a manifest of its own" % (ENV_MANIFEST, path, problem)
    if doc["run_id"] != run_id:
        return None, "%s=%s holds run %s, not %s=%s; this process writes a manifest of its own" % (
            ENV_MANIFEST, path, doc["run_id"], RUN_ID_ENV, run_id or "(unset)")
    if _recorded_by_api(doc):
        return None, None
    return Outer(os.path.abspath(path), run_id, doc), None


def _recorded_by_api(doc: Mapping[str, Any]) -> bool:
    collection = doc.get("collection")
    return isinstance(collection, dict) and isinstance(collection.get("api"), dict)


def adopt_lineage(doc: Dict[str, Any], outer: Mapping[str, Any], explicit: Any) -> None:
    """Take run's ``--parent``/``--group``/``--note`` unless the trainer gave its own (``explicit``)."""
    theirs = outer.get("lineage") if isinstance(outer.get("lineage"), dict) else {}
    ours = dict(doc.get("lineage") or {}) if isinstance(doc.get("lineage"), dict) else {}
    for key in LINEAGE_KEYS:
        if key not in explicit and key in theirs:
            ours[key] = theirs[key]
    if ours:
        doc["lineage"] = ours


def fold(outer: Mapping[str, Any], inner: Mapping[str, Any]) -> Dict[str, Any]:
    """One document from run's manifest (``outer``) and the trainer's (``inner``) of the same run."""
    out: Dict[str, Any] = dict(outer)
    for key, value in inner.items():
        if key in ("schema_version", "run_id", "generated_at", "collection") or key in OUTER_SECTIONS:
            continue
        theirs = outer.get(key)
        if key in PROCESS_SECTIONS or not isinstance(value, dict) or not isinstance(theirs, dict):
            if value or key not in out:  # an empty section of the trainer's does not erase run's
                out[key] = value
        else:
            out[key] = dict(theirs)
            out[key].update(value)
    for key in OUTER_SECTIONS:
        if key not in out and key in inner:
            out[key] = inner[key]
    collection = dict(outer.get("collection") or {}) if isinstance(outer.get("collection"), dict) else {}
    # What the cap cut from run's first write may be whole again (the trainer's patch, its config
    # files): writer.fit notes again whatever this write has to cut.
    collection.pop("truncated", None)
    api = inner.get("collection") if isinstance(inner.get("collection"), dict) else {}
    collection["api"] = {k: v for k, v in api.items() if k in ("probes", "seconds", "deadline_s", "redactions")}
    out["collection"] = collection
    return out


def write(outer: Outer, inner: Mapping[str, Any], *, first: bool) -> Tuple[Optional[str], Optional[str]]:
    """Fold ``inner`` into the manifest at ``outer.path`` and replace it atomically: (path, None), (path, what
    was not stored) or (None, why).

    The file is read again here: ``relaxrepro run`` or an earlier write of the trainer may have
    changed it since. ``first``: this process has not written into it yet, so a file another
    process already recorded into (two trainers started at once under one ``run``) is refused.
    Redacted, fitted under the 100 KB cap; a reader sees the old file or the new one, never a mix.
    """
    path = outer.path
    doc, problem = read(path)
    if doc is None:
        return None, "could not record into %s: %s" % (path, problem)
    if doc["run_id"] != outer.run_id:
        return None, "could not record into %s: it now holds run %s" % (path, doc["run_id"])
    if first and _recorded_by_api(doc):
        return None, "could not record into %s: another process of run %s already did" % (path, outer.run_id)
    try:
        lost = _replace(path, outer.run_id, doc, inner)
    except OSError as exc:
        return None, writer.describe_os_error(exc, path)
    return path, "; ".join(lost) or None  # written; a patch that could not be stored is said


def _replace(path: str, run_id: str, doc: Dict[str, Any], inner: Mapping[str, Any]) -> List[str]:
    private = dict(getattr(inner, "private_sidecars", None) or {})
    merged = redact.redact_document(fold(doc, inner), policy_of(inner))
    private_sidecars = [("manifest_%s.%s.private.patch" % (run_id, writer.safe_name(name)), body, 0o600)
                        for name, body in sorted(private.items())]
    return writer.rewrite(path, merged, private_sidecars)
