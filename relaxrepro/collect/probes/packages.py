"""Installed distributions of the training interpreter, read from their metadata directories.

No ``pip freeze`` (about 700 ms) and no ``importlib.metadata`` (it would describe relaxrepro's own
interpreter): each ``*.dist-info``/``*.egg-info`` on the training interpreter's ``sys.path`` gives its
``Name``/``Version`` header lines and, for direct-URL installs, its PEP 610 ``direct_url.json``.
The first distribution of a name on the path wins, as it does at import time.
"""

from __future__ import annotations

import json
import os
import re
import stat

from ...manifest.model import is_key_package
from ...manifest.redact import strip_credentials
from ...std.files import READ_FLAGS
from ...std.sha import sha256_hex
from .. import interpreter
from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Tuple

_HEADER_BYTES = 1024
"""Name and Version are the first header lines: read 1 KB, more only when the headers go on."""
_MORE_BYTES = 65536

_MAX_WARNINGS = 10

def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_metadata(text: str) -> Tuple[Optional[str], Optional[str]]:
    """``(Name, Version)`` from the RFC 822 headers of METADATA / PKG-INFO (stops at the body)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    name = version = None
    # Fast path: both open the headers (lines 2 and 3 as every build backend writes them).
    for line in text.split("\n", 8)[:8]:
        if not line:
            break  # end of headers
        key = line[:8].lower()
        if key.startswith("name:") and name is None:
            name = line[5:].strip() or None
        elif key == "version:" and version is None:
            version = line[8:].strip() or None
        if name and version:
            return name, version
    head = text.split("\n\n", 1)[0]
    m_name = _NAME_RE.search(head) if name is None else None
    m_version = _VERSION_RE.search(head) if version is None else None
    if m_name:
        name = m_name.group(1).strip() or None
    if m_version:
        version = m_version.group(1).strip() or None
    return name, version


_NAME_RE = re.compile(r"^name[ \t]*:(.*)$", re.MULTILINE | re.IGNORECASE)
_VERSION_RE = re.compile(r"^version[ \t]*:(.*)$", re.MULTILINE | re.IGNORECASE)


def parse_direct_url(text: str) -> Optional[Dict[str, Any]]:
    """PEP 610 ``direct_url.json`` -> {url, editable, vcs, commit, requested_revision}; None if unusable."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    out: Dict[str, Any] = {"url": strip_credentials(data["url"], users="not-git", query="keep")}
    dir_info = data.get("dir_info")
    out["editable"] = bool(isinstance(dir_info, dict) and dir_info.get("editable"))
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict):
        if isinstance(vcs.get("vcs"), str):
            out["vcs"] = vcs["vcs"]
        if isinstance(vcs.get("commit_id"), str):
            out["commit"] = vcs["commit_id"]
        if isinstance(vcs.get("requested_revision"), str):
            out["requested_revision"] = vcs["requested_revision"]
    return out


def _read_head(path: str, limit: int = _HEADER_BYTES) -> Optional[str]:
    # os.open/os.read: a third of the cost of open() per file, which matters for 2,000 dists. The
    # flags and the fstat are std.files' rule (a FIFO named METADATA must not block the probe).
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


class Distribution:
    __slots__ = ("name", "version", "location", "direct_url")

    def __init__(self, name: str, version: str, location: str, direct_url: Optional[Dict[str, Any]]) -> None:
        self.name = name
        self.version = version
        self.location = location
        self.direct_url = direct_url


def scan(dirs: List[str]) -> Tuple[Dict[str, Distribution], List[str]]:
    """Distributions on ``dirs`` by normalised name (first on the path wins), and warnings."""
    found: Dict[str, Distribution] = {}
    warnings: List[str] = []
    seen_dirs = set()
    for directory in dirs:
        real = os.path.realpath(directory)
        if real in seen_dirs:
            continue
        seen_dirs.add(real)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            dist = _read_dist(entry, directory, warnings)
            if dist is None:
                continue
            key = normalize(dist.name)
            if key not in found:
                found[key] = dist
    return found, warnings


def _read_dist(entry: "os.DirEntry[str]", location: str, warnings: List[str]) -> Optional[Distribution]:
    name = entry.name
    # String concatenation, not os.path.join: this runs once per distribution (2,000 in big envs).
    if name.endswith(".dist-info"):
        meta_path, is_dir = entry.path + "/METADATA", True
    elif name.endswith(".egg-info"):
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        meta_path = entry.path + "/PKG-INFO" if is_dir else entry.path
    else:
        return None
    text = _read_head(meta_path)
    if text is None:
        warnings.append("%s: metadata unreadable or missing; skipped" % entry.path)
        return None
    full = len(text) >= _HEADER_BYTES
    # Name and Version open the headers; a cut-off last line must not yield half a version.
    dist_name, version = parse_metadata(text[:text.rfind("\n") + 1] if full else text)
    if full and not (dist_name and version):
        dist_name, version = parse_metadata(_read_head(meta_path, _MORE_BYTES) or "")
    if not dist_name or not version:
        warnings.append("%s: metadata without %s; skipped" % (entry.path, "Name" if not dist_name else "Version"))
        return None
    direct = None
    if is_dir:
        raw = _read_head(entry.path + "/direct_url.json", limit=_MORE_BYTES)
        if raw is not None:
            direct = parse_direct_url(raw)
            if direct is None:
                warnings.append("%s: direct_url.json is not valid PEP 610 JSON; ignored" % entry.path)
    return Distribution(dist_name, version, location, direct)


def digest(packages: Dict[str, str]) -> str:
    """sha256 over sorted ``name==version`` lines: equal iff the installed sets are equal."""
    lines = "".join("%s==%s\n" % (k, packages[k]) for k in sorted(packages))
    return "sha256:" + sha256_hex(lines.encode("utf-8"))




def installed(ctx: Context) -> Dict[str, Any]:
    """``{"dists": {name: Distribution}, "warnings": [...]}`` for the training interpreter, computed once."""

    def compute() -> Dict[str, Any]:
        interp = interpreter.resolve(ctx)
        dists, warnings = scan(interp.site_dirs)
        return {"dists": dists, "warnings": warnings}

    return ctx.memo("packages", compute)


def collect(ctx: Context) -> Outcome:
    got = installed(ctx)
    dists: Dict[str, Distribution] = got["dists"]
    out = Outcome()
    warnings = got["warnings"]
    for w in warnings[:_MAX_WARNINGS]:
        out.warn(w)
    if len(warnings) > _MAX_WARNINGS:
        out.warn("%d more broken distributions skipped" % (len(warnings) - _MAX_WARNINGS))
    if not dists:
        out.status = "absent"
        out.warnings.append("no distributions found on the training interpreter's path")
        return out
    packages = {name: dists[name].version for name in sorted(dists)}
    env: Dict[str, Any] = {
        "packages": packages,
        "packages_count": len(packages),
        "packages_digest": digest(packages),
        "key_packages": {n: v for n, v in packages.items() if is_key_package(n)},
    }
    editable: Dict[str, Any] = {}
    vcs: Dict[str, Any] = {}
    other: Dict[str, Any] = {}
    for name in sorted(dists):
        direct = dists[name].direct_url
        if direct is None:
            continue
        if direct.get("editable"):
            editable[name] = direct
        if "vcs" in direct or "commit" in direct:
            vcs[name] = direct
        elif not direct.get("editable"):
            other[name] = direct  # a local wheel, directory or archive URL: no index gives it back
    if editable:
        env["editable"] = editable
    if vcs:
        env["vcs_installs"] = vcs
    if other:
        env["direct_installs"] = other
    out.data = {"environment": env}
    return out
