"""Assembly: probes -> derivers -> redact once. The result is a :class:`Manifest` ready to write."""

from __future__ import annotations

import time

from .._version import __version__
from ..manifest.model import SCHEMA_VERSION, SECTIONS, Manifest, new_run_id, utc_now_iso
from ..manifest.redact import redact_document
from . import runner
from .context import Context

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Optional, Sequence

    from ..manifest.redact import Redactor


def build(
    ctx: Context,
    *,
    probes: Optional[Sequence[runner.Probe]] = None,
    derivers: Optional[Sequence[runner.Deriver]] = None,
    run_id: Optional[str] = None,
    skip: Iterable[str] = (),
    redactor: Optional[Redactor] = None,
) -> Manifest:
    """Run the probes and return the redacted document. Never raises for what a probe does."""
    from . import registry  # lazy: every probe module (~40 ms); probe_problems, all the API takes, needs none

    now = time.gmtime()
    sections, collection_probes = runner.run_probes(registry.PROBES if probes is None else probes, ctx, skip=skip)
    doc: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id or new_run_id(now),
        "generated_at": utc_now_iso(now),
    }
    for section in SECTIONS:
        doc[section] = {}
    runner.merge_into(doc, sections)
    derived = runner.run_derivers(registry.DERIVERS if derivers is None else derivers, doc, ctx)
    collection = doc["collection"] if isinstance(doc.get("collection"), dict) else {}
    collection.update({
        "probes": dict(collection_probes, **derived),
        "seconds": round(ctx.clock() - ctx.started, 4),
        "deadline_s": round(ctx.deadline - ctx.started, 3),
        "tool": {"name": "relaxrepro", "version": __version__},
    })
    if isinstance(ctx.options.get("recording"), dict):
        collection["recording"] = dict(ctx.options["recording"])  # redacted below with the rest
    doc["collection"] = collection
    red = redactor or ctx.redactor
    m = Manifest(redact_document(doc, red))
    m.redacted_by = red
    m.private_sidecars = dict(ctx.memo("private_sidecars", dict))
    return m


def probe_problems(doc: Dict[str, Any]) -> List[str]:
    """Probes that failed or timed out, as lines for stderr (``--strict`` turns them into exit 1)."""
    out = []
    probes = ((doc.get("collection") or {}).get("probes") or {})
    for name in sorted(probes):
        entry = probes[name]
        if isinstance(entry, dict) and entry.get("status") in ("failed", "timeout"):
            first = (entry.get("warnings") or [""])[0]
            out.append("%s %s%s" % (name, entry["status"], (": " + first) if first else ""))
    return out


def probe_warnings(doc: Dict[str, Any]) -> List[str]:
    """One line per warning of each probe that is not ok (partial, failed, timed out), for stderr: a run
    missing its packages or its data digest says so. Absent probes (no GPU, no Ray) are no news."""
    out = []
    probes = ((doc.get("collection") or {}).get("probes") or {})
    for name in sorted(probes):
        entry = probes[name]
        if isinstance(entry, dict) and entry.get("status") in ("partial", "failed", "timeout"):
            for warning in [w for w in entry.get("warnings") or () if isinstance(w, str) and w] or [""]:
                out.append("%s %s%s" % (name, entry["status"], (": " + warning) if warning else ""))
    return out
