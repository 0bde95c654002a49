"""Serialise, fit under the size cap, and write atomically without ever overwriting.

A patch over ``INLINE_PATCH_BYTES`` (or not UTF-8) always lives in a sidecar file beside the manifest,
so several dirty repositories still leave room for the rest. A document still over ``CAP_BYTES`` loses
its largest offenders first, one at a time, only as many as it takes, so that one huge value cannot
cost the small fields that matter (key packages, ``CUDA_VISIBLE_DEVICES``, ``NCCL_*``, the GPU summary):

- a patch body moves to its sidecar (sha256, size and file list stay);
- a config file's inline content goes (its digest and size stay);
- a string over 1 KB keeps its head and says how many bytes were cut, with the whole one's sha256;
- a list of thousands keeps its first items, a map its key entries and a bounded sample, beside a
  ``<name>_truncated`` count and digest of the whole.

A second, harder level runs only when the first finds nothing more to cut, then a last resort.
Each cut leaves a note in ``collection.truncated``: the dotted path and what was there.

A write that cannot happen returns a warning, never raises, and leaves nothing half-written: the file
appears under its final name complete or not at all (temp file in the same directory, fsync, then
link/rename).
"""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import threading

from ..std.records import Factory, Record
from ..std.sha import oversized_int, sha256_hex
from ..std.text import visible_bytes
from .model import CAP_BYTES, is_key_entry, new_run_id

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

    from .redact import Redactor


class WriteResult(Record):
    """Where a manifest went (``path`` None: nowhere, see ``warnings``) and under which ``run_id``: a clash
    with an existing file makes :func:`write` take a fresh one."""

    path: Optional[str] = None
    sidecars: List[str] = Factory(list)
    warnings: List[str] = Factory(list)
    run_id: Optional[str] = None


def jsonable(value: Any, _seen: Optional[set] = None) -> Any:
    """A JSON-safe copy: non-finite floats become ``"<non-finite:inf>"`` etc., other objects strings, and a
    byte that was not UTF-8 (an argv, an environment value or a path read with ``surrogateescape``) the
    visible escape ``\\xff`` (:func:`~relaxrepro.std.text.visible_bytes`): UTF-8 holds every manifest."""
    if isinstance(value, str):
        return visible_bytes(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "<non-finite:%s>" % ("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
    if type(value) is int and value.bit_length() > 64:
        return oversized_int(value) or value  # past what JSON holds: never the reason a manifest is not written
    if value is None or isinstance(value, (bool, int)):
        return value
    seen = _seen if _seen is not None else set()
    if id(value) in seen:
        return "<recursive>"
    if isinstance(value, dict):
        seen.add(id(value))
        out = {visible_bytes(str(k)): jsonable(v, seen) for k, v in value.items()}
        seen.discard(id(value))
        return out
    if isinstance(value, (list, tuple)):
        seen.add(id(value))
        out_list = [jsonable(v, seen) for v in value]
        seen.discard(id(value))
        return out_list
    try:
        return visible_bytes(str(value))
    except Exception:
        return "<unprintable %s>" % type(value).__name__


def serialize(doc: Dict[str, Any]) -> bytes:
    """Deterministic bytes: sorted keys, one-space indent, UTF-8, trailing newline."""
    return (json.dumps(jsonable(doc), sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode(
        "utf-8"
    )


# -- fitting under the cap --------------------------------------------------------------------

INLINE_PATCH_BYTES = 32_000
"""A patch body over this always lives in its sidecar (not a degradation: several dirty repos must
still leave the manifest room under the cap)."""

LEVELS: Tuple[Tuple[int, int, int, int, int, int], ...] = (
    # (a string over this many bytes, keeps its head of; a list over, keeps its first; a map over, keeps a sample of)
    (1024, 256, 32, 16, 64, 32),
    (256, 64, 8, 4, 16, 8),
)
"""How hard fitting cuts: the second level only when the first finds nothing more to cut."""

KEY_KEPT = 64
"""At most this many key entries (:func:`~relaxrepro.manifest.model.is_key_entry`) survive a map's cut."""

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
        import base64  # lazy: ~1.5 ms, only a binary patch needs it

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
    to sidecars. Returns (document, sidecars, notes); ``doc`` itself is left as it is: only the maps on the
    way to a moved patch are copied (a deep copy of the whole document cost ~0.2 s beside a 3.5 MB patch)."""
    big = [name for name, p in _patches(doc)
           if "text_base64" in p or len(p["text"]) > INLINE_PATCH_BYTES  # a character is a byte or more
           or len(p["text"].encode("utf-8", "surrogateescape")) > INLINE_PATCH_BYTES]
    if not big:
        return doc, {}, []
    doc = dict(doc)
    owned = {id(doc)}
    sidecars: Dict[str, bytes] = {}
    notes = []
    for name in big:
        patch = _own(doc, ("code", name, "patch", None), owned)
        sidecar = _to_sidecar(name, patch, sidecars, run_id)
        notes.append("code.%s.patch.text moved to sidecar %s" % (name, sidecar))
    return doc, sidecars, notes


def _own(doc: Dict[str, Any], path: Tuple[Any, ...], owned: set) -> Any:
    """The container that holds ``path``'s last step, with every map and list on the way to it copied once
    (their ids in ``owned``): a cut changes the copy, never the caller's document."""
    node: Any = doc
    for step in path[:-1]:
        child = node[step]
        if id(child) not in owned:
            child = dict(child) if isinstance(child, dict) else list(child)
            node[step] = child
            owned.add(id(child))
        node = child
    return node


Cut = "Tuple[int, str, Tuple[Any, ...], Any, Any, str]"
"""(bytes cutting it alone saves, dotted path, path, its container, its key there, kind); annotations only."""


def _string_kind(path: Tuple[Any, ...]) -> str:
    if len(path) == 4 and path[0] == "code" and path[2] == "patch" and path[3] in ("text", "text_base64"):
        return "sidecar"  # a patch is never cut: restore needs it whole
    if len(path) == 3 and path[:2] == ("config", "file_contents"):
        return "drop"  # its digest (config.files) and size (config.file_details) stay
    return "string"


def _group(name: Any) -> str:
    return str(name).replace("-", "_").replace(".", "_").partition("_")[0]


def kept_entries(node: Dict[Any, Any], sample: int) -> List[Any]:
    """The entries a cut map keeps: its key entries, then a sample taking the smallest families of names
    first, so that 10,000 ``MYVAR_*`` variables give way before ``SLURM_JOB_ID`` does."""
    names = sorted(node, key=str)
    key = [n for n in names if is_key_entry(str(n))][:KEY_KEPT]
    chosen = set(key)
    families: Dict[str, int] = {}
    for n in names:
        families[_group(n)] = families.get(_group(n), 0) + 1
    rest = sorted((n for n in names if n not in chosen), key=lambda n: (families[_group(n)], str(n)))
    return key + rest[:sample]


def _offenders(doc: Dict[str, Any], level: Tuple[int, ...], done: set) -> List[Cut]:
    """Everything fitting may cut at ``level``, the largest saving first. Sizes are estimates (for the order
    only): the caller serialises to see whether the document fits."""
    string_max, head, list_max, list_keep, map_max, sample = level
    found: List[Cut] = []

    def cuttable(parent: Any, key: Any, where: str) -> bool:
        return isinstance(parent, dict) and where not in done and "%s_truncated" % key not in parent

    def size(node: Any, parent: Any, key: Any, path: Tuple[Any, ...], where: str) -> int:
        depth = len(path)
        if isinstance(node, str):
            n = len(node) + 2
            if n > string_max and depth >= 2 and cuttable(parent, key, where):
                kind = _string_kind(path)
                found.append((n - head - 96 if kind == "string" else n, where, path, parent, key, kind))
            return n
        if isinstance(node, dict):
            sizes = {k: len(str(k)) + depth + 6 + (0 if path == ("collection",) and k == "truncated" else
                                                   size(v, node, k, path + (k,), "%s.%s" % (where, k) if where else k))
                     for k, v in node.items()}
            total = sum(sizes.values()) + depth + 2
            if len(node) > map_max and depth >= 2 and cuttable(parent, key, where):
                kept = sum(sizes[k] for k in kept_entries(node, sample))
                found.append((total - kept - 128, where, path, parent, key, "map"))
            return total
        if isinstance(node, list):
            items = [size(v, node, i, path + (i,), "%s[%d]" % (where, i)) + depth + 2 for i, v in enumerate(node)]
            total = sum(items) + depth + 2
            if len(node) > list_max and depth >= 2 and cuttable(parent, key, where):
                found.append((total - sum(items[:list_keep]) - 128, where, path, parent, key, "list"))
            return total
        return 6

    size(doc, None, None, (), "")
    found.sort(key=lambda c: (-c[0], c[1]))
    return found


def _cut(cut: Cut, level: Tuple[int, ...], sidecars: Dict[str, bytes], run_id: str, doc: Dict[str, Any],
         owned: set) -> str:
    """Apply one cut to the copies of the containers on its path (:func:`_own`); the note that says what went
    and how much."""
    _saving, where, path, _parent, key, kind = cut
    parent = _own(doc, path, owned)
    node = parent[key]
    if kind == "sidecar":
        return "%s moved to sidecar %s" % (where, _to_sidecar(str(path[1]), parent, sidecars, run_id))
    if kind == "drop":
        parent.pop(key)
        return "%s dropped (%d characters)" % (where, len(node))
    if kind == "string":
        whole = node.encode("utf-8", "surrogatepass")
        head = node[:level[1]]
        kept = len(head.encode("utf-8", "surrogatepass"))
        parent[key] = head + "<cut %d of %d bytes, sha256:%s>" % (len(whole) - kept, len(whole), sha256_hex(whole))
        return "%s: kept the first %d of %d bytes" % (where, kept, len(whole))
    parent["%s_truncated" % key] = {"count": len(node), "sha256": _digest(node)}
    if kind == "map":
        parent[key] = {k: node[k] for k in kept_entries(node, level[5])}
        return "%s: kept %d of %d entries (key ones and a sample; count and digest of all in %s_truncated)" % (
            where, len(parent[key]), len(node), key)
    parent[key] = node[:level[3]]
    return "%s: kept the first %d of %d items (count and digest of all in %s_truncated)" % (
        where, len(parent[key]), len(node), key)


def _overlaps(a: Tuple[Any, ...], b: Tuple[Any, ...]) -> bool:
    return a[:len(b)] == b or b[:len(a)] == a


def _digest(value: Any) -> str:
    return sha256_hex(json.dumps(jsonable(value), sort_keys=True).encode())


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip(".") or "repo"


def fit(doc: Dict[str, Any], limit: int = CAP_BYTES, cuts: Optional[List[str]] = None
        ) -> Tuple[bytes, Dict[str, Any], Dict[str, bytes]]:
    """Serialise ``doc`` under ``limit`` bytes; return (bytes, the document as written, sidecars).

    Over the limit, the largest offenders go first, only as many as it takes: a patch body to its sidecar,
    a config file's content, a huge string to its head, a huge list or map to its first items or its key
    entries and a sample. Each cut is noted in ``collection.truncated`` (dotted path, what was there) and,
    given ``cuts``, appended to it too (the notes the limit caused, not a patch's usual move to its sidecar).
    """
    run_id = str(doc.get("run_id", "run"))
    notes = _notes(doc)  # a merge's or an earlier write's notes stay true
    doc, sidecars, moved = place_patches(doc, run_id)
    if moved:
        notes.extend(moved)
        doc = _note(doc, notes)
    data = serialize(doc)
    if len(data) <= limit:
        return data, doc, sidecars
    doc = dict(doc)  # the cuts change copies of the containers on their paths (_own), not the caller's
    owned = {id(doc)}
    done: set = set()
    first_cut = len(notes)
    for level in LEVELS:
        while True:
            offenders = _offenders(doc, level, done)
            if not offenders:
                break
            over, saved, taken = len(data) - limit, 0, []  # type: ignore[var-annotated]
            for cut in offenders:
                if any(_overlaps(cut[2], t) for t in taken):
                    continue  # within this round the cuts are disjoint, so each one's container is still there
                notes.append(_cut(cut, level, sidecars, run_id, doc, owned))
                done.add(cut[1])
                taken.append(cut[2])
                saved += cut[0] - 256  # its note costs bytes too
                if saved >= over:
                    break
            doc = _note(doc, notes)
            data = serialize(doc)
            if len(data) <= limit:
                if cuts is not None:
                    cuts.extend(notes[first_cut:])
                return data, doc, sidecars
    # Last resort: keep only what identifies the run and says what happened.
    keep = {k: doc[k] for k in ("schema_version", "run_id", "generated_at") if k in doc}
    keep.update({k: {} for k in ("code", "config", "environment", "hardware", "runtime", "training")})
    # Relax's reader needs a command with argv and working_directory: the argv goes, a short cwd stays.
    command = doc.get("command") if isinstance(doc.get("command"), dict) else {}
    cwd = command.get("cwd")
    cwd = cwd if isinstance(cwd, str) and len(cwd) <= 1024 else "."
    keep["command"] = {"argv": [], "cwd": cwd, "working_directory": cwd}
    notes.append("every section dropped: the document stayed over %d bytes" % limit)
    keep["collection"] = {"truncated": notes}
    if cuts is not None:
        cuts.extend(notes[first_cut:])
    return serialize(keep), keep, sidecars


def _note(doc: Dict[str, Any], truncated: List[str]) -> Dict[str, Any]:
    """``doc`` with ``collection.truncated`` set to ``truncated``: a copy of ``doc`` and of its collection,
    the rest shared."""
    doc = dict(doc)
    collection = doc.get("collection", {})
    if isinstance(collection, dict):
        doc["collection"] = dict(collection, truncated=list(truncated))
    return doc


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
    _into_place(path, data, mode, _link_exclusive)


def _link_exclusive(tmp: str, path: str) -> bool:
    """Hard-link ``tmp`` to ``path`` (False: ``tmp`` is still there), or rename it where the file system has
    no hard links (True); FileExistsError when ``path`` exists."""
    try:
        os.link(tmp, path)
        return False
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
    # No hard links here (some FUSE and network filesystems): a checked rename is the best we have.
    if os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, "exists", path)
    os.rename(tmp, path)
    return True


def _into_place(path: str, data: bytes, mode: int, put: Callable[[str, str], bool]) -> None:
    """``data`` into a synced temp file beside ``path``, put at ``path`` by ``put(tmp, path)`` (which says
    whether it moved the temp file), then the directory synced; the temp file never stays behind."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = _synced_temp(directory, data, mode)
    moved = False
    try:
        moved = put(tmp, path)
        _fsync_dir(directory)
    finally:
        if not moved:
            _unlink_quietly(tmp)


def replace_atomically(path: str, data: bytes) -> None:
    """Replace an existing ``path`` with ``data`` atomically, keeping its mode (temp, fsync, rename).

    The one sanctioned rewrite of a manifest: adding the outcome of the run it describes.
    """
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        mode = 0o644
    _into_place(path, data, mode, _replace)


def _replace(tmp: str, path: str) -> bool:
    os.replace(tmp, path)
    return True


def rewrite(path: str, doc: Dict[str, Any], extra_sidecars: Sequence[Tuple[str, bytes, int]] = ()) -> List[str]:
    """Replace the manifest at ``path`` with ``doc`` (already redacted): fitted under the cap, the
    sidecars that fitting moves out (and ``extra_sidecars``: (name, body, mode)) written beside it
    unless they exist already (written for this very run), then the file replaced atomically.

    A moved-out patch that cannot be stored costs only itself, as in :func:`write` (marked ``not_stored``,
    digests kept): the warnings for those are returned. Raises OSError when the manifest itself cannot be
    replaced."""
    data, written, sidecars = fit(doc)
    directory = os.path.dirname(os.path.abspath(path))
    data, written, lost = _store_sidecars(data, written, sidecars, {}, path, [], exist_ok=True)
    for name, body, mode in extra_sidecars:
        try:
            write_exclusive(os.path.join(directory, name), body, mode=mode)
        except FileExistsError:
            pass
    replace_atomically(path, data)
    return lost


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
    return "could not write %s: %s" % (target, os_error_reason(exc))


def os_error_reason(exc: BaseException) -> str:
    """Why a write failed, in a user's words ("no space left on device")."""
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
    return str(reason or getattr(exc, "strerror", None) or exc)


def write(
    doc: Dict[str, Any],
    *,
    directory: Optional[str] = None,
    path: Optional[str] = None,
    redactor: Optional[Redactor] = None,
    default: Optional[Redactor] = None,
    retries: int = 16,
) -> WriteResult:
    """Redact, fit under the cap and write ``doc`` atomically. Never raises; never overwrites.

    A :class:`~relaxrepro.manifest.model.Manifest` that collection redacted with the run's policy and that
    is written with that same policy (its ``redacted_by`` is ``redactor``) is not redacted again; any
    other document is, with ``redactor``, else the policy it was collected with (a manifest the trainer
    changed after collection: the API's), else ``default`` (the caller's machine default:
    :func:`relaxrepro.collect.context.policy_of`), else the rules that need no machine facts: nothing reaches
    the disk unredacted. With ``directory`` the file is ``manifest_<run-id>.json`` there, and a clash with an
    existing file takes a new run id (``result.run_id``). With ``path`` an existing file is refused.
    """
    result = WriteResult()
    _ignore_sigxfsz()
    private = dict(getattr(doc, "private_sidecars", None) or {})
    if redactor is None or getattr(doc, "redacted_by", None) is not redactor:
        # lazy: ~6 ms; what collection redacted (generate) skips it
        from .redact import Redactor, own_policy, redact_document

        red = redactor or own_policy(doc) or default or Redactor()
        try:
            doc = redact_document(doc, red)
        except Exception as exc:  # pragma: no cover - redaction is pure; this guards the promise anyway
            result.warnings.append("redaction failed (%s); nothing written" % exc)
            return result
    if path is None and directory is None:
        directory = "."
    taken = ""  # the file whose run id a clash made this write give up
    for _ in range(retries):
        cuts: List[str] = []
        data, written, sidecars = fit(doc, cuts=cuts)
        if path is not None:
            target = path
        else:
            target = os.path.join(directory or ".", "manifest_%s.json" % written.get("run_id", "run"))
        if os.path.isdir(target):
            result.warnings.append("could not write %s: it is a directory" % target)
            return result
        sidecar_paths: List[str] = []
        try:
            data, written, lost = _store_sidecars(data, written, sidecars, private, target, sidecar_paths)
            write_exclusive(target, data)
        except FileExistsError:
            for sp in sidecar_paths:
                _unlink(sp)
            if path is not None:
                result.warnings.append(
                    "could not write %s: it already exists (manifests are never overwritten)" % target)
                return result
            taken = taken or target
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
        if taken:
            result.warnings.append("run id %s is taken (%s exists): wrote %s under run id %s instead" % (
                written_id(taken), taken, target, result.run_id))
        result.warnings.extend(lost)
        if cuts:
            result.warnings.append("manifest over %d bytes: %s" % (CAP_BYTES, "; ".join(cuts[:3])))
        return result
    result.warnings.append("could not find a free run id in %s after %d tries" % (directory, retries))
    return result


def written_id(path: str) -> str:
    """The run id in a manifest's file name ``manifest_<run-id>.json``."""
    name = os.path.basename(path)
    return name[len("manifest_"):-len(".json")] if name.startswith("manifest_") and name.endswith(".json") else name


def _mark_not_stored(code: Dict[str, Any], name: str, exc: OSError, where: str, written: Dict[str, Any],
                     lost: List[str]) -> None:
    """The patch whose sidecar ``name`` could not be written: marked ``not_stored`` (its digests kept), noted."""
    for repo in sorted(code):
        patch = code[repo].get("patch") if isinstance(code[repo], dict) else None
        if isinstance(patch, dict) and patch.get("sidecar") == name:
            del patch["sidecar"]
            patch["not_stored"] = os_error_reason(exc)
            collection = written.setdefault("collection", {})  # fit's own copy, as the patch is: it moved
            if isinstance(collection, dict):
                collection["truncated"] = _notes(written) + ["code.%s.patch not stored: %s" % (
                    repo, patch["not_stored"])]
            lost.append("patch of repo %s not stored: %s; the manifest keeps its sha256" % (
                repo, describe_os_error(exc, where)))


def _store_sidecars(data: bytes, written: Dict[str, Any], sidecars: Dict[str, bytes], private: Dict[str, bytes],
                    target: str, stored: List[str], *, exist_ok: bool = False
                    ) -> Tuple[bytes, Dict[str, Any], List[str]]:
    """Write the sidecars beside ``target`` (their paths appended to ``stored``). One that cannot be written
    (disk full, a file-size limit) does not cost the manifest: its patch is marked ``not_stored`` with the
    reason, its digests kept. Returns the manifest's (bytes, document) and a warning per sidecar lost;
    raises FileExistsError on a clash (the caller takes another run id; with ``exist_ok``, a rewrite of this
    very run, the file there is its own) and OSError only from refitting."""
    directory = os.path.dirname(os.path.abspath(target))
    code = written.get("code") if isinstance(written.get("code"), dict) else {}
    lost: List[str] = []
    pending = sorted(sidecars.items())
    while pending:
        failed = False
        for name, body in pending:
            where = os.path.join(directory, name)
            try:
                write_exclusive(where, body)
            except FileExistsError as exc:
                if not exist_ok:
                    raise
                if os.path.isfile(where):
                    continue  # this run's own, written before
                failed = True
                _mark_not_stored(code, name, exc, where, written, lost)
                continue
            except OSError as exc:
                failed = True
                _mark_not_stored(code, name, exc, where, written, lost)
                continue
            stored.append(where)
        if not failed:
            break
        data, written, more = fit(written)  # the marks changed its size; a cut could move another patch out
        code = written.get("code") if isinstance(written.get("code"), dict) else {}
        pending = sorted(more.items())
    for repo, body in sorted(private.items()):
        name = "manifest_%s.%s.private.patch" % (written.get("run_id", "run"), safe_name(repo))
        where = os.path.join(directory, name)
        try:
            write_exclusive(where, body, mode=0o600)
        except FileExistsError:
            raise
        except OSError as exc:
            patch = code.get(repo, {}).get("patch") if isinstance(code.get(repo), dict) else None
            if isinstance(patch, dict) and patch.pop("private", None) is not None:
                data = serialize(written)  # smaller by the flag: still under the cap
            lost.append("unredacted patch of repo %s not kept: %s" % (repo, describe_os_error(exc, where)))
            continue
        stored.append(where)
    return data, written, lost


def _notes(doc: Dict[str, Any]) -> List[str]:
    collection = doc.get("collection")
    notes = collection.get("truncated") if isinstance(collection, dict) else None
    return [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []


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
