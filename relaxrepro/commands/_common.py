"""What every command shares: the exit codes, saying things to people, and the parsing of ``NAME=VALUE``
options and directory arguments (reading the run a command is given: :mod:`._runs`)."""

from __future__ import annotations

import os
import sys
from enum import IntEnum  # free: re and argparse import enum before any command runs

from ..std.text import say

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Sequence


class Exit(IntEnum):
    """The exit statuses of relaxrepro's own (``run`` and ``rerun --confirm`` pass their command's through)."""

    OK = 0
    FAIL = 1
    """A failure: a check FAILed, a diff found differences, a probe failed under ``--strict``, nothing written."""
    USAGE = 2
    """A usage error, an unreadable input, a refused request (``rerun``, ``restore``, ``merge``)."""
    REFUSED = 2
    """An alias of USAGE: a request refused before anything ran."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C): 128 + SIGINT, as a shell reports it."""


def verify_exit(result: Mapping[str, Any]) -> Exit:
    """The exit status of a verdict of :func:`relaxrepro.analyze.verify.verify` (``verify``, ``rerun --quick``):
    OK reproduced, FAIL diverged, USAGE nothing to verify."""
    from ..analyze.verify import DIVERGED, REPRODUCED  # lazy: ~6 ms; cli imports _common first

    return {REPRODUCED: Exit.OK, DIVERGED: Exit.FAIL}.get(result.get("verdict"), Exit.USAGE)


class UsageError(Exception):
    """A bad option value found after argparse: one line on stderr and :attr:`Exit.USAGE`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def pairs(values: Sequence[str], flag: str) -> Dict[str, str]:
    """``NAME=VALUE`` options as a dict; a value without ``=`` raises :class:`UsageError`."""
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name:
            raise UsageError("relaxrepro: error: %s %r: expected NAME=VALUE" % (flag, value))
        out[name] = rest
    return out


def dirs_or_cwd(dirs: Sequence[str]) -> List[str]:
    return list(dirs) or ["."]


def unreadable_tail(count: int) -> str:
    """How a "found nothing" error ends when manifests were found but none could be read: they are not nothing,
    and the warnings above them name each one."""
    return ": %d manifest_*.json unreadable (named above)" % count if count else ""


def report_missing(dirs: Sequence[str], verb: str) -> bool:
    """Say which of ``dirs`` do not exist (one line each); True when any does not."""
    missing = [d for d in dirs if not os.path.exists(d)]
    for d in missing:
        say("relaxrepro %s: error: %s: no such file or directory", verb, d)
    return bool(missing)


def progress_line() -> Any:
    """A progress line on stderr for a long index build, only on a terminal."""
    try:
        if not sys.stderr.isatty():
            return None
    except (AttributeError, ValueError):
        return None

    def show(done: int, total: int) -> None:
        if total >= 2000:
            sys.stderr.write("\rrelaxrepro: indexing %d/%d manifests%s" % (done, total, "\n" if done == total else ""))
            sys.stderr.flush()
    return show


def print_json(value: Any) -> None:
    """A command's ``--json`` answer on stdout: one document, sorted keys, ASCII (safe on any terminal)."""
    import json  # ~1 ms, only for --json (cli imports this module first)

    sys.stdout.write(json.dumps(value, sort_keys=True, indent=1, ensure_ascii=True, default=str) + "\n")
