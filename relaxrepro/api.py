"""The Python API for a trainer's entry point.

These functions never raise and never block past the deadline: whatever fails, the trainer gets
``None`` or a partial manifest and one warning through :mod:`logging` (logger ``relaxrepro``).
The collection runs in a daemon thread joined with a deadline, so even a probe stuck in a call that
ignores its own timeout (an NFS stat, a wedged driver) costs the trainer at most the deadline.

    args = parser.parse_args()
    with relaxrepro.recorded(args, output_dir=args.log_dir) as manifest:
        ray.init()
        relaxrepro.update_manifest(manifest)   # live Ray topology, kept at exit with the outcome
        train(args)
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .manifest.model import Manifest, output_dir, should_stop, stop_run
from .record import session
from .std.text import safe_format


class _Escaped(logging.Filter):
    """Our warnings quote manifests, paths and tools' stderr: their values are escaped before any handler
    sees them, so a trainer's log on a terminal takes no control sequence and no forged line from them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.msg, record.args = safe_format(str(record.msg), *record.args), ()
        return True


log = logging.getLogger("relaxrepro")
log.addFilter(_Escaped())

_GRACE_S = 2.0
"""Seconds past the collection deadline before the API stops waiting for it (merging, redaction)."""

Updater = Callable[[Manifest, Dict[str, Any]], Any]
"""``fn(manifest, options) -> runner.Outcome | None``: what only the running trainer can see."""

_UPDATERS: List[Tuple[str, Updater]] = []
"""Named steps run by :func:`update_manifest`, in order; the name is the key under ``collection.probes``.
The Ray issue plugs ``runtime_from_ray`` in here with :func:`register_updater`."""

_lock = threading.RLock()

_claimed = False
"""Whether this process has already tried to adopt the manifest of ``relaxrepro run`` (once per process)."""

_ADOPT_S = 2.0
"""Seconds reading run's manifest may take (a hung network filesystem) before the trainer records alone."""


def register_updater(name: str, fn: Updater) -> None:
    """Add (or replace, by name) a step that :func:`update_manifest` runs."""
    with _lock:
        for i, (existing, _fn) in enumerate(_UPDATERS):
            if existing == name:
                _UPDATERS[i] = (name, fn)
                return
        _UPDATERS.append((name, fn))


def _bounded(fn: Callable[[], Any], limit: float, what: str) -> Tuple[bool, Any]:
    """Run ``fn`` in a daemon thread for at most ``limit`` seconds: (finished, result or exception)."""
    box: Dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: B036 - reported to the caller's thread, never lost
            box["error"] = exc

    t = threading.Thread(target=body, name="relaxrepro-" + what, daemon=True)
    t.start()
    t.join(limit)
    if t.is_alive():
        return False, None
    if "error" in box:
        return False, box["error"]
    return True, box.get("value")


def collect_manifest(
    args: Any = None,
    *,
    repos: Optional[Mapping[str, str]] = None,
    data: Optional[Sequence[str]] = None,
    parent: Any = None,
    group: Optional[str] = None,
    note: Optional[str] = None,
    output_dir: Optional[str] = None,
    argv: Optional[Sequence[str]] = None,
    env: Optional[Mapping[str, str]] = None,
    deadline_s: Optional[float] = None,
    **options: Any,
) -> Optional[Manifest]:
    """Collect a manifest of the calling process's run. Call after parsing arguments, before ``ray.init()``.

    ``args``: the parsed arguments (Namespace, dict, any object with ``__dict__``); ``repos``: extra
    repositories by name; ``data``: input paths to fingerprint; ``parent``: a run id, a manifest path
    or a :class:`Manifest`; ``group``/``note``: lineage. Returns None (and logs one warning) when
    nothing could be collected within the deadline.

    Started by ``relaxrepro run`` (``RELAXREPRO_MANIFEST`` names its manifest of ``RELAXREPRO_RUN_ID``),
    the first manifest collected by rank 0 of the process takes run's run id and its lineage (unless
    ``parent``/``group``/``note`` are given here), and :func:`write_manifest` folds it into run's file.
    """
    try:
        from .collect.context import DEADLINE, Context

        limit = float(deadline_s) if deadline_s else DEADLINE
        if argv is None:
            argv = [sys.executable] + list(sys.argv)
        for key, value in (("args", args), ("repos", repos), ("data", data), ("parent", parent),
                           ("group", group), ("note", note), ("output_dir", output_dir)):
            if value is not None:
                options[key] = value
        ctx = Context(env=env, argv=argv, argv_source="api", deadline_s=limit, options=options)
        explicit = {key for key in ("parent", "group", "note") if key in options}
        adopting = _claim(env if env is not None else os.environ)
    except Exception as exc:
        log.warning("relaxrepro: could not collect a manifest: %s: %s", type(exc).__name__, exc)
        return None
    found: Dict[str, Any] = {}

    def build() -> Manifest:
        from .collect.assemble import build as assemble

        outer = None
        if adopting:  # read in this thread: RELAXREPRO_MANIFEST may sit on a hung network filesystem
            from .record import adopt

            done, answer = _bounded(functools.partial(adopt.find, ctx.env), min(_ADOPT_S, limit), "adopt")
            if done:
                outer, found["warning"] = answer
            else:
                found["warning"] = "%s=%s: %s; this process writes a manifest of its own" % (
                    adopt.ENV_MANIFEST, ctx.env.get(adopt.ENV_MANIFEST),
                    "no answer within %g s" % min(_ADOPT_S, limit) if answer is None else
                    "%s: %s" % (type(answer).__name__, answer))
        m = assemble(ctx, run_id=outer.run_id if outer is not None else None)
        if outer is not None:
            adopt.adopt_lineage(m, outer.doc, explicit)
            m._outer = outer  # type: ignore[attr-defined]  # where write_manifest folds it
        return m

    finished, value = _bounded(build, limit + _GRACE_S, "collect")
    if found.get("warning"):
        log.warning("relaxrepro: %s", found["warning"])
    if not finished:
        why = "%s: %s" % (type(value).__name__, value) if value is not None else \
            "still running after %.0f s; gave up waiting" % (limit + _GRACE_S)
        log.warning("relaxrepro: could not collect a manifest: %s", why)
        return None
    m: Manifest = value
    _warn_problems(m, "partial manifest")
    _collected(m)
    return m


def _claim(env: Mapping[str, str]) -> bool:
    """True for the one call per process that may adopt the manifest of ``relaxrepro run``.

    Only rank 0 adopts, as only rank 0 records: under ``relaxrepro run -- torchrun ...`` the other
    ranks' ``collect_manifest(all_ranks)`` calls must not all rewrite one file. Later calls in the same
    process (``@recorded`` on a function called per trial) are runs of their own, with their own files.
    """
    global _claimed
    # The name adopt.ENV_MANIFEST, spelled out: adopt is imported only when it is set.
    if not env.get("RELAXREPRO_MANIFEST") or not session.records_here(env):
        return False
    with _lock:
        if _claimed:
            return False
        _claimed = True
    return True


def _warn_problems(m: Manifest, what: str) -> None:
    from .collect.assemble import probe_problems

    problems = probe_problems(m)
    unfound = session.unfound_parent(m)
    if unfound:
        problems.append(unfound)
    if problems:
        m.warnings.extend(problems)
        log.warning("relaxrepro: %s: %s", what, "; ".join(problems))


def update_manifest(manifest: Optional[Manifest], **options: Any) -> Optional[Manifest]:
    """Add what only the running trainer can see (the live Ray topology after ``ray.init()``).

    Runs each registered updater under the deadline and merges what it reports into ``manifest``,
    with its status under ``collection.probes``. ``per_node=True``: then one zero-CPU Ray task per
    alive node collects that node's fragment, merged into ``runtime.nodes`` and ``heterogeneity``
    (``deadline_s``, default 10 s, bounds the wait). Returns the same manifest; None stays None.
    """
    if manifest is None:
        return None
    try:
        from .collect import runner
        from .collect.context import DEADLINE

        with _lock:
            updaters = list(_UPDATERS)
        given = options.pop("deadline_s", None)
        per_node = bool(options.pop("per_node", False))
        limit = float(given or DEADLINE)
        problems: List[str] = []
        for name, fn in updaters:
            t0 = time.monotonic()
            finished, value = _bounded(functools.partial(fn, manifest, dict(options)), limit, "update-" + name)
            seconds = round(time.monotonic() - t0, 4)
            if not finished:
                status = "timeout" if value is None else "failed"
                warning = "%s did not finish within %.0f s" % (name, limit) if value is None else \
                    "%s crashed: %s: %s" % (name, type(value).__name__, value)
                entry: Dict[str, Any] = {"status": status, "seconds": seconds, "warnings": [warning]}
                problems.append(warning)
            elif value is None:
                continue
            else:
                entry = {"status": getattr(value, "status", "ok"), "seconds": seconds,
                         "warnings": [str(w) for w in getattr(value, "warnings", [])]}
                with _lock:
                    # What the running trainer sees is newer than what was seen from outside.
                    runner.merge_into(manifest, getattr(value, "data", None) or {}, override=True)
            with _lock:
                collection = manifest.setdefault("collection", {})
                collection.setdefault("probes", {})[name] = entry
        if per_node:
            # One zero-CPU Ray task per alive node collects that node's fragment (issue 10).
            from .collect import node

            wait = float(given) if given else node.PER_NODE_DEADLINE
            finished, value = _bounded(functools.partial(node.update_per_node, manifest, wait), wait + _GRACE_S,
                                       "update-per-node")
            if finished and isinstance(value, dict) and value is not manifest:
                with _lock:
                    manifest.clear()
                    manifest.update(value)
            elif not finished:
                problems.append("per-node collection: %s" % (
                    "%s: %s" % (type(value).__name__, value) if value is not None else "did not finish in time"))
        if problems:
            log.warning("relaxrepro: could not update the manifest: %s", "; ".join(problems))
    except Exception as exc:
        log.warning("relaxrepro: could not update the manifest: %s: %s", type(exc).__name__, exc)
    return manifest


def write_manifest(manifest: Optional[Dict[str, Any]], directory: "os.PathLike[str] | str | None" = None, *,
                   integrations: Optional[bool] = None, tensorboard: Any = None) -> Optional[str]:
    """Write ``manifest_<run-id>.json`` into ``directory`` (created if needed) atomically.

    Attached to the trainer's active W&B run, MLflow run and TensorBoard ``SummaryWriter`` (found in the
    caller's frames, or given as ``tensorboard=writer``), which ``lineage.trackers`` records; see
    :mod:`relaxrepro.record.trackers`. ``integrations=False`` (or ``RELAXREPRO_INTEGRATIONS=0``) turns that off.

    Default directory: ``$RELAXREPRO_OUTPUT_DIR``, else ``.``. Returns the path, or None (one
    warning logged). Writing the same manifest to the same directory again returns the first path:
    a manifest is written once.

    A manifest that adopted the run of ``relaxrepro run`` (see :func:`collect_manifest`) is folded
    into run's file instead, whatever ``directory`` says (one run, one manifest), and every call
    folds again, so later changes are kept; its path is returned. Should that file be gone or hold
    another run now, the manifest is written to ``directory`` as usual, under a fresh run id.
    """
    if manifest is None:
        return None
    found = _find_trackers(manifest, integrations, tensorboard)
    path = _write(manifest, directory)
    if path is not None and found:
        _send_trackers(found, path, manifest)
    return path


def _write(manifest: Dict[str, Any], directory: "os.PathLike[str] | str | None") -> Optional[str]:
    try:
        from .manifest.model import new_run_id

        target = output_dir(directory, os.environ)
        with _lock:
            outer = getattr(manifest, "_outer", None)
            if outer is not None:
                from .record import adopt

                path, why = adopt.write(outer, manifest, first=getattr(manifest, "path", None) != outer.path)
                if path is not None:
                    if why:
                        log.warning("relaxrepro: %s", why)
                    manifest.path = path
                    return path
                log.warning("relaxrepro: %s; writing a manifest of its own", why)
                manifest._outer = None  # type: ignore[attr-defined]
                manifest.path = None
                manifest["run_id"] = new_run_id()  # run's id stays run's file's alone
            earlier = getattr(manifest, "path", None)
            if earlier and os.path.isfile(earlier) and _same_dir(os.path.dirname(earlier), target):
                return earlier
            target = session.output_directory(target, os.environ)  # created, as generate and run do
            # Redacted again (the trainer may have changed it) with the policy it was collected with;
            # follows a fresh run id taken on a clash.
            result = session.write(manifest, directory=target)
        if result.warnings:
            log.warning("relaxrepro: %s", "; ".join(result.warnings))
        return result.path
    except Exception as exc:
        log.warning("relaxrepro: could not write the manifest: %s: %s", type(exc).__name__, exc)
        return None


def _find_trackers(manifest: Dict[str, Any], integrations: Optional[bool], tensorboard: Any) -> List[Any]:
    """The tracker runs of the trainer (never imported here), noted under ``lineage.trackers``; [] when off."""
    try:
        from .record import trackers

        if not trackers.enabled(integrations, os.environ):
            return []
        found = trackers.find(sys.modules, sys._getframe(1), tensorboard)
        if found:
            from .collect.context import policy_of

            with _lock:
                trackers.note(manifest, found, policy_of(manifest))
        return found
    except Exception as exc:
        log.warning("relaxrepro: could not look for tracker runs: %s: %s", type(exc).__name__, exc)
        return []


def _send_trackers(found: List[Any], path: str, manifest: Dict[str, Any], final: bool = False) -> None:
    """Hand the written manifest to the tracker runs, waiting at most ``trackers.SEND_S`` (one warning)."""
    try:
        from .collect.context import policy_of
        from .record import trackers

        with _lock:
            info = trackers.summary(manifest, policy_of(manifest))
        done, value = _bounded(functools.partial(trackers.send, found, path, info, sys.modules, final),
                               trackers.SEND_S, "trackers")
        if not done:
            value = ["%s: %s" % (", ".join(trackers.NAMES[a.tool] for a in found),
                                 "no answer within %g s; the trainer carries on" % trackers.SEND_S
                                 if value is None else "%s: %s" % (type(value).__name__, value))]
        if value:
            log.warning("relaxrepro: could not attach the manifest to %s", "; ".join(value))
    except Exception as exc:
        log.warning("relaxrepro: could not attach the manifest: %s: %s", type(exc).__name__, exc)


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a or ".", b or ".")
    except OSError:
        return False


class _State:
    def __init__(self, manifest: Optional[Manifest], path: Optional[str], started: float) -> None:
        self.manifest = manifest
        self.path = path
        self.started = started
        self.out: Optional[str] = None


class recorded:  # noqa: N801 - used like a function: ``with recorded(...)`` / ``@recorded(...)``
    """Record this run: collect, update and write at entry; add the outcome at exit.

    As a context manager it yields the :class:`Manifest` (or None); as a decorator each call of the
    function is one recorded run. The exception, ``sys.exit`` code or ``KeyboardInterrupt`` passes
    through untouched. Only rank 0 (``RANK``, else ``SLURM_PROCID``) records unless ``all_ranks``.
    Changes made to the manifest inside the block (``update_manifest`` after ``ray.init()``) are
    written at exit together with the outcome. Under ``relaxrepro run`` both go into run's manifest
    (see :func:`write_manifest`); run then lays the process's exit status or signal over this
    outcome, which keeps ``exception_type`` from here. The trainer's active W&B, MLflow and TensorBoard runs get
    the manifest at entry and the final one at exit (see :func:`write_manifest`; ``integrations=False`` turns
    that off, ``tensorboard=writer`` names a writer the caller's frames do not hold).
    """

    def __init__(self, args: Any = None, output_dir: "os.PathLike[str] | str | None" = None, *,
                 all_ranks: bool = False, metrics: Optional[Mapping[str, Any]] = None,
                 outputs: Optional[Sequence[Any]] = None, integrations: Optional[bool] = None, tensorboard: Any = None,
                 **options: Any) -> None:
        self._args = args
        self._output_dir = output_dir
        self._all_ranks = all_ranks
        self._metrics = metrics
        self._outputs = outputs
        self._trackers: Dict[str, Any] = {"integrations": integrations, "tensorboard": tensorboard}
        self._options = options
        self._local = threading.local()

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with recorded(self._args, self._output_dir, all_ranks=self._all_ranks, metrics=self._metrics,
                          outputs=self._outputs, **self._trackers, **self._options):
                return func(*a, **kw)

        return wrapper

    def __enter__(self) -> Optional[Manifest]:
        started = time.monotonic()
        state = _State(None, None, started)
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append(state)
        _active.__dict__.setdefault("stack", []).append(state)  # trace()/result() act on the innermost block
        try:
            env = self._options.get("env") or os.environ
            if not session.records_here(env, self._all_ranks):
                return None
            out = output_dir(self._output_dir, env)
            state.out = out
            m = collect_manifest(self._args, output_dir=out, **self._options)
            m = update_manifest(m)
            state.manifest = m
            state.path = write_manifest(m, out, **self._trackers)
            return m
        except Exception as exc:  # pragma: no cover - every call above already keeps the promise
            log.warning("relaxrepro: could not record this run: %s: %s", type(exc).__name__, exc)
            return state.manifest

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        try:
            stack = self._local.__dict__.get("stack") or []
            state = stack.pop() if stack else None
            active = _active.__dict__.get("stack") or []
            if state in active:
                active.remove(state)
            if state is None or state.path is None or state.manifest is None:
                return False
            from .record import outcome

            if not (exc_type is not None and issubclass(exc_type, KeyboardInterrupt)):  # ^C: leave at once
                result(self._metrics, self._outputs, manifest=state.manifest)
            settle(state.manifest)
            ended = outcome.from_exit(exc_type, exc, state.started)
            state.manifest._flushed = True  # type: ignore[attr-defined]  # written here, not again at exit
            if getattr(state.manifest, "_outer", None) is not None:
                # Under relaxrepro run the outcome goes into run's manifest with the rest; run lays the
                # process's exit status or signal over it once the command has exited, keeping only
                # our exception_type (what run cannot see).
                state.manifest["outcome"] = ended
                write_manifest(state.manifest, state.out, **self._trackers)  # warns on its own
                return False
            # The tracker runs of now (one may have started inside the block) get the final file, with the outcome.
            found = _find_trackers(state.manifest, self._trackers["integrations"], self._trackers["tensorboard"])
            warning = outcome.record(state.path, ended, run_id=state.manifest.run_id, doc=state.manifest)
            if warning:
                log.warning("relaxrepro: %s", warning)
            else:
                state.manifest["outcome"] = ended
                if found:
                    _send_trackers(found, state.path, state.manifest, final=True)
        except Exception as err:  # never replace the trainer's own exception with ours
            log.warning("relaxrepro: could not record the outcome: %s: %s", type(err).__name__, err)
        return False


# -- results and the trace ---------------------------------------------------------------------------

_active = threading.local()
"""``stack``: this thread's open ``recorded`` blocks (their ``_State``), innermost last."""

_last: Optional[Manifest] = None
"""The manifest collected last in this process: what :func:`trace` and :func:`result` act on outside a block."""


def _collected(m: Manifest) -> None:
    global _last
    first = _last is None
    _last = m
    if first:
        import atexit

        atexit.register(_flush_last)


def current_manifest() -> Optional[Manifest]:
    """The manifest :func:`trace` and :func:`result` act on: the innermost open ``recorded`` block's in this
    thread (None on a rank that does not record), else the one collected last in this process."""
    stack = _active.__dict__.get("stack")
    return stack[-1].manifest if stack else _last


def trace(step: Any, loss: Any = None, **scalars: Any) -> None:
    """:meth:`Manifest.trace` on :func:`current_manifest`; without one, only the stop at
    ``$RELAXREPRO_MAX_STEPS`` (every rank of a quick replay stops at the same step)."""
    m = current_manifest()
    if m is not None:
        m.trace(step, loss, **scalars)
    elif should_stop(step):
        stop_run(step)


def result(metrics: Optional[Mapping[str, Any]] = None, outputs: Optional[Sequence[Any]] = None,
           manifest: Optional[Manifest] = None) -> Optional[Dict[str, Any]]:
    """Record final ``metrics`` ({name: number}) and fingerprint ``outputs`` (files or directories) into
    ``results`` of ``manifest`` (default :func:`current_manifest`); written with the outcome at exit.
    Returns the ``results`` section so far, or None without a manifest. Never raises: one warning instead."""
    m = manifest if manifest is not None else current_manifest()
    if m is None or (metrics is None and outputs is None):
        return m.get("results") if m is not None else None
    try:
        from .collect.context import safe_getcwd
        from .record import results

        problems: List[str] = []
        found: Dict[str, Any] = {}
        if metrics is not None:
            found["metrics"], warns = results.metrics_section(metrics)
            problems.extend(warns)
        if outputs is not None:
            paths = [outputs] if isinstance(outputs, (str, bytes, os.PathLike)) else list(outputs)
            found["outputs"], warns = results.fingerprint_outputs(paths, cwd=safe_getcwd(), env=os.environ)
            problems.extend(warns)
        with _lock:
            section = results.merge(m, **found)
        if problems:
            log.warning("relaxrepro: results: %s", "; ".join(problems))
        return section
    except Exception as exc:
        log.warning("relaxrepro: could not record the results: %s: %s", type(exc).__name__, exc)
        return None


def settle(m: Manifest) -> None:
    """The trace collected in memory, laid into ``results.trace`` before a write."""
    from .record import results

    with _lock:
        results.settle(m)


def _flush_last() -> None:
    """At interpreter exit: the trace and results of a manifest recorded without ``recorded`` (by
    ``collect_manifest`` + ``write_manifest``) go into its file, as ``recorded`` does at the block's end."""
    m = _last
    if m is None or getattr(m, "path", None) is None or getattr(m, "_flushed", False):
        return
    from .record import results

    if any(s.manifest is m for s in _active.__dict__.get("stack") or ()) or not results.pending(m):
        return
    try:
        settle(m)
        if getattr(m, "_outer", None) is not None:
            write_manifest(m)
            return
        from .record import outcome

        warning = outcome.record(m.path, None, run_id=m.run_id, doc=m)
        if warning:
            log.warning("relaxrepro: %s", warning)
    except Exception as exc:
        log.warning("relaxrepro: could not record the results: %s: %s", type(exc).__name__, exc)


def _ray_live(manifest: Manifest, options: Dict[str, Any]) -> Any:
    """The live Ray topology from the trainer's own driver: ``ray.nodes()`` and ``cluster_resources()``.

    No subprocess, no second driver. Ray is never imported here: without an initialised Ray in this
    process the step reports nothing. It replaces the runtime seen from outside (which may have been
    partial) and re-derives the training topology from it.
    """
    ray = sys.modules.get("ray")
    if ray is None or not callable(getattr(ray, "is_initialized", None)) or not ray.is_initialized():
        return None
    from .collect import runner
    from .collect.context import policy_of
    from .collect.probes import ray as ray_probe
    from .collect.probes import training

    live = ray_probe.runtime_from_ray_nodes(
        ray.nodes(), ray.cluster_resources(), str(getattr(ray, "__version__", "") or "") or None)
    with _lock:
        runtime = dict(manifest.get("runtime") or {})
        old_ray = runtime.get("ray") if isinstance(runtime.get("ray"), dict) else {}
        for key in ("mode", "node_count", "nodes", "dead_nodes", "totals", "local_nodes"):
            runtime.pop(key, None)
        live_ray = live.pop("ray")
        for key in ("cli_version", "address", "address_source"):
            if old_ray.get(key) is not None:
                live_ray[key] = old_ray[key]
        if live_ray.get("cli_version") and live_ray.get("version"):
            live_ray["mismatch"] = live_ray["cli_version"] != live_ray["version"]
        runtime.update(live)
        runtime["ray"] = live_ray
        manifest["runtime"] = runtime
        derived, _ = training.derive_training(manifest)
        kept = {k: v for k, v in (manifest.get("training") or {}).items() if k not in training.OWNED_KEYS}
        kept.update(derived)
        manifest["training"] = kept
        red = policy_of(manifest)  # the policy the manifest was collected with
        for section in ("runtime", "training"):
            manifest[section] = red.value(manifest[section])
    return runner.Outcome()


register_updater("ray_live", _ray_live)
