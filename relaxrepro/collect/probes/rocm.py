"""AMD GPUs, best effort: ``amd-smi static --json`` (ROCm 6+), else ``rocm-smi --showproductname
--showmeminfo vram --json``. Part of the ``gpu`` probe; called when there is no ``nvidia-smi``.

No real capture was available when this was written: the parsers follow the documented shapes
(see tests/fixtures/rocm/SOURCES.md) and accept both amd-smi layouts (a bare list, and the
``{"gpu_data": [...]}`` object of ROCm 6.4+), with sizes as numbers, "N MB" strings or
``{"value", "unit"}`` objects.
"""

from __future__ import annotations

import json
import re

from ..context import Context
from ..runner import Outcome
from .gpu_fields import summarize, uuid_hash
from .units import to_mib

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional


def _loads(text: str) -> Any:
    start = min([i for i in (text.find("{"), text.find("[")) if i >= 0] or [-1])
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def _text(value: Any) -> Optional[str]:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return None if text.upper() in ("", "N/A", "NA") else text


def parse_amd_smi_static(text: str) -> Dict[str, Any]:
    """``amd-smi static --json``: model, VRAM, bus, driver version per GPU."""
    data = _loads(text or "")
    if isinstance(data, dict):
        data = data.get("gpu_data", data.get("gpus"))
    if not isinstance(data, list):
        return {}
    gpus: List[Dict[str, Any]] = []
    driver = None
    for pos, entry in enumerate(data):
        if not isinstance(entry, dict):
            continue
        asic = entry.get("asic") if isinstance(entry.get("asic"), dict) else {}
        vram = entry.get("vram") if isinstance(entry.get("vram"), dict) else {}
        bus = entry.get("bus") if isinstance(entry.get("bus"), dict) else {}
        drv = entry.get("driver") if isinstance(entry.get("driver"), dict) else {}
        index = entry.get("gpu")
        gpu: Dict[str, Any] = {"index": index if isinstance(index, int) else pos}
        for key, value in (
            ("model", _text(asic.get("market_name"))),
            ("architecture", _text(asic.get("target_graphics_version"))),
            ("memory_total_mib", to_mib(vram.get("size"))),
            ("pci_bus_id", _text(bus.get("bdf"))),
            ("uuid_hash", uuid_hash(_text(asic.get("asic_serial")))),
        ):
            if value is not None:
                gpu[key] = value
        driver = driver or _text(drv.get("version"))
        gpus.append(gpu)
    if not gpus:
        return {}
    out: Dict[str, Any] = {"gpus": gpus, "gpu_count": len(gpus)}
    if driver:
        out["driver_version"] = driver
    return out


def parse_rocm_smi_json(text: str) -> Dict[str, Any]:
    """``rocm-smi --showproductname --showmeminfo vram --json``: ``{"card0": {...}, "system": {...}}``."""
    data = _loads(text or "")
    if not isinstance(data, dict):
        return {}
    cards = sorted((k for k in data if re.match(r"^card\d+$", k)), key=lambda k: int(k[4:]))
    gpus = []
    for key in cards:
        card = data[key] if isinstance(data[key], dict) else {}
        norm = {k.lower(): v for k, v in card.items()}
        gpu: Dict[str, Any] = {"index": int(key[4:])}
        model = _text(norm.get("card series")) or _text(norm.get("card model"))
        if model:
            gpu["model"] = model
        mem = to_mib(norm.get("vram total memory (b)"), "B")
        if mem is not None:
            gpu["memory_total_mib"] = mem
        gfx = _text(norm.get("gfx version"))
        if gfx:
            gpu["architecture"] = gfx
        uid = _text(norm.get("unique id"))
        if uid:
            gpu["uuid_hash"] = uuid_hash(uid)
        gpus.append(gpu)
    if not gpus:
        return {}
    out: Dict[str, Any] = {"gpus": gpus, "gpu_count": len(gpus)}
    system = data.get("system") if isinstance(data.get("system"), dict) else {}
    driver = _text({k.lower(): v for k, v in system.items()}.get("driver version"))
    if driver:
        out["driver_version"] = driver
    return out


def collect(ctx: Context) -> Optional[Outcome]:
    """AMD GPUs through amd-smi, else rocm-smi; None when neither tool is on PATH."""
    tools = [
        ("amd-smi", ["amd-smi", "static", "--json"], parse_amd_smi_static),
        ("rocm-smi", ["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"], parse_rocm_smi_json),
    ]
    present = [t for t in tools if ctx.which(t[0])]
    if not present:
        return None
    out = Outcome()
    for name, argv, parse in present:
        res = ctx.run(argv)
        data = parse(res.stdout) if isinstance(res.stdout, str) else {}
        if data.get("gpus"):
            hw = dict(data, gpu_vendor="amd", gpu_source=" ".join(argv[:2]))
            summarize(hw)
            out.data = {"hardware": hw}
            return out
        out.warnings.append("%s gave no GPU data: %s" % (name, res.describe()))
    out.status = "timeout" if out.warnings and "timed out" in out.warnings[-1] else "failed"
    return out
