"""Manifests on disk: the walk that finds every ``manifest_*.json`` below some directories, and the partial
reader that reads just the top-level sections a listing needs, fast.

A team's run tree holds thousands of manifests of up to 100 KB, most of it packages and config
contents that a listing never shows. Our writer's layout is fixed (sorted keys, one-space indent),
so a top-level key always starts a line as ``\\n "key": `` and nothing nested can look like that
(nested keys are indented deeper; newlines inside strings are escaped). Sorted keys put the bulky
``config`` and ``environment`` in the middle, so :func:`read_fields` reads a large file's two ends
only and parses just the sections a listing needs; a file in any other layout is parsed whole by
the strict reader. An unreadable manifest is an entry with an ``error``, never a crash.
"""

from __future__ import annotations

import os
import re

from ..std.records import Factory, Record
from .model import READ_LIMIT_BYTES
from .reader import ManifestError, ReadError, check_version, parse_json, parse_manifest, read_bytes, read_ends
from .sections import Sectioned
from .summary import LS_FIELDS

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

    Listing = Callable[..., Tuple[List[str], List[str], List[Any]]]
    """Lists one directory: (its subdirectories to walk, its manifests' names, their keys)."""

_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "wandb"})

_CHECKPOINT_DIR = re.compile(r"^(iter_\d+|global_step\d+|checkpoint-\d+|step_\d+|mp_rank_\d+(_\d+)*)$")
"""Checkpoint iteration directories (Megatron ``iter_0000100/mp_rank_00``, DeepSpeed ``global_step100``,
HF Trainer ``checkpoint-500``): a long run has hundreds, each with a subdirectory per rank, and no
manifest is ever written inside one. Not descending into them keeps ``ls`` fast on real run trees."""


class Entry(Record):
    """One manifest file: the sections read (``doc``), or why it could not be read (``error``).

    Its own ``__init__``, not the record's: a listing makes one per run, and this one costs a tenth of the
    generic one (10,000 runs: ~70 ms less for ``ls --json``); it also takes ``doc=None`` for an empty one."""

    path: str
    doc: Dict[str, Any]
    error: Optional[str]

    def __init__(self, path: str, doc: Optional[Dict[str, Any]] = None, error: Optional[str] = None) -> None:
        self.path = path
        self.doc = {} if doc is None else doc
        self.error = error

    @property
    def run_id(self) -> Optional[str]:
        value = self.doc.get("run_id")
        return value if isinstance(value, str) else None


def scan(roots: Iterable[str], fields: Sequence[str] = LS_FIELDS, walk: Optional[Walk] = None) -> List[Entry]:
    """Every manifest below ``roots``, read or marked unreadable, in walk order; ``walk``: the rule, which
    keeps the links it did not follow (see :class:`Walk`)."""
    entries = []
    for path in find_manifests(roots, walk):
        try:
            entries.append(Entry(path, read_fields(path, fields)))
        except ManifestError as exc:
            entries.append(Entry(path, error=str(exc)))
    return entries


# -- the walk ---------------------------------------------------------------------------------------

def find_manifests(roots: Iterable[str], walk: Optional[Walk] = None) -> Iterator[str]:
    """Paths of ``manifest_*.json`` below ``roots`` (a file root is yielded as is).

    Hidden directories, ``__pycache__``, ``node_modules``, ``wandb`` and checkpoint iteration
    directories are skipped; a symlinked directory is never followed (:class:`Walk`). Only symlinks
    cost a ``stat``: the walk itself reads directory entries alone.
    """
    roots = list(roots)
    walk = Walk.of(roots) if walk is None else walk
    for root in roots:
        yield from walk_root(root, walk)


class Walk(Record):
    """The one rule of every walk over run trees, shared by the roots of one listing: the walk never leaves
    its roots through a link. A symbolic link to a directory is not followed: where it leads is either below
    a root (and walked there, so never twice) or outside all of them (a link to ``/`` or ``..`` once made
    ``ls`` read every manifest on the machine): those are kept in ``outside`` as (link, its target), for one
    warning (:meth:`warning`). A root that is itself a link is followed: the user named it.

    ``roots``: the real paths of the roots."""

    roots: List[str]
    outside: List[Tuple[str, str]] = Factory(list)

    @classmethod
    def of(cls, roots: Iterable[str]) -> Walk:
        return cls([os.path.realpath(r) for r in roots])

    def note(self, link: str) -> None:
        """``link`` (a symlinked directory met by the walk) is not followed: say so when it leads outside."""
        target = os.path.realpath(link)
        if not any(target == r or target.startswith(os.path.join(r, "")) for r in self.roots):
            try:
                shown = os.readlink(link)
            except OSError:
                shown = target
            self.outside.append((link, shown))

    def warning(self, shown: Callable[[str], str] = str) -> Optional[str]:
        """One line about the links that lead outside the roots (None: there were none), each link's path as
        ``shown`` shows it."""
        found = sorted(set(self.outside))
        if not found:
            return None
        named = ", ".join("%s -> %s" % (shown(link), target) for link, target in found[:3])
        return "%d symbolic link%s lead%s out of the directories listed and %s not followed: %s%s" % (
            len(found), "s" if len(found) != 1 else "", "" if len(found) != 1 else "s",
            "were" if len(found) != 1 else "was", named, ", ..." if len(found) > 3 else "")


def walk_root(root: str, walk: Walk) -> Iterator[str]:
    """:func:`find_manifests` for one root; ``walk``: the rule and what it met, shared by the roots of one
    listing (the run index walks each root on its own, and must list what the scan lists)."""
    if os.path.isfile(root):
        yield root
        return
    for d, names, _ in walk_dirs(root, walk):
        for name in names:
            yield os.path.join(d, name)


def walk_dirs(root: str, walk: Walk, *, key: Optional[Callable[[int, int, int], Any]] = None,
              listed: Optional[Callable[[str, Listing], Tuple[List[str], List[str], List[Any]]]] = None
              ) -> Iterator[Tuple[str, List[str], List[Any]]]:
    """Each directory below the directory ``root`` that :func:`walk_root` visits, in its order, with the
    names of its manifests sorted (so the walk order is the same on every file system) and, given
    ``key``, ``key(size, mtime_ns, inode)`` of each (None: it vanished), else an empty list.

    The keys are taken in the same pass, by name in the open directory: no path lookup, no second loop
    (100,000 manifests: the run index's check is mostly these ``stat`` calls). ``listed``: what lists a
    directory instead, ``listed(d, listing)`` where ``listing(d, rule)`` lists it (the listings a caller keeps
    between walks: :func:`treesig.walk`); each gives (its subdirectories, the names, the keys)."""
    by_fd = key is not None and os.stat in os.supports_dir_fd and os.scandir in os.supports_fd

    def listing(d: str, rule: Any = walk) -> Tuple[List[str], List[str], List[Any]]:
        subdirs, found = _read_dir(d, rule, key, by_fd)
        found.sort()
        if key is None:
            return subdirs, found, []
        return subdirs, [n for n, _ in found], [k for _, k in found]

    stack = [root]
    while stack:
        d = stack.pop()
        subdirs, names, keys = listing(d) if listed is None else listed(d, listing)
        yield d, names, keys
        stack.extend(sorted(subdirs, reverse=True))


def _read_dir(d: str, walk: Walk, key: Optional[Callable[[int, int, int], Any]], by_fd: bool
             ) -> Tuple[List[str], List[Any]]:
    """(the subdirectories of ``d`` to walk, its manifests: names, or (name, key) pairs given ``key``). An
    entry that cannot be looked at is left out; a directory that cannot be read lists what it listed before
    the error, and nothing below it."""
    subdirs: List[str] = []
    found: List[Any] = []
    fd = None
    try:
        if by_fd:
            fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        # Listed from the open directory, an entry's stat() is by name in it (fstatat, no path to resolve): with
        # the stat inline, the walk of 10,000 manifests takes ~5% less than with os.stat(name, dir_fd=fd).
        with os.scandir(d if fd is None else fd) as it:
            for e in it:
                name = e.name
                try:
                    if e.is_dir():
                        if name.startswith(".") or name in _SKIP_DIRS or _CHECKPOINT_DIR.match(name):
                            continue
                        if e.is_symlink():
                            walk.note(os.path.join(d, name))
                        else:
                            subdirs.append(os.path.join(d, name))
                    elif name.startswith("manifest_") and name.endswith(".json"):
                        if key is None:
                            found.append(name)
                            continue
                        try:
                            st = e.stat() if fd is not None else os.stat(os.path.join(d, name))
                        except OSError:  # vanished, or cannot be stat'ed
                            found.append((name, None))
                            continue
                        found.append((name, key(st.st_size, st.st_mtime_ns, st.st_ino)))
                except OSError:
                    continue
    except OSError:
        subdirs = []
    finally:
        if fd is not None:
            os.close(fd)
    return subdirs, found


# -- the partial reader -----------------------------------------------------------------------------

def read_fields(path: str, fields: Sequence[str] = LS_FIELDS, raw: Optional[bytes] = None,
                parsed: Any = None) -> Dict[str, Any]:
    """The top-level ``fields`` of the manifest at ``path``; raises ``ManifestError`` when unreadable.

    ``raw``: the whole file, when the caller read it already (the run index reads each file once); the
    same ends of it are looked at, so the answer, or the error, is the one a read from disk gives.
    ``parsed``: ``raw`` parsed whole already (:func:`reader.parse_json`), when it parsed: its sections are
    taken where the partial reader would read the same ones, instead of parsing them again.
    """
    try:
        if raw is not None:
            head, tail = (raw, None) if len(raw) <= _HEAD + _TAIL else (raw[:_HEAD], raw[-_TAIL:])
        else:
            head, tail = read_ends(path, READ_LIMIT_BYTES, _HEAD, _TAIL)
        taken = tail is None and _same_sections(head, parsed)  # it parsed: no bare NaN or Infinity in it
        quick = {k: parsed[k] for k in fields if k in parsed} if taken else _quick(head, fields, tail,
                                                                                   whole=tail is None)
        if quick is not None and not taken and _maybe_nonfinite(head, tail):
            quick = None  # the strict reader refuses a bare NaN/Infinity with its dotted path, as check does
        if quick is None or "schema_version" not in quick or "run_id" not in quick:
            raw = head if tail is None else (raw or read_bytes(path, READ_LIMIT_BYTES))
            quick = None
    except ReadError as exc:
        # The listing prints the path before the reason, so the reason does not repeat it.
        raise ManifestError(exc.short("file is over the %d MB limit for a manifest" % (READ_LIMIT_BYTES // 2**20))
                            ) from None
    if quick is not None:
        check_version(quick["schema_version"])
        if not isinstance(quick["run_id"], str):
            raise ManifestError("Unexpected type %s (expected string)" % type(quick["run_id"]).__name__, "run_id")
        return quick
    doc, _warnings = parse_manifest(raw)
    return {k: doc[k] for k in fields if k in doc}


def _same_sections(raw: bytes, parsed: Any) -> bool:
    """Whether ``parsed`` (the whole of ``raw``, parsed) holds what :func:`_quick` reads of ``raw``: a file in
    our writer's layout (each top-level key starts a line as ``\\n "key": ``, which nothing nested can do)
    whose top-level keys are each there once (a repeated key is read as the reader reads it, not as json)."""
    if type(parsed) is Sectioned:
        return True  # cut at each top-level key, which were each there once: so much is known
    return (isinstance(parsed, dict) and raw.startswith(b'{\n "') and raw.endswith(b"\n}\n")
            and raw.count(b'\n "') == len(parsed))


def _maybe_nonfinite(head: bytes, tail: Optional[bytes]) -> bool:
    """Whether the bytes read may hold a bare ``NaN`` or ``Infinity`` (JSON has neither; Python writes them).

    A string value that merely spells them costs one strict parse. The middle of a file too large to read
    whole is not looked at: ``check`` and ``diff`` read it all.
    """
    return any(_spells(part, b"N", b"NaN") or _spells(part, b"I", b"Infinity") for part in (head, tail) if part)


def _spells(data: bytes, lead: bytes, word: bytes) -> bool:
    # ``word in data`` scans 60 KB in ~35 us (a short needle defeats CPython's skip table); hopping between
    # the few capital letters with find(lead), a memchr, takes ~2 us: 0.3 s less over 10,000 manifests.
    i = data.find(lead)
    while i >= 0:
        if data.startswith(word, i):
            return True
        i = data.find(lead, i + 1)
    return False


_BULK = frozenset({b"config", b"environment"})
"""Sections of unbounded size (config file contents, the package list): read past only when wanted."""

_HEAD = 16 * 1024
_TAIL = 32 * 1024
"""Bytes read from each end of a large manifest: code, collection and command sit at the head,
generated_at to training at the tail; a file whose wanted sections reach further is read whole."""


def _quick(head: bytes, fields: Sequence[str], tail: Optional[bytes] = None, *,
           whole: bool = True) -> Optional[Dict[str, Any]]:
    """Parse only ``fields`` from a file in our writer's layout; None when it is not in that layout
    (or, with ``whole=False``, when the wanted sections reach beyond ``head`` and ``tail``).

    Keys are sorted, so the bulky sections sit in the middle: walk the top-level keys forward from
    the start and backward from the end, each walk stopping at the first bulky section it does not
    need, and decode only the wanted values. A wanted key between the two stops is looked up directly.
    """
    tail = head if tail is None else tail
    if not head.startswith(b'{\n "') or not tail.endswith(b"\n}\n"):
        return None  # another layout, or cut short: the strict reader says which
    wanted = {name.encode("utf-8") for name in fields}
    found: Dict[bytes, Any] = {}
    low, high = b"", b"\xff"  # keys not walked lie strictly between these
    try:
        pos = 1
        while True:  # forward: pos is the newline before a key
            key_end = head.find(b'": ', pos + 3)
            if key_end < 0:
                return None
            key = head[pos + 3:key_end]
            if key in _BULK and key not in wanted:
                low = key
                break
            nxt = head.find(b'\n "', key_end)
            if nxt < 0 and not whole:
                return None
            if key in wanted:
                found[key] = _value(head, key_end + 3, nxt if nxt >= 0 else len(head) - 2)
            if nxt < 0:
                return {k.decode("utf-8"): v for k, v in found.items()}  # walked the whole file
            pos = nxt
        end = len(tail) - 2
        while True:  # backward from the closing brace
            i = tail.rfind(b'\n "', 0, end)
            if i < 0:
                return None  # the tail holds no bulky section: it is all wanted, read whole
            key_end = tail.find(b'": ', i + 3)
            key = tail[i + 3:key_end]
            if key in found or (key in _BULK and key not in wanted):
                high = key
                break
            if key in wanted:
                found[key] = _value(tail, key_end + 3, end)
            end = i
        for key in wanted - set(found):  # between the two walks (config, container, data, environment)
            if not low < key < high:
                continue  # its place was walked: the file has no such key
            if not whole:
                return None
            i = head.find(b'\n "' + key + b'": ')
            if i >= 0:
                nxt = head.find(b'\n "', i + len(key) + 6)
                found[key] = _value(head, i + len(key) + 6, nxt if nxt >= 0 else len(head) - 2)
    except ValueError:
        return None
    return {k.decode("utf-8"): v for k, v in found.items()}


def _value(raw: bytes, start: int, end: int) -> Any:
    chunk = raw[start:end].rstrip()
    if chunk.endswith(b","):
        chunk = chunk[:-1]
    return parse_json(chunk.decode("utf-8"))
