"""Which repositories shaped the run: named ones, the working directory's, the script's, editable
installs' and ``PYTHONPATH``'s. Each found once, under a stable name.

Discovery looks only at given paths and their ancestors, one listing of each site directory, and a
few small files; it never walks a filesystem.
"""

from __future__ import annotations

import json
import os
import re

from ..std.files import read_regular
from ..std.records import Factory, Record
from ..std.sha import sha256_hex
from . import gitfs

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

ROUTES = ("explicit", "cwd", "script", "editable", "pythonpath")
"""How a repository was found, in order of precedence for its name."""

_PYTHON_RE = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)*)?(?:-dbg|d|m|u)?(?:\.exe)?$|^pythonw$")

# Python options that take a value (``-W ignore``, ``-X dev``, ``--check-hash-based-pycs default``).
_PY_VALUE_OPTS = {"-W", "-X", "--check-hash-based-pycs"}

_LAUNCHER_MODULES = {
    "torch.distributed.run", "torch.distributed.launch", "deepspeed", "deepspeed.launcher.runner",
    "accelerate.commands.launch", "accelerate.commands.accelerate_cli", "torch.distributed.elastic.agent",
}
"""``python -m`` launchers whose own arguments name the training script (``-m torch.distributed.run
--nproc-per-node 8 train.py``)."""


class Found(Record):
    """One repository (or, without ``.git``, one source directory) and how it was reached."""

    top: str
    name: str = ''
    found_by: List[str] = Factory(list)
    explicit_name: Optional[str] = None
    dist_name: Optional[str] = None
    has_git: bool = True
    given_path: Optional[str] = None


# -- the recorded command -----------------------------------------------------------------------

def is_python(token: str) -> bool:
    return bool(_PYTHON_RE.match(os.path.basename(token)))


def parse_command(argv: Sequence[str]) -> Optional[Tuple[str, str]]:
    """The training code a command runs: ``("script", path)`` or ``("module", "pkg.mod")``, or None.

    Handles ``python [opts] x.py``, ``python -m pkg.mod``, launchers (``torchrun``, ``deepspeed``,
    ``accelerate launch``, ``srun``, ``env A=1``, ``python -m torch.distributed.run``) by taking the
    first ``*.py`` argument, and ``torchrun -m pkg.mod`` / ``--module``.
    """
    argv = list(argv)
    if not argv:
        return None
    if is_python(argv[0]):
        return _parse_python(argv[1:])
    return _scan_launcher(argv[1:]) or (("script", argv[0]) if argv[0].endswith(".py") else None)


def _parse_python(args: List[str]) -> Optional[Tuple[str, str]]:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-c":
            return None
        if a == "-m" or (a.startswith("-m") and len(a) > 2 and not a.startswith("--")):
            mod = args[i + 1] if a == "-m" and i + 1 < len(args) else a[2:]
            if not mod:
                return None
            if mod in _LAUNCHER_MODULES:
                return _scan_launcher(args[i + 2 if a == "-m" else i + 1:])
            return ("module", mod)
        if a in _PY_VALUE_OPTS:
            i += 2
            continue
        if a == "--" or a == "-":
            return None if a == "-" else (_first_positional(args[i + 1:]))
        if a.startswith("-"):
            i += 1
            continue
        return ("script", a)
    return None


def _first_positional(args: List[str]) -> Optional[Tuple[str, str]]:
    return ("script", args[0]) if args and args[0] != "-" else None


def _scan_launcher(args: List[str]) -> Optional[Tuple[str, str]]:
    module_next = False
    for i, a in enumerate(args):
        if is_python(a):
            return _parse_python(args[i + 1:])
        if module_next and not a.startswith("-"):
            return ("module", a)
        if a in ("-m", "--module"):
            module_next = True
            continue
        if a.endswith(".py") and not a.startswith("-"):
            return ("script", a.split("=", 1)[1] if a.startswith("--") else a)
    return None


def module_file(module: str, search: Iterable[str]) -> Optional[str]:
    """The file ``python -m module`` would run, looked up in ``search`` directories (no imports)."""
    parts = [p for p in module.split(".") if p]
    if not parts or any(not p.isidentifier() for p in parts):
        return None
    for base in search:
        stem = os.path.join(base, *parts)
        for cand in (stem + ".py", os.path.join(stem, "__main__.py"), os.path.join(stem, "__init__.py")):
            if os.path.isfile(cand):
                return cand
    return None


# -- editable installs --------------------------------------------------------------------------

def parse_direct_url(text: str) -> Optional[str]:
    """PEP 610 ``direct_url.json`` -> the local directory of an editable install, else None."""
    try:
        info = json.loads(text)
    except ValueError:
        return None
    if not isinstance(info, dict) or not isinstance(info.get("dir_info"), dict):
        return None
    if info["dir_info"].get("editable") is not True:
        return None
    url = info.get("url")
    if not isinstance(url, str) or not url.startswith("file:"):
        return None
    from urllib.parse import unquote, urlparse  # ~6 ms with ipaddress: only for an editable install

    parsed = urlparse(url)
    path = unquote(parsed.path)
    return path or None


def normalize_dist(name: str) -> str:
    """PEP 503 normalised distribution name (``Megatron_Core`` -> ``megatron-core``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_name(dist_info: str) -> str:
    head = _read_small(os.path.join(dist_info, "METADATA"), 8192) or ""
    for line in head.splitlines():
        if line.lower().startswith("name:"):
            return normalize_dist(line.split(":", 1)[1].strip())
        if not line.strip():
            break
    return normalize_dist(os.path.basename(dist_info)[: -len(".dist-info")].split("-")[0])


def editable_installs(site_dirs: Iterable[str]) -> List[Tuple[str, str]]:
    """[(distribution name, source dir)] for every PEP 610 editable install in ``site_dirs``."""
    out: List[Tuple[str, str]] = []
    seen = set()
    for d in site_dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for entry in names:
            if not entry.endswith(".dist-info"):
                continue
            dist_info = os.path.join(d, entry)
            text = _read_small(os.path.join(dist_info, "direct_url.json"), 65536)
            src = parse_direct_url(text) if text else None
            if src and src not in seen:
                seen.add(src)
                out.append((_dist_name(dist_info), src))
    return out


def _read_small(path: str, limit: int) -> Optional[str]:
    try:
        return read_regular(path, limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


# -- putting it together -------------------------------------------------------------------------

def discover(
    *,
    cwd: str,
    argv: Sequence[str] = (),
    env: Optional[Mapping[str, str]] = None,
    explicit: Optional[Mapping[str, str]] = None,
    site_dirs: Sequence[str] = (),
    warnings: Optional[List[str]] = None,
) -> List[Found]:
    """Every repository that shaped the run, each once, with a stable unique name."""
    env = env or {}
    warnings = warnings if warnings is not None else []
    found: Dict[str, Found] = {}
    order: List[str] = []

    def add(path: str, route: str, *, name: Optional[str] = None, dist: Optional[str] = None,
            require_git: bool = True) -> bool:
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))
        top = gitfs.find_toplevel(path)
        has_git = top is not None
        if top is None:
            if require_git:
                return False
            top = path
        key = os.path.realpath(top)
        entry = found.get(key)
        if entry is None:
            entry = found[key] = Found(top=top, has_git=has_git, given_path=path)
            order.append(key)
        if route not in entry.found_by:
            entry.found_by.append(route)
        if name and not entry.explicit_name:
            entry.explicit_name = name
        if dist and not entry.dist_name:
            entry.dist_name = dist
        return True

    for name, path in sorted((explicit or {}).items()):
        if not os.path.exists(os.path.join(cwd, os.path.expanduser(str(path)))):
            warnings.append("repo %s: %s does not exist" % (name, path))
            continue
        add(str(path), "explicit", name=str(name), require_git=False)

    cwd_in_repo = add(cwd, "cwd")

    target = parse_command(argv)
    if target is not None:
        kind, value = target
        script = None
        if kind == "script":
            script = value
        else:
            search = [cwd] + [os.path.join(cwd, p) for p in _pythonpath(env)] + list(site_dirs)
            script = module_file(value, search)
            if script is None:
                warnings.append("module %s of the command not found on the search path" % value)
        if script is not None:
            full = os.path.join(cwd, script)
            if not os.path.exists(full):
                warnings.append("script %s of the command does not exist" % script)
            elif not add(os.path.dirname(os.path.abspath(full)), "script"):
                warnings.append("script %s is not inside a git repository (no .git): code state unknown" % script)

    for dist, src in editable_installs(site_dirs):
        if os.path.isdir(src) and not is_own_checkout(src):
            add(src, "editable", dist=dist)

    for entry in _pythonpath(env):
        full = os.path.join(cwd, entry)
        if os.path.isdir(full) and not is_own_checkout(full):
            add(entry, "pythonpath")

    entries = [found[k] for k in order]
    if not cwd_in_repo and not entries:
        warnings.append("working directory is not inside a git repository")
    for e in entries:
        e.found_by.sort(key=ROUTES.index)
    _assign_names(entries)
    return entries


_OWN_SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The checkout holding this file: ``<checkout>/relaxrepro/collect/repos.py``."""


def is_own_checkout(path: str) -> bool:
    """``path`` is relaxrepro's own source checkout (the recorder, not the training code).

    ``PYTHONPATH=/src/relaxrepro`` or ``pip install -e relaxrepro`` would otherwise record the
    tool's repo as part of every run; its version is in ``collection.tool`` already. A trainer that
    vendors relaxrepro inside its own repo is not affected: that repo's top is not this checkout.
    """
    top = gitfs.find_toplevel(path)
    if top is None:
        return False
    try:
        return os.path.samefile(top, _OWN_SOURCE)
    except OSError:
        return False


def _pythonpath(env: Mapping[str, str]) -> List[str]:
    return [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep) if p]


def _assign_names(entries: List[Found]) -> None:
    """Explicit name, else distribution name, else directory name; later clashes get a path digest.

    The digest of the path (not a counter) keeps a name stable when another repo comes or goes.
    """
    taken: Dict[str, Found] = {}
    ranked = sorted(entries, key=lambda e: (0 if e.explicit_name else 1, e.top))
    for e in ranked:
        base = e.explicit_name or e.dist_name or os.path.basename(e.top.rstrip(os.sep)) or "root"
        name = base
        if name in taken and not e.explicit_name:
            name = "%s-%s" % (base, sha256_hex(os.path.realpath(e.top).encode("utf-8", "surrogateescape"))[:6])
        taken[name] = e
        e.name = name
