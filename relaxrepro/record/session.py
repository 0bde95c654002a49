"""One run's facts, each worked out in one place: which rank this process is and whether it records,
where its manifest goes (:func:`output_directory`), and writing it so that the caller learns the run id
it was written under."""

from __future__ import annotations

import os

from ..manifest.model import output_dir

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Mapping, Optional

    from ..manifest.redact import Redactor
    from ..manifest.writer import WriteResult

RANK_ENV = ("RANK", "SLURM_PROCID")
"""Where a multi-rank launcher says which rank this process is: torchrun/deepspeed, else srun."""


def rank(env: Mapping[str, str]) -> Optional[int]:
    """This process's rank under a launcher (``RANK``, else ``SLURM_PROCID``); None when not launched so."""
    for name in RANK_ENV:
        value = env.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def records_here(env: Mapping[str, str], all_ranks: bool = False) -> bool:
    """Whether this process writes the run's manifest: rank 0 only (or no launcher), unless ``all_ranks``."""
    return all_ranks or rank(env) in (None, 0)


def output_directory(given: Any, env: Mapping[str, str]) -> str:
    """The directory this run's manifests go to (:func:`~relaxrepro.manifest.model.output_dir`), created with
    its parents: a run's log directory (``runs/$SLURM_JOB_ID``) seldom exists before the run. A directory
    that cannot be made is left to the write, whose warning names the reason."""
    directory = output_dir(given, env)
    _make_dirs(directory)
    return directory


def _make_dirs(directory: str) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        pass  # the write's warning names the reason


def unfound_parent(doc: Mapping[str, Any]) -> Optional[str]:
    """The warning for a parent that was given but not found (kept as given, ``found: false``), or None."""
    lineage = doc.get("lineage") if isinstance(doc.get("lineage"), dict) else {}
    parent = lineage.get("parent") if isinstance(lineage.get("parent"), dict) else {}
    if parent and not parent.get("found"):
        return "parent %s not found; recorded as given" % parent.get("given")
    return None


def write(doc: Dict[str, Any], *, directory: Optional[str] = None, path: Optional[str] = None,
          redactor: Optional[Redactor] = None, env: Optional[Mapping[str, str]] = None) -> WriteResult:
    """Write ``doc`` (see :func:`relaxrepro.manifest.writer.write`) into ``directory`` or at ``path`` (whose
    folder is created with its parents) and follow the run id it was written under: a clash with an
    existing file takes a fresh one, and ``doc`` then says so too."""
    if path is not None:  # --output runs/42/manifest.json: its folder is made as --output-dir's is
        _make_dirs(os.path.dirname(os.path.abspath(path)))
    # lazy, these two: ~20 ms (the writer, the redaction rules); `import relaxrepro` stays cheap for a trainer
    from ..collect.context import policy_of
    from ..manifest import writer

    default = policy_of(doc, env) if redactor is None else None  # the policy doc was collected with, else env's
    result = writer.write(doc, directory=directory, path=path, redactor=redactor, default=default)
    if result.path is not None and path is None and result.run_id and result.run_id != doc.get("run_id"):
        doc["run_id"] = result.run_id
    if result.path is not None and hasattr(doc, "path"):
        doc.path = result.path  # type: ignore[attr-defined]
    return result
