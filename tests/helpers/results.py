"""Helpers for the verify and compare tests (the analyses and their commands): documents whose results (metrics,
outputs, trace) are written by hand."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict, Sequence, Tuple

from tests.helpers.recording import make_doc, put

H = float.hex


def trace(steps: Sequence[int], **columns: Sequence[str]) -> Dict[str, Any]:
    """A ``results.trace`` section as the API records it: ``columns`` maps each scalar to its hex values."""
    names = list(columns)
    return {"first": 50, "every": 10, "calls": len(steps), "last_step": steps[-1] if steps else None,
            "steps": list(steps), "names": names, "values": [list(columns[n]) for n in names]}


def _doc(run_id: str = "a", **results: Any) -> Dict[str, Any]:
    return make_doc(run_id, schema_version="1.3", results=results)


BASE = {"metrics": {"auc": 0.91, "loss": 0.25},
        "outputs": {"ckpt/model.pt": {"kind": "file", "sha256": "a" * 64, "size": 10}},
        "trace": trace(range(5), loss=[H(1.0 / (i + 1)) for i in range(5)])}
"""The results both runs of ``pair`` start from."""


def pair(**changes: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Runs ``old`` and ``new`` with ``BASE``'s results; each change replaces a section of new's (None drops it)."""
    old = _doc("old", **copy.deepcopy(BASE))
    new = _doc("new", **copy.deepcopy(BASE))
    for key, value in changes.items():
        if value is None:
            del new["results"][key]
        else:
            new["results"][key] = value
    return old, new


def _loss_trace(loss: float) -> Dict[str, Any]:
    return {"steps": [0, 1], "names": ["loss"], "values": [[(1.0).hex(), loss.hex()]], "last_step": 1}


def group(tmp_path: Path) -> None:
    """Group ``det`` under ``tmp_path/runs``: four runs with results (one auc NaN, one other output and trace)
    and a 1.0 manifest without results."""
    runs = [(0.90, "a", 0.5), (0.90, "a", 0.5), (0.93, "b", 0.25), (float("nan"), "a", 0.5)]
    for i, (auc, digest, loss) in enumerate(runs):
        results = {"metrics": {"auc": "NaN" if auc != auc else auc, "epochs": 3},
                   "outputs": {"w.pt": {"kind": "file", "sha256": digest * 64, "size": 1}},
                   "trace": _loss_trace(loss)}
        put(tmp_path / "runs", make_doc("r%d" % i, schema_version="1.3", lineage={"group": "det"}, results=results))
    put(tmp_path / "runs", make_doc("old", lineage={"group": "det"}))  # 1.0: no results, counted nowhere
