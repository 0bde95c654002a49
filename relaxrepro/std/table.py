"""Text tables for the terminal: columns padded to their widest cell, each cell one escaped line, and paths
shown relative to the working directory (as ``ls``, ``lineage`` and ``compare`` print them)."""

from __future__ import annotations

import itertools
import os
import re

from .records import Factory, Record
from .text import safe_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict, List, Optional, Sequence


def rel_path(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep + "..") else rel


class RelPaths(Record):
    """:func:`rel_path` of many paths, one ``relpath`` per directory (100,000 rows: 0.5 s less)."""

    cwd: str
    dirs: Dict[str, str] = Factory(dict)

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
    ``safe``: how many leading columns hold :func:`safe_text` cells already (``ls``'s stored cells)."""
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
