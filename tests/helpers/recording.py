"""Helpers for the recording, lineage and run-index tests: hand-made manifests on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

from relaxrepro.manifest import writer

_n = [0]


def make_doc(run_id: str, *, generated_at: Optional[str] = None, **sections: Any) -> Dict[str, Any]:
    """A minimal schema-valid v1 document; ``sections`` replace or add top-level sections."""
    _n[0] += 1
    doc: Dict[str, Any] = {
        "schema_version": "1.0",
        "run_id": run_id,
        "generated_at": generated_at or "2026-01-01T00:00:%02dZ" % (_n[0] % 60),
        "command": {"argv": ["python", "train.py"], "cwd": "/work", "source": "cli"},
        "code": {}, "config": {}, "environment": {}, "hardware": {}, "runtime": {}, "training": {},
        "collection": {"probes": {}},
    }
    doc.update(sections)
    return doc


def put(directory: Path, doc: Dict[str, Any], name: Optional[str] = None) -> Path:
    """Write ``doc`` as our writer lays it out, as ``manifest_<run-id>.json`` unless ``name``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or "manifest_%s.json" % doc["run_id"])
    path.write_bytes(writer.serialize(doc))
    return path


def load(path: Path) -> Dict[str, Any]:
    return json.loads(Path(path).read_text())


def manifests(directory: Path) -> list:
    return sorted(Path(directory).glob("manifest_*.json"))
