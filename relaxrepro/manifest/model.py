"""The manifest as data: its version, sections, size cap, key packages and run ids, and the :class:`Manifest` type.

Nothing here looks at the machine; collection (``relaxrepro.collect``) fills the document, the writer
fits and stores it, the reader checks it.
"""

from __future__ import annotations

import os
import re
import time

from .trace import MAX_STEPS_ENV, Trace, max_steps

_PID = [os.getpid()]
"""This process's id, kept by a fork hook: ``os.getpid`` is a system call (~0.3 us where system calls are
trapped, as under gVisor), and :meth:`Manifest.trace` asks for it at every step."""


def _forked() -> None:
    _PID[0] = os.getpid()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork, so its pid never changes under us
    os.register_at_fork(after_in_child=_forked)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import datetime
    from typing import Any, Dict, List, Mapping, Optional, Tuple, Union



SCHEMA_VERSION = "1.3"
"""1.0: the foundation sections. 1.1 adds the optional sections seeds, data, container, scheduler,
lineage, outcome and heterogeneity (and fields inside the 1.0 sections). 1.2 writes ``config.files`` as
Relax's reader wants it (an object: path -> digest; see :data:`CONFIG_FILE_MAPS`) and adds
``command.working_directory``. 1.3 adds ``results`` (metrics, outputs, trace), ``lineage.replay_of`` and
``lineage.trackers``. Readers take every 1.x."""
MAJOR = 1
"""The major version this relaxrepro reads; another major is refused."""

SECTIONS = ("command", "code", "config", "environment", "hardware", "runtime", "training", "collection")
"""Sections every manifest carries (possibly empty). Later 1.x minors add optional ones."""

CAP_BYTES = 100_000
"""The size every manifest written here fits under (the writer's degradation order makes it fit)."""

READ_LIMIT_BYTES = 10 * 1024 * 1024
"""The largest file a reader accepts: older writers and other tools did not keep to :data:`CAP_BYTES`."""

ADOPT_LIMIT_BYTES = 4 * CAP_BYTES
"""The largest file at ``RELAXREPRO_MANIFEST`` the API adopts and rewrites: the manifest ``relaxrepro run``
wrote is under :data:`CAP_BYTES`, so anything much larger at that path is not ours to rewrite."""

KEY_PACKAGES: Tuple[str, ...] = (
    "torch", "ray", "sglang", "vllm", "megatron-core", "transformer-engine", "flash-attn", "deepspeed",
    "transformers", "accelerate", "datasets", "numpy", "triton", "apex",
)
"""The packages recorded apart under ``environment.key_packages`` and kept when a package list is cut."""

DECISIVE_PACKAGES: Tuple[str, ...] = (
    "torch", "ray", "sglang", "vllm", "megatron-core", "transformer-engine", "flash-attn", "transformers",
)
"""The key packages whose version decides whether a run computes the same thing: ``check`` FAILs on
another minor of one of these, and only reports the other packages."""

_KEY_PATTERN = re.compile(
    # The CUDA stack as wheels: nvidia-cudnn-cu12, nvidia-nccl-cu13, and CUDA 13's unsuffixed
    # nvidia-cuda-runtime; transformer-engine ships as transformer-engine-cu12 / -torch too.
    r"^(?:nvidia-(?:cuda-runtime|cuda-nvrtc|cudnn|nccl|cublas)(?:-cu\d+)?|transformer-engine-[a-z0-9]+|pytorch-triton)$"
)

KEY_VARIABLES: Tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE",
)
KEY_VARIABLE_PREFIXES: Tuple[str, ...] = ("NCCL_",)
"""Environment variables that decide which devices a run sees and what it computes: kept, like the key
packages, when the size cap summarises a map of thousands of entries."""

OUTPUT_DIR_ENV = "RELAXREPRO_OUTPUT_DIR"
"""Where manifests go when no directory is given (``generate``, ``run``, the API)."""

RUN_ID_ENV = "RELAXREPRO_RUN_ID"
"""The run id shared by every process and node of one run (``relaxrepro run`` exports it to the command;
an sbatch script exports it for ``generate`` and every node's ``--node-report``)."""

RUN_ID_MAX = 128
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,%d}$" % (RUN_ID_MAX - 1))
"""A run id given by a user (``--run-id``, ``$RELAXREPRO_RUN_ID``): safe in a file name."""


def is_key_package(name: str) -> bool:
    """Whether a (PEP 503 normalised) package name is a key package or part of the CUDA stack as wheels."""
    return name in KEY_PACKAGES or bool(_KEY_PATTERN.match(name))


def is_key_entry(name: str) -> bool:
    """Whether a map entry named ``name`` (a package or an environment variable) is kept when its map is cut."""
    return is_key_package(name) or name in KEY_VARIABLES or name.startswith(KEY_VARIABLE_PREFIXES)


CONFIG_FILE_MAPS = ("files", "file_details", "file_contents")
"""The maps under ``config`` keyed by a config file's path as the command named it: ``files`` its
``sha256:<hex>`` digest (Relax's layout, which its reader requires to be an object of strings),
``file_details`` its ``size``, ``binary`` and ``error``, ``file_contents`` its text when kept inline.
Up to 1.1 one list held ``{path, size, sha256, content, binary, error}`` entries instead."""


def config_file_maps(entries: Any) -> Dict[str, Dict[str, Any]]:
    """``{path, size?, sha256?, content?, binary?, error?}`` entries (the config probe's, or the list 1.0
    and 1.1 wrote) as the path-keyed maps of :data:`CONFIG_FILE_MAPS`; the last two only when not empty.
    An entry without a path has no key to go under and is left out."""
    files: Dict[str, Any] = {}
    details: Dict[str, Any] = {}
    contents: Dict[str, Any] = {}
    for entry in entries if isinstance(entries, list) else ():
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not path:
            continue
        digest = entry.get("sha256")
        if isinstance(digest, str) and digest:
            files[path] = digest if digest.startswith("sha256:") else "sha256:" + digest
        rest = {k: v for k, v in entry.items() if k not in ("path", "sha256", "content")}
        if rest:
            details[path] = rest
        if "content" in entry:
            contents[path] = entry["content"]
    maps: Dict[str, Dict[str, Any]] = {"files": files}
    if details:
        maps["file_details"] = details
    if contents:
        maps["file_contents"] = contents
    return maps


def output_dir(given: Any, env: Mapping[str, str]) -> str:
    """The directory manifests go to: the one given, else ``$RELAXREPRO_OUTPUT_DIR``, else ``.``."""
    if given is not None and given != "":
        return os.fspath(given)
    return env.get(OUTPUT_DIR_ENV) or "."


def valid_run_id(run_id: Optional[str]) -> bool:
    return bool(run_id) and bool(RUN_ID_RE.match(run_id))  # type: ignore[arg-type]


def run_id_problem(run_id: str) -> Optional[str]:
    """What breaks :data:`RUN_ID_RE` in ``run_id``, said as the rule it breaks; None for a valid one."""
    if not run_id:
        return "empty"
    if len(run_id) > RUN_ID_MAX:
        return "too long (%d > %d characters)" % (len(run_id), RUN_ID_MAX)
    if not run_id[0].isascii() or not run_id[0].isalnum():
        return "must start with a letter or a digit"
    bad = next((c for c in run_id if not (c.isascii() and (c.isalnum() or c in "._-"))), None)
    if bad is not None:
        return "%r is not allowed: use letters, digits, '.', '_' and '-' only" % bad
    return None


class Manifest(dict):
    """A manifest document: a plain dict (JSON-ready) with a few conveniences."""

    warnings: List[str]
    path: Optional[str]
    private_sidecars: Dict[str, bytes]
    """{repo name: unredacted patch} for ``--private-patch``; written 0600 beside the manifest,
    never part of the document."""
    redacted_by: Any
    """The redaction policy (a ``Redactor``) collection applied, so the writer does not apply it twice."""
    tracer: Any
    """The :class:`~relaxrepro.manifest.trace.Trace` of :meth:`trace` (None until the first call); written
    into ``results.trace`` with the outcome."""
    outer: Any
    """The manifest of ``relaxrepro run`` this one is folded into (:mod:`relaxrepro.record.adopt`), else None."""
    flushed: bool
    """Written with its outcome when its ``recorded`` block ended: not written again at interpreter exit."""
    pid: int
    """The process that made it: only that process writes it, traces into it or records its outcome (a child
    forked inside ``recorded`` holds a copy, and its exit must not overwrite the parent's run)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.warnings = []
        self.path = None
        self.private_sidecars = {}
        self.redacted_by = None
        self.tracer = None
        self.outer = None
        self.flushed = False
        self.pid = _PID[0]

    def owned(self) -> bool:
        """Whether this process made this manifest (see :attr:`pid`)."""
        return self.pid == _PID[0]

    def trace(self, step: Any, loss: Any = None, **scalars: Any) -> None:
        """Keep this step's scalars exactly (the first 50 steps, then every K-th; see
        :mod:`relaxrepro.manifest.trace`); no I/O. At ``$RELAXREPRO_MAX_STEPS`` the step is kept and the run
        ends cleanly: ``SystemExit(0)``, which ``recorded`` writes as outcome ok with the trace."""
        self.trace_values(step, loss, scalars)

    def trace_values(self, step: Any, loss: Any, scalars: Dict[str, Any]) -> None:
        """:meth:`trace` with the scalars as the dict they came in (relaxrepro.trace hands its own on: a
        second ``**`` costs about as much as the rest of the call)."""
        if not self.owned():  # a forked child's copy: its rows would never be written, only the stop holds
            if should_stop(step):
                stop_run(step)
            return
        tracer = self.tracer
        if tracer is None:
            tracer = self.tracer = Trace(stop=max_steps(os.environ))
        if tracer.add(step, loss, scalars):
            stop_run(step)

    def should_stop(self, step: Any) -> bool:
        """True when ``$RELAXREPRO_MAX_STEPS`` is set and ``step`` has reached it (a quick replay)."""
        return should_stop(step)

    @property
    def run_id(self) -> str:
        return str(self.get("run_id", ""))


def should_stop(step: Any) -> bool:
    """True when ``$RELAXREPRO_MAX_STEPS=N`` is set and ``step >= N``."""
    limit = max_steps(os.environ)
    try:
        return limit is not None and step >= limit
    except TypeError:
        return False


def stop_run(step: Any) -> None:
    """End the run cleanly after ``step`` under ``$RELAXREPRO_MAX_STEPS``: ``SystemExit(0)``, so ``recorded``
    writes outcome ok, the trace and results, as at any clean exit."""
    import logging  # lazy: ~4 ms, once, when a quick replay stops the run

    logging.getLogger("relaxrepro").warning("relaxrepro: stopping after step %s (%s=%s)",
                                            step, MAX_STEPS_ENV, os.environ.get(MAX_STEPS_ENV))
    raise SystemExit(0)


def _utc_strftime(fmt: str, now: Optional[Union["datetime.datetime", time.struct_time]]) -> str:
    """``now`` (a UTC ``time.gmtime()`` struct or an aware ``datetime``; default: now) formatted."""
    # time.gmtime, not datetime (~2.5 ms to import); a caller's datetime still works.
    if now is None:
        now = time.gmtime()
    if isinstance(now, time.struct_time):
        return time.strftime(fmt, now)
    return now.strftime(fmt)


def new_run_id(now: Optional[Union["datetime.datetime", time.struct_time]] = None) -> str:
    """``YYYYMMDD_HHMMSS_<7 hex>``: UTC time plus randomness (the commit lives in ``code``)."""
    # os.urandom, not secrets.token_hex: the same bytes, without secrets' hmac/hashlib/OpenSSL/random (~8 ms).
    return _utc_strftime("%Y%m%d_%H%M%S_", now) + os.urandom(4).hex()[:7]


def utc_now_iso(now: Optional[Union["datetime.datetime", time.struct_time]] = None) -> str:
    return _utc_strftime("%Y-%m-%dT%H:%M:%SZ", now)
