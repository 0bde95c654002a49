"""``relaxrepro attach MANIFEST --wandb [ENTITY/]PROJECT/RUN_ID | --mlflow RUN_ID | --tensorboard LOGDIR``.

For a run started without the trainer API: the tracker's library (which this command alone imports)
opens the run, the manifest records it under ``lineage.trackers`` and the tracker gets the manifest as
the API gives it (:mod:`relaxrepro.record.trackers`). Should the tracker fail, the manifest is put back
as it was: it never names a run that does not hold it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from ..collect.context import policy_of
from ..manifest import reader, writer
from ..manifest.model import READ_LIMIT_BYTES
from ..manifest.redact import redact_document
from ..record import trackers
from ._common import Exit, print_json, say
from ._runs import read_or_report, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Callable, Dict, Optional, Tuple

_PACKAGES = {"wandb": ("wandb",), "mlflow": ("mlflow",), "tensorboard": ("torch.utils.tensorboard", "tensorboardX")}
_WHAT = {"wandb": "W&B run", "mlflow": "MLflow run", "tensorboard": "TensorBoard log directory"}
_PIP = {"wandb": "wandb", "mlflow": "mlflow", "tensorboard": "tensorboard (with torch) or tensorboardX"}


def run(args: argparse.Namespace) -> int:
    tool = "wandb" if args.wandb else "mlflow" if args.mlflow else "tensorboard"
    problem = _usage_problem(args, tool)
    if problem:
        say("relaxrepro attach: error: %s", problem)
        return Exit.USAGE
    if not resolve_args("attach", args, "manifest"):
        return Exit.USAGE
    doc, original = _read(args.manifest)
    if doc is None:
        return Exit.USAGE
    module = None
    if _installed(tool):
        # importing the tracker's library and reaching its run can take many seconds: say what is under way
        say("relaxrepro attach: %s", _opening(tool, args))
        module = _library(tool)
    if module is None:
        say("relaxrepro attach: error: --%s needs the %s package, which is not installed here", tool, _PIP[tool])
        return Exit.USAGE
    uri = None
    try:
        uri = _tracking_uri(module, args) if tool == "mlflow" else None
        attachment, close = _OPEN[tool](module, args)
    except Exception as exc:
        say("relaxrepro attach: error: could not open the %s run: %s", trackers.NAMES[tool],
            trackers.scrub("%s: %s" % (type(exc).__name__, exc), uri))
        return Exit.USAGE
    try:
        # The file may hold what no write of ours let through (written by hand, by an older version, by another
        # tool): it is redacted again, as the writer redacts, before a tracker gets a copy.
        policy = policy_of(doc)
        doc = redact_document(doc, policy)
        trackers.note(doc, [attachment], policy)
        path = args.manifest
        try:
            writer.rewrite(path, doc)
        except OSError as exc:
            say("relaxrepro attach: error: %s", writer.describe_os_error(exc, path))
            return Exit.FAIL
        warnings = trackers.send([attachment], path, trackers.summary(doc, policy),
                                 {_PACKAGES[tool][0]: module, tool: module}, final=True)
    finally:
        try:
            close()
        except Exception as exc:
            say("relaxrepro attach: warning: closing the %s run: %s", trackers.NAMES[tool],
                trackers.scrub("%s: %s" % (type(exc).__name__, exc), uri))
    if warnings:
        writer.replace_atomically(path, original)  # the manifest names no run that does not hold it
        say("relaxrepro attach: error: %s; %s left as it was", "; ".join(warnings), path)
        return Exit.FAIL
    entry = attachment.entry
    if args.json:
        print_json({"manifest": path, "tool": tool, "tracker": entry})
        return Exit.OK
    say("relaxrepro attach: %s attached to %s %s", os.path.basename(path), _WHAT[tool],
        entry.get("run") or entry.get("run_id") or entry.get("log_dir"), out=sys.stdout)
    if tool == "wandb":
        _say_if_offline(attachment.handle)
    return Exit.OK


def _say_if_offline(run: Any) -> None:
    """W&B cannot resume an offline run: ``init(id=..., resume="must")`` opens a new offline run directory with
    that id rather than adding to the run's own, which is left as it was. Say where the manifest went."""
    offline = getattr(run, "offline", None)
    if offline is None:
        offline = bool(getattr(getattr(run, "settings", None), "_offline", False))
    if not offline:
        return
    directory = getattr(getattr(run, "settings", None), "sync_dir", None) or "a new offline-run-*-%s" % run.id
    say("relaxrepro attach: note: W&B cannot resume an offline run: the manifest went into a new offline run "
        "directory with the run's id, %s (an earlier directory of the run is left as it was); upload it with "
        "`wandb sync %s`", directory, directory)


def _usage_problem(args: argparse.Namespace, tool: str) -> Optional[str]:
    if args.tracking_uri and tool != "mlflow":
        return "--tracking-uri goes with --mlflow"
    if tool == "wandb":
        parts = args.wandb.split("/")
        if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
            return "--wandb %r: expected [ENTITY/]PROJECT/RUN_ID" % args.wandb
    if tool == "mlflow" and not args.mlflow.strip():
        return "--mlflow: expected a run id"
    if tool == "tensorboard" and not os.path.isdir(args.tensorboard):
        return "--tensorboard %s: no such directory" % args.tensorboard
    return None


def _read(path: str) -> Tuple[Optional[Dict[str, Any]], bytes]:
    """The manifest as written (not normalised: it is written back) and its bytes; (None, b"") said on stderr."""
    if read_or_report("attach", path) is None:  # the reader's own checks and messages
        return None, b""
    raw = reader.read_bytes(path, READ_LIMIT_BYTES)
    return reader.parse_json(raw.decode("utf-8")), raw


def _installed(tool: str) -> bool:
    """Whether a package the tool needs is there, found without importing it (that alone may take seconds)."""
    return any(importlib.util.find_spec(name.split(".")[0]) is not None for name in _PACKAGES[tool])


def _opening(tool: str, args: argparse.Namespace) -> str:
    """The progress line said before the tracker's library is imported: which run, and where."""
    if tool == "wandb":
        mode = os.environ.get("WANDB_MODE")
        return "opening W&B run %s%s" % (args.wandb, " (%s)" % mode if mode else "")
    if tool == "mlflow":
        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        return "opening MLflow run %s at %s" % (
            args.mlflow, trackers.shown_uri(uri) if uri else "MLflow's default tracking URI")
    return "opening TensorBoard log directory %s" % args.tensorboard


def _library(tool: str) -> Any:
    for name in _PACKAGES[tool]:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _open_wandb(wandb: Any, args: argparse.Namespace) -> Tuple[Any, Callable[[], None]]:
    # PROJECT/RUN_ID is W&B's run.path without an entity (an offline run's), as the API records it
    *entity, project, run_id = args.wandb.split("/")
    # This process's own argv, environment, code and git state are not the run's: W&B's capture is off.
    settings = wandb.Settings(disable_code=True, disable_git=True, x_disable_meta=True, x_disable_stats=True,
                              x_save_requirements=False, console="off")
    run = wandb.init(entity=entity[0] if entity else None, project=project, id=run_id, resume="must",
                     settings=settings)
    def close() -> None:
        run.finish()
        teardown = getattr(wandb, "teardown", None)
        if callable(teardown):
            teardown()  # W&B's service process ends with this command

    return trackers.Attachment("wandb", {"tool": "wandb", "run": str(run.path)}, run), close


def _tracking_uri(mlflow: Any, args: argparse.Namespace) -> str:
    return args.tracking_uri or str(mlflow.get_tracking_uri())


def _open_mlflow(mlflow: Any, args: argparse.Namespace) -> Tuple[Any, Callable[[], None]]:
    uri = _tracking_uri(mlflow, args)
    run = mlflow.MlflowClient(tracking_uri=uri).get_run(args.mlflow)  # an unknown run id fails here
    return trackers.mlflow_attachment(run, uri), lambda: None


def _open_tensorboard(tb: Any, args: argparse.Namespace) -> Tuple[Any, Callable[[], None]]:
    writer = tb.SummaryWriter(log_dir=args.tensorboard)
    entry = {"tool": "tensorboard", "log_dir": os.path.abspath(args.tensorboard)}
    return trackers.Attachment("tensorboard", entry, writer), writer.close


_OPEN = {"wandb": _open_wandb, "mlflow": _open_mlflow, "tensorboard": _open_tensorboard}
