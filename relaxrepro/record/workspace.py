"""A replay's workspace of its own (``rerun --confirm --workspace [DIR]``): every recorded repo's exact tree
rebuilt by :mod:`.restore` (commit, patch, submodules; offline, from the local clone or ``--from NAME=PATH``),
and the command pointed into it, so that the user's checkout may be at any commit with any change and is
never touched. The workspace goes once the replay reproduced (unless ``--keep``); otherwise it stays, named."""

from __future__ import annotations

import os
import shutil

from ..manifest.fields import expand_home, section
from .restore import restore

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple


def default_dir(target: str) -> str:
    """Beside the replay's own directory: ``runs/a.replay-1`` -> ``runs/a.replay-1.workspace``."""
    return target.rstrip(os.sep) + ".workspace"


def build(rec: Mapping[str, Any], manifest_path: str, into: str, *, cwd: str, home: Optional[str],
          sources: Mapping[str, str], env: Mapping[str, str]) -> Tuple[Dict[str, str], List[str]]:
    """Restore every recorded repo under ``into``: ({where the repo was recorded, on this machine: its
    restored tree}, notes). Raises :class:`~relaxrepro.record.restore.RestoreError` (nothing left behind)."""
    notes = restore(rec, manifest_path, into, sources=sources, env=env)
    trees: Dict[str, str] = {}
    for name, repo in section(rec, "code").items():
        path = repo.get("path") if isinstance(repo, dict) else None
        if isinstance(path, str) and path:
            trees[os.path.normpath(os.path.join(cwd, expand_home(path, home)))] = os.path.join(into, str(name))
    return trees, notes


def inside(path: str, trees: Mapping[str, str]) -> Optional[str]:
    """``path`` (absolute) moved into the restored tree that holds it, or None when no recorded repo does."""
    for source in sorted(trees, key=len, reverse=True):
        if path == source or path.startswith(source.rstrip(os.sep) + os.sep):
            rel = os.path.relpath(path, source)
            return trees[source] if rel == os.curdir else os.path.join(trees[source], rel)
    return None


def relocate(p: Any, trees: Mapping[str, str], skip: List[str]) -> List[Tuple[str, str, str]]:
    """Point the plan's working directory and its absolute arguments and env values inside a recorded repo
    into the workspace (``p`` changed in place); the interpreter and the values in ``skip`` (already pointed
    at the replay's directory) stay. Relative values need nothing: they are read from the new working
    directory. Returns [(where, old, new)]."""
    changes: List[Tuple[str, str, str]] = []

    def moved(value: str) -> Optional[str]:
        head, eq, tail = value.partition("=")
        for prefix, path in (("", value), (head + eq, tail) if eq else ("", "")):
            if path and os.path.isabs(path):
                new = inside(os.path.normpath(path), trees)
                if new is not None:
                    return prefix + new
        return None

    if p.cwd:
        new = inside(os.path.normpath(p.cwd), trees)
        if new is not None:
            changes.append(("cwd", p.cwd, new))
            p.cwd = new
    for i, arg in enumerate(p.argv):
        if "argv[%d]" % i in skip or arg == p.interpreter:
            continue
        new = moved(arg)
        if new is not None:
            changes.append(("argv[%d]" % i, arg, new))
            p.argv[i] = new
    for name in sorted(p.env):
        if "env " + name in skip:
            continue
        new = moved(p.env[name])
        if new is not None:
            changes.append(("env " + name, p.env[name], new))
            p.env[name] = new
    return changes


def remove(into: str) -> None:
    """The workspace gone (a replay that reproduced needs it no more)."""
    shutil.rmtree(into, ignore_errors=True)
