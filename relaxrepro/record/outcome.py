"""How a run ended, added to its own manifest once it has.

The manifest is written at the start (a run killed by the OOM killer still leaves one), so the
outcome comes later: :func:`record` rewrites that one file through a new temp file and a rename of
the same name. This is the only place an existing manifest is replaced, because the outcome belongs
to the run it describes; a reader sees the old file or the new one, never a mix.
"""

from __future__ import annotations

import datetime as _dt
import time

from ..collect.context import policy_of, safe_getcwd
from ..manifest import reader, redact, writer
from ..manifest.model import READ_LIMIT_BYTES
from ..std import proc
from .results import merge, unhashed_outputs

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional


def utc_now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_exit(exc_type: Any, exc: Optional[BaseException], started: float) -> Dict[str, Any]:
    """The outcome of a Python block that ended normally, by ``sys.exit`` or by an exception.

    ``started`` is a ``time.monotonic()`` reading. Only the exception's type is kept: messages carry
    paths, hosts and occasionally credentials, and the type is what tells runs apart.
    """
    out: Dict[str, Any] = {"ended_at": utc_now_iso(), "duration_s": round(max(time.monotonic() - started, 0.0), 3)}
    if exc_type is None:
        out.update(status="ok", exit_code=0)
    elif issubclass(exc_type, SystemExit):
        code = getattr(exc, "code", None)
        # sys.exit(None) is 0, sys.exit("message") prints it and exits 1, as the interpreter does.
        number = 0 if code is None else code if isinstance(code, int) and not isinstance(code, bool) else 1
        out.update(status="ok" if number == 0 else "exit", exit_code=number)
    else:
        out.update(status="exception", exit_code=None, exception_type=_qualname(exc_type))
    return out


def from_process(rc: Optional[int], error: Optional[str], seconds: float) -> Dict[str, Any]:
    """The outcome of a child process: its exit code, the signal that killed it, or why it never ran."""
    out: Dict[str, Any] = {"ended_at": utc_now_iso(), "duration_s": round(max(seconds, 0.0), 3)}
    if rc is None:
        out.update(status="not_started", exit_code=127, error=error or "could not start")
    elif rc < 0:
        out.update(status="signal", exit_code=128 - rc, signal=-rc, signal_name=proc.signal_name(-rc))
    else:
        out.update(status="ok" if rc == 0 else "exit", exit_code=rc)
    return out


def _qualname(exc_type: Any) -> str:
    module = getattr(exc_type, "__module__", "") or ""
    name = getattr(exc_type, "__qualname__", None) or getattr(exc_type, "__name__", "?")
    return name if module in ("builtins", "") else "%s.%s" % (module, name)


def mark_unhashed(doc: Dict[str, Any], outputs: List[Any]) -> None:
    """``outputs`` in ``doc["results"]`` as not hashed yet (:func:`~relaxrepro.record.results.unhashed_outputs`),
    so the outcome can be written before the minutes of hashing; their digests replace the marks."""
    merge(doc, outputs=unhashed_outputs(outputs, cwd=safe_getcwd()))


def record(path: str, outcome: Optional[Dict[str, Any]], *, run_id: Optional[str] = None,
           doc: Optional[Dict[str, Any]] = None, results: Optional[Dict[str, Any]] = None) -> Optional[str]:
    """Add ``outcome`` (None: leave it) to the manifest at ``path``; return a warning line, or None when done.

    ``results``: ``{"metrics": ..., "outputs": ...}`` found outside the run (``run --outputs``), merged
    into its ``results`` and redacted with the rest.
    ``doc``: the in-memory manifest to write instead of the file's content (the API's, which
    ``update_manifest`` may have completed after the first write); it is redacted again here, with the
    policy it was collected with.
    Refuses (with a warning) when the file is no longer the manifest of ``run_id``: a file put there
    by someone else is never rewritten. Never raises.
    """
    try:
        on_disk = reader.parse_json(reader.read_bytes(path, READ_LIMIT_BYTES).decode("utf-8"))
        if not isinstance(on_disk, dict):
            return "could not add the outcome to %s: it is no longer a manifest" % path
        if run_id is not None and on_disk.get("run_id") != run_id:
            return "could not add the outcome to %s: it now holds run %s" % (path, on_disk.get("run_id"))
        if doc is not None and doc.get("run_id") == on_disk.get("run_id"):
            doc = redact.redact_document(dict(doc), policy_of(doc))
        else:
            doc = on_disk
        if results:
            merge(doc, **results)
            doc = redact.redact_document(doc, policy_of(doc))
        if outcome is not None:
            previous = doc.get("outcome")
            doc["outcome"] = dict(previous, **outcome) if isinstance(previous, dict) else dict(outcome)
        lost = writer.rewrite(path, doc)  # the outcome may tip it over the cap: then the patch moves out
        return "; ".join(lost) or None
    except (OSError, ValueError) as exc:
        if isinstance(exc, reader.ReadError) and exc.os_error is not None:
            exc = exc.os_error  # the file could not be opened or read: worded as that OSError
        reason = writer.describe_os_error(exc, path) if isinstance(exc, OSError) else "%s: %s" % (path, exc)
        return "could not add the outcome: %s" % reason
    except Exception as exc:  # the promise: a warning, never a traceback at the end of a long run
        return "could not add the outcome to %s: %s: %s" % (path, type(exc).__name__, exc)


