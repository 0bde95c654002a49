"""Numbers in tools' text: integers and memory sizes, one reading for every probe.

nvidia-smi, rocm-smi and the schedulers' variables spell numbers their own ways; the differences are
options here (``leading``, ``unit``), not copies of the parser.
"""

from __future__ import annotations

import re

from ...std.lazy_re import LazyPattern

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Optional

_SIZE_RE = LazyPattern(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.I)  # only where a tool printed a size
_TO_MIB = {"B": 1.0 / (1 << 20), "KB": 1.0 / 1024, "MB": 1.0, "GB": 1024.0, "TB": float(1 << 20)}


def to_int(text: Optional[str], *, leading: bool = False) -> Optional[int]:
    """The integer ``text`` spells (``"-3"``, ``" 8 "``), else None. ``leading``: the digits it starts
    with, the rest ignored (nvidia-smi's ``"12 %"``; no sign)."""
    if text is None:
        return None
    if leading:
        m = re.match(r"^\s*(\d+)", text)
        return int(m.group(1)) if m else None
    value = text.strip()
    return int(value) if re.match(r"^-?\d+$", value) else None


def to_mib(value: Any, unit: str = "MiB") -> Optional[int]:
    """Memory in MiB, rounded: ``"81559 MiB"``, ``"80 GiB"``, ``"512 B"``, a bare number (string or not) in
    ``unit``, or rocm-smi's ``{"value": ..., "unit": ...}``. KB/KiB alike (tools mean binary units). None for
    anything else."""
    if isinstance(value, dict):
        return to_mib(value.get("value"), str(value.get("unit") or unit))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m:
            return None
        number, unit = float(m.group(1)), m.group(2) or unit
    else:
        return None
    factor = _TO_MIB.get(unit.upper().replace("I", ""))
    return None if factor is None else int(round(number * factor))
