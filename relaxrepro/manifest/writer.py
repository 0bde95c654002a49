"""Serialise, fit under the size cap, and write atomically without ever overwriting.

The degradation order, applied one step at a time until the document fits ``CAP_BYTES``:

1. patch bodies leave the document (kept as sidecar files beside the manifest), largest first,
   keeping their sha256, size and file list; a patch over ``INLINE_PATCH_BYTES`` (or not UTF-8)
   always lives in its sidecar, so several dirty repositories still leave room for the rest;
2. inline config file contents go, keeping path, size and sha256;
3. long lists and maps (packages, untracked files, nodes, ...) keep their key entries plus a digest
   of the full list;
4. any string over 1 KB is cut to its head with a digest of the whole.

Each step leaves a note in ``collection.truncated``. A write that cannot happen returns a warning,
never raises, and leaves nothing half-written: the file appears under its final name complete or not
at all (temp file in the same directory, fsync, then link/rename).
"""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import threading

from ..std.records import Record
from ..std.sha import sha256_hex
from .model import CAP_BYTES, KEY_PACKAGES, new_run_id

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Sequence, Tuple

    from .redact import Redactor

_KEEP_PACKAGES = frozenset(KEY_PACKAGES)


class WriteResult(Record):
    """Where a manifest went (``path`` None: nowhere, see ``warnings``) and under which ``run_id``: a clash
    with an existing file makes :func:`write` take a fresh one."""

    _fields = ("path", "sidecars", "warnings", "run_id")

    def __init__(self, path: Optional[str] = None, sidecars: Optional[List[str]] = None,
                 warnings: Optional[List[str]] = None, run_id: Optional[str] = None) -> None:
        self.path = path
        self.run_id = run_id
        self.sidecars: List[str] = [] if sidecars is None else sidecars
        self.warnings: List[str] = [] if warnings is None else warnings


def jsonable(value: Any, _seen: Optional[set] = None) -> Any:
    """A JSON-safe copy: non-finite floats become ``"<non-finite:inf>"`` etc., other objects strings."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "<non-finite:%s>" % ("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
    if value is None or isinstance(value, (str, bool, int)):
        return value
    seen = _seen if _seen is not None else set()
    if id(value) in seen:
        return "<recursive>"
    if isinstance(value, dict):
        seen.add(id(value))
        out = {str(k): jsonable(v, seen) for k, v in value.items()}
        seen.discard(id(value))
        return out
    if isinstance(value, (list, tuple)):
        seen.add(id(value))
        out_list = [jsonable(v, seen) for v in value]
        seen.discard(id(value))
        return out_list
    try:
        return str(value)
    except Exception:
        return "<unprintable %s>" % type(value).__name__


def serialize(doc: Dict[str, Any]) -> bytes:
    """Deterministic bytes: sorted keys, one-space indent, UTF-8, trailing newline."""
    return (json.dumps(jsonable(doc), sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode(
        "utf-8"
    )


# -- fitting under the cap --------------------------------------------------------------------

Step = "Callable[[Dict[str, Any], Dict[str, bytes], str], List[str]]"  # annotations only


INLINE_PATCH_BYTES = 32_000
"""A patch body over this always lives in its sidecar (not a degradation: several dirty repos must
still leave the manifest room under the cap)."""


def _patches(doc: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    code = doc.get("code")
    if not isinstance(code, dict):
        return []
    out = []
    for name in sorted(code):
        repo = code[name]
        patch = repo.get("patch") if isinstance(repo, dict) else None
        if isinstance(patch, dict) and (isinstance(patch.get("text"), str) or
                                        isinstance(patch.get("text_base64"), str)):
            out.append((name, patch))
    return out


def _to_sidecar(name: str, patch: Dict[str, Any], sidecars: Dict[str, bytes], run_id: str) -> str:
    if isinstance(patch.get("text_base64"), str):
        import base64

        body = base64.b64decode(patch.pop("text_base64"))
        patch.pop("text", None)
    else:
        body = patch.pop("text").encode("utf-8", "surrogateescape")
    sidecar = "manifest_%s.%s.patch" % (run_id, safe_name(name))
    sidecars[sidecar] = body
    patch["sidecar"] = sidecar
    patch["inline"] = False
    return sidecar


def place_patches(doc: Dict[str, Any], run_id: str) -> Tuple[Dict[str, Any], Dict[str, bytes], List[str]]:
    """Move patch bodies over ``INLINE_PATCH_BYTES``, and non-UTF-8 ones (base64 in the document),
    to sidecars. Returns (document, sidecars, notes); the document is copied only when one moves."""
    big = [name for name, p in _patches(doc)
           if "text_base64" in p or len(p["text"].encode("utf-8", "surrogateescape")) > INLINE_PATCH_BYTES]
    if not big:
        return doc, {}, []
    import copy  # only when a patch moves: most runs never copy

    doc = copy.deepcopy(doc)
    sidecars: Dict[str, bytes] = {}
    notes = []
    for name, patch in _patches(doc):
        if name in big:
            sidecar = _to_sidecar(name, patch, sidecars, run_id)
            notes.append("code.%s.patch.text moved to sidecar %s" % (name, sidecar))
    return doc, sidecars, notes


def _drop_patch_bodies(doc: Dict[str, Any], sidecars: Dict[str, bytes], run_id: str,
                       limit: Optional[int] = None) -> List[str]:
    """Largest patch first, only as many as it takes to fit ``limit`` (all when no limit)."""
    notes = []
    patches = sorted(_patches(doc), key=lambda np: (-len(np[1].get("text") or np[1].get("text_base64") or ""),
                                                    np[0]))
    for name, patch in patches:
        if limit is not None and len(serialize(doc)) + 1024 <= limit:  # room for the notes
            break
        sidecar = _to_sidecar(name, patch, sidecars, run_id)
        notes.append("code.%s.patch.text moved to sidecar %s" % (name, sidecar))
    return notes


def _drop_config_contents(doc: Dict[str, Any], sidecars: Dict[str, bytes], run_id: str) -> List[str]:
    notes = []
    files = (doc.get("config") or {}).get("files") if isinstance(doc.get("config"), dict) else None
    if isinstance(files, list):
        for i, f in enumerate(files):
            if isinstance(f, dict) and "content" in f:
                f.pop("content")
                notes.append("config.files[%d].content dropped" % i)
    return notes


def _shorten_collections(doc: Dict[str, Any], sidecars: Dict[str, bytes], run_id: str) -> List[str]:
    notes: List[str] = []

    def visit(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for k in list(node):
                v = node[k]
                path = "%s.%s" % (where, k) if where else k
                if isinstance(v, dict) and len(v) > 64 and all(not isinstance(x, (dict, list)) for x in v.values()):
                    kept = {n: x for n, x in v.items() if n in _KEEP_PACKAGES or n.startswith("nvidia-")}
                    node[k] = kept
                    node[k + "_truncated"] = {"count": len(v), "sha256": _digest(v)}
                    notes.append("%s: kept %d of %d entries (digest of all in %s_truncated)"
                                 % (path, len(kept), len(v), k))
                elif isinstance(v, list) and len(v) > 32:
                    node[k] = v[:16]
                    node[k + "_truncated"] = {"count": len(v), "sha256": _digest(v)}
                    notes.append("%s: kept 16 of %d items" % (path, len(v)))
                else:
                    visit(v, path)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                visit(v, "%s[%d]" % (where, i))

    for section in sorted(doc):
        if section != "collection":
            visit(doc[section], section)
    return notes


def _cut_long_strings(doc: Dict[str, Any], sidecars: Dict[str, bytes], run_id: str) -> List[str]:
    notes: List[str] = []

    def visit(node: Any, where: str) -> Any:
        if isinstance(node, str) and len(node) > 1024:
            notes.append("%s: cut from %d characters" % (where, len(node)))
            return node[:256] + "<cut: %d chars, sha256 %s>" % (len(node), sha256_hex(node.encode()))
        if isinstance(node, dict):
            return {k: visit(v, "%s.%s" % (where, k) if where else k) for k, v in node.items()}
        if isinstance(node, list):
            return [visit(v, "%s[%d]" % (where, i)) for i, v in enumerate(node)]
        return node

    for section in sorted(doc):
        if section != "collection":
            doc[section] = visit(doc[section], section)
    return notes


DEGRADATION: Tuple[Step, ...] = (_drop_patch_bodies, _drop_config_contents, _shorten_collections, _cut_long_strings)


def _digest(value: Any) -> str:
    return sha256_hex(json.dumps(jsonable(value), sort_keys=True).encode())


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip(".") or "repo"


_safe_name = safe_name  # the foundation's name, kept for callers written against it


def fit(doc: Dict[str, Any], limit: int = CAP_BYTES) -> Tuple[bytes, Dict[str, Any], Dict[str, bytes]]:
    """Serialise ``doc`` under ``limit`` bytes; return (bytes, the document as written, sidecars)."""
    run_id = str(doc.get("run_id", "run"))
    doc, sidecars, truncated = place_patches(doc, run_id)
    if truncated:
        _note(doc, truncated)
    data = serialize(doc)
    if len(data) <= limit:
        return data, doc, sidecars
    import copy  # only over the cap

    doc = copy.deepcopy(doc)
    for step in DEGRADATION:
        if step is _drop_patch_bodies:  # moves only as many patches as the cap requires
            truncated.extend(_drop_patch_bodies(doc, sidecars, run_id, limit=limit))
        else:
            truncated.extend(step(doc, sidecars, run_id))
        _note(doc, truncated)
        data = serialize(doc)
        if len(data) <= limit:
            return data, doc, sidecars
    # Last resort: keep only what identifies the run and says what happened.
    keep = {k: doc[k] for k in ("schema_version", "run_id", "generated_at") if k in doc}
    keep.update({k: {} for k in ("command", "code", "config", "environment", "hardware", "runtime", "training")})
    keep["collection"] = {"truncated": truncated + ["every section dropped: the document stayed over %d bytes" % limit]}
    return serialize(keep), keep, sidecars


def _note(doc: Dict[str, Any], truncated: List[str]) -> None:
    collection = doc.setdefault("collection", {})
    if isinstance(collection, dict):
        collection["truncated"] = list(truncated)


# -- atomic, exclusive writes -----------------------------------------------------------------

def _synced_temp(directory: str, data: bytes, mode: int) -> str:
    """``data`` in a new temp file of ``directory``, fsynced, with ``mode``; its path.

    Nothing is left behind if writing fails (disk full, file-size limit).
    """
    fd, tmp = _mkstemp(directory)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _mkstemp(directory: str) -> Tuple[int, str]:
    """``tempfile.mkstemp(prefix=".relaxrepro-", suffix=".tmp", dir=directory)`` without importing
    ``tempfile`` (and ``random``, ~2 ms): a new file only we can read, never one that exists or a symlink."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        path = os.path.join(directory, ".relaxrepro-%s.tmp" % os.urandom(6).hex())
        try:
            return os.open(path, flags, 0o600), os.path.abspath(path)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", directory)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_exclusive(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically; raise FileExistsError if ``path`` exists.

    The bytes go to a temp file in the same directory, are fsynced, then hard-linked to the final
    name (atomic and exclusive); a reader never sees a partial file, even if we are SIGKILLed.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = _synced_temp(directory, data, mode)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
                raise
            # No hard links here (some FUSE and network filesystems): a checked rename is the best we have.
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, "exists", path) from None
            os.rename(tmp, path)
            tmp = ""
        _fsync_dir(directory)
    finally:
        if tmp:
            _unlink_quietly(tmp)


def replace_atomically(path: str, data: bytes) -> None:
    """Replace an existing ``path`` with ``data`` atomically, keeping its mode (temp, fsync, rename).

    The one sanctioned rewrite of a manifest: adding the outcome of the run it describes.
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        mode = 0o644
    tmp = _synced_temp(directory, data, mode)
    try:
        os.replace(tmp, path)
        tmp = ""
        _fsync_dir(directory)
    finally:
        if tmp:
            _unlink_quietly(tmp)


def rewrite(path: str, doc: Dict[str, Any], extra_sidecars: Sequence[Tuple[str, bytes, int]] = ()) -> None:
    """Replace the manifest at ``path`` with ``doc`` (already redacted): fitted under the cap, the
    sidecars that fitting moves out (and ``extra_sidecars``: (name, body, mode)) written beside it
    unless they exist already (written for this very run), then the file replaced atomically. Raises
    OSError."""
    data, _written, sidecars = fit(doc)
    directory = os.path.dirname(os.path.abspath(path))
    bodies = [(name, body, 0o644) for name, body in sorted(sidecars.items())] + list(extra_sidecars)
    for name, body, mode in bodies:
        try:
            write_exclusive(os.path.join(directory, name), body, mode=mode)
        except FileExistsError:
            pass
    replace_atomically(path, data)


def _fsync_dir(directory: str) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def describe_os_error(exc: BaseException, target: str) -> str:
    """One line a user understands for a failed write."""
    code = getattr(exc, "errno", None)
    reasons = {
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.EROFS: "read-only file system",
        errno.ENOSPC: "no space left on device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EFBIG: "file too large (file-size limit)",
        errno.ENOENT: "directory does not exist",
        errno.EISDIR: "is a directory",
        errno.ENOTDIR: "a path component is not a directory",
        errno.EEXIST: "already exists",
    }
    reason = reasons.get(code) if code is not None else None
    return "could not write %s: %s" % (target, reason or getattr(exc, "strerror", None) or exc)


def write(
    doc: Dict[str, Any],
    *,
    directory: Optional[str] = None,
    path: Optional[str] = None,
    redactor: Optional[Redactor] = None,
    env: Optional[Dict[str, str]] = None,
    retries: int = 16,
) -> WriteResult:
    """Redact, fit under the cap and write ``doc`` atomically. Never raises; never overwrites.

    A :class:`~relaxrepro.manifest.model.Manifest` that collection redacted with the run's policy and that
    is written with that same policy (its ``redacted_by`` is ``redactor``) is not redacted again; any
    other document is, with ``redactor``, else the policy it was collected with (a manifest the trainer
    changed after collection: the API's), else this machine's default: nothing reaches the disk
    unredacted. With ``directory`` the file is ``manifest_<run-id>.json`` there, and a clash with an
    existing file takes a new run id (``result.run_id``). With ``path`` an existing file is refused.
    """
    result = WriteResult()
    _ignore_sigxfsz()
    private = dict(getattr(doc, "private_sidecars", None) or {})
    if redactor is None or getattr(doc, "redacted_by", None) is not redactor:
        from .redact import policy_of, redact_document

        red = redactor or policy_of(doc, env)
        try:
            doc = redact_document(doc, red)
        except Exception as exc:  # pragma: no cover - redaction is pure; this guards the promise anyway
            result.warnings.append("redaction failed (%s); nothing written" % exc)
            return result
    if path is None and directory is None:
        directory = "."
    for _ in range(retries):
        data, written, sidecars = fit(doc)
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
                write_exclusive(sp, body)
                sidecar_paths.append(sp)
            for name, body in sorted(private.items()):
                sp = os.path.join(os.path.dirname(os.path.abspath(target)), "manifest_%s.%s.private.patch" % (
                    written.get("run_id", "run"), safe_name(name)))
                write_exclusive(sp, body, mode=0o600)
                sidecar_paths.append(sp)
            write_exclusive(target, data)
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
            result.warnings.append(describe_os_error(exc, target))
            return result
        result.path = target
        result.sidecars = sidecar_paths
        result.run_id = str(written.get("run_id", "")) or None
        if isinstance(written.get("collection"), dict) and written["collection"].get("truncated"):
            result.warnings.append("manifest over %d bytes: %s" % (
                CAP_BYTES, "; ".join(written["collection"]["truncated"][:3])))
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
