"""The run index: every manifest below some directories, read fast, one summary line each.

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

from ..std.records import Record
from ..std.text import safe_format, safe_text
from .model import READ_LIMIT_BYTES
from .reader import parse_json  # the readers' rules: a NaN in a field read quickly sends the file to the strict one

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

LS_FIELDS = ("schema_version", "run_id", "generated_at", "code", "hardware", "training", "lineage", "outcome")

_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "wandb"})

_CHECKPOINT_DIR = re.compile(r"^(iter_\d+|global_step\d+|checkpoint-\d+|step_\d+|mp_rank_\d+(_\d+)*)$")
"""Checkpoint iteration directories (Megatron ``iter_0000100/mp_rank_00``, DeepSpeed ``global_step100``,
HF Trainer ``checkpoint-500``): a long run has hundreds, each with a subdirectory per rank, and no
manifest is ever written inside one. Not descending into them keeps ``ls`` fast on real run trees."""


class Entry(Record):
    """One manifest file: the sections read, or why it could not be read."""

    _fields = ("path", "doc", "error")

    def __init__(self, path: str, doc: Optional[Dict[str, Any]] = None, error: Optional[str] = None) -> None:
        self.path = path
        self.doc: Dict[str, Any] = {} if doc is None else doc
        self.error = error

    @property
    def run_id(self) -> Optional[str]:
        value = self.doc.get("run_id")
        return value if isinstance(value, str) else None


def find_manifests(roots: Iterable[str]) -> Iterator[str]:
    """Paths of ``manifest_*.json`` below ``roots`` (a file root is yielded as is).

    Hidden directories, ``__pycache__``, ``node_modules``, ``wandb`` and checkpoint iteration
    directories are skipped. Symlinked directories are
    followed (run trees link shared runs in) once each, and never into a directory that contains
    them (a loop). Only symlinks cost a ``stat``: the walk itself reads directory entries alone.
    """
    linked: set = set()
    for root in roots:
        yield from walk_root(root, linked)


def walk_root(root: str, linked: set) -> Iterator[str]:
    """:func:`find_manifests` for one root; ``linked``: the symlink targets followed so far, shared by the
    roots of one listing (the run index walks each root on its own, and must list what the scan lists)."""
    if os.path.isfile(root):
        yield root
        return
    for d, names, _ in walk_dirs(root, linked):
        for name in names:
            yield os.path.join(d, name)


def walk_dirs(root: str, linked: set, *, key: Optional[Callable[[int, int, int], Any]] = None
              ) -> Iterator[Tuple[str, List[str], List[Any]]]:
    """Each directory below the directory ``root`` that :func:`walk_root` visits, in its order, with the
    names of its manifests sorted (so the walk order is the same on every file system) and, given
    ``key``, ``key(size, mtime_ns, inode)`` of each (None: it vanished), else an empty list.

    The keys are taken in the same pass, by name in the open directory: no path lookup, no second loop
    (100,000 manifests: the run index's check is mostly these ``stat`` calls)."""
    keys = key is not None
    by_fd = keys and os.stat in os.supports_dir_fd
    stack = [root]
    while stack:
        d = stack.pop()
        subdirs = []
        found: List[Any] = []
        fd = None
        try:
            if by_fd:
                fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            with os.scandir(d) as it:
                for e in it:
                    name = e.name
                    try:
                        if e.is_dir():
                            if name.startswith(".") or name in _SKIP_DIRS or _CHECKPOINT_DIR.match(name):
                                continue
                            if e.is_symlink():
                                target = os.path.realpath(e.path)
                                here = os.path.realpath(d)
                                if target in linked or here == target or here.startswith(target + os.sep):
                                    continue
                                linked.add(target)
                            subdirs.append(e.path)
                        elif name.startswith("manifest_") and name.endswith(".json"):
                            if not keys:
                                found.append(name)
                                continue
                            try:
                                st = os.stat(name, dir_fd=fd) if fd is not None else os.stat(e.path)
                                found.append((name, key(st.st_size, st.st_mtime_ns, st.st_ino)))  # type: ignore[misc]
                            except OSError:
                                found.append((name, None))
                    except OSError:
                        continue
        except OSError:
            subdirs = []  # as an unreadable directory always was: what it listed, not below it
        finally:
            if fd is not None:
                os.close(fd)
        found.sort()
        if keys:
            yield (d, [n for n, _ in found], [k for _, k in found]) if found else (d, [], [])
        else:
            yield d, found, []
        stack.extend(sorted(subdirs, reverse=True))


def read_fields(path: str, fields: Sequence[str] = LS_FIELDS, raw: Optional[bytes] = None) -> Dict[str, Any]:
    """The top-level ``fields`` of the manifest at ``path``; raises ``ManifestError`` when unreadable.

    ``raw``: the whole file, when the caller read it already (the run index reads each file once); the
    same ends of it are looked at, so the answer, or the error, is the one a read from disk gives.
    """
    from .reader import ManifestError, ReadError, check_version, parse_manifest, read_bytes, read_ends

    try:
        if raw is not None:
            head, tail = (raw, None) if len(raw) <= _HEAD + _TAIL else (raw[:_HEAD], raw[-_TAIL:])
        else:
            head, tail = read_ends(path, READ_LIMIT_BYTES, _HEAD, _TAIL)
        quick = _quick(head, fields, tail, whole=tail is None)
        if quick is not None and _maybe_nonfinite(head, tail):
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


def scan(roots: Iterable[str], fields: Sequence[str] = LS_FIELDS) -> List[Entry]:
    """Every manifest below ``roots``, read or marked unreadable, in walk order."""
    from .reader import ManifestError

    entries = []
    for path in find_manifests(roots):
        try:
            entries.append(Entry(path, read_fields(path, fields)))
        except ManifestError as exc:
            entries.append(Entry(path, error=str(exc)))
    return entries


# -- summaries --------------------------------------------------------------------------------

def short(commit: Any) -> str:
    return commit[:7] if isinstance(commit, str) and commit else "-"


def repos(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    code = doc.get("code")
    out = []
    if isinstance(code, dict):
        for name in sorted(code):
            repo = code[name]
            if isinstance(repo, dict):
                out.append({"name": name, "commit": repo.get("commit"), "dirty": repo.get("dirty")})
    return out


def gpus(doc: Dict[str, Any]) -> Tuple[Optional[int], Optional[str]]:
    """(count, model) from the hardware section, whichever of its shapes is there."""
    hw = doc.get("hardware")
    if not isinstance(hw, dict):
        return None, None
    items = hw.get("gpus")
    count = hw.get("gpu_count")
    model = hw.get("gpu_model")
    if isinstance(items, list):
        if not isinstance(count, int):
            count = len(items)
        if not model and items and isinstance(items[0], dict):
            model = items[0].get("model") or items[0].get("name")
    gpu = hw.get("gpu")
    if isinstance(gpu, dict):
        count = count if isinstance(count, int) else gpu.get("count")
        model = model or gpu.get("model")
    return (count if isinstance(count, int) else None), (str(model) if model else None)


def algorithm(doc: Dict[str, Any]) -> Optional[str]:
    training = doc.get("training")
    if isinstance(training, dict):
        value = training.get("algorithm") or training.get("algo")
        if value:
            return str(value)
    return None


def lineage_of(doc: Dict[str, Any]) -> Dict[str, Any]:
    value = doc.get("lineage")
    return value if isinstance(value, dict) else {}


def parent_id(doc: Dict[str, Any]) -> Optional[str]:
    parent = lineage_of(doc).get("parent")
    if isinstance(parent, dict):
        return parent.get("run_id") or parent.get("given") or None
    return None


def trackers(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """``lineage.trackers``: the W&B, MLflow and TensorBoard runs the manifest was attached to."""
    value = lineage_of(doc).get("trackers")
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


def trackers_cell(doc: Dict[str, Any]) -> str:
    names = sorted({str(t.get("tool")) for t in trackers(doc)})
    return ",".join(names) or "-"


def outcome_text(doc: Dict[str, Any]) -> str:
    out = doc.get("outcome")
    if not isinstance(out, dict) or "status" not in out:
        return "-"
    status = out.get("status")
    if status == "ok":
        return "ok"
    if status == "exit":
        return "exit %s" % out.get("exit_code")
    if status == "signal":
        return "%s (%s)" % (out.get("signal_name") or "signal %s" % out.get("signal"), out.get("exit_code"))
    if status == "exception":
        return "exception %s" % out.get("exception_type", "?")
    if status == "not_started":
        return "not started (127)"
    return str(status)


def summary(entry: Entry) -> Dict[str, Any]:
    """The machine form of one ``ls`` line."""
    doc = entry.doc
    if entry.error is not None:
        return {"path": entry.path, "error": entry.error}
    count, model = gpus(doc)
    lin = lineage_of(doc)
    return {
        "path": entry.path,
        "run_id": entry.run_id,
        "generated_at": doc.get("generated_at"),
        "code": repos(doc),
        "algorithm": algorithm(doc),
        "gpus": {"count": count, "model": model},
        "group": lin.get("group"),
        "parent": parent_id(doc),
        "outcome": doc.get("outcome") if isinstance(doc.get("outcome"), dict) else None,
        "trackers": trackers(doc),
    }


def _code_cell(doc: Dict[str, Any]) -> str:
    parts = ["%s@%s%s" % (r["name"], short(r["commit"]), "*" if r["dirty"] else "") for r in repos(doc)]
    return ",".join(parts) or "-"


def gpu_cell(doc: Dict[str, Any]) -> str:
    count, model = gpus(doc)
    if not count and not model:
        return "-"
    if model and model.startswith("NVIDIA "):
        model = model[len("NVIDIA "):]
    return "%sx%s" % (count if count is not None else "?", (model or "?").replace(" ", "-"))


def time_cell(value: Any) -> str:
    if isinstance(value, str) and len(value) >= 16:
        return value[:10] + " " + value[11:16]
    return "-"


def ls_cells(doc: Dict[str, Any], run_id: Optional[str]) -> List[str]:
    """The cells of one ``ls`` row but its path, each one escaped line (the run index stores them)."""
    return [safe_text(c) for c in (run_id or "-", time_cell(doc.get("generated_at")), _code_cell(doc),
                                   algorithm(doc) or "-", gpu_cell(doc), str(lineage_of(doc).get("group") or "-"),
                                   parent_id(doc) or "-", outcome_text(doc), trackers_cell(doc))]


def ls_order(entries: Sequence[Entry]) -> Tuple[List[Entry], List[Entry]]:
    """(readable entries by time then run id, walk order breaking ties; unreadable ones by path)."""
    good = sorted((e for e in entries if e.error is None),
                  key=lambda e: (str(e.doc.get("generated_at") or ""), e.run_id or ""))
    return good, sorted((e for e in entries if e.error is not None), key=lambda e: e.path)


def render_ls(entries: Sequence[Entry], *, cwd: str = ".") -> str:
    """The ``ls`` table: readable runs by time, then one ``unreadable`` line per bad file, by path."""
    good, bad = ls_order(entries)
    return render_rows([ls_cells(e.doc, e.run_id) for e in good], [e.path for e in good],
                       [(e.path, e.error) for e in bad], cwd=cwd)


def render_rows(cells: Sequence[List[str]], paths: Sequence[str], bad: Sequence[Tuple[str, Any]], *,
                cwd: str = ".") -> str:
    """The ``ls`` table from each row's :func:`ls_cells` and path, then a line per (path, why) of a bad file."""
    rel = RelPaths(cwd)
    return render_columns(list(zip(*cells)), rel.many(paths), [(rel(p), why) for p, why in bad])


def render_columns(columns: List[Sequence[str]], shown: Sequence[str], bad: Sequence[Tuple[str, Any]]) -> str:
    """:func:`render_rows` from the cells column by column (100,000 rows cost a few C loops, not 100,000
    lists), with the paths as shown (:class:`RelPaths`)."""
    text = ""
    if shown:
        tracked = columns[8].count("-") != len(columns[8])  # the column appears once a run was attached
        if not tracked:
            del columns[8]
        columns.append(shown)
        text = format_columns(["RUN", "TIME (UTC)", "CODE", "ALGO", "GPUS", "GROUP", "PARENT", "OUTCOME"]
                              + ["TRACKERS"] * tracked + ["PATH"], columns, safe=len(columns) - 1)
    for path, why in bad:
        text += safe_format("unreadable  %s: %s\n", path, why)
    return text


def rel_path(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep + "..") else rel


class RelPaths:
    """:func:`rel_path` of many paths, one ``relpath`` per directory (100,000 rows: 0.5 s less)."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.dirs: Dict[str, str] = {}

    def __call__(self, path: str) -> str:
        cut = path.rfind(os.sep)
        d, name = path[:cut], path[cut + 1:]
        if cut <= 0 or not name or name in (".", "..") or d.endswith(os.sep):
            return rel_path(path, self.cwd)
        rd = self.dirs.get(d)
        if rd is None:
            try:
                rd = self.dirs[d] = os.path.relpath(d, self.cwd)
            except ValueError:
                return path
        rel = name if rd == "." else rd + os.sep + name
        return path if rel.startswith(".." + os.sep + "..") else rel

    def head(self, prefix: str) -> Optional[str]:
        """What stands for ``prefix`` (a walked root, ending in a separator) in front of the walk's relative
        paths below it, so that ``head + rel == self(prefix + rel)``; None where that does not hold."""
        try:
            rd = os.path.relpath(prefix, self.cwd)
        except ValueError:
            return prefix
        if rd.startswith(".." + os.sep + ".."):
            return prefix
        return "" if rd == "." else rd + os.sep

    def many(self, paths: Sequence[str]) -> List[str]:
        """``[self(p) for p in paths]``, with each directory's part worked out once."""
        sep, lead, slow, unset = os.sep, {}, self, object()
        out = []
        for p in paths:
            d, _, name = p.rpartition(sep)
            head = lead.get(d, unset)
            if head is unset:
                rd = None
                if d and not d.endswith(sep):
                    try:
                        rd = os.path.relpath(d, self.cwd)
                    except ValueError:
                        rd = None
                # "": the path as it is (two levels up); None: the careful way (.., odd paths)
                if rd is None or (rd.startswith("..") and not rd.startswith(".." + sep + "..")):
                    head = None
                else:
                    head = "" if rd.startswith("..") else "." if rd == "." else rd + sep
                lead[d] = head
            if head is None or name[:1] in ("", "."):
                out.append(slow(p))
            elif head == "":
                out.append(p)
            else:
                out.append(name if head == "." else head + name)
        return out


def format_columns(header: List[str], columns: List[Sequence[str]], *, safe: int = 0) -> str:
    """:func:`format_table` of ``header`` and the rows that ``columns`` hold, in one formatting call when
    every cell is printable and no row ends in a blank (the common case: what rstrip would not change).
    ``safe``: how many leading columns hold :func:`safe_text` cells already (``ls_cells``)."""
    import itertools

    last = columns[-1]
    if ("".join(itertools.chain(header, *columns[safe:])).isprintable() and "" not in last
            and not re.search(r"\s(\n|\Z)", "\n".join(last))):
        widths = [max(len(h), max(map(len, c))) for h, c in zip(header, columns[:-1])]
        fmt = "  ".join(["%%-%ds" % w for w in widths] + ["%s"])
        cells = itertools.chain(header, itertools.chain.from_iterable(zip(*columns)))
        return ("\n".join([fmt] * (len(last) + 1)) + "\n") % tuple(cells)
    return format_table([header] + [list(r) for r in zip(*columns)])


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the last column is never padded. Every cell is one escaped
    line (:func:`safe_text`): a value from a manifest can neither break a row nor act on the terminal."""
    if not rows:
        return ""
    # One isprintable test per row, not per cell: a row of printable cells is kept as it is (100,000 rows: 1 s less).
    rows = [r if "".join(r).isprintable() else [safe_text(cell) for cell in r] for r in rows]
    widths = [0] * max(len(r) for r in rows)
    for r in rows:
        for i, cell in enumerate(r[:-1]):
            if len(cell) > widths[i]:
                widths[i] = len(cell)
    lines = []
    formats: Dict[int, str] = {}
    for r in rows:
        fmt = formats.get(len(r))
        if fmt is None:
            fmt = formats[len(r)] = "  ".join(["%%-%ds" % w for w in widths[:len(r) - 1]] + ["%s"])
        lines.append((fmt % tuple(r)).rstrip())
    return "\n".join(lines) + "\n"
