"""Assemble the probes' outputs into one v1 document, and write it as ``manifest_<run-id>.json``."""

from __future__ import annotations

import os
import signal
import threading
import time

from . import redact, runner, writer
from ._version import __version__
from .context import Context
from .schema import SCHEMA_VERSION, SECTIONS

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import datetime
    from typing import Any, Dict, Iterable, List, Optional, Sequence, Union


class Manifest(dict):
    """A manifest document: a plain dict (JSON-ready) with a few conveniences."""

    warnings: List[str]
    path: Optional[str]
    private_sidecars: Dict[str, bytes]
    """{repo name: unredacted patch} for ``--private-patch``; written 0600 beside the manifest,
    never part of the document."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.warnings = []
        self.path = None
        self.private_sidecars = {}

    @property
    def run_id(self) -> str:
        return str(self.get("run_id", ""))


def _utc_strftime(fmt: str, now: Optional[Union["datetime.datetime", time.struct_time]]) -> str:
    """``now`` (a UTC ``time.gmtime()`` struct or an aware ``datetime``; default: now) formatted."""
    # time.gmtime, not datetime (~2.5 ms to import); a caller's datetime still works.
    if now is None:
        now = time.gmtime()
    if isinstance(now, time.struct_time):
        return time.strftime(fmt, now)
    return now.strftime(fmt)


def new_run_id(now: Optional[Union["datetime.datetime", time.struct_time]] = None) -> str:
    """``YYYYMMDD_HHMMSS_<7 hex>``: UTC time plus randomness (the commit lives in ``code``)."""
    # os.urandom, not secrets.token_hex: the same bytes, without secrets' hmac/hashlib/OpenSSL/random (~8 ms).
    return _utc_strftime("%Y%m%d_%H%M%S_", now) + os.urandom(4).hex()[:7]


def utc_now_iso(now: Optional[Union["datetime.datetime", time.struct_time]] = None) -> str:
    return _utc_strftime("%Y-%m-%dT%H:%M:%SZ", now)


def build(
    ctx: Context,
    *,
    probes: Optional[Sequence[runner.Probe]] = None,
    derivers: Optional[Sequence[runner.Deriver]] = None,
    run_id: Optional[str] = None,
    skip: Iterable[str] = (),
    redactor: Optional[redact.Redactor] = None,
) -> Manifest:
    """Run the probes and return the redacted document. Never raises for what a probe does."""
    from . import probes as registry

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
    doc["collection"] = collection
    red = redactor or redact.Redactor.for_environment(ctx.env)
    m = Manifest(redact.redact_document(doc, red))
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


def write(
    doc: Dict[str, Any],
    *,
    directory: Optional[str] = None,
    path: Optional[str] = None,
    redactor: Optional[redact.Redactor] = None,
    env: Optional[Dict[str, str]] = None,
    retries: int = 16,
) -> writer.WriteResult:
    """Redact, fit under the cap and write ``doc`` atomically. Never raises; never overwrites.

    With ``directory`` the file is ``manifest_<run-id>.json`` there, and a clash with an existing
    file takes a new run id. With ``path`` an existing file is refused.
    """
    result = writer.WriteResult()
    red = redactor or redact.Redactor.for_environment(env if env is not None else os.environ)
    _ignore_sigxfsz()
    private = dict(getattr(doc, "private_sidecars", None) or {})
    try:
        doc = redact.redact_document(doc, red)
    except Exception as exc:  # pragma: no cover - redaction is pure; this guards the promise anyway
        result.warnings.append("redaction failed (%s); nothing written" % exc)
        return result
    if path is None and directory is None:
        directory = "."
    for _ in range(retries):
        data, written, sidecars = writer.fit(doc)
        if path is not None:
            target = path
        else:
            target = os.path.join(directory or ".", "manifest_%s.json" % written.get("run_id", "run"))
        if os.path.isdir(target):
            result.warnings.append("could not write %s: it is a directory" % target)
            return result
        sidecar_paths: List[str] = []
        try:
            for name, body in sorted(sidecars.items()):
                sp = os.path.join(os.path.dirname(os.path.abspath(target)), name)
                writer.write_exclusive(sp, body)
                sidecar_paths.append(sp)
            for name, body in sorted(private.items()):
                sp = os.path.join(os.path.dirname(os.path.abspath(target)), "manifest_%s.%s.private.patch" % (
                    written.get("run_id", "run"), writer.safe_name(name)))
                writer.write_exclusive(sp, body, mode=0o600)
                sidecar_paths.append(sp)
            writer.write_exclusive(target, data)
        except FileExistsError:
            for sp in sidecar_paths:
                _unlink(sp)
            if path is not None:
                result.warnings.append(
                    "could not write %s: it already exists (manifests are never overwritten)" % target)
                return result
            doc = dict(doc)
            doc["run_id"] = new_run_id()
            continue
        except OSError as exc:
            for sp in sidecar_paths:
                _unlink(sp)
            result.warnings.append(writer.describe_os_error(exc, target))
            return result
        result.path = target
        result.sidecars = sidecar_paths
        if isinstance(written.get("collection"), dict) and written["collection"].get("truncated"):
            result.warnings.append("manifest over %d bytes: %s" % (
                writer.MAX_BYTES, "; ".join(written["collection"]["truncated"][:3])))
        return result
    result.warnings.append("could not find a free run id in %s after %d tries" % (directory, retries))
    return result


def _unlink(p: str) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def _ignore_sigxfsz() -> None:
    # Past a file-size limit the kernel sends SIGXFSZ, which kills the process by default; ignored,
    # the write fails with EFBIG instead and becomes a warning.
    sig = getattr(signal, "SIGXFSZ", None)
    if sig is not None and threading.current_thread() is threading.main_thread():
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
