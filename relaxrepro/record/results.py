"""What a run produced, as ``results``: final metrics, fingerprints of its outputs, and its trace.

``metrics``: ``{name: number}``; a non-finite value is the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``
(JSON holds no NaN and our reader refuses a bare one; ``float(value)`` reads either form back).
``outputs``: ``{path: {kind: file|directory, sha256, size, files (directories)}}``, path relative to the
working directory where it lies below it; a directory's digest is the tree digest of
:mod:`relaxrepro.collect.fingerprint` over its files' sha256, which the fingerprint cache keeps, so an
unchanged checkpoint is not read twice. A path that is missing or not fully read keeps ``kind`` with an
``error`` and no ``sha256``: verify never calls it the same.
"""

from __future__ import annotations

import json
import math
import os

from ..collect.fingerprint import Cache, default_cache_path, full_digest, scan
from ..manifest import reader
from ..std.sha import oversized_int

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}

METRICS_FILE_LIMIT = 1 << 20
"""The largest ``--metrics`` file read: a metrics file is a small JSON object."""


def metric_value(value: Any) -> Any:
    """A metric as written: an int as itself, a finite float as itself (JSON keeps a float exactly), a
    non-finite one as ``"NaN"``/``"Infinity"``/``"-Infinity"``; None for what is not a number."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return oversized_int(value) or value  # past what JSON holds: a text that still tells values apart
    if isinstance(value, str) and value in NON_FINITE.values():
        return value
    try:
        number = float(value)  # numpy scalars, one-element tensors
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return None
    if math.isfinite(number):
        return number
    return NON_FINITE[repr(number)]


def metrics_section(metrics: Mapping[Any, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """``({name: value}, warnings)``: each value through :func:`metric_value`; what is no number is left out."""
    out: Dict[str, Any] = {}
    warnings: List[str] = []
    if not callable(getattr(metrics, "items", None)):
        return out, ["metrics: expected a mapping of name to number, got %s" % type(metrics).__name__]
    for name, value in metrics.items():
        number = metric_value(value)
        if number is None:
            warnings.append("metric %s: %s is not a number; left out" % (name, type(value).__name__))
        elif isinstance(number, str) and number not in NON_FINITE.values():
            warnings.append("metric %s: an integer too large to write as a number is recorded as %s" % (name, number))
            out[str(name)] = number
        else:
            out[str(name)] = number
    return out, warnings


def read_metrics_file(path: str, cwd: str = "") -> Tuple[Dict[str, Any], Optional[str]]:
    """The metrics a trainer wrote as a JSON object at ``path`` (relative to ``cwd``): (metrics, None) or
    ({}, why not)."""
    try:
        raw = reader.read_bytes(os.path.join(cwd, path), METRICS_FILE_LIMIT)
        doc = json.loads(raw.decode("utf-8"))  # json accepts NaN/Infinity here: a trainer's json.dump writes them
    except reader.ReadError as exc:
        if exc.os_error is not None:
            return {}, "%s: %s" % (path, (exc.os_error.strerror or type(exc.os_error).__name__).lower())
        return {}, "%s: %s" % (path, exc)
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError
        return {}, "%s: not JSON (%s)" % (path, exc)
    if not isinstance(doc, dict):
        return {}, "%s: expected a JSON object of name to number, got %s" % (path, type(doc).__name__)
    metrics, warnings = metrics_section(doc)
    return metrics, "; ".join("%s: %s" % (path, w) for w in warnings) or None


def shown_path(path: str, cwd: str) -> str:
    """``path`` as recorded: relative to ``cwd`` when below it, else absolute (redaction hides a home)."""
    full = os.path.normpath(os.path.join(cwd, os.fspath(path)))
    rel = os.path.relpath(full, cwd)
    return full if rel == ".." or rel.startswith(".." + os.sep) else rel


UNHASHED = "not hashed: relaxrepro ended before the digest was taken"
"""The ``error`` of an output whose digest was still to come when the outcome was written."""


def unhashed_outputs(paths: Iterable[Any], *, cwd: str) -> Dict[str, Any]:
    """``{shown path: {kind, error}}`` for outputs about to be hashed: what the manifest says of them should
    hashing never finish (a SIGTERM at a job's time limit), so the outcome can be written first."""
    out: Dict[str, Any] = {}
    for path in paths:
        try:
            path = os.fspath(path)
            kind = "directory" if os.path.isdir(os.path.join(cwd, path)) else "file"
            out[shown_path(path, cwd)] = {"kind": kind, "error": UNHASHED}
        except (TypeError, ValueError):  # not a path, bytes, an embedded NUL: hashing says so in its turn
            continue
    return out


def fingerprint_outputs(paths: Iterable[Any], *, cwd: str, env: Mapping[str, str]) -> Tuple[Dict[str, Any], List[str]]:
    """``({shown path: entry}, warnings)`` for ``results.outputs``: each file or tree hashed in full,
    per-file digests read from and stored in the fingerprint cache."""
    cache_path = default_cache_path(env)
    cache = Cache(cache_path, readonly=False) if cache_path else None
    warnings: List[str] = list(cache.warnings) if cache is not None else []
    out: Dict[str, Any] = {}
    try:
        for path in paths:
            path = os.fspath(path)
            key = shown_path(path, cwd)
            s = scan(path, cwd=cwd)
            if s.error is not None:
                out[key] = {"kind": "missing", "error": s.error}
                warnings.append("output %s: %s" % (key, s.error))
                continue
            full = full_digest(s, cache, hash_missing=True)
            entry: Dict[str, Any] = {"kind": "file" if s.kind == "file" else "directory", "size": s.total_bytes}
            if s.kind == "tree":
                entry["files"] = len(s.files)
                links = sum(1 for e in s.entries if e.kind == "link")
                if links:
                    entry["symlinks"] = links
                if s.skipped():
                    warnings.append("output %s: %s" % (key, s.skipped()))
            if full.sha256:
                entry["sha256"] = full.sha256.split(":", 1)[-1]
            else:
                entry["error"] = s.not_read() or "not fully read"
                warnings.append("output %s: %s" % (key, entry["error"]))
            out[key] = entry
    finally:
        if cache is not None:
            warnings.extend(w for w in cache.warnings if w not in warnings)
            cache.close()
    return out, warnings


def after_run(outputs: Sequence[str], metrics: Optional[str], *, cwd: str, env: Mapping[str, str]
              ) -> Tuple[Dict[str, Any], List[str]]:
    """``run --outputs``/``--metrics`` (and a replay of a run recorded with them) once the command has exited:
    ({"metrics": ..., "outputs": ...} as found, one warning line per problem), never another exit status."""
    found: Dict[str, Any] = {}
    warnings: List[str] = []
    if metrics:
        found["metrics"], problem = read_metrics_file(metrics, cwd)
        if problem:
            warnings.append("--metrics %s" % problem)
    if outputs:
        found["outputs"], problems = fingerprint_outputs(outputs, cwd=cwd, env=env)
        warnings.extend(problems)
    return found, warnings


def merge(doc: Dict[str, Any], *, metrics: Optional[Mapping[str, Any]] = None,
          outputs: Optional[Mapping[str, Any]] = None, trace: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Add to ``doc["results"]`` (made when absent): metrics and outputs by name, the trace whole."""
    results = doc.get("results")
    results = dict(results) if isinstance(results, dict) else {}
    for key, value in (("metrics", metrics), ("outputs", outputs)):
        if value:
            old = results.get(key)
            old = old if isinstance(old, dict) else {}
            if key == "outputs":  # the digests replace the marks written before hashing (keys redacted since)
                old = {k: v for k, v in old.items() if not (isinstance(v, dict) and v.get("error") == UNHASHED)}
            results[key] = dict(old, **value)
    if trace is not None:
        results["trace"] = dict(trace)
    doc["results"] = results
    return results


def pending(doc: Any) -> bool:
    """Whether ``doc`` (a Manifest) holds a trace or results not in its file yet."""
    tracer = getattr(doc, "tracer", None)
    return bool(tracer is not None and tracer.calls) or bool(doc.get("results"))


def settle(doc: Any) -> None:
    """Lay the trace collected in memory into ``doc["results"]["trace"]`` (before a write)."""
    tracer = getattr(doc, "tracer", None)
    if tracer is not None and tracer.calls:
        merge(doc, trace=tracer.section())
