"""The run a command is given, and reading it: a manifest file, or a run id or a unique prefix of one, found
through the run index (:mod:`relaxrepro.manifest.runindex`).

An argument that names an existing file or directory is that path, even when it also reads as a run id. Else,
when it reads as a run id, it is looked up below the run directories: those of ``--runs DIR`` (repeatable), else
``$RELAXREPRO_RUNS`` (directories separated by ``os.pathsep``, as in ``PATH``), else the default output directory
(``$RELAXREPRO_OUTPUT_DIR``) and ``.``; ``lineage`` and ``report`` look below the directories they are given
too, and then not below those two. A run whose id is the argument wins; else the one run whose id starts
with it. Several runs: the argument is ambiguous and its candidates are named; none: the directories looked in
are named; each is one line and exit 2.
"""

from __future__ import annotations

import os

from ..manifest.model import OUTPUT_DIR_ENV, RUN_ID_RE
from ..manifest.reader import ManifestError, read_manifest_file
from ._common import say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

RUNS_ENV = "RELAXREPRO_RUNS"
"""The run directories when no ``--runs`` is given, separated by ``os.pathsep``."""

SHOWN = 10
"""Candidates an ambiguous prefix names (the rest are counted)."""


class NotFound(Exception):
    """An argument that names no file and no single run; the message says why, in one line."""


def run_dirs(runs: Sequence[str], env: Mapping[str, str], first: Sequence[str] = ()) -> List[str]:
    """Where run ids are looked up: ``first`` (the directories a command is given: ``lineage``'s, ``report``'s),
    then ``runs`` (``--runs``), else ``$RELAXREPRO_RUNS``, else, when ``first`` is empty too, the default output
    directory and ``.``; each once."""
    chosen = list(runs) or [d for d in (env.get(RUNS_ENV) or "").split(os.pathsep) if d]
    if not chosen and not first:
        chosen = [env.get(OUTPUT_DIR_ENV) or ".", "."]
    out: List[str] = []
    for d in list(first) + chosen:
        if os.path.normpath(d) not in (os.path.normpath(o) for o in out):
            out.append(d)
    return out


def find_manifest(given: str, dirs: Sequence[str], *, use_index: bool = True,
                  warnings: Optional[List[str]] = None, src: Any = None) -> str:
    """The path ``given`` names: itself when it exists (or cannot be a run id: the reader then says why it
    cannot be read), else the manifest of the run whose id is, or uniquely starts with, ``given`` below
    ``dirs``. Raises :class:`NotFound`. ``warnings``: where to add what the run index says (a database
    bypassed or rebuilt). ``src``: ``dirs`` opened already by the caller (``runindex.open_roots``, left open)."""
    if os.path.exists(given) or not RUN_ID_RE.match(given):
        return given
    present = [d for d in dirs if os.path.isdir(d)]
    own = src is None
    if own:
        # Only a run id needs the index: `diff A.json B.json` never imports it (tests/test_imports.py).
        from ..manifest import runindex  # lazy: ~12 ms (sqlite3 and the walk), for an argument that is not a path

        src = runindex.open_roots(present, use_index=use_index)
    if warnings is not None:
        warnings.extend(src.warnings)
    try:
        # Run ids sort as text: the rows from given up to given + the highest character start with it, and the
        # index answers that range without reading the rest.
        rows = src.find("run_id >= ? AND run_id < ?", (given, given + "\U0010ffff"),
                        lambda r: isinstance(r.run_id, str) and r.run_id.startswith(given))
    finally:
        if own:
            src.close()
    ids: Dict[str, str] = {}
    for r in rows:
        ids.setdefault(r.run_id, r.path)  # the first in walk order, as for one id
    if given in ids:
        return ids[given]
    if len(ids) == 1:
        return next(iter(ids.values()))
    if ids:
        names = sorted(ids)
        more = " (+%d more)" % (len(names) - SHOWN) if len(names) > SHOWN else ""
        raise NotFound("%s is ambiguous: %d runs start with it: %s%s; give more of the id or a manifest file"
                       % (given, len(names), ", ".join(names[:SHOWN]), more))
    looked = ", ".join(d if d in present else "%s (%s)" % (d, "not a directory" if os.path.exists(d) else
                                                            "no such directory") for d in dirs)
    raise NotFound("%s: no such file, and no run id starts with it under %s (name where runs are with --runs DIR "
                   "or $%s)" % (given, looked, RUNS_ENV))


def resolve_args(verb: str, args: argparse.Namespace, *names: str, first: Sequence[str] = (),
                 env: Optional[Mapping[str, str]] = None, warnings: Optional[List[str]] = None,
                 src: Any = None) -> bool:
    """Each argument ``names`` of ``args`` (a string, or a list of them) made the path it names
    (:func:`find_manifest` under :func:`run_dirs` of ``args.runs``); False after one ``error:`` line when one
    names nothing. The argument is left as given when it is an existing path. The run index's warnings go to
    ``warnings`` (for a caller that says them with its own), else, and before an error, are said here. ``src``:
    (directories, their ``runindex.open_roots``) a caller opened already, asked when they are the ones to look in."""
    dirs = run_dirs(getattr(args, "runs", None) or (), os.environ if env is None else env, first)
    opened = src[1] if src is not None and list(src[0]) == dirs else None
    for name in names:
        value = getattr(args, name)
        if value is None:
            continue
        found = []
        for given in [value] if isinstance(value, str) else list(value or ()):
            said: List[str] = []
            why = None
            try:
                found.append(find_manifest(given, dirs, use_index=not getattr(args, "no_index", False),
                                           warnings=said, src=opened))
            except NotFound as exc:
                why = str(exc)
            if warnings is not None and why is None:
                warnings.extend(said)
            else:
                for w in said:
                    say("relaxrepro %s: warning: %s", verb, w)
            if why is not None:
                say("relaxrepro %s: error: %s", verb, why)
                return False
        setattr(args, name, found[0] if isinstance(value, str) else found)
    return True


def read_or_report(verb: str, path: str, stderr: Any = None) -> Optional[Tuple[Dict[str, Any], List[str]]]:
    """Read ``path`` for subcommand ``verb``: (document, warnings), or one line on stderr and None (exit 2).

    The light reader (plain dicts): it pulls in neither the assembler nor the writer, so ``diff``
    starts fast on a laptop.
    """
    try:
        return read_manifest_file(path)
    except ManifestError as exc:
        say("relaxrepro %s: %s: %s", verb, path, exc, out=stderr)
        return None


def read_with_notes(verb: str, path: str) -> Optional[Dict[str, Any]]:
    """:func:`read_or_report`, with the reader's warnings (a legacy form normalised, a newer minor) said
    on stderr as ``note:`` lines; the document, or None (exit 2)."""
    read = read_or_report(verb, path)
    if read is None:
        return None
    doc, warnings = read
    for w in warnings:
        say("relaxrepro %s: note: %s", verb, w)
    return doc
