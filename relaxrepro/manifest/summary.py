"""What a listing reads of a manifest and shows of it: the top-level sections it reads (:data:`LS_FIELDS`),
the accessors over them (repositories, GPUs, algorithm, lineage, outcome), and their one-cell text forms.

The run index stores each run's ``ls`` cells (:func:`ls_cells`), so they are made here, below the
commands; ``lineage``, ``report`` and the trackers' summary show the same cells.
"""

from __future__ import annotations

import glob
import os

from ..std.text import safe_text
from .numbers import shown

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Tuple

LS_FIELDS = ("schema_version", "run_id", "generated_at", "code", "hardware", "training", "lineage", "outcome")
"""The sections the accessors below read: what a listing reads of every manifest."""


def run_id_of(doc: Dict[str, Any]) -> Optional[str]:
    """The document's ``run_id`` when it is a string, else None."""
    value = doc.get("run_id")
    return value if isinstance(value, str) else None


COPY_RANK = {"merged": 0, "manifest": 1}
"""Which copy of a run a listing shows: the merged manifest (it holds the nodes too), then the run's own;
a tracker's copy (``wandb``, ``mlflow``, ``tensorboard``) only when it is all there is."""


def copy_kind(path: str, run_id: str) -> str:
    """What the file at ``path`` is among a run's copies: ``merged`` (``relaxrepro merge``'s
    ``manifest_<id>.merged.json``), a tracker's copy of ``manifest_<id>.json`` (``wandb``: a W&B run's
    ``files/``; ``mlflow``: the ``relaxrepro/`` artifact folder; ``tensorboard``: beside event files), else
    ``manifest``."""
    name = os.path.basename(path)
    if name == "manifest_%s.merged.json" % run_id:
        return "merged"
    folder = os.path.dirname(path)
    parts = os.path.normpath(path).split(os.sep)
    if name == "manifest_%s.json" % run_id:
        if len(parts) >= 3 and parts[-2] == "files" and any(p == "wandb" or p.startswith(("run-", "offline-run-"))
                                                           for p in parts[:-2]):
            return "wandb"
        if len(parts) >= 2 and parts[-2] == "relaxrepro":
            return "mlflow"
        if glob.glob(os.path.join(glob.escape(folder or "."), "events.out.tfevents.*")):
            return "tensorboard"
    return "manifest"


def short(commit: Any) -> str:
    return commit[:7] if isinstance(commit, str) and commit else "-"


def repos(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    code = doc.get("code")
    out = []
    if isinstance(code, dict):
        for name in sorted(code):
            repo = code[name]
            if isinstance(repo, dict):
                out.append({"name": name, "commit": repo.get("commit"), "dirty": repo.get("dirty")})
    return out


def gpus(doc: Dict[str, Any]) -> Tuple[Optional[int], Optional[str]]:
    """(count, model) from the hardware section, whichever of its shapes is there."""
    hw = doc.get("hardware")
    if not isinstance(hw, dict):
        return None, None
    items = hw.get("gpus")
    count = hw.get("gpu_count")
    model = hw.get("gpu_model")
    if isinstance(items, list):
        if not isinstance(count, int):
            count = len(items)
        if not model and items and isinstance(items[0], dict):
            model = items[0].get("model") or items[0].get("name")
    gpu = hw.get("gpu")
    if isinstance(gpu, dict):
        count = count if isinstance(count, int) else gpu.get("count")
        model = model or gpu.get("model")
    return (count if isinstance(count, int) else None), (str(model) if model else None)


def algorithm(doc: Dict[str, Any]) -> Optional[str]:
    training = doc.get("training")
    if isinstance(training, dict):
        value = training.get("algorithm") or training.get("algo")
        if value:
            return str(value)
    return None


def lineage_of(doc: Dict[str, Any]) -> Dict[str, Any]:
    value = doc.get("lineage")
    return value if isinstance(value, dict) else {}


def parent_id(doc: Dict[str, Any]) -> Optional[str]:
    parent = lineage_of(doc).get("parent")
    if isinstance(parent, dict):
        return parent.get("run_id") or parent.get("given") or None
    return None


def trackers(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """``lineage.trackers``: the W&B, MLflow and TensorBoard runs the manifest was attached to."""
    value = lineage_of(doc).get("trackers")
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


# -- one-cell text forms --------------------------------------------------------------------------

def trackers_cell(doc: Dict[str, Any]) -> str:
    names = sorted({str(t.get("tool")) for t in trackers(doc)})
    return ",".join(names) or "-"


def outcome_text(doc: Dict[str, Any]) -> str:
    out = doc.get("outcome")
    if not isinstance(out, dict) or "status" not in out:
        return "-"
    status = out.get("status")
    if status == "ok":
        return "ok"
    if status == "exit":
        return "exit %s" % shown(out.get("exit_code"))
    if status == "signal":
        return "%s (%s)" % (out.get("signal_name") or "signal %s" % shown(out.get("signal")),
                            shown(out.get("exit_code")))
    if status == "exception":
        return "exception %s" % out.get("exception_type", "?")
    if status == "not_started":
        return "not started (127)"
    return str(status)


def code_cell(doc: Dict[str, Any]) -> str:
    parts = ["%s@%s%s" % (r["name"], short(r["commit"]), "*" if r["dirty"] else "") for r in repos(doc)]
    return ",".join(parts) or "-"


def gpu_cell(doc: Dict[str, Any]) -> str:
    count, model = gpus(doc)
    if not count and not model:
        return "-"
    if model and model.startswith("NVIDIA "):
        model = model[len("NVIDIA "):]
    return "%sx%s" % (shown(count) if count is not None else "?", (model or "?").replace(" ", "-"))


def time_cell(value: Any) -> str:
    if isinstance(value, str) and len(value) >= 16:
        return value[:10] + " " + value[11:16]
    return "-"


def ls_cells(doc: Dict[str, Any], run_id: Optional[str], gpu: Optional[str] = None) -> List[str]:
    """The cells of one ``ls`` row but its path, each one escaped line (the run index stores them). ``gpu``:
    :func:`gpu_cell` of ``doc`` when the caller has it (the cold index keeps it by the shared hardware section)."""
    cells = (run_id or "-", time_cell(doc.get("generated_at")), code_cell(doc), algorithm(doc) or "-",
             gpu_cell(doc) if gpu is None else gpu,
             str(lineage_of(doc).get("group") or "-"), parent_id(doc) or "-", outcome_text(doc), trackers_cell(doc))
    return [safe_text(c) for c in cells]
