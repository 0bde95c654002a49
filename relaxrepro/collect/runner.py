"""Run the registered probes concurrently under one deadline and merge what they report.

Probes run in daemon threads (:mod:`relaxrepro.std.deadline`): a probe stuck past the deadline is
recorded as ``timeout`` and left behind, and the process still exits promptly.
"""

from __future__ import annotations

import functools

from ..std import deadline
from ..std.records import Factory, FrozenRecord, Record
from .context import Context

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import threading
    from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

    from ..std.deadline import Call

STATUSES = ("ok", "partial", "absent", "failed", "timeout", "skipped")


class Outcome(Record):
    """What a probe hands back: data keyed by manifest section, a status and warnings.

    ``data`` is ``{"environment": {...}, "hardware": {...}}``: a probe may feed several sections;
    the runner deep-merges them in registry order and warns on a clash.
    """

    data: Dict[str, Any] = Factory(dict)
    status: str = "ok"
    warnings: List[str] = Factory(list)

    def warn(self, message: str, *, status: Optional[str] = None) -> "Outcome":
        self.warnings.append(message)
        if status is not None:
            self.status = status
        elif self.status == "ok":
            self.status = "partial"
        return self


class Probe(FrozenRecord):
    """A named collector. The name is its key under ``collection.probes``."""

    name: str
    collect: Callable[[Context], Outcome]


class Deriver(FrozenRecord):
    """A pure step run after every probe, over the merged document (e.g. training topology)."""

    name: str
    derive: Callable[[Dict[str, Any], Context], Optional[Outcome]]


def stray_threads() -> List[threading.Thread]:
    """Probe threads still running after their collection ended (the CLI exits hard if any)."""
    return deadline.stray_threads()


def run_probes(
    probes: Iterable[Probe], ctx: Context, *, skip: Iterable[str] = ()
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Run ``probes`` in parallel; return (merged sections, ``collection.probes`` entries)."""
    probes = list(probes)
    skip = set(skip)
    running = [p for p in probes if p.name not in skip]
    # Each probe has its own budget from its start, and all share the hard deadline.
    calls = deadline.call_all([functools.partial(_collect, probe, ctx) for probe in running], ctx.deadline,
                              clock=ctx.clock, each=ctx.probe_budget_s + 0.25,
                              names=["relaxrepro-" + probe.name for probe in running])
    results: Dict[str, Call] = {probe.name: call for probe, call in zip(running, calls)}

    sections: Dict[str, Any] = {}
    collection: Dict[str, Any] = {}
    for probe in probes:
        if probe.name in skip:
            collection[probe.name] = {"status": "skipped", "seconds": 0.0, "warnings": []}
            continue
        got = results[probe.name]
        if not got.ok:  # still running (or ended by a BaseException, which leaves no outcome either)
            collection[probe.name] = {
                "status": "timeout",
                "seconds": round(ctx.clock() - ctx.started, 3),
                "warnings": ["%s did not finish within its budget; its data is left out" % probe.name],
            }
            continue
        outcome, seconds = got.value
        status = outcome.status if outcome.status in STATUSES else "failed"
        warnings = [str(w) for w in outcome.warnings]
        for clash in merge_into(sections, outcome.data):
            warnings.append("%s: %s was already set by another probe; kept the first" % (probe.name, clash))
        collection[probe.name] = {"status": status, "seconds": round(seconds, 4), "warnings": warnings}
    return sections, collection


def _collect(probe: Probe, ctx: Context) -> Tuple[Outcome, float]:
    """One probe's outcome and seconds, in its own thread; a crash becomes a ``failed`` outcome."""
    ctx.begin_probe()
    t0 = ctx.clock()
    try:
        outcome = probe.collect(ctx)
        if not isinstance(outcome, Outcome):
            outcome = Outcome(status="failed", warnings=["probe returned %s" % type(outcome).__name__])
    except Exception as exc:  # a probe bug must cost one probe, not the manifest
        import traceback  # lazy: ~3 ms (linecache, tokenize), only when a probe crashes

        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome = Outcome(
            status="failed",
            warnings=["%s crashed: %s: %s (%s:%s)" % (
                probe.name, type(exc).__name__, exc, where.filename.rsplit("/", 1)[-1], where.lineno)],
        )
    return outcome, ctx.clock() - t0


def run_derivers(derivers: Iterable[Deriver], doc: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    """Run pure post-collection steps; each may add sections. Returns their collection entries."""
    collection: Dict[str, Any] = {}
    for d in derivers:
        t0 = ctx.clock()
        try:
            outcome = d.derive(doc, ctx)
        except Exception as exc:
            outcome = Outcome(status="failed", warnings=["%s crashed: %s: %s" % (d.name, type(exc).__name__, exc)])
        if outcome is None:
            continue
        warnings = list(outcome.warnings)
        for clash in merge_into(doc, outcome.data):
            warnings.append("%s: %s was already set; kept the first" % (d.name, clash))
        collection[d.name] = {"status": outcome.status, "seconds": round(ctx.clock() - t0, 4), "warnings": warnings}
    return collection


def merge_into(target: Dict[str, Any], data: Dict[str, Any], prefix: str = "", *, override: bool = False
               ) -> List[str]:
    """Deep-merge ``data`` into ``target``; return the dotted paths that clashed.

    On a clash the first value is kept, unless ``override`` (a live update replacing what was seen
    from outside), where the new one wins and nothing is reported.
    """
    clashes: List[str] = []
    for key, value in data.items():
        where = prefix + key
        if key not in target:
            target[key] = value
        elif isinstance(target[key], dict) and isinstance(value, dict):
            clashes.extend(merge_into(target[key], value, where + ".", override=override))
        elif target[key] != value:
            if override:
                target[key] = value
            else:
                clashes.append(where)
    return clashes
