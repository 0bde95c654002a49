"""A repository's uncommitted state as a patch: git-style new-file hunks for untracked files, path quoting,
redaction of patch lines, and the judgement of what was gathered (:func:`patch_record`). Pure over bytes
and files already found; :mod:`.git` runs git and gathers the parts.
"""

from __future__ import annotations

import os
import re
import stat

from ...manifest.redact.prefilter import Stream
from ...std.files import read_regular
from ...std.records import Factory, Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Tuple

UNTRACKED_CONSIDERED = 1000
"""Untracked files looked at for embedding in the patch; beyond this they are only counted."""
EMBED_FILE_MAX = 256 * 1024
"""An untracked file larger than this is listed, not embedded (a forgotten checkpoint costs a stat)."""
EMBED_TOTAL_MAX = 2 * 1024 * 1024
"""Bytes of untracked files embedded in one patch, all files together."""


def show(name: bytes) -> str:
    """A file name for the manifest: UTF-8 when it is, backslash escapes for other bytes."""
    return name.decode("utf-8", "backslashreplace")


def quote_path(name: bytes) -> bytes:
    """A path as git writes it in a patch header: C-quoted when it holds odd or non-ASCII bytes."""
    if not any(b < 0x21 or b >= 0x7F or b in (0x22, 0x5C) for b in name):
        return name
    esc = {0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v", 0x0C: b"\\f", 0x0D: b"\\r",
           0x22: b'\\"', 0x5C: b"\\\\"}
    out = bytearray(b'"')
    for b in name:
        if b in esc:
            out += esc[b]
        elif b < 0x20 or b >= 0x7F:
            out += b"\\%03o" % b
        else:
            out.append(b)
    return bytes(out + b'"')


def new_file_patch(path: bytes, content: bytes, mode: str = "100644") -> bytes:
    """A ``git apply``-able hunk creating ``path`` with ``content`` (text; or a symlink's target)."""
    a = quote_path(b"a/" + path)
    b = quote_path(b"b/" + path)
    out = [b"diff --git " + a + b" " + b + b"\n", b"new file mode " + mode.encode() + b"\n"]
    if not content:
        return b"".join(out)
    lines = content.split(b"\n")
    tail_newline = lines[-1] == b""
    if tail_newline:
        lines.pop()
    out += [b"--- /dev/null\n", b"+++ " + b + b"\n", b"@@ -0,0 +1%s @@\n" % (b"" if len(lines) == 1 else
                                                                        b",%d" % len(lines))]
    out += [b"+" + line + b"\n" for line in lines]
    if not tail_newline:
        out.append(b"\\ No newline at end of file\n")
    return b"".join(out)


def needles_of(redactor: Any) -> Optional[List[str]]:
    """What the patch pass of ``redactor`` looks for (``Redactor.needles``), None when it has no such pass."""
    needles = getattr(redactor, "needles", None)
    return needles() if callable(needles) else None


def stream_for(redactor: Any) -> Optional[Stream]:
    """A :class:`~relaxrepro.manifest.redact.prefilter.Stream` that redacts a patch's files for ``redactor`` as git
    prints them (``Redactor.lines`` of each run), None when ``redactor`` has no such pass."""
    machine = needles_of(redactor)
    if machine is None or not callable(getattr(redactor, "own", None)):
        return None
    return Stream(machine, lambda text, hot: redactor.lines(text, hot, part=True))


def redact_lines(redactor: Any, text: str) -> Tuple[str, List[int]]:
    """``Redactor.lines`` when the redactor has it; else the same contract line by line."""
    fn = getattr(redactor, "lines", None)
    if callable(fn):
        out, changed = fn(text)
        return out, sorted(int(n) for n in changed)
    lines = text.split("\n")
    changed = []
    for i, line in enumerate(lines):
        new = redactor.text(line)
        if new != line:
            lines[i] = new
            changed.append(i + 1)
    return "\n".join(lines), changed


# -- the patch ------------------------------------------------------------------------------------

class PatchParts(Record):
    """The parts of a repository's patch as they are gathered, before :func:`patch_record` judges them."""

    body: bytes = b""
    files: List[str] = Factory(list)
    binary_untracked: List[Dict[str, Any]] = Factory(list)
    own_outputs: List[str] = Factory(list)
    skipped_untracked: List[Dict[str, Any]] = Factory(list)
    untracked_over_limit: int = 0
    incomplete: Optional[str] = None
    """Why the tracked changes are missing from ``body`` (one line), None when it is all there."""
    incomplete_reason: Optional[str] = None
    """``timeout``, ``size`` or ``error``: the short form of :attr:`incomplete`."""
    streamed: Optional[Tuple[List[Tuple[int, str, str]], List[int], int]] = None
    """The first bytes of ``body`` redacted while git printed them, run of files by run
    (:meth:`~relaxrepro.manifest.redact.prefilter.Stream.redacted`), None when not."""


_OWN_OUTPUT_RE = re.compile(rb"^(?:manifest_.+\.(?:json|patch)|node_.+\.json|\.relaxrepro-.+\.tmp)$")


def embed_untracked(top: str, names: List[bytes], parts: PatchParts) -> None:
    """Append new-file hunks for small untracked text files; list binary and large ones.

    Each file is ``lstat``ed first and read only when small: a 5 GB checkpoint costs one stat.
    """
    budget = EMBED_TOTAL_MAX
    base = os.fsencode(top)
    chunks = [parts.body]
    parts.untracked_over_limit = max(len(names) - UNTRACKED_CONSIDERED, 0)
    for name in names[:UNTRACKED_CONSIDERED]:
        path = os.path.join(base, name)
        shown = show(name)
        if name.endswith(b"/"):
            parts.skipped_untracked.append({"path": shown, "size": None, "reason": "nested repository"})
            continue
        if _OWN_OUTPUT_RE.match(os.path.basename(name)):
            # Our own manifests written into the tree (the default output directory is the cwd) are not
            # part of the code: embedding them would make each manifest carry all the earlier ones.
            parts.own_outputs.append(shown)
            continue
        try:
            st = os.lstat(path)
        except OSError as exc:
            parts.skipped_untracked.append({"path": shown, "size": None, "reason": exc.strerror or "unreadable"})
            continue
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(path)
            except OSError:
                target = b""
            chunks.append(new_file_patch(name, target, "120000"))
            parts.files.append(shown)
            continue
        if not stat.S_ISREG(st.st_mode):
            parts.skipped_untracked.append({"path": shown, "size": None, "reason": "not a regular file"})
            continue
        if st.st_size > EMBED_FILE_MAX or st.st_size > budget:
            reason = "over %d bytes" % EMBED_FILE_MAX if st.st_size > EMBED_FILE_MAX else "patch budget spent"
            parts.skipped_untracked.append({"path": shown, "size": st.st_size, "reason": reason})
            continue
        try:  # read_regular: replaced by a FIFO since the lstat, it is refused, not waited on
            content = read_regular(path, min(EMBED_FILE_MAX, budget) + 1)
        except OSError as exc:
            parts.skipped_untracked.append({"path": shown, "size": st.st_size,
                                            "reason": exc.strerror or "unreadable"})
            continue
        if len(content) > min(EMBED_FILE_MAX, budget):  # it grew since the stat (a log being written)
            parts.skipped_untracked.append({"path": shown, "size": len(content), "reason": "growing"})
            continue
        if b"\0" in content[:8000]:  # git's own binary test
            parts.binary_untracked.append({"path": shown, "size": st.st_size})
            continue
        budget -= len(content)
        chunks.append(new_file_patch(name, content, "100755" if st.st_mode & 0o111 else "100644"))
        parts.files.append(shown)
    parts.body = b"".join(chunks)


def patch_record(parts: PatchParts, redactor: Any) -> Tuple[Dict[str, Any], bytes]:
    """The ``patch`` entry for ``parts``: hashes, file list, the redacted body and what it restores.

    Returns (record, original bytes) — the original is only for ``--private-patch``.
    """
    import hashlib  # only for a dirty repository: OpenSSL's ~4 ms stays off a clean run

    original = parts.body
    streamed = _streamed(parts, redactor, hashlib.sha256())
    if streamed is not None:
        text, changed, stored_sha256 = streamed
    else:
        text, changed = redact_lines(redactor, original.decode("utf-8", "surrogateescape"))
        stored_sha256 = None
    inline: Optional[str] = text
    if stored_sha256 is None:
        try:
            stored = text.encode("utf-8")  # strict: a text with no escaped byte is its own UTF-8 (3.5 MB: ~5 ms less)
        except UnicodeEncodeError:
            stored, inline = text.encode("utf-8", "surrogateescape"), None
        stored_sha256 = hashlib.sha256(stored).hexdigest()
    rec: Dict[str, Any] = {
        "sha256": hashlib.sha256(original).hexdigest(),
        "stored_sha256": stored_sha256,
        "size": len(original),
        "files": parts.files,
        "redacted_lines": changed,
        "inline": True,
    }
    try:
        rec["text"] = stored.decode("utf-8") if inline is None else inline
    except UnicodeDecodeError:
        # A latin-1 source file's diff is not UTF-8; JSON can carry it only as base64.
        import base64  # lazy: ~1.5 ms, kept off every run (tests/test_imports.py), only for a non-UTF-8 patch

        rec["text_base64"] = base64.b64encode(stored).decode("ascii")
    if parts.binary_untracked:
        rec["binary_untracked"] = parts.binary_untracked
    if parts.skipped_untracked:
        rec["skipped_untracked"] = parts.skipped_untracked
    if parts.own_outputs:
        rec["relaxrepro_outputs"] = parts.own_outputs
    if parts.untracked_over_limit:
        rec["untracked_over_limit"] = parts.untracked_over_limit
    rec["restores_exactly"] = not (changed or parts.binary_untracked or parts.skipped_untracked
                                   or parts.untracked_over_limit or parts.incomplete)
    if parts.incomplete:
        # Part of the change is missing: its digest would match any other run missing the same part (an
        # empty diff after a timeout), so there is none to compare; stored_sha256 still verifies the body.
        rec["incomplete"] = parts.incomplete
        rec["incomplete_reason"] = parts.incomplete_reason or "error"
        del rec["sha256"]
    return rec, original


def _streamed(parts: PatchParts, redactor: Any, digest: Any) -> Optional[Tuple[str, List[int], Optional[str]]]:
    """The patch redacted run by run as git printed it (``parts.streamed``), the untracked files' hunks after it
    redacted here: (its text, the changed lines, the SHA-256 of its UTF-8, None when some of it is not UTF-8); None
    when it was not streamed. A run nothing changed is hashed as git's own bytes, which it was decoded from (an ASCII
    one is those bytes): the 3.5 MB patch is never encoded again to be hashed."""
    if parts.streamed is None:
        return None
    runs, changed, count = parts.streamed
    body = parts.body
    size = sum(n for n, _text, _new in runs)
    if len(body) < size or (size and body[size - 1:size] != b"\n"):
        return None
    texts = [new for _n, _text, new in runs]
    if size < len(body):  # the untracked files' hunks, each from its own header
        rest, more = redactor.lines(body[size:].decode("utf-8", "surrogateescape"), part=True)
        texts.append(rest)
        changed = changed + [count + n for n in more]
        runs = runs + [(len(body) - size, "", rest)]
    at = 0
    with memoryview(body) as view:
        for n, text, new in runs:
            if new is text and text.isascii():
                with view[at:at + n] as own:
                    digest.update(own)
            else:
                try:
                    digest.update(new.encode("utf-8"))
                except UnicodeEncodeError:  # escaped bytes: the record stores it as patch_record decides
                    digest = None
                    break
            at += n
    text = "".join(texts)
    redactor.own(text)
    return text, changed, None if digest is None else digest.hexdigest()

