"""A recorded training interpreter's packages, back as something an installer reads, and judged against
an interpreter here: pure, a manifest in, text or a :class:`~relaxrepro.analyze.check.Report` out.

Every distribution of ``environment.packages`` becomes an exact pin (``name==version``); one installed from
git (``environment.vcs_installs``) becomes ``name @ git+URL@commit``, one from an archive URL
(``environment.direct_installs``) ``name @ URL``; one that no index can give back (installed editable,
``environment.editable``; from a local wheel or directory; from a URL that was redacted; a git install without
a recorded commit; a name or version an installer would misread) becomes a comment saying why. Nothing recorded as
redacted is ever filled back in.
"""

from __future__ import annotations

import json
import re

from ..collect.probes.container_parse import DIGEST, registry_name
from ..manifest import fields
from ..manifest.fields import get, scalar, section
from ..std.records import Factory, Record
from ..std.text import safe_text
from .check import FAIL, INFO, PASS, WARN, Item, Report

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

MARK = "# Written by relaxrepro env"
"""How every exported file begins: ``env -o`` replaces an existing file only when it begins so."""

FORMATS = ("requirements", "conda", "dockerfile")

_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
"""A distribution name as PEP 508 spells one."""
_VERSION_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.!+_-]*[A-Za-z0-9])?$")
"""The characters of a PEP 440 version (epoch ``!``, local ``+``): nothing a requirements line, a YAML
scalar or a shell word would read as something else."""
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"\\`$<>]+$")
"""A URL a requirement, a YAML scalar and a single-quoted shell word all keep whole: no space, no quote,
no ``<`` or ``>`` (which is how a redaction placeholder reads)."""
_COMMIT_RE = re.compile(r"^[0-9a-fA-F]{7,64}$")
_IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*$")
"""An image reference FROM takes (lower-case repository, a tag), without its digest."""


class NotExportable(ValueError):
    """The manifest has nothing an installer could read (no package list): one line for the user."""


class Pin(Record):
    """One recorded distribution: ``line`` is what an installer reads, or ``why`` says why there is none."""

    name: str
    version: str
    line: Optional[str] = None
    why: str = ""


class Plan(Record):
    """What a manifest says about the environment to rebuild, whatever the format."""

    run_id: str
    pins: List[Pin] = Factory(list)
    python: Optional[str] = None
    implementation: Optional[str] = None
    image: Optional[str] = None
    """A reference ``FROM`` takes (``name@sha256:...`` when a digest was recorded), else None."""
    image_note: str = ""
    cuda: Optional[str] = None
    driver: Optional[str] = None
    local: List[str] = Factory(list)
    """Git installs pinned at a ``file:`` URL: the pin works only where that repository is."""
    notes: List[str] = Factory(list)
    """What makes the file incomplete (a package list the size cap cut): said in the file and on stderr."""

    @property
    def lines(self) -> List[str]:
        return [p.line for p in self.pins if p.line]

    @property
    def unpinned(self) -> List[Pin]:
        return [p for p in self.pins if not p.line]


def plan(doc: Mapping[str, Any]) -> Plan:
    """Read what the manifest records of its training interpreter's environment; :class:`NotExportable`
    when it records no package list."""
    env = section(doc, "environment")
    packages = env.get("packages")
    if not isinstance(packages, dict) or not packages:
        raise NotExportable("the manifest records no package list (environment.packages)%s" % (
            "; only environment.key_packages, too few to rebuild the environment from"
            if isinstance(env.get("key_packages"), dict) and env.get("key_packages") else ""))
    editable, vcs, direct = (env.get(k) if isinstance(env.get(k), dict) else {}
                             for k in ("editable", "vcs_installs", "direct_installs"))
    out = Plan(run_id=scalar(doc.get("run_id")) or "unknown")
    for name in sorted(packages, key=str):
        version = packages[name]
        version = scalar(version) if isinstance(version, (str, int, float)) and not isinstance(version, bool) else None
        pin = _pin(str(name), version or "", editable.get(name), vcs.get(name), direct.get(name))
        out.pins.append(pin)
        if pin.line and " @ " in pin.line and "+file:" in pin.line:
            out.local.append(pin.name)
    if fields.is_relax(doc):
        out.notes.append("a manifest written by Relax records only its own packages (%s), not the whole "
                         "environment" % ", ".join(fields.RELAX_PACKAGES))
    cut = env.get("packages_truncated")
    if isinstance(cut, dict):
        out.notes.append("the manifest kept %d of %s packages (environment.packages_truncated): the others are "
                         "missing here" % (len(packages), safe_text(cut.get("count", "more"))))
    version = scalar(fields.python_version(doc))
    out.python = version if version and _VERSION_RE.match(version) else None
    impl = scalar(get(doc, "environment.python.implementation", None))
    out.implementation = impl.lower() if impl and _NAME_RE.match(impl) else None
    out.image, out.image_note = _image(doc)
    cuda = scalar(get(doc, "hardware.cuda_version", None)) or scalar(get(doc, "hardware.cuda.runtime", None))
    out.cuda = cuda if cuda and _VERSION_RE.match(cuda) else None
    driver = scalar(get(doc, "hardware.driver_version", None))
    out.driver = driver if driver and _VERSION_RE.match(driver) else None
    return out


def _pin(name: str, version: str, editable: Any, vcs: Any, direct: Any) -> Pin:
    pin = Pin(name=name, version=version)
    if not _NAME_RE.match(name):
        pin.why = "not a distribution name an installer reads"
    elif not _VERSION_RE.match(version):
        pin.why = "no version recorded" if not version else "not a version an installer reads"
    elif isinstance(editable, dict) and editable.get("editable") is not False:
        where = scalar(editable.get("url"))
        pin.why = "installed editable%s: install its source tree (relaxrepro restore rebuilds recorded repos)" % (
            " from %s" % where if where else "")
    elif isinstance(vcs, dict):
        kind = scalar(vcs.get("vcs")) or "git"
        url = scalar(vcs.get("url")) or ""
        commit = scalar(vcs.get("commit")) or ""
        if fields.redacted_parts(url) or "***" in url:
            pin.why = "installed from %s at %s, a URL that was redacted: give it yourself" % (kind, url or "?")
        elif not _URL_RE.match(url) or not _NAME_RE.match(kind):
            pin.why = "installed from %s at %s, not a URL an installer reads" % (kind, url or "no URL")
        elif not _COMMIT_RE.match(commit):
            pin.why = "installed from %s+%s without a recorded commit" % (kind, url)
        else:
            pin.line = "%s @ %s+%s@%s" % (name, kind, url, commit)
    elif isinstance(direct, dict):
        url = scalar(direct.get("url")) or ""
        if url.startswith("file:") or not url:
            pin.why = "installed from %s, a file on the recording machine: no index gives it back" % (url or "a file")
        elif fields.redacted_parts(url) or "***" in url:
            pin.why = "installed from %s, a URL that was redacted: give it yourself" % url
        elif not _URL_RE.match(url):
            pin.why = "installed from %s, not a URL an installer reads" % url
        else:
            pin.line = "%s @ %s" % (name, url)
    else:
        pin.line = "%s==%s" % (name, version)
    return pin


def _image(doc: Mapping[str, Any]) -> Tuple[Optional[str], str]:
    """The recorded container image as ``FROM`` takes it, and a note on what was recorded."""
    image = section(doc, "container.image")
    name = scalar(image.get("name"))
    runtime = scalar(get(doc, "container.runtime", None)) or "container"
    if not name:
        return None, ""
    shown = safe_text(name, 200)
    digest = scalar(image.get("digest"))
    digest = digest if digest and DIGEST.match(digest) else None
    ref, _, given = registry_name(name).partition("@")
    digest = digest or (given if DIGEST.match(given) else None)
    if fields.redacted_parts(name) or ref.endswith((".sif", ".simg", ".sqsh", ".squashfs")) \
            or not _IMAGE_RE.match(ref):
        return None, "the run ran in %s image %s, which FROM cannot name: start from the image it was built from" % (
            safe_text(runtime), shown)
    if digest:
        source = scalar(image.get("digest_source"))
        return "%s@%s" % (ref, digest), "the run ran in %s image %s (digest%s)" % (
            safe_text(runtime), shown, " from %s" % safe_text(source) if source else "")
    return ref, "the run ran in %s image %s; no digest was recorded, so the tag may name another image now" % (
        safe_text(runtime), shown)


# -- the formats ----------------------------------------------------------------------------------------------


def _head(p: Plan, form: str) -> List[str]:
    lines = ["%s (--format %s) from run %s: its training interpreter's packages." % (MARK, form, safe_text(p.run_id))]
    if p.python:
        lines.append("# python %s%s" % (p.python, " (%s)" % p.implementation if p.implementation else ""))
    else:
        lines.append("# python: version not recorded")
    if p.cuda:
        wheels = any(pin.line and pin.name.startswith("nvidia-") for pin in p.pins)
        lines.append("# CUDA %s%s recorded: the host needs a driver that supports it%s" % (
            p.cuda, " with driver %s" % p.driver if p.driver else "",
            "; the CUDA libraries are the nvidia-* wheels below" if wheels else ""))
    lines.extend("# incomplete: %s" % n for n in p.notes)
    if p.local:
        lines.append("# installed from a git repository on the recording machine's disk (file:), found only where "
                     "it is: %s" % ", ".join(p.local))
    return lines


def _tail(p: Plan) -> List[str]:
    return ["# not pinned: %s %s: %s" % (safe_text(u.name, 100), safe_text(u.version or "-", 60), safe_text(u.why))
            for u in p.unpinned]


def requirements(p: Plan) -> str:
    """A pip requirements file: ``python -m pip install -r FILE``."""
    lines = _head(p, "requirements")
    if p.image_note:
        lines.append("# " + p.image_note)
    return "\n".join(lines + p.lines + _tail(p)) + "\n"


def conda(p: Plan) -> str:
    """A conda ``environment.yml``: Python from conda, every package through pip, pinned as for pip."""
    lines = _head(p, "conda")
    if p.image_note:
        lines.append("# " + p.image_note)
    mm = fields.major_minor(p.python)
    lines += ["name: relaxrepro-%s" % re.sub(r"[^A-Za-z0-9._-]", "-", p.run_id), "channels:", "  - conda-forge",
              "dependencies:"]
    if mm and p.implementation in (None, "cpython"):
        lines.append("  - python=%s" % mm)
    lines += ["  - pip", "  - pip:"]
    lines += ["      - %s" % json.dumps(line) for line in p.lines]  # a JSON string is a YAML double-quoted scalar
    return "\n".join(lines + _tail(p)) + "\n"


def dockerfile(p: Plan) -> str:
    """A Dockerfile: ``FROM`` the recorded image (by digest when recorded), else the recorded Python's
    official image, then one ``pip install`` of every pin."""
    lines = _head(p, "dockerfile")
    if p.image_note:
        lines.append("# " + p.image_note)
    base = p.image
    if base is None:
        tag = p.python if p.python and re.match(r"^\d+\.\d+(\.\d+)?$", p.python) else "3"
        base = "python:%s-slim" % tag
    lines.append("FROM %s" % base)
    if any(" @ " in line for line in p.lines):
        if p.image is None:
            lines.append("RUN apt-get update && apt-get install -y --no-install-recommends git "
                         "&& rm -rf /var/lib/apt/lists/*")
        else:
            lines.append("# the git installs below need git in the image")
    if p.lines:
        words = ["'%s'" % line for line in p.lines]  # _pin lets no quote, space or backslash into a line
        lines.append("RUN python -m pip install --no-cache-dir \\")
        lines += ["    %s \\" % w for w in words[:-1]] + ["    %s" % words[-1]]
    return "\n".join(lines + _tail(p)) + "\n"


WRITERS: Dict[str, Callable[[Plan], str]] = {"requirements": requirements, "conda": conda, "dockerfile": dockerfile}


def export(doc: Mapping[str, Any], form: str) -> Tuple[str, Plan]:
    """The text of ``form`` for the manifest ``doc``, and the plan it came from (ValueError: unknown form;
    :class:`NotExportable`: nothing to export)."""
    if form not in WRITERS:
        raise ValueError("unknown format %r (one of: %s)" % (form, ", ".join(FORMATS)))
    p = plan(doc)
    return WRITERS[form](p), p


# -- the judgement ----------------------------------------------------------------------------------------------


def judge(rec: Mapping[str, Any], here: Mapping[str, Any]) -> Report:
    """Each recorded package against the interpreter here: same version (and commit, for a git install) PASS,
    another version or not installed FAIL, installed here only WARN; the Python version too."""
    p = plan(rec)
    report = Report(run_id=p.run_id, warnings=list(p.notes))
    exe_here = scalar(get(here, "environment.python.executable", None)) or "-"
    exe_rec = scalar(get(rec, "environment.python.executable", None)) or "-"
    report.items.append(Item("interpreter", exe_rec, exe_here, INFO))
    report.items.append(_python_item(p.python, scalar(fields.python_version(here))))
    got = section(here, "environment")
    have = got.get("packages") if isinstance(got.get("packages"), dict) else None
    if have is None and get(here, "collection.probes.packages.status", None) == "absent":
        have = {}  # an interpreter with no distributions at all: every recorded one is missing
    if have is None:
        report.items.append(Item("packages", "%d recorded" % len(p.pins), "-", FAIL,
                                 "no package list could be read from the interpreter here"))
        return report
    have = {fields.norm_package(str(k)): scalar(v) or "" for k, v in have.items()}
    commits_here = {fields.norm_package(str(k)): scalar(v.get("commit")) for k, v in
                    (got.get("vcs_installs") or {}).items() if isinstance(v, dict)}
    rec_vcs = section(rec, "environment.vcs_installs")
    recorded = set()
    for pin in p.pins:
        key = fields.norm_package(pin.name)
        recorded.add(key)
        label = "package " + safe_text(pin.name, 60)
        b = have.get(key)
        commit = scalar(rec_vcs[pin.name].get("commit")) if isinstance(rec_vcs.get(pin.name), dict) else None
        if b is None:
            report.items.append(Item(label, pin.version or "-", "not installed", FAIL, pin.why))
        elif b != pin.version:
            report.items.append(Item(label, pin.version or "-", b, FAIL, pin.why))
        elif commit and commits_here.get(key) != commit:
            report.items.append(Item(label, "%s %s" % (pin.version, commit[:12]),
                                     "%s %s" % (b, (commits_here.get(key) or "no commit")[:12]), FAIL,
                                     "another commit of the git install"))
        else:
            report.items.append(Item(label, pin.version, b, PASS, pin.why))
    for key in sorted(set(have) - recorded) if not fields.is_relax(rec) else ():  # Relax: the others unrecorded
        report.items.append(Item("package " + safe_text(key, 60), "not installed", have[key], WARN,
                                 "installed here, not in the run"))
    return report


def _python_item(rec: Optional[str], here: Optional[str]) -> Item:
    if not rec:
        return Item("python", "-", here or "-", WARN, "the manifest records no Python version")
    if not here:
        return Item("python", rec, "-", FAIL, "the interpreter here could not be asked")
    if rec == here:
        return Item("python", rec, here, PASS)
    if fields.major_minor(rec) == fields.major_minor(here):
        return Item("python", rec, here, WARN, "another patch release")
    return Item("python", rec, here, FAIL, "another minor: compiled wheels differ")
