"""Helpers for the per-node tests: fragments from real GPU captures, clusters of them, validation."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Dict, List, Optional

from relaxrepro.collect import node as node_collect
from relaxrepro.collect.context import Context
from relaxrepro.manifest import nodes as node
from tests.helpers.common import ROOT, SCHEMA_PATH
from tests.helpers.gpu import NVIDIA, fake_smi

FRAGMENT_SCHEMA = ROOT / "schema" / "node-fragment-v1.schema.json"
XML = NVIDIA / "xml"

# Same model, two drivers: the classic "one node was not upgraded" cluster.
RTX3090_590 = XML / "telegraf__3090-v13.xml"  # 590.44.01 / CUDA 13.1
RTX3090_525 = XML / "telegraf__rtx-3090-v12.xml"  # 525.147.05 / CUDA 12.0
A100_80GB_X4 = XML / "telegraf__a100-sxm4-v12.xml"  # 4x A100-SXM4-80GB, 535.54.03
A100_40GB_MIG = XML / "netdata__a100-sxm4-mig.xml"  # 1x A100-SXM4-40GB, 510.47.03

_fragment_validator = None


def validate_fragment(doc: dict) -> None:
    """Validate against schema/node-fragment-v1.schema.json (which refers into the manifest schema)."""
    global _fragment_validator
    if _fragment_validator is None:
        import jsonschema
        from referencing import Registry, Resource

        manifest_schema = json.loads(SCHEMA_PATH.read_text())
        schema = json.loads(FRAGMENT_SCHEMA.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in (manifest_schema, schema)])
        _fragment_validator = jsonschema.Draft202012Validator(schema, registry=registry)
    errors = sorted(_fragment_validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        raise AssertionError("\n".join("%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors[:10]))


def fragment_from_capture(tmp: Path, xml: Optional[Path], run_id: str = "run-1", **env: str) -> dict:
    """``collect_fragment`` on a node whose only tool is a fake nvidia-smi serving ``xml`` (or none)."""
    bindir = tmp / ("bin-%s" % (xml.stem if xml else "nogpu"))
    bindir.mkdir(parents=True, exist_ok=True)
    if xml is not None:
        fake_smi(bindir, {"-q -x": xml})
    # An empty filesystem root: the gpu probe must not find this machine's /proc/driver/nvidia.
    root = tmp / "root"
    root.mkdir(exist_ok=True)
    ctx = Context(env=dict(env, PATH=str(bindir)), root=str(root), cwd=str(tmp), options={"run_id": run_id})
    return node_collect.collect_fragment(ctx)


def as_node(fragment: dict, index: int) -> dict:
    """A copy of ``fragment`` posing as another host of the same run (its own stable name)."""
    out = copy.deepcopy(fragment)
    out["node"]["name"] = node.node_name(out["run_id"], "host-%04d" % index)
    return out


def cluster(parts: Dict[str, int], fragments: Dict[str, dict]) -> List[dict]:
    """``{"a": 14, "b": 2}`` -> 16 fragments, 14 copies of fragments["a"] then 2 of fragments["b"]."""
    out: List[dict] = []
    for key, count in parts.items():
        for _ in range(count):
            out.append(as_node(fragments[key], len(out)))
    return out


def write_fragments(directory: Path, fragments: List[dict]) -> List[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for frag in fragments:
        p = directory / node.fragment_filename(frag)
        p.write_text(json.dumps(frag))
        paths.append(p)
    return paths


def base_manifest(run_id: str = "run-1", nodes: Optional[List[dict]] = None) -> dict:
    """A minimal valid manifest (what rank 0 wrote) to merge into."""
    doc = {"schema_version": "1.0", "run_id": run_id, "generated_at": "2026-12-02T10:00:00Z",
           "command": {"argv": ["python", "train.py"]}, "code": {}, "config": {}, "environment": {},
           "hardware": {}, "runtime": {}, "training": {}, "collection": {"probes": {}}}
    if nodes is not None:
        doc["runtime"]["nodes"] = nodes
    return doc
