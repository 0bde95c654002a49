"""Field access for the reading commands (check, diff, rerun, restore, lineage, compare): safe lookups
into documents that may lack any field or hold an odd type, package and version rules, redaction
placeholders.

Cheap to import: ``diff`` must start fast on a laptop with nothing but Python, so nothing here imports
a probe, the writer or the manifest assembler.
"""

from __future__ import annotations

import re

from .numbers import ZERO_KEY, digits_key

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

HOME_PLACEHOLDERS: Tuple[str, ...] = ("<HOME>", "<home>")
"""Redaction's stand-ins for a home directory: ours, then the Relax trainer's (its ``relax/utils/manifest.py``
writes ``<home>``). Each means "this machine's home" wherever a recorded path is resolved."""

PLACEHOLDERS: Tuple[str, ...] = HOME_PLACEHOLDERS + (
    "<redacted>", "<internal-host>", "<internal-address>", "<user>", "<private-key>",
    # Relax's own spellings (it writes <redacted>, <home>, <internal-host> too):
    "<host>", "<slurm-nodes>",
)
"""What redaction leaves in place of a value, by either tool; ``***`` (a masked secret such as ``wand***``)
is the other. The one list every reader asks "was this value redacted?"."""

MISSING = object()
"""Returned by :func:`get` when a field is absent (distinct from a recorded ``null``)."""


# -- safe lookups -------------------------------------------------------------------------------

def get(doc: Any, dotted: str, default: Any = MISSING) -> Any:
    """``doc["a"]["b"]`` for ``"a.b"``; ``default`` when any step is absent or not an object."""
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def section(doc: Any, dotted: str) -> Dict[str, Any]:
    """The object at ``dotted``, or ``{}`` when absent or of another type."""
    value = get(doc, dotted, None)
    return value if isinstance(value, dict) else {}


def scalar(value: Any) -> Optional[str]:
    """A recorded scalar as text; None for absent, null, empty or structured values."""
    if value is MISSING or value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    return text or None


_SEPARATORS = re.compile(r"[-_.]+")
_NORMAL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def norm_package(name: str) -> str:
    """PEP 503 name normalisation: ``Flash_Attn`` and ``flash-attn`` are one package."""
    got = _NORMED.get(name)
    if got is None:
        # most names already are normal: skip the substitution (diff must be fast)
        got = name if _NORMAL_NAME.match(name) else _SEPARATORS.sub("-", name).lower()
        if len(_NORMED) < 50000:  # a cold index reads the same few thousand names in every manifest
            _NORMED[name] = got
    return got


_NORMED: Dict[str, str] = {}


def packages(doc: Any) -> Optional[Dict[str, str]]:
    """Installed distributions by normalised name, from ``packages`` or else ``key_packages``.

    None when the manifest recorded neither (the probe was absent), which is not "none installed".
    """
    env = section(doc, "environment")
    found: Optional[Dict[str, str]] = None
    for key in ("key_packages", "packages"):  # full list last, so it wins on a clash
        table = env.get(key)
        if isinstance(table, dict):
            found = found or {}
            normed = _NORMED.get
            for name, version in table.items():
                if type(version) is str:  # nearly all: one test, not three (a cold index reads 100 per run)
                    version = version.strip()
                elif isinstance(version, (int, float)) and not isinstance(version, bool):
                    version = str(version)
                else:
                    continue
                if version and isinstance(name, str):
                    found[normed(name) or norm_package(name)] = version
    return found


def config_files(doc: Any) -> Optional[Dict[str, Dict[str, Any]]]:
    """``config.files`` by path, each an object with ``sha256`` where one is known; None when not recorded.

    Three forms are read: relaxrepro's earlier list of ``{path, sha256, size, ...}``, the object keyed by
    path that Relax writes (``{path: digest}``, the form its schema requires) and that object with an
    object per path. A digest's ``sha256:`` prefix is dropped, so the forms compare equal.
    """
    files = get(doc, "config.files", None)
    out: Dict[str, Dict[str, Any]] = {}
    if isinstance(files, list):
        for f in files:
            if isinstance(f, dict) and scalar(f.get("path")):
                out[str(f["path"])] = dict(f)
    elif isinstance(files, dict):
        for path, f in files.items():
            out[str(path)] = dict(f) if isinstance(f, dict) else {"sha256": f}
    else:
        return None
    for entry in out.values():
        digest = scalar(entry.get("sha256"))
        if digest is not None and digest.startswith("sha256:"):
            entry["sha256"] = digest[len("sha256:"):]
    return out


# -- seeds --------------------------------------------------------------------------------------

SEED_KEYS: Tuple[str, ...] = ("seed", "random_seed", "data_seed", "rng_seed", "manual_seed")
"""Argument names that are seeds, as are ``*_seed``: the seeds deriver and the reader of Relax's
``config.arguments`` pick them out by the same rule."""


def find_seeds(args: Mapping[str, Any], prefix: str = "", depth: int = 0) -> Dict[str, Any]:
    """Every ``seed``/``random_seed``/``*_seed`` value in the args (nested keys dotted)."""
    out: Dict[str, Any] = {}
    if depth > 8:
        return out
    for key, value in args.items():
        name = prefix + str(key)
        leaf = str(key).split(".")[-1].lower().replace("-", "_")
        if isinstance(value, dict):
            out.update(find_seeds(value, name + ".", depth + 1))
        elif (leaf in SEED_KEYS or leaf.endswith("_seed")) and not isinstance(value, (list, dict)):
            out[name] = value
    return out


# -- versions -----------------------------------------------------------------------------------

_RELEASE = re.compile(r"^[vV]?([0-9]+(?:\.[0-9]+)*)(.*)$")


def parse_version(text: Any) -> Optional[Tuple[Tuple[Tuple[int, str], ...], str, str]]:
    """(release numbers, suffix such as ``rc1``/``.post1``, local part after ``+``) or None.

    Each release number is its :func:`~relaxrepro.manifest.numbers.digits_key`: ordered exactly at any
    length (a 5,000-digit "version" compares, where ``int()`` would refuse it)."""
    value = scalar(text)
    if value is None:
        return None
    public, _, local = value.partition("+")
    m = _RELEASE.match(public.strip())
    if not m:
        return None
    return tuple(digits_key(x) for x in m.group(1).split(".")), m.group(2), local


def _padded(release: Tuple[Tuple[int, str], ...], n: int) -> Tuple[Tuple[int, str], ...]:
    return release + (ZERO_KEY,) * (n - len(release))


def change_level(old: Any, new: Any) -> str:
    """How two versions differ: ``equal``, ``local``, ``patch``, ``minor``, ``major`` or ``unknown``.

    ``2.3.0+cu121`` vs ``2.3.0+cu118`` is ``local``; ``12.1.105`` vs ``12.1.66`` is ``patch``;
    a pre-release or post-release suffix counts as ``patch``. Unparseable and different is
    ``unknown`` (a git describe string, a date).
    """
    a, b = scalar(old), scalar(new)
    if a == b:
        return "equal"
    pa, pb = parse_version(a), parse_version(b)
    if pa is None or pb is None:
        return "unknown"
    ra, rb = _padded(pa[0], 3), _padded(pb[0], 3)
    if ra[0] != rb[0]:
        return "major"
    if ra[1] != rb[1]:
        return "minor"
    if ra != rb or pa[1] != pb[1]:
        return "patch"
    if pa[2] != pb[2]:
        return "local"
    return "equal"  # "12.1" and "12.1.0"


def version_order(old: Any, new: Any) -> int:
    """-1 when ``new`` is older than ``old`` (a downgrade), 1 when newer, 0 when equal or unknown."""
    pa, pb = parse_version(old), parse_version(new)
    if pa is None or pb is None:
        return 0
    ra, rb = _padded(pa[0], 4), _padded(pb[0], 4)
    if ra != rb:
        return 1 if rb > ra else -1
    if pa[1] != pb[1]:
        # a suffix-less release is newer than its pre-releases ("2.4.0" > "2.4.0rc1")
        if not pb[1]:
            return 1 if not pa[1].startswith((".post", "post", "-post")) else -1
        if not pa[1]:
            return -1 if not pb[1].startswith((".post", "post", "-post")) else 1
        return 1 if pb[1] > pa[1] else -1
    return 0


def major_minor(text: Any) -> Optional[str]:
    parsed = parse_version(text)
    if parsed is None:
        return None
    release = _padded(parsed[0], 2)
    return "%s.%s" % (release[0][1], release[1][1])


# -- redaction placeholders ---------------------------------------------------------------------

def redacted_parts(value: Any) -> List[str]:
    """The placeholders redaction left inside ``value`` (``<HOME>``, ``wand***`` ...), in order."""
    if not isinstance(value, str):
        return []
    found = [p for p in PLACEHOLDERS if p in value]
    found.extend(m.group(0) for m in re.finditer(r"\S{0,4}\*\*\*", value))
    return found


def home_prefix(path: Any) -> Optional[str]:
    """The home placeholder ``path`` starts with (``<HOME>`` or Relax's ``<home>``, alone or before a
    ``/``), or None."""
    if isinstance(path, str):
        for mark in HOME_PLACEHOLDERS:
            if path == mark or path.startswith(mark + "/"):
                return mark
    return None


def resolve_home(path: Any, home: Optional[str]) -> Optional[str]:
    """A recorded path with a leading ``<HOME>`` (or ``<home>``) resolved against this machine's home."""
    if not isinstance(path, str) or not path:
        return None
    mark = home_prefix(path)
    if mark is not None:
        if not home:
            return None
        return home.rstrip("/") + path[len(mark):]
    return path


def patch_text(patch: Any) -> Optional[str]:
    """The inline text of a recorded patch (``{"text": ...}``, or the bare string of older manifests), or None."""
    text = patch.get("text") if isinstance(patch, dict) else patch
    return text if isinstance(text, str) and text else None


def patch_counts(text: str) -> Tuple[int, int, int]:
    """(lines, added, removed) of a unified diff, its ``+++``/``---`` file headers not counted."""
    lines = text.split("\n")
    plus = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    minus = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return len(lines), plus, minus


def patch_incomplete(patch: Any) -> Optional[str]:
    """Why a recorded patch is not the whole change (``timeout: git diff did not finish in time``), or None.

    Such a patch has no comparable digest, even where an older manifest kept one in ``sha256``.
    """
    if not isinstance(patch, dict) or patch.get("incomplete") in (None, False, ""):
        return None
    why = scalar(patch.get("incomplete")) or "not fully recorded"
    reason = scalar(patch.get("incomplete_reason"))
    return "%s: %s" % (reason, why) if reason and not why.startswith(reason) else why


def untracked_files(value: Any) -> List[str]:
    """The paths of a repo's ``untracked`` record: ``{files: [{path, size} | path, ...]}`` or a bare list."""
    if isinstance(value, dict):
        value = value.get("files")
    if not isinstance(value, list):
        return []
    return [str(f.get("path") if isinstance(f, dict) else f) for f in value]


def patch_digest(patch: Any, *, partial: bool = False) -> Optional[str]:
    """A recorded patch's comparable digest (``sha256``); None when there is none or it is incomplete.

    ``partial``: the digest to show for it even when it is incomplete, the stored part's (``stored_sha256``)
    when there is no other (``diff`` shows both, and calls an incomplete pair different whatever they say).
    """
    if not isinstance(patch, dict):
        return None
    if partial:
        return next((patch[k] for k in ("sha256", "stored_sha256") if isinstance(patch.get(k), str) and patch[k]),
                    None)
    if patch_incomplete(patch):
        return None
    return scalar(patch.get("sha256"))


def expand_home(value: str, home: Optional[str]) -> str:
    """``value`` with every ``<HOME>`` or ``<home>`` (redaction's stand-in for a home directory, anywhere in
    an argument such as ``--data=<HOME>/d``) replaced by ``home``; unchanged without a home."""
    if not home:
        return value
    for mark in HOME_PLACEHOLDERS:
        if mark in value:
            value = value.replace(mark, home.rstrip("/") or "/")
    return value


def python_version(doc: Any) -> Any:
    """The training interpreter's version: ``environment.python.version``, else the legacy flat field."""
    v = get(doc, "environment.python.version", None)
    return v if scalar(v) else get(doc, "environment.python_version", None)


# -- Relax's own layout -------------------------------------------------------------------------
# The Relax trainer shipped the RFC first (redai-infra/Relax, relax/utils/manifest.py, schema 1.0) and
# records some facts under other names. The reader (manifest/reader.py) copies each to relaxrepro's name
# and keeps the original beside it; the commands read the relaxrepro name and, for a document the reader
# has not normalised, fall back to Relax's (:func:`recorded`); diff skips an original whose twin is there
# (:func:`relax_twin`), so one fact is never counted twice.

RELAX_ALIASES: Dict[str, str] = {
    # Relax 1.0 (collect_manifest)
    "command.working_directory": "command.cwd",
    "config.arguments": "config.resolved_args",
    "config.environment": "config.selected_env",
    "environment.machine": "environment.system.arch",
    "environment.os": "environment.system.os",
    "environment.os_version": "environment.system.kernel",
    "environment.cuda_version": "hardware.cuda_version",
    "environment.nccl_version": "hardware.nccl_version",
    "hardware.cpu_count": "hardware.cpu.logical_cpus",
    "hardware.cpu_model": "hardware.cpu.model",
    "hardware.memory_gb": "hardware.memory_total_gb",
    "hardware.numa_nodes": "hardware.cpu.numa_nodes",
    "runtime.slurm": "scheduler",
    "runtime.parallel_topology": "training.parallel_topology",
    "hostname": "environment.system.hostname",
    "inputs": "data.inputs",
    "code.*.untracked_files": "code.*.untracked",
    "code.*.tracked_dirty": "code.*.dirty",  # Relax's dirty counts untracked files; relaxrepro's does not
    # Relax's earlier writer (relax/utils/reproducibility.py, build_manifest)
    "created_at": "generated_at",
    "collection_duration_ms": "collection.seconds",
    "environment.platform.machine": "environment.system.arch",
    "environment.platform.system": "environment.system.os",
    "environment.platform.release": "environment.system.kernel",
    "environment.container_image": "container.image",
    "hardware.memory_bytes": "hardware.memory_total_gb",
    "runtime.topology": "training.parallel_topology",
}
"""Relax's field -> relaxrepro's field holding the same fact (``*``: any repository name). One table, shared
by the reader that copies the values and the commands that must not count them twice."""

RELAX_MARKS: Tuple[str, ...] = ("config.arguments", "config.environment",
                                "created_at", "environment.machine", "environment.platform",
                                "hardware.cpu_count", "hardware.memory_gb")
"""Fields only Relax writes (relaxrepro never did, under any schema version; ``command.working_directory`` it
writes too since 1.2, for Relax's reader): a document holding one is
Relax's, whose other names (``environment.packages``: only its own seven packages) read differently."""

RELAX_PACKAGES: Tuple[str, ...] = ("relax", "torch", "ray", "sglang", "transformers", "megatron-core", "numpy")
"""The only distributions Relax looks up (its ``_PACKAGES``): another one missing from its
``environment.packages`` was not recorded, not absent."""


def is_relax(doc: Any) -> bool:
    """Whether ``doc`` was written by Relax's implementation (holds a field only Relax writes)."""
    return any(get(doc, mark) is not MISSING for mark in RELAX_MARKS)


def _alias_match(path: str, source: str) -> Optional[Tuple[str, str]]:
    """``(matched source, rest)`` when ``path`` is ``source`` or below it (``*`` matching one name)."""
    if "*" not in source:
        if path == source:
            return source, ""
        if path.startswith(source) and path[len(source)] in ".[":
            return source, path[len(source):]
        return None
    head, _, tail = source.partition(".*.")
    if not path.startswith(head + "."):
        return None
    name, dot, rest = path[len(head) + 1:].partition(".")
    if not dot:
        return None
    found = _alias_match(rest, tail)
    return ("%s.%s.%s" % (head, name, found[0]), found[1]) if found else None


def relax_twin(doc: Any, path: str) -> Optional[str]:
    """The relaxrepro field recorded in ``doc`` beside the Relax field at (or above) flat ``path``, or None.

    ``config.arguments.lr`` in a document that also holds ``config.resolved_args`` has the twin
    ``config.resolved_args``: the reader copied the one into the other, so only the copy is compared.
    """
    for source, target in RELAX_ALIASES.items():
        found = _alias_match(path, source)
        if found is None:
            continue
        if "*" in target:
            name = found[0].split(".")[1]
            target = target.replace("*", name, 1)
        if get(doc, target) is not MISSING:
            return target
    return None


def recorded(doc: Any, dotted: str, default: Any = MISSING) -> Any:
    """The field at relaxrepro's name, else where Relax records the same fact (a document not normalised)."""
    value = get(doc, dotted)
    if value is not MISSING:
        return value
    for source, target in RELAX_ALIASES.items():
        if target == dotted and "*" not in source:
            value = get(doc, source)
            if value is not MISSING:
                return value
    return default


_SAME_PLACEHOLDER = (
    ("<home>", "<HOME>"),
    ("<host>", "<hidden-host>"), ("<internal-host>", "<hidden-host>"), ("<internal-address>", "<hidden-host>"),
    ("<slurm-nodes>", "<hidden-host>"), ("<private-key>", "<redacted>"),
)
_MASK = re.compile(r"\S{0,4}\*\*\*")


def placeholder_form(text: str) -> str:
    """``text`` with every redaction placeholder of either tool spelled one way, to compare two values.

    ``--api-key=wand***`` (ours) and ``--api-key=<redacted>`` (Relax's) hide the same kind of value, and
    ``<home>/x`` is ``<HOME>/x``: nobody can say those differ. A hidden host is a hidden host, whichever
    tool hid it and under which name.
    """
    if "<" not in text and "***" not in text:
        return text
    for old, new in _SAME_PLACEHOLDER:
        text = text.replace(old, new)
    return _MASK.sub("<redacted>", text) if "***" in text else text


def canonical_home(text: str) -> str:
    """Relax's ``<home>`` written as ours, ``<HOME>`` (what :func:`expand_home` and rerun resolve)."""
    return text.replace("<home>", "<HOME>") if "<home>" in text else text
