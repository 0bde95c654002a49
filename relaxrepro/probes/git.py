"""Code state of the repository holding the working directory: commit, branch, dirty.

Foundation version; issue 3 extends it to every repo that shaped the run, with patches.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ..context import Context
from ..runner import Outcome


def find_toplevel(start: str) -> Optional[str]:
    """The nearest directory at or above ``start`` holding ``.git`` (dir or file); no subprocess."""
    path = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def parse_status_v2(text: str) -> Dict[str, Any]:
    """``git status --porcelain=v2 --branch``: commit, branch (or detached) and tracked dirtiness."""
    out: Dict[str, Any] = {"commit": None, "dirty": False}
    for line in text.splitlines():
        if line.startswith("# branch.oid "):
            oid = line[len("# branch.oid "):].strip()
            out["commit"] = None if oid == "(initial)" else oid
        elif line.startswith("# branch.head "):
            head = line[len("# branch.head "):].strip()
            if head == "(detached)":
                out["detached"] = True
            else:
                out["branch"] = head
        elif line[:2] in ("1 ", "2 ", "u "):
            out["dirty"] = True
    return out


def git_argv(toplevel: str, *args: str) -> list:
    # safe.directory per call: repos owned by another uid (Apptainer, Docker) work without
    # touching the user's git config.
    return ["git", "-c", "safe.directory=*", "-C", toplevel] + list(args)


def collect(ctx: Context) -> Outcome:
    top = find_toplevel(ctx.cwd)
    if top is None:
        return Outcome(status="absent", warnings=["working directory is not inside a git repository"])
    res = ctx.run(git_argv(top, "status", "--porcelain=v2", "--branch", "--untracked-files=no"))
    name = os.path.basename(top) or "repo"
    if not res.ok:
        return Outcome(data={"code": {name: {"path": top, "commit": None}}}, status="failed",
                       warnings=["git status failed: " + res.describe()])
    repo = parse_status_v2(res.stdout)
    repo["path"] = top
    return Outcome(data={"code": {name: repo}})
