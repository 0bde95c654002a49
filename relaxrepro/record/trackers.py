"""The tracker runs a manifest is attached to: Weights & Biases, MLflow and TensorBoard.

relaxrepro never imports a tracker: :func:`find` looks in ``sys.modules`` for the ones the trainer
already imported and asks each for its active run (an attribute or a thread-local read, no I/O), so a
trainer without one pays a few dictionary lookups. :func:`note` records what was found under
``lineage.trackers`` (redacted, credentials stripped) before the manifest is written; :func:`send`
then hands the written file and a small summary to each run. The API calls ``send`` in a daemon
thread joined with :data:`SEND_S`: a tracker stuck on its network costs the trainer that long at most.
``send`` never raises: every error of a tracker becomes one line of the warnings it returns.

W&B: the file saved with the run (``run.save``, policy ``now``) and ``run.config["relaxrepro"]`` set to
:func:`summary`. MLflow: the file as the artifact ``relaxrepro/manifest_<run-id>.json`` and
``relaxrepro.*`` tags (:func:`tags`). TensorBoard: the file copied into the writer's log directory as
``manifest_<run-id>.json`` and :func:`summary_text` as the text summary ``relaxrepro``.
"""

from __future__ import annotations

import os

from ..manifest import summary as manifest_summary
from ..manifest import writer as manifest_writer
from ..manifest.fields import get
from ..manifest.model import READ_LIMIT_BYTES
from ..manifest.redact import strip_credentials
from ..std.files import read_regular
from ..std.records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from types import FrameType
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

TOOLS = ("wandb", "mlflow", "tensorboard")
ENV_SWITCH = "RELAXREPRO_INTEGRATIONS"
"""``RELAXREPRO_INTEGRATIONS=0`` (or false/no/off) turns attaching off, unless a call says ``integrations=True``."""
SEND_S = 10.0
"""Seconds the trainer waits for the trackers to take the manifest (an MLflow server or artifact store
across a network); past it the trainer carries on with one warning and the upload finishes, or not, behind it."""
TENSORBOARD_MODULES = ("torch.utils.tensorboard", "tensorboardX")
_FRAMES = 64
"""Caller frames searched for a ``SummaryWriter`` (locals, ``self``'s attributes, globals)."""
_OFF = ("0", "false", "no", "off")


class Attachment(Record):
    """One tracker run: ``entry`` as ``lineage.trackers`` records it, ``handle`` what :func:`send` talks to
    (the W&B run, ``(run_id, tracking_uri)`` of MLflow with its credentials, the ``SummaryWriter``)."""

    tool: str
    entry: Dict[str, Any]
    handle: Any


def enabled(flag: Optional[bool], env: Mapping[str, str]) -> bool:
    """Whether to attach: ``integrations=True/False`` as given, else unless ``RELAXREPRO_INTEGRATIONS`` is off."""
    if flag is not None:
        return bool(flag)
    return str(env.get(ENV_SWITCH, "")).strip().lower() not in _OFF


# -- finding the trainer's runs (the caller's thread: MLflow's active run is thread-local) -----------

def find(modules: Mapping[str, Any], frame: Optional[FrameType] = None, tensorboard: Any = None
         ) -> List[Attachment]:
    """The active tracker runs of this process; ``tensorboard``: a writer given explicitly, else the
    ``SummaryWriter`` objects found in ``frame`` and its callers. Never imports a tracker."""
    found = []
    wandb = modules.get("wandb")
    run = getattr(wandb, "run", None) if wandb is not None else None
    if run is not None and getattr(run, "path", None):
        found.append(Attachment("wandb", {"tool": "wandb", "run": str(run.path)}, run))
    mlflow = modules.get("mlflow")
    active = getattr(mlflow, "active_run", None) if mlflow is not None else None
    if callable(active):
        mlrun = active()
        if mlrun is not None:
            found.append(mlflow_attachment(mlrun, str(mlflow.get_tracking_uri())))
    writers = [tensorboard] if tensorboard is not None else summary_writers(modules, frame)
    for writer in writers:
        found.append(Attachment("tensorboard", {"tool": "tensorboard", "log_dir": os.path.abspath(log_dir(writer))},
                                writer))
    return found


def mlflow_attachment(run: Any, tracking_uri: str) -> Attachment:
    info = run.info
    entry = {"tool": "mlflow", "run_id": str(info.run_id),
             "tracking_uri": shown_uri(tracking_uri)}
    if getattr(info, "experiment_id", None) is not None:
        entry["experiment_id"] = str(info.experiment_id)
    return Attachment("mlflow", entry, (str(info.run_id), tracking_uri))


def summary_writers(modules: Mapping[str, Any], frame: Optional[FrameType]) -> List[Any]:
    """``SummaryWriter`` objects (torch's or tensorboardX's) held by ``frame`` and its callers: in their
    locals, one level into ``self``, and their modules' globals. A writer kept deeper (inside a trainer
    library's callback) is not found: pass it as ``tensorboard=writer``. Scanning the whole heap
    (``gc``) would find it, at a cost that grows with the trainer's heap; this costs microseconds."""
    classes = tuple(c for c in (getattr(modules.get(name), "SummaryWriter", None) for name in TENSORBOARD_MODULES)
                    if isinstance(c, type))
    if not classes:
        return []
    found: Dict[int, Any] = {}
    scopes = set()

    def look(values: Any) -> None:
        for value in list(values):
            if isinstance(value, classes):
                found.setdefault(id(value), value)

    depth = 0
    while frame is not None and depth < _FRAMES:
        local = frame.f_locals
        look(local.values())
        me = local.get("self")
        if me is not None and isinstance(getattr(me, "__dict__", None), dict):
            look(vars(me).values())
        if id(frame.f_globals) not in scopes:
            scopes.add(id(frame.f_globals))
            look(frame.f_globals.values())
        frame, depth = frame.f_back, depth + 1
    return list(found.values())


def log_dir(writer: Any) -> str:
    get = getattr(writer, "get_logdir", None)
    return str(get() if callable(get) else writer.logdir)


def note(doc: Dict[str, Any], found: Sequence[Attachment], redactor: Any) -> None:
    """Add ``found`` to ``doc["lineage"]["trackers"]`` (each run once, entries passed through ``redactor``)."""
    if not found:
        return
    lineage, kept = manifest_summary.lineage_of(doc), manifest_summary.trackers(doc)
    for a in found:
        entry = redactor.value(dict(a.entry))
        if entry not in kept:
            kept.append(entry)
    lineage["trackers"] = kept
    doc["lineage"] = lineage


def shown_uri(uri: str) -> str:
    """A tracking URI as it may be shown or recorded: no ``user:password@``, no query (``?token=``), no fragment."""
    return strip_credentials(uri, users="any", query="drop")


def scrub(text: str, uri: Optional[str] = None) -> str:
    """A tracker's error message without the ``user:password@`` of the URLs it quotes; the tracking URI ``uri``
    shown as :func:`shown_uri` shows it, and its query and fragment taken out wherever the message quotes them
    apart from it (``Max retries exceeded with url: /mlflow?token=...``)."""
    if uri:
        text = text.replace(uri, shown_uri(uri))
        base = uri.split("#", 1)[0].split("?", 1)[0]
        tail = uri[len(base):]
        for piece in (tail, tail.split("#", 1)[0], tail[tail.find("#"):] if "#" in tail else ""):
            if len(piece) > 1:
                text = text.replace(piece, "")
    return strip_credentials(text, users="any", query="keep")


# -- what the trackers are given ---------------------------------------------------------------------

def summary(doc: Mapping[str, Any], redactor: Any) -> Dict[str, Any]:
    """The small record a tracker shows beside its own: run id, each repo's commit and dirty flag, the
    package digest, GPUs, CUDA, NCCL, the bit-reproducible verdict and, once known, the outcome."""
    doc = dict(doc)  # a Mapping given: the readers below take a dict
    out: Dict[str, Any] = {
        "run_id": doc.get("run_id"),
        "manifest": "manifest_%s.json" % doc.get("run_id"),
        "code": {r["name"]: {"commit": r["commit"], "dirty": r["dirty"]} for r in manifest_summary.repos(doc)},
        "packages_digest": get(doc, "environment.packages_digest", None),
        "gpus": manifest_summary.gpu_cell(doc),
        "cuda": get(doc, "hardware.cuda_version", None),
        "nccl": get(doc, "hardware.nccl_version", None),
        "bit_reproducible": get(doc, "seeds.bit_reproducible", None),
    }
    if get(doc, "outcome.status", None):
        out["outcome"] = manifest_summary.outcome_text(doc)
    return manifest_writer.jsonable(redactor.value(out))  # a name that is not UTF-8 as its visible escape


def tags(info: Mapping[str, Any]) -> Dict[str, str]:
    """MLflow tags of a :func:`summary`: ``relaxrepro.commit``/``.dirty`` of the one repo (per repo,
    ``relaxrepro.commit.<name>``, when there are several; ``relaxrepro.dirty`` then: any is dirty)."""
    out = {"relaxrepro.run_id": info.get("run_id"), "relaxrepro.manifest": "relaxrepro/" + str(info.get("manifest")),
           "relaxrepro.packages_digest": info.get("packages_digest"), "relaxrepro.gpus": info.get("gpus"),
           "relaxrepro.cuda": info.get("cuda"), "relaxrepro.nccl": info.get("nccl"),
           "relaxrepro.bit_reproducible": info.get("bit_reproducible"), "relaxrepro.outcome": info.get("outcome")}
    code = info.get("code") or {}
    if len(code) == 1:
        repo = next(iter(code.values()))
        out.update({"relaxrepro.commit": repo.get("commit"), "relaxrepro.dirty": repo.get("dirty")})
    elif code:
        for name, repo in code.items():
            out["relaxrepro.commit." + name] = repo.get("commit")
        out["relaxrepro.dirty"] = any(bool(repo.get("dirty")) for repo in code.values())
    return {k: _tag(v) for k, v in out.items() if v is not None}


def _tag(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def summary_text(info: Mapping[str, Any]) -> str:
    """:func:`summary` as the Markdown table TensorBoard's text tab renders."""
    lines = ["| relaxrepro | |", "|---|---|"]
    for key, value in sorted(info.items()):
        if key == "code":
            for name, repo in sorted((value or {}).items()):
                lines.append("| code.%s | %s%s |" % (name, repo.get("commit"), " (dirty)" if repo.get("dirty") else ""))
        elif value is not None:
            lines.append("| %s | %s |" % (key, str(value).replace("|", "\\|")))
    return "\n".join(lines)


def send(found: Sequence[Attachment], path: str, info: Dict[str, Any], modules: Mapping[str, Any],
         final: bool = False) -> List[str]:
    """Give each run the manifest at ``path`` and its summary ``info``; the warnings (one per tool that
    failed), never an exception. ``final``: the copy made at the end, with the outcome."""
    warnings = []
    for a in found:
        try:
            _SENDERS[a.tool](a.handle, path, info, modules, final)
        except Exception as exc:
            uri = a.handle[1] if a.tool == "mlflow" else None
            warnings.append(scrub("%s: %s: %s" % (NAMES[a.tool], type(exc).__name__, exc), uri))
    return warnings


NAMES = {"wandb": "W&B", "mlflow": "MLflow", "tensorboard": "TensorBoard"}


def send_wandb(run: Any, path: str, info: Dict[str, Any], modules: Mapping[str, Any], final: bool) -> None:
    base = os.path.dirname(os.path.abspath(path))
    try:
        run.save(os.path.abspath(path), base_path=base, policy="now", glob=False)  # a '[' in the folder is no glob
    except TypeError:  # wandb before 0.22 has no glob=
        run.save(os.path.abspath(path), base_path=base, policy="now")
    run.config.update({"relaxrepro": info}, allow_val_change=True)


def send_mlflow(handle: Any, path: str, info: Dict[str, Any], modules: Mapping[str, Any], final: bool) -> None:
    run_id, uri = handle
    mlflow = modules["mlflow"]
    client_class = getattr(mlflow, "MlflowClient", None) or mlflow.tracking.MlflowClient
    client = client_class(tracking_uri=uri)
    client.log_artifact(run_id, path, artifact_path="relaxrepro")
    for key, value in sorted(tags(info).items()):
        client.set_tag(run_id, key, value)


def send_tensorboard(writer: Any, path: str, info: Dict[str, Any], modules: Mapping[str, Any], final: bool) -> None:
    directory = log_dir(writer)
    copy = os.path.join(directory, os.path.basename(path))
    if not (os.path.exists(copy) and os.path.samefile(copy, path)):  # the log dir may be the output dir
        os.makedirs(directory, exist_ok=True)
        manifest_writer.replace_atomically(copy, read_regular(path, READ_LIMIT_BYTES))
    if getattr(writer, "all_writers", True) is None:
        return  # closed: a text summary would open a new event file behind the trainer's back
    writer.add_text("relaxrepro", summary_text(info), global_step=1 if final else 0)
    writer.flush()


_SENDERS: Dict[str, Callable[..., None]] = {"wandb": send_wandb, "mlflow": send_mlflow,
                                             "tensorboard": send_tensorboard}
