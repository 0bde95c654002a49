"""What the GPU sources share: nvidia-smi's spellings of "no value", UUID hashes, the flat summary fields."""

from __future__ import annotations

from ...std.sha import sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional

# Values nvidia-smi prints for "no value". "[Requested functionality has been deprecated]" is the
# 595+ form for fields such as Display Mode; "Not Found" is <cuda_version> on driver 430 (K80).
NO_VALUE = {
    "", "n/a", "na", "none", "not found", "not supported", "unknown", "unknown error",
    "requested functionality has been deprecated", "insufficient permissions", "not available",
}


def clean(value: Optional[str]) -> Optional[str]:
    """A field's text, or None for nvidia-smi's many spellings of "no value"."""
    if value is None:
        return None
    text = str(value).strip()
    bare = text.strip("[]").strip().lower()
    if bare in NO_VALUE:
        return None
    return text


def uuid_hash(uuid: Optional[str]) -> Optional[str]:
    """sha256 of a GPU/MIG UUID, first 16 hex digits; None when there is no UUID."""
    value = clean(uuid)
    if value is None:
        return None
    return sha256_hex(value.encode("utf-8"))[:16]


def summarize(hw: Dict[str, Any]) -> None:
    """Add the flat summary fields (``gpu_model``, ``gpu_memory_gb``) from ``hw["gpus"]``."""
    gpus = hw.get("gpus") or []
    models: List[str] = []
    for g in gpus:
        if g.get("model") and g["model"] not in models:
            models.append(g["model"])
    if len(models) == 1:
        hw["gpu_model"] = models[0]
    elif models:
        hw["gpu_model"] = "mixed: " + ", ".join(models)
    mems = [g["memory_total_mib"] for g in gpus if isinstance(g.get("memory_total_mib"), int)]
    if mems:
        hw["gpu_memory_gb"] = round(min(mems) / 1024.0, 2)
