"""The container judgement of ``check``: is this machine in the image the run was recorded in?

Pure: the recorded ``container`` section and this machine's (or another run's) in, a verdict word out.
Images are the same when their content digests are; a name alone (a tag, a SIF's file name) can be
moved to other content, so it never proves the same image.
"""

from __future__ import annotations

from ..manifest.fields import scalar
from ..std.records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Mapping, Optional

SAME, NAME_ONLY, OTHER_DIGEST, OTHER_IMAGE, NONE_HERE, UNKNOWN, NOT_RECORDED = (
    "same", "name-only", "other-digest", "other-image", "none-here", "unknown", "not-recorded")
"""The outcomes of :func:`compare`; ``check`` turns them into PASS, WARN or FAIL."""


class Judgement(Record):
    outcome: str
    recorded: str
    here: str
    note: str = ""


_KINDS = {"podman": "an image id", "sif": "a SIF file's sha256"}
"""What a digest is a digest of, by ``digest_source``; any other source gives a registry (manifest) digest."""


def _kind(image: Mapping[str, Any]) -> str:
    return _KINDS.get(scalar(image.get("digest_source")) or "", "a registry digest")


def _image(c: Mapping[str, Any]) -> Mapping[str, Any]:
    image = c.get("image")
    return image if isinstance(image, dict) else {}


def describe(c: Optional[Mapping[str, Any]]) -> str:
    """A container as a table cell: ``NAME@sha256:<12 hex>`` (or its runtime), ``-`` for none."""
    if not isinstance(c, dict) or not c:
        return "-"
    image = _image(c)
    name, digest = scalar(image.get("name")), scalar(image.get("digest"))
    text = name or scalar(image.get("path")) or ""
    if digest:
        text += "@" + digest[:19]
    runtime = scalar(c.get("runtime"))
    if not text:
        return "%s, image unknown" % runtime if runtime else "-"
    return "%s (%s)" % (text, runtime) if runtime else text


def compare(rec: Any, here: Any) -> Judgement:
    """The recorded container (``rec``) against this machine's (``here``); None or {}: no container."""
    rec = rec if isinstance(rec, dict) else {}
    here = here if isinstance(here, dict) else {}
    a, b = describe(rec), describe(here)
    ri, hi = _image(rec), _image(here)
    if not rec or not (ri or scalar(rec.get("runtime"))):
        return Judgement(outcome=NOT_RECORDED, recorded="-", here=b)
    if not here:
        return Judgement(outcome=NONE_HERE, recorded=a, here="none", note="recorded in a container, none here")
    rd, hd = scalar(ri.get("digest")), scalar(hi.get("digest"))
    rn, hn = scalar(ri.get("name")), scalar(hi.get("name"))
    runtimes = scalar(rec.get("runtime")), scalar(here.get("runtime"))
    if not (rd or rn or scalar(ri.get("path"))):
        # The run's image was never identified (Docker shows none inside): only its runtime can be compared.
        if runtimes[0] == runtimes[1]:
            return Judgement(outcome=NOT_RECORDED, recorded=a, here=b, note="the run's image was not identified")
        return Judgement(outcome=UNKNOWN, recorded=a, here=b, note="recorded in %s (image not identified), here in %s"
                         % (runtimes[0], runtimes[1] or "an unidentified container"))
    if rd and hd:
        if rd == hd:
            return Judgement(outcome=SAME, recorded=a, here=b)
        if _kind(ri) != _kind(hi):  # the same image has one digest of each kind: these say nothing
            return Judgement(outcome=NAME_ONLY if rn and rn == hn else UNKNOWN, recorded=a, here=b,
                             note="digests of different kinds (recorded: %s, here: %s): cannot compare"
                             % (_kind(ri), _kind(hi)))
        if rn and rn == hn:
            return Judgement(outcome=OTHER_DIGEST, recorded=a, here=b, note="same name, other digest")
        return Judgement(outcome=OTHER_IMAGE, recorded=a, here=b, note="another image")
    if rn and hn and rn != hn:
        return Judgement(outcome=OTHER_IMAGE, recorded=a, here=b, note="another image")
    if rn and rn == hn:
        return Judgement(outcome=NAME_ONLY, recorded=a, here=b,
                         note="same name; no digest %s to compare" % ("recorded" if not rd else "here"))
    if all(runtimes) and runtimes[0] != runtimes[1]:
        return Judgement(outcome=OTHER_IMAGE, recorded=a, here=b,
                         note="recorded in %s, here in %s" % runtimes)
    return Judgement(outcome=UNKNOWN, recorded=a, here=b,
                     note="the image here is not identified (set RELAXREPRO_IMAGE=NAME@sha256:... to compare)")
