"""Version policy and the manifest reader: strict on structure, lenient on minor versions.

Every problem is a :class:`ManifestError` with one line naming it and, where there is one, the dotted
path of the bad field. Legacy forms are normalised in :func:`normalize_legacy` and nowhere else. Every
manifest or fragment file is read through one door, :func:`read_bytes` (or :func:`read_ends`), bounded
and with its policy for FIFOs and devices in one place.
"""

from __future__ import annotations

import errno
import json
import os
import stat

from ..std.files import READ_FLAGS, NotRegularFile, open_regular
from .fields import RELAX_ALIASES, find_seeds, get
from .model import MAJOR, READ_LIMIT_BYTES, Manifest, config_file_maps
from .numbers import FLOAT_DIGITS, is_digits, shorten, small_int, wide

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional, Tuple

MAX_DEPTH = 64
"""Deeper than any real manifest: config contents and resolved args nest a few levels at most."""


class ManifestError(ValueError):
    """A manifest that cannot be read, with the dotted path of the offending field when known."""

    def __init__(self, message: str, path: Optional[str] = None) -> None:
        self.field = path
        super().__init__(message if path is None else "%s in '%s'" % (message, path))


def load_manifest(path: "os.PathLike[str] | str") -> "Manifest":
    """Read, check and normalise a manifest file; raises :class:`ManifestError`."""
    doc, warnings = read_manifest_file(path)
    m = Manifest(doc)
    m.warnings = warnings
    m.path = str(path)
    return m


def read_manifest_file(path: "os.PathLike[str] | str") -> Tuple[Dict[str, Any], List[str]]:
    """The checked, normalised document of a file and its warnings, as plain data.

    Reading commands (``diff``) use this directly: it pulls in neither the assembler nor the writer.
    """
    return parse_manifest(read_bytes(path, READ_LIMIT_BYTES))


# -- the one door every manifest and fragment file is read through ---------------------------------

class ReadError(ManifestError):
    """Why :func:`read_bytes` gave no bytes. ``str()`` is the strict reader's line (the path, the limit);
    a reader with wording of its own (a fragment, ``ls``, adoption, the outcome) words it from these:

    ``reason``: ``"os"`` (``os_error`` is the :class:`OSError`; a directory is ``IsADirectoryError``),
    ``"too_large"`` (over ``limit``; ``size`` is the file's size when ``stat`` knew it, else None) or
    ``"not_regular"`` (a FIFO, socket or device).
    """

    def __init__(self, message: str, reason: str, limit: int, *, os_error: Optional[OSError] = None,
                 size: Optional[int] = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.limit = limit
        self.os_error = os_error
        self.size = size

    def short(self, too_large: str) -> str:
        """The reason in a listing's or a merge's words, without the path: ``too_large`` when over the limit,
        else ``not a regular file`` or ``cannot read: <the OS's reason>``."""
        if self.reason == "too_large":
            return too_large
        if self.os_error is None:
            return "not a regular file"
        return "cannot read: %s" % (self.os_error.strerror or self.os_error)


def read_bytes(path: "os.PathLike[str] | str", limit: int) -> bytes:
    """The bytes of the file at ``path``, at most ``limit`` of them; raises :class:`ReadError`.

    The one door to a manifest or fragment on disk: the strict reader (every reading command), ``ls``'s
    index (through :func:`read_ends`), lineage's parent lookup and the outcome read with
    ``model.READ_LIMIT_BYTES``, adoption with ``model.ADOPT_LIMIT_BYTES``, a merge's fragments with
    ``nodes.FRAGMENT_LIMIT_BYTES``. A directory or a file whose ``stat`` size is over ``limit`` is
    refused before it is opened; one that yields more than ``limit`` bytes (it grew) is refused after
    ``limit + 1``: nothing is read unbounded. Only a regular file (or a symlink to one) is read: a FIFO,
    socket or device (``<(cat m.json)``, a link to ``/dev/zero``) is refused unread with reason
    ``"not_regular"``, opened without blocking (:func:`relaxrepro.std.files.open_regular`).
    """
    with _open(path, limit) as (fh, size):
        try:
            # As many bytes as fstat said and one more (a read of limit + 1 allocates the whole limit first:
            # 60 us a file, a second over a cold index of 20,000), then the rest only if it grew meanwhile.
            data = fh.read(size + 1)
            if len(data) > size:
                data += fh.read(limit + 1 - len(data))
        except OSError as exc:
            raise _os_error(path, limit, exc) from None
    if len(data) > limit:
        raise _too_large(limit)
    return data


def read_whole(path: str, limit: int) -> Optional[bytes]:
    """:func:`read_bytes` of a regular file of at most ``limit`` bytes that reads whole at once, in three
    system calls (open, fstat, read: no ``stat`` of the path, no buffered file object); None where anything
    else happens, for :func:`read_bytes` to read it again and say why. A cold index reads 100,000 manifests
    through here: ~10 us a file less."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = os.read(fd, st.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == st.st_size else None  # it grew, or a /proc file: the careful door


def read_ends(path: "os.PathLike[str] | str", limit: int, head: int, tail: int) -> Tuple[bytes, Optional[bytes]]:
    """(the whole file, None) when it holds at most ``head + tail`` bytes, else (its first ``head``
    bytes, its last ``tail`` bytes): :func:`read_bytes` for a listing that needs a large file's ends only."""
    with _open(path, limit) as (fh, size):
        try:
            if size <= head + tail:
                data = fh.read(limit + 1)
                if len(data) > limit:
                    raise _too_large(limit)
                return data, None
            first = fh.read(head)
            fh.seek(size - tail)
            return first, fh.read(tail)
        except OSError as exc:
            raise _os_error(path, limit, exc) from None


class _open:
    """``with _open(path, limit) as (fh, size)``: the checks of :func:`read_bytes`, then the open file
    and its ``fstat`` size. A class rather than ``contextlib`` (start-up cost)."""

    def __init__(self, path: "os.PathLike[str] | str", limit: int) -> None:
        self.path, self.limit = path, limit
        self.fh: Any = None

    def __enter__(self) -> Tuple[Any, int]:
        path, limit = self.path, self.limit
        # stat before open, as the strict reader always has: a directory or an oversized file is
        # named as such even where opening it would fail first.
        try:
            st = os.stat(path)
        except OSError as exc:
            raise _os_error(path, limit, exc) from None
        if stat.S_ISDIR(st.st_mode):
            raise _os_error(path, limit, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path)))
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, limit)
        if st.st_size > limit:
            raise _too_large(limit, st.st_size)
        # open_regular checks the open descriptor again: the path may have been swapped since the stat.
        try:
            self.fh, st = open_regular(path)
        except NotRegularFile:
            raise _not_regular(path, limit) from None
        except OSError as exc:
            raise _os_error(path, limit, exc) from None
        if st.st_size > limit:  # grew since the stat above
            self.fh.close()
            raise _too_large(limit, st.st_size)
        return self.fh, st.st_size

    def __exit__(self, *exc_info: Any) -> None:
        self.fh.close()


def _not_regular(path: "os.PathLike[str] | str", limit: int) -> ReadError:
    return ReadError("%s is not a regular file" % path, "not_regular", limit)


def _os_error(path: "os.PathLike[str] | str", limit: int, exc: OSError) -> ReadError:
    if isinstance(exc, IsADirectoryError):
        message = "%s is a directory, not a manifest file" % path
    else:
        message = "cannot read %s: %s" % (path, exc.strerror or exc)
    return ReadError(message, "os", limit, os_error=exc)


def _too_large(limit: int, size: Optional[int] = None) -> ReadError:
    if size is None:  # more bytes came than stat said there were
        return ReadError("file is over the %s limit for a manifest" % _limit_text(limit), "too_large", limit)
    return ReadError("file is %d bytes, over the %s limit for a manifest" % (size, _limit_text(limit)), "too_large",
                     limit, size=size)


def _limit_text(limit: int) -> str:
    return "%d MB" % (limit // 2**20) if limit % 2**20 == 0 else "%d-byte" % limit


def parse_manifest(raw: bytes, parsed: Any = None) -> Tuple[Dict[str, Any], List[str]]:
    """Decode, parse, check and normalise the bytes of a manifest. Returns (document, warnings). ``parsed``:
    what :func:`parse_json` gives of the text of ``raw``, had already (the run index parsed it for its row:
    ``sections.parse_manifest_text``, whose values are shared, never changed: normalising copies what it
    changes); every other check is made of ``raw`` as without it."""
    if len(raw) > READ_LIMIT_BYTES:
        raise ManifestError("file is over the %d MB limit for a manifest" % (READ_LIMIT_BYTES // 2**20))
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ManifestError("file starts with a UTF-8 byte order mark (BOM); manifests are plain UTF-8")
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ManifestError("file is UTF-16 (it starts with a byte order mark); manifests are UTF-8")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError("not UTF-8: invalid byte 0x%02x at offset %d" % (raw[exc.start], exc.start)) from None
    if not text.strip():
        raise ManifestError("file is empty")
    doc = parse_json(text) if parsed is None else parsed
    if not isinstance(doc, dict):
        raise ManifestError("not a manifest: the top level is %s, expected an object" % _typename(doc))
    _check_depth(doc)
    doc, warnings = normalize_legacy(doc)
    check_version(doc.get("schema_version"))
    check_types(doc)
    return doc, warnings


MAX_INT_DIGITS = 4300
"""The longest integer any reader takes. Python 3.11+ refuses to convert longer ones (its
``int_max_str_digits``, a ValueError from ``json.loads``) and 3.8-3.10 take any: this is our rule,
the same on every version. No manifest field holds a number anywhere near it. One shorter but beyond a
float's range is read exactly, as :class:`~relaxrepro.manifest.numbers.BigInt` (``numbers.read_int``'s rule)."""

_INF = float("inf")


def parse_json(text: str) -> Any:
    """The data of a JSON text, by the rules of every reader (manifest, fragment, ``--args-json``).

    Stricter than ``json.loads``: ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON, nor is a number
    too large for a float (``1e999`` would read as Infinity), and an integer of more than
    :data:`MAX_INT_DIGITS` digits is refused on every Python; a shorter integer a float cannot hold is read
    exactly, as a ``numbers.BigInt``. Raises :class:`ManifestError`, with the
    dotted path of the bad value (``training.seed``) where it has one.
    """
    global _DECODER, _FAST_DECODER
    if _DECODER is None:  # one decoder for every call: ls parses ~80,000 small values per 10,000 files
        _DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
        _FAST_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_parse_constant)
    before = _FLAGGED[0]
    try:
        doc = None
        if _LONG_DIGITS not in text.encode("utf-8", "replace").translate(_DIGITS):
            # No integer can be too long or beyond a float: json's own int parsing, ~6x faster on a trace of a
            # million rows.
            try:
                doc = _FAST_DECODER.decode(text)
            except json.JSONDecodeError:
                raise
            except ValueError:  # an int() limit set lower than ours (PYTHONINTMAXSTRDIGITS): said below
                pass
        if doc is None:
            doc = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ManifestError("not JSON: %s at line %d column %d" % (exc.msg, exc.lineno, exc.colno)) from None
    except RecursionError:
        raise ManifestError("nesting is deeper than any manifest (over %d levels)" % MAX_DEPTH) from None
    if _FLAGGED[0] != before:  # rare: only then walk the document to say where (another thread's flag: no find)
        found = _find_bad(doc)
        if found is not None:
            where, value = found
            raise ManifestError(value.message, where or None)
    return doc


_DECODER: Optional[json.JSONDecoder] = None
_FAST_DECODER: Optional[json.JSONDecoder] = None
_DIGITS = bytes(0x31 if 0x30 <= i <= 0x39 else 0x30 for i in range(256))
"""A ``bytes.translate`` table: each digit to ``1``, any other byte to ``0``."""
_LONG_DIGITS = b"1" * (FLOAT_DIGITS + 1)
"""A run of digits longer than a float-sized integer, in a text through :data:`_DIGITS`: where there is one,
the hooks read it (too long, refused; beyond a float, a ``BigInt``)."""
_FLAGGED = [0]
"""How many values the hooks refused so far: parse_json walks its document only when this moved."""


def _parse_int(s: str) -> Any:
    digits = len(s) - s.startswith("-")
    if digits <= MAX_INT_DIGITS:
        try:
            value = int(s)
        except ValueError:  # PYTHONINTMAXSTRDIGITS set lower than ours
            pass
        else:  # numbers.read_int, inlined: ls parses ~80,000 small values per 10,000 files
            return value if digits <= FLOAT_DIGITS else wide(value)
    return _flag("integer of %d digits is longer than the %d allowed" % (digits, MAX_INT_DIGITS))


def _parse_float(s: str) -> Any:
    value = float(s)
    if -_INF < value < _INF:
        return value
    shown = s if len(s) <= 24 else s[:10] + "..." + s[-10:]
    return _flag("number %s is out of range (it would read as %s)" % (shown, "-Infinity" if value < 0 else "Infinity"))


def _parse_constant(name: str) -> Any:
    return _flag("not valid JSON: %s literal is not allowed (JSON has no %s)" % (name, name))


class _Bad:
    """Stands in for a refused value until the whole text is parsed and its path can be named. Not a
    ``Record``: ``std.records`` (~0.35 ms) is not on diff's start-up path."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def _flag(message: str) -> _Bad:
    _FLAGGED[0] += 1
    return _Bad(message)


def _find_bad(doc: Any) -> Optional[Tuple[str, _Bad]]:
    """The dotted path and the first refused value in document order; None when a later duplicate key
    replaced every one (the document does not hold it)."""
    stack: List[Tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, _Bad):
            return where, node
        if isinstance(node, dict):
            stack.extend(((v, (where + "." if where else "") + str(k)) for k, v in reversed(list(node.items()))))
        elif isinstance(node, list):
            stack.extend((node[i], "%s[%d]" % (where, i)) for i in range(len(node) - 1, -1, -1))
    return None


def _typename(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )


_CONTAINERS = frozenset({dict, list})


def _check_depth(doc: Any) -> None:
    stack: List[Tuple[Any, int, str, Any]] = [(doc, 1, "", None)]  # (node, depth, its parent's path, its key)
    while stack:
        node, depth, parent, key = stack.pop()
        if depth > MAX_DEPTH:
            raise ManifestError("nesting is deeper than any manifest (over %d levels)" % MAX_DEPTH,
                                _path(parent, key) or None)
        if isinstance(node, dict):
            where = _path(parent, key)
            for k, v in node.items():
                if isinstance(v, (dict, list)):
                    stack.append((v, depth + 1, where, str(k)))
        elif isinstance(node, list) and not _CONTAINERS.isdisjoint(map(type, node)):  # a trace's columns: skipped
            where = _path(parent, key)
            for i, v in enumerate(node):
                if isinstance(v, (dict, list)):
                    stack.append((v, depth + 1, where, i))


def _path(parent: str, key: Any) -> str:
    """``parent`` and then ``key``: ``a.b`` for an object's member, ``a[3]`` for an array's element."""
    if key is None:
        return parent
    if type(key) is int:
        return "%s[%d]" % (parent, key)
    return parent + "." + key if parent else key


def check_version(version: Any) -> None:
    """Accept 1.x (any minor); refuse another major with a message that says what we read."""
    if version is None:
        raise ManifestError("missing schema_version", None)
    if not isinstance(version, str):
        raise ManifestError("Unexpected type %s (expected string)" % _typename(version), "schema_version")
    head = version.split(".", 1)[0]
    if not is_digits(head) or "." not in version:
        raise ManifestError("malformed schema_version %r (expected MAJOR.MINOR)" % shorten(version))
    if small_int(head) != MAJOR:  # None: digits, too many of them for any major
        raise ManifestError("unsupported schema_version %s: this relaxrepro reads %d.x" % (shorten(version), MAJOR))


# Field types the tools rely on; anything else is free-form and kept as found.
_TYPES: Tuple[Tuple[str, Tuple[type, ...]], ...] = (
    ("run_id", (str,)),
    ("generated_at", (str,)),
    ("command", (dict,)),
    ("command.argv", (list,)),
    ("command.argv[]", (str,)),
    ("command.cwd", (str, type(None))),
    ("code", (dict,)),
    ("code.*", (dict,)),
    ("code.*.commit", (str, type(None))),
    ("code.*.dirty", (bool, type(None))),
    ("config", (dict,)),
    ("environment", (dict,)),
    ("environment.packages", (dict,)),
    ("hardware", (dict,)),
    ("runtime", (dict,)),
    ("runtime.nodes", (list,)),
    ("training", (dict,)),
    ("collection", (dict,)),
)


_TYPE_NAMES = {dict: "object", list: "array", str: "string", type(None): "null", bool: "boolean"}


def check_types(doc: Dict[str, Any]) -> None:
    """Check the fields other tools rely on; raise with the dotted path of the first bad one."""
    for pattern, types in _TYPES:
        for where, value in _walk(doc, pattern.split(".")):
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
                raise ManifestError("Unexpected type %s (expected %s)" % (_typename(value), want), where)


def _walk(node: Any, parts: List[str], where: str = ""):
    if not parts:
        yield where, node
        return
    head, rest = parts[0], parts[1:]
    if not isinstance(node, dict):
        return
    if head == "*":
        items = list(node.items())
    elif head.endswith("[]"):
        name = head[:-2]
        if name not in node or not isinstance(node[name], list):
            return
        base = (where + "." if where else "") + name
        for i, v in enumerate(node[name]):
            yield from _walk(v, rest, "%s[%d]" % (base, i))
        return
    elif head in node:
        items = [(head, node[head])]
    else:
        return
    for k, v in items:
        yield from _walk(v, rest, (where + "." if where else "") + str(k))


_LEGACY_FLAT = ("experiment_name", "git_commit", "has_uncommitted_changes", "python_version", "hyperparams", "seed",
                "metrics")


def normalize_legacy(doc: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """Bring old and foreign forms to v1: ``cli_args``, the flat records simple trackers write, 1.1's
    ``config.files`` list, and the Relax trainer's layouts (:func:`_from_relax`).

    Returns a new document and the warnings that say what was converted.
    """
    warnings: List[str] = []
    doc = dict(doc)
    if "schema_version" in doc:
        doc = _from_relax(doc, warnings)
    if "cli_args" in doc and "schema_version" in doc:
        argv = doc.pop("cli_args")
        command = dict(doc.get("command") or {})
        command.setdefault("argv", [str(a) for a in argv] if isinstance(argv, list) else argv)
        doc["command"] = command
        warnings.append("legacy field cli_args read as command.argv")
    if "schema_version" not in doc and any(k in doc for k in _LEGACY_FLAT + ("cli_args",)):
        doc = _from_flat(doc)
        warnings.append("legacy flat record without schema_version read as a v1 manifest")
    _config_files_by_path(doc)
    return doc, warnings


def _config_files_by_path(doc: Dict[str, Any]) -> None:
    """1.0 and 1.1 wrote ``config.files`` as a list of ``{path, sha256, ...}``; 1.2 writes path-keyed maps
    (``config.files``: path -> ``sha256:<hex>``, as Relax does). The list is read as those maps: no warning,
    it is our own earlier minor."""
    config = doc.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("files"), list):
        return
    config = doc["config"] = dict(config)
    for key, value in config_file_maps(config.pop("files")).items():
        config.setdefault(key, value)


def _from_flat(flat: Dict[str, Any]) -> Dict[str, Any]:
    rest = dict(flat)
    doc: Dict[str, Any] = {"schema_version": "1.0"}
    command: Dict[str, Any] = {}
    if "cli_args" in rest:
        argv = rest.pop("cli_args")
        command["argv"] = [str(a) for a in argv] if isinstance(argv, list) else argv
    code: Dict[str, Any] = {}
    if "git_commit" in rest or "has_uncommitted_changes" in rest:
        repo: Dict[str, Any] = {}
        if "git_commit" in rest:
            repo["commit"] = rest.pop("git_commit")
        if "has_uncommitted_changes" in rest:
            repo["dirty"] = rest.pop("has_uncommitted_changes")
        code["main"] = repo
    environment: Dict[str, Any] = {}
    if "python_version" in rest:
        environment["python_version"] = rest.pop("python_version")
    config: Dict[str, Any] = {}
    if "hyperparams" in rest:
        config["resolved_args"] = rest.pop("hyperparams")
    training: Dict[str, Any] = {}
    if "experiment_name" in rest:
        training["experiment_name"] = rest.pop("experiment_name")
    if "seed" in rest:
        doc["seeds"] = {"seed": rest.pop("seed")}
    if "metrics" in rest:
        doc["outcome"] = {"metrics": rest.pop("metrics")}
    for key in ("run_id", "generated_at"):
        if key in rest:
            doc[key] = rest.pop(key)
    if "timestamp" in rest and "generated_at" not in doc:
        doc["generated_at"] = str(rest.pop("timestamp"))
    if "run_id" not in doc:
        import hashlib  # lazy: ~4 ms (OpenSSL), only legacy records need it, and diff's start-up does not

        digest = hashlib.sha256(json.dumps(flat, sort_keys=True, default=str).encode()).hexdigest()[:7]
        doc["run_id"] = "legacy_" + digest
    doc.update({"command": command, "code": code, "config": config, "environment": environment,
                "hardware": {}, "runtime": {}, "training": training, "collection": {}})
    if rest:
        doc["legacy"] = rest
    return doc


# -- the Relax trainer's layouts ------------------------------------------------------------------
# The RFC was first shipped inside the Relax trainer (redai-infra/Relax, relax/utils/manifest.py, schema 1.0),
# under field names of its own; its earlier writer (relax/utils/reproducibility.py) kept ``code`` flat. Its
# users hold thousands of such manifests, and the RFC promises that every 1.x document reads: each Relax
# field is given under relaxrepro's name too (fields.RELAX_ALIASES, the one table, which diff reads to skip
# the originals), beside the original (kept, as every unknown field is). Only a name the document does not
# already use is filled, so a relaxrepro manifest reads exactly as written. Seed arguments go to
# ``seeds.values`` (fields.find_seeds).

def _from_relax(doc: Dict[str, Any], warnings: List[str]) -> Dict[str, Any]:
    """``doc`` (a shallow copy) with the Relax fields it holds given under relaxrepro's names as well."""
    code = doc.get("code")
    if isinstance(code, dict) and any(k in code and not isinstance(code[k], dict) for k in _RELAX_FLAT_CODE):
        name = code.get("repository") if isinstance(code.get("repository"), str) and code["repository"] else "main"
        doc["code"] = {name: dict(code)}
        warnings.append("Relax's earlier flat code (commit, branch, dirty, repository) read as code.%s" % name)
    # The earlier writer's environment.python is a version string (ours is an object): not in the shared
    # table, which would have diff skip our own environment.python.* as its twin.
    for source, target in list(RELAX_ALIASES.items()) + [("environment.python", "environment.python_version")]:
        if "*" not in source:
            value = _convert(source, get(doc, source, None))
            if value is not None:
                _fill(doc, target, value)
    code = doc.get("code")
    if isinstance(code, dict) and any(isinstance(r, dict) and isinstance(r.get("untracked_files"), list)
                                      and "untracked" not in r for r in code.values()):
        doc["code"] = code = dict(code)
        for name, repo in code.items():
            files = repo.get("untracked_files") if isinstance(repo, dict) else None
            if isinstance(files, list) and "untracked" not in repo:
                untracked = {"count": len(files), "files": [str(f) for f in files], "truncated": False}
                code[name] = dict(repo, untracked=untracked)
    args = get(doc, "config.arguments", None)
    if isinstance(args, dict) and "seeds" not in doc:
        seeds = find_seeds(args)
        if seeds:
            doc["seeds"] = {"values": seeds}
    return doc


_RELAX_FLAT_CODE = ("commit", "branch", "dirty", "repository")


def _convert(source: str, value: Any) -> Any:
    """A Relax value in relaxrepro's unit and shape; None when there is nothing to give (null, an odd type)."""
    if value is None or value == "" or value == []:
        return None  # nothing recorded: nothing to give under our name (an empty map is: "none of them set")
    # float(): a BigInt (beyond a float's range) is infinite, and no size or duration
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and -_INF < float(value) < _INF
    if source == "hardware.memory_bytes":
        return round(value / 2**30, 2) if number else None
    if source == "collection_duration_ms":
        return round(value / 1000.0, 4) if number else None
    if source == "environment.python":
        return value if isinstance(value, str) else None
    if source == "runtime.slurm":
        if not isinstance(value, dict):
            return None
        out = {"type": "slurm"}
        for k, v in value.items():  # job_id, partition, nodelist: our names; counts are numbers here
            count = small_int(v) if k in _SLURM_COUNTS and isinstance(v, str) else None
            out[k] = v if count is None else count
        return out
    return _copy(value)


_SLURM_COUNTS = ("node_count", "ntasks", "ntasks_per_node", "cpus_per_task", "gpus_on_node", "procid", "localid")


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _fill(doc: Dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``dotted`` unless the document already has it (or a step of it is not an object)."""
    parts = dotted.split(".")
    node = doc
    for part in parts[:-1]:
        child = node.get(part)
        if child is not None and not isinstance(child, dict):
            return
        # each object on the way is copied: the document the caller passed is never changed
        child = node[part] = dict(child or {})
        node = child
    if node.get(parts[-1]) is None:
        node[parts[-1]] = value
