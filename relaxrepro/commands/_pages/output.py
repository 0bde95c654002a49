"""Where a page goes and how it is written: ``-o FILE``, ``-o DIR``, else beside the runs it describes (the
common directory of its inputs), but never into a git working tree that does not ignore it there (the next
``generate`` would record the page as an uncommitted change): then into the user's cache. A file is replaced
only when it is itself a page of ours, atomically."""

from __future__ import annotations

import os

from ...manifest.writer import replace_atomically
from ...std.files import read_regular
from ...std.proc import run
from .html import GENERATOR

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Mapping, Optional, Sequence, Tuple


class NotOurs(Exception):
    """The chosen file exists and is not a page relaxrepro wrote: it is left alone."""


def ours(path: str) -> bool:
    """Whether ``path`` is a page this tool wrote (the only kind of file it replaces)."""
    try:
        head = read_regular(path, 2048)
    except OSError:
        return False
    return head.startswith(b"<!DOCTYPE html>") and (b'<meta name="generator" content="%s ' % GENERATOR.encode()
                                                    ) in head


def beside(inputs: Sequence[str]) -> str:
    """The common directory of ``inputs`` (a directory stands for itself, a file for its directory)."""
    dirs = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or ".") for p in inputs] or [
        os.path.abspath(".")]
    try:
        return os.path.commonpath(dirs)
    except ValueError:  # Windows: inputs on two drives
        return dirs[0]


def _work_tree(directory: str) -> Optional[str]:
    """The top of the git working tree ``directory`` lies in (a ``.git`` directory or file above it), or None."""
    cur = directory
    while True:
        if os.path.lexists(os.path.join(cur, ".git")):
            return cur
        up = os.path.dirname(cur)
        if up == cur:
            return None
        cur = up


def dirties_a_checkout(path: str, env: Mapping[str, str]) -> bool:
    """Whether writing ``path`` would show in ``git status``: inside a working tree that does not ignore it
    (asked of ``git check-ignore``; a git that cannot answer counts as not ignored)."""
    top = _work_tree(os.path.dirname(os.path.abspath(path)))
    if top is None:
        return False
    res = run(["git", "-C", top, "check-ignore", "-q", "--", os.path.abspath(path)], timeout=10, env=env)
    return res.rc != 0


def cache_dir(env: Mapping[str, str]) -> str:
    """The user's cache for pages that have no better place: ``$XDG_CACHE_HOME/relaxrepro/reports``."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "relaxrepro", "reports")


def target(output: Optional[str], name: str, inputs: Sequence[str], env: Mapping[str, str],
           flag: str = "-o") -> Tuple[str, str]:
    """(path, note): ``-o FILE``, ``-o DIR`` (``name`` inside), else ``name`` beside ``inputs`` -- or in the
    cache when that would dirty a checkout, and ``note`` says so. Raises :class:`NotOurs` over a file that
    is not one of our pages (its message names ``flag``, the option that names the file)."""
    note = ""
    if output is not None:
        path = os.path.join(output, name) if os.path.isdir(output) else output
    else:
        where = os.path.relpath(beside(inputs))
        path = name if where == os.curdir else os.path.join(where, name)
        if dirties_a_checkout(path, env):
            note = "%s would be a change in a git checkout (not ignored there)" % path
            path = os.path.join(cache_dir(env), name)
    if os.path.lexists(path) and not ours(path):
        raise NotOurs("%s exists and is not a relaxrepro report: not replaced (name another file with %s)"
                      % (path, flag))
    return path, note


def write(path: str, text: str) -> None:
    """The page, atomically (its directory made if need be)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    replace_atomically(path, text.encode("utf-8", "replace"))
