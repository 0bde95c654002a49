"""What ``nvidia-smi`` prints, as data: pure parsers of each of its outputs and of ``/proc/driver/nvidia``.

Every ``parse_*`` function is pure and tested on real captures under ``tests/fixtures/nvidia/``;
none of them raises on garbage, they return what they could read (an empty dict at worst).
:mod:`.nvidia` runs the calls and chooses between the answers.

UUIDs never reach the manifest: each is replaced by ``uuid_hash`` (sha256, first 16 hex), enough
to tell "same GPU" across runs without publishing an identifier.
"""

from __future__ import annotations

import re

from ...std.lazy_re import LazyPattern
from .gpu_fields import clean as _clean
from .gpu_fields import uuid_hash
from .units import to_int, to_mib

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import xml.etree.ElementTree as ET
    from typing import Any, Dict, List, Optional, Sequence, Tuple

QUERY_FIELDS: Tuple[str, ...] = (
    "index", "name", "uuid", "memory.total", "pci.bus_id", "driver_version", "compute_cap", "mig.mode.current",
)
"""``--query-gpu`` fields. ``compute_cap`` (driver 510) and ``mig.mode.current`` (450) are newer than the rest."""

BASIC_QUERY_FIELDS: Tuple[str, ...] = ("index", "name", "uuid", "memory.total", "pci.bus_id", "driver_version")
"""Fields every driver since the 3xx series answers: the retry when a field is refused."""

# Compiled on first use: on a machine without nvidia-smi most never run (~1 ms off every start).
_VERSION_RE = LazyPattern(r"\d+(?:\.\d+)+")
_ANSI_RE = LazyPattern(r"\x1b\[[0-9;?]*[A-Za-z]")
BUS_ID_RE = LazyPattern(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")

# Banners nvidia-smi prints before or instead of its data (stdout on most drivers, stderr on
# some): kind, lower-case needle. Seen in NVIDIA/open-gpu-kernel-modules#387 and #862,
# NVIDIA/nvidia-docker#988 and #1671, JosephKJ/OWOD#81 (see tests/fixtures/nvidia/errors/).
_BANNERS: Tuple[Tuple[str, str], ...] = (
    ("driver-unreachable", "couldn't communicate with the nvidia driver"),
    ("no-devices", "no devices were found"),
    ("nvml-init-failed", "failed to initialize nvml"),
    ("device-handle", "unable to determine the device handle"),
    ("gpu-lost", "gpu is lost"),
    ("invalid-field", "is not a valid field to query"),
    ("usage-error", "please run 'nvidia-smi -h'"),
    ("nvml-not-found", "nvml shared library not found"),
    ("not-supported", "is not supported on this"),
    ("insufficient-permissions", "insufficient permissions"),
)


# --------------------------------------------------------------------------------------- helpers
def _version(value: Optional[str]) -> Optional[str]:
    """The first dotted version in a field, or None.

    Driver 610 appends a note ("610.57.04 [Deprecated; will be removed in CUDA 14.0. Use KMD
    Version instead]") or replaces the value with prose ('Deprecated, see "KMD version" instead').
    """
    text = _clean(value)
    if text is None:
        return None
    m = _VERSION_RE.search(text.split("[", 1)[0])
    return m.group(0) if m else None


def _mib_of(value: Optional[str]) -> Optional[int]:
    """Memory in MiB from "81559 MiB", "81559" (nounits) or "80 GiB"; None when absent."""
    return to_mib(_clean(value))


def _int_of(value: Optional[str]) -> Optional[int]:
    return to_int(_clean(value), leading=True)


def _mode(value: Optional[str]) -> Optional[str]:
    """MIG mode "Enabled"/"Disabled" as lower case; None for N/A (GPUs without MIG) or anything else."""
    text = (_clean(value) or "").lower()
    return text if text in ("enabled", "disabled") else None


def _compute_capability(value: Optional[str]) -> Optional[str]:
    text = _clean(value)
    if text and re.match(r"^\d+\.\d+$", text):
        return text
    return None


def strip_ansi(text: str) -> str:
    """Remove terminal escape codes (``topo -m`` underlines its header since driver 5xx)."""
    return _ANSI_RE.sub("", text)


def parse_errors(text: str) -> Dict[str, Any]:
    """Error banners in any nvidia-smi output: ``{"errors": [{"kind", "message"}]}``.

    A banner wrapped by a Windows console continues on an indented next line (AlexeyAB/darknet#86);
    the continuation is joined back.
    """
    errors: List[Dict[str, str]] = []
    lines = strip_ansi(text or "").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        low = line.lower()
        kind = next((k for k, needle in _BANNERS if needle in low), None)
        if kind is None and low.startswith("error:"):
            kind = "error"
        if kind is not None:
            while i + 1 < len(lines) and lines[i + 1].startswith((" ", "\t")) and lines[i + 1].strip() \
                    and not lines[i + 1].lstrip().startswith(("|", "+", "<")):
                i += 1
                line = line + " " + lines[i].strip()
            message = re.sub(r"\s+", " ", line)[:300]
            if not any(e["message"] == message for e in errors):
                errors.append({"kind": kind, "message": message})
        i += 1
    return {"errors": errors} if errors else {}


# ------------------------------------------------------------------------------------ -q -x (XML)
def _xml_text(node: Optional[ET.Element], path: str) -> Optional[str]:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    return found.text


def parse_smi_xml(text: str) -> Dict[str, Any]:
    """``nvidia-smi -q -x``: driver, the driver's CUDA version, and per-GPU facts.

    Banners printed before the document are skipped. Old drivers have no ``<cuda_version>``
    (384, 418) or say "Not Found" (430 with K80s); driver 610 deprecates ``<driver_version>`` and
    ``<cuda_version>`` for KMD / CUDA UMD versions, read under the names its ``-q`` text uses.
    """
    if not text:
        return {}
    start = text.find("<nvidia_smi_log")
    if start < 0 or "<!ENTITY" in text:  # entities would be expanded by expat: not nvidia-smi
        return {}
    end = text.rfind("</nvidia_smi_log>")
    body = text[start:end + len("</nvidia_smi_log>")] if end > start else text[start:]
    import xml.etree.ElementTree as ET  # ~3 ms (pyexpat): only when nvidia-smi answered

    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return {}
    out = _driver_fields(_xml_text(root, "kmd_version"), _xml_text(root, "cuda_umd_version"),
                         _xml_text(root, "driver_version"), _xml_text(root, "cuda_version"))
    attached = _int_of(_xml_text(root, "attached_gpus"))
    gpus = []
    for index, node in enumerate(root.findall("gpu")):
        gpu: Dict[str, Any] = {"index": index}
        _put(gpu, "model", _clean(_xml_text(node, "product_name")))
        _put(gpu, "architecture", _clean(_xml_text(node, "product_architecture")))
        _put(gpu, "memory_total_mib", _mib_of(_xml_text(node, "fb_memory_usage/total")))
        _put(gpu, "uuid_hash", uuid_hash(_xml_text(node, "uuid")))
        bus = _clean(_xml_text(node, "pci/pci_bus_id")) or _clean(node.get("id"))
        _put(gpu, "pci_bus_id", bus)
        _put(gpu, "compute_capability", _compute_capability(_xml_text(node, "compute_cap")))
        _put(gpu, "mig_mode", _mode(_xml_text(node, "mig_mode/current_mig")))
        migs = []
        for mig in node.findall("mig_devices/mig_device"):
            dev: Dict[str, Any] = {}
            _put(dev, "index", _int_of(_xml_text(mig, "index")))
            _put(dev, "gpu_instance_id", _int_of(_xml_text(mig, "gpu_instance_id")))
            _put(dev, "compute_instance_id", _int_of(_xml_text(mig, "compute_instance_id")))
            _put(dev, "multiprocessor_count", _int_of(_xml_text(mig, "device_attributes/shared/multiprocessor_count")))
            _put(dev, "memory_total_mib", _mib_of(_xml_text(mig, "fb_memory_usage/total")))
            migs.append(dev)
        if migs:
            gpu["mig_devices"] = migs
        gpus.append(gpu)
    out["gpus"] = gpus
    out["gpu_count"] = max(attached or 0, len(gpus))
    return out


def _put(target: Dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


# ------------------------------------------------------------------------------ --query-gpu (CSV)
def read_csv(text: str, fields: Optional[Sequence[str]] = None) -> List[Dict[str, str]]:
    """Rows of any ``--query-*`` CSV as dicts; the header line names the fields when ``fields``
    is None (``--format=csv``: "memory.total [MiB]" becomes "memory.total").

    Lines that are not rows of the expected width (banners, garbage) are skipped.
    """
    # NUL bytes from a lying tool: csv on Python 3.8-3.10 raises "line contains NUL" on them.
    lines = [ln.replace("\0", "") for ln in strip_ansi(text or "").splitlines() if ln.strip()]
    names: Optional[List[str]] = list(fields) if fields is not None else None
    rows: List[Dict[str, str]] = []
    import csv  # only when nvidia-smi answered

    for cells in csv.reader(lines, skipinitialspace=True):
        cells = [c.strip() for c in cells]
        header = len(cells) > 1 and all(re.match(r"^[A-Za-z_][\w.]*( \[.*\])?$", c) for c in cells)
        if header and (names is None or not rows):
            # A header line names the columns even when noheader was asked for: a wrapper
            # script or an old driver may print one anyway.
            found = [c.split(" [", 1)[0] for c in cells]
            if names is None or set(found) & set(names):
                names = found
                continue
        if names is None:
            continue
        if len(cells) != len(names):
            continue
        rows.append(dict(zip(names, cells)))
    return rows


def parse_query_csv(text: str, fields: Optional[Sequence[str]] = QUERY_FIELDS) -> Dict[str, Any]:
    """``--query-gpu=...`` output (with or without header and units) as GPUs.

    ``fields`` is the requested list for ``noheader`` output; None reads the header line.
    """
    out: Dict[str, Any] = {}
    gpus = []
    for pos, row in enumerate(read_csv(text, fields)):
        gpu: Dict[str, Any] = {}
        index = _int_of(row.get("index"))
        gpu["index"] = index if index is not None else pos
        _put(gpu, "model", _clean(row.get("name", row.get("gpu_name"))))
        _put(gpu, "memory_total_mib", _mib_of(row.get("memory.total")))
        _put(gpu, "uuid_hash", uuid_hash(row.get("uuid", row.get("gpu_uuid"))))
        _put(gpu, "pci_bus_id", _clean(row.get("pci.bus_id", row.get("gpu_bus_id"))))
        _put(gpu, "compute_capability", _compute_capability(row.get("compute_cap")))
        _put(gpu, "mig_mode", _mode(row.get("mig.mode.current")))
        driver = _version(row.get("kmd_version")) or _version(row.get("driver_version"))
        if driver and "driver_version" not in out:
            out["driver_version"] = driver
        gpus.append(gpu)
    if not gpus:
        return out
    out["gpus"] = gpus
    out["gpu_count"] = len(gpus)
    return out


# ----------------------------------------------------------------------------------------- -L
_LIST_RE = LazyPattern(
    r"GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)\s]+)\)"
    r"|MIG (?P<profile>\S+)\s+Device\s+(?P<mig>\d+): \(UUID: (?P<miguuid>[^)\s]+)\)"
)


def parse_list(text: str) -> Dict[str, Any]:
    """``nvidia-smi -L``: index, model and UUID per GPU, MIG devices with their profiles.

    Works on the one-line form an issue form makes of it (NVIDIA/open-gpu-kernel-modules#387),
    and on the GPU header lines of ``nvlink -s`` / ``c2c -s`` output.
    """
    gpus: List[Dict[str, Any]] = []
    for m in _LIST_RE.finditer(strip_ansi(text or "")):
        if m.group("index") is not None:
            gpu: Dict[str, Any] = {"index": int(m.group("index")), "model": m.group("name").strip()}
            _put(gpu, "uuid_hash", uuid_hash(m.group("uuid")))
            gpus.append(gpu)
        elif gpus:
            dev = {"index": int(m.group("mig")), "profile": m.group("profile")}
            _put(dev, "uuid_hash", uuid_hash(m.group("miguuid")))
            gpus[-1].setdefault("mig_devices", []).append(dev)
            gpus[-1]["mig_mode"] = "enabled"
    if not gpus:
        return {}
    return {"gpus": gpus, "gpu_count": len(gpus)}


# ------------------------------------------------------------------------------ default table
_HEADER_RE = LazyPattern(
    r"NVIDIA-SMI\s+(?P<smi>[\d.]+)\s+(?P<dlabel>Driver Version|KMD Version):\s*(?P<driver>[\d.]+)"
    r"(?:\s+(?P<clabel>CUDA Version|CUDA UMD Version):\s*(?P<cuda>[\d.]+|N/A))?"
)
_ROW_RE = LazyPattern(
    r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<mode>On|Off|TCC|WDDM|MCDM|N/A)\s*\|\s*(?P<bus>"
    + BUS_ID_RE.pattern + r")"
)
_MEM_RE = LazyPattern(r"(\d+)MiB\s*/\s*(\d+)MiB")
_MIG_ROW_RE = LazyPattern(
    r"^\|\s+(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<ci>\d+)\s+(?P<dev>\d+)\s+\|\s+\d+MiB\s*/\s*(?P<mem>\d+)MiB\s*\|"
    r"\s*(?P<sm>\d+)?"
)


def parse_table(text: str) -> Dict[str, Any]:
    """The default ``nvidia-smi`` table: driver, CUDA, and per GPU model (maybe truncated), bus,
    memory and MIG mode. Lines outside the table (banners, a missing GPU's error) are ignored.

    The header says "KMD Version" / "CUDA UMD Version" from driver 610; on WSL the NVIDIA-SMI and
    driver versions differ (555.42.06 vs 555.97), and the driver is the one recorded.
    """
    out: Dict[str, Any] = {}
    lines = strip_ansi(text or "").splitlines()
    gpus: List[Dict[str, Any]] = []
    current: Optional[Dict[str, Any]] = None
    row_line = 0
    section = "gpus"
    for line in lines:
        h = _HEADER_RE.search(line)
        if h:
            out["driver_version"] = h.group("driver")
            if h.group("dlabel").startswith("KMD"):
                out["kmd_version"] = h.group("driver")
            if h.group("cuda") and h.group("cuda") != "N/A":
                out["cuda_driver_version"] = h.group("cuda")
            continue
        if "MIG devices:" in line:
            section = "mig"
        elif "Processes:" in line:
            section = "processes"
        if section == "mig":
            m = _MIG_ROW_RE.match(line)
            if m:
                owner = next((g for g in gpus if g["index"] == int(m.group("gpu"))), None)
                if owner is not None:
                    dev = {"index": int(m.group("dev")), "gpu_instance_id": int(m.group("gi")),
                           "compute_instance_id": int(m.group("ci")), "memory_total_mib": int(m.group("mem"))}
                    if m.group("sm"):
                        dev["multiprocessor_count"] = int(m.group("sm"))
                    owner.setdefault("mig_devices", []).append(dev)
            continue
        if section != "gpus":
            continue
        m = _ROW_RE.match(line)
        if m:
            name = m.group("name").strip()
            current = {"index": int(m.group("index")), "model": name, "pci_bus_id": m.group("bus")}
            if name.endswith("..."):
                # The table cuts long names ("NVIDIA RTX PRO 6000 Blac..."); -q/-L have them whole.
                current["model"] = name[:-3].rstrip()
                current["model_truncated"] = True
            gpus.append(current)
            row_line = 1
            continue
        if current is None or not line.startswith("|"):
            current = None if line.startswith("+") else current
            continue
        row_line += 1
        if row_line == 2:
            mem = _MEM_RE.search(line)
            if mem:
                current["memory_total_mib"] = int(mem.group(2))
        elif row_line == 3:
            last = line.rstrip().rstrip("|").rsplit("|", 1)[-1].strip()
            _put(current, "mig_mode", _mode(last))
    if gpus:
        out["gpus"] = gpus
        out["gpu_count"] = len(gpus)
    return out


def _driver_fields(kmd: Any, umd: Any, driver: Any, cuda: Any) -> Dict[str, Any]:
    """Driver and CUDA versions from either form; driver 610 renames them KMD Version / CUDA UMD Version."""
    out: Dict[str, Any] = {}
    kmd, umd = _version(kmd), _version(umd)
    driver = kmd or _version(driver)
    cuda = umd or _version(cuda)
    if driver:
        out["driver_version"] = driver
    if kmd:
        out["kmd_version"] = kmd
    if cuda:
        out["cuda_driver_version"] = cuda
    return out


# --------------------------------------------------------------------------- --version, /proc
def parse_smi_version(text: str) -> Dict[str, Any]:
    """What ``nvidia-smi --version`` prints (drivers 5xx+). From 610 the "DRIVER version" and "CUDA version"
    lines say 'Deprecated, see "KMD version" instead' and the values move to KMD / CUDA UMD lines."""
    values: Dict[str, str] = {}
    for line in strip_ansi(text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip().lower()] = value.strip()
    out = _driver_fields(values.get("kmd version"), values.get("cuda umd version"), values.get("driver version"),
                         values.get("cuda version"))
    smi = _version(values.get("nvidia-smi version"))
    if smi:
        out["smi_version"] = smi
    return out


_PROC_RE = LazyPattern(
    r"NVRM version:\s*NVIDIA UNIX\s+(?P<open>Open\s+)?(?:\S+\s+)?Kernel Module(?:\s+for\s+\S+)?\s+(?P<v>\d+(?:\.\d+)+)"
)


def parse_proc_version(text: str) -> Dict[str, Any]:
    """``/proc/driver/nvidia/version``: the loaded kernel module's version and flavour.

    Proprietary: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.135  <date>"; open modules
    (515+): "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ...".
    """
    m = _PROC_RE.search(text or "")
    if not m:
        return {}
    return {"driver_version": m.group("v"), "kernel_module": "open" if m.group("open") else "proprietary"}


# ---------------------------------------------------------------------------------- topo -m
_TOPO_DEV_RE = LazyPattern(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|CPU\d+)$")


def parse_topo(text: str) -> Dict[str, Any]:
    """``nvidia-smi topo -m`` (escape codes stripped): the link matrix between GPUs (and NICs),
    each GPU's CPU and NUMA affinity, and the NIC legend.

    ``{"devices": [...], "links": [[...]], "cpu_affinity": {...}, "numa_affinity": {...},
    "nics": {"NIC0": "mlx5_0"}}``. Tabs or the spaces an issue tracker turned them into both work;
    a Windows 591 driver answers "ERROR: Option -m is missing its value" and gives {}.
    """
    lines = strip_ansi(text or "").splitlines()
    header: Optional[List[str]] = None
    rows: Dict[str, List[str]] = {}
    order: List[str] = []
    cpu: Dict[str, str] = {}
    numa: Dict[str, str] = {}
    nics: Dict[str, str] = {}
    for line in lines:
        tokens = line.split()
        if not tokens:
            continue
        if header is None:
            # The header row starts with blank space where the row labels stand below it.
            if line[:1] in (" ", "\t") and _TOPO_DEV_RE.match(tokens[0]):
                header = [t for t in tokens if _TOPO_DEV_RE.match(t)]
            continue
        m = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if m:
            nics[m.group(1)] = m.group(2)
            continue
        if tokens[0] in header and len(tokens) > len(header):
            cells = tokens[1:1 + len(header)]
            rows[tokens[0]] = cells
            order.append(tokens[0])
            rest = tokens[1 + len(header):]
            if tokens[0].startswith("GPU"):
                if rest and re.match(r"^[\d,\-]+$", rest[0]):
                    cpu[tokens[0]] = rest[0]
                    rest = rest[1:]
                if rest and re.match(r"^\d+(?:-\d+)?$", rest[0]):
                    numa[tokens[0]] = rest[0]
    if header is None or not rows:
        return {}
    out: Dict[str, Any] = {"devices": header, "links": [rows.get(d, []) for d in header]}
    if cpu:
        out["cpu_affinity"] = cpu
    if numa:
        out["numa_affinity"] = numa
    if nics:
        out["nics"] = nics
    return out


# ------------------------------------------------------------------------------- visible devices
def parse_visible_devices(value: Optional[str], gpu_count: Optional[int],
                          uuids: Sequence[str] = ()) -> Optional[Dict[str, Any]]:
    """``CUDA_VISIBLE_DEVICES`` as CUDA reads it: entries up to the first invalid one count.

    Indices are kept; UUID entries (``GPU-…``, ``MIG-…``, unique prefixes allowed) are hashed like
    every UUID in the manifest. None when the variable is unset (every GPU is visible).
    """
    if value is None:
        return None
    entries = [e.strip() for e in value.split(",")]
    if value.strip() == "":
        entries = []
    shown: List[str] = []
    count = 0
    valid = True
    for entry in entries:
        is_uuid = entry.upper().startswith(("GPU-", "MIG-"))
        if is_uuid:
            shown.append("uuid:%s" % uuid_hash(entry))
            ok = not uuids or entry.upper().startswith("MIG-") or any(u.startswith(entry) for u in uuids)
        else:
            shown.append(entry)
            ok = entry.isdigit() and (gpu_count is None or int(entry) < gpu_count)
        if valid and ok:
            count += 1
        else:
            valid = False
    return {"visible_devices": shown, "visible_gpu_count": count}
