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

import atexit
import functools
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .manifest.model import Manifest, new_run_id, output_dir, should_stop, stop_run
from .record import seeding, session
from .record.seeding import seed_everything  # noqa: F401 - public: relaxrepro.seed_everything
from .std import deadline
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


class _NeverRaise:
    """The API's promise, kept in one place: ``with _NeverRaise("write the manifest"): ...`` turns any
    ``Exception`` inside into one warning, ``relaxrepro: could not write the manifest: Type: message``, and
    the code after the block runs (it returns what the trainer gets then). ``KeyboardInterrupt`` and
    ``SystemExit`` pass through: they are the trainer's, not ours."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        if exc_type is None or not issubclass(exc_type, Exception):
            return False
        log.warning("relaxrepro: could not %s: %s: %s", self.what, exc_type.__name__, exc)
        return True


_GRACE_S = 2.0
"""Seconds past the collection deadline before the API stops waiting for it (merging, redaction)."""

Updater = Callable[[Manifest, Dict[str, Any]], Any]
"""``fn(manifest, options) -> runner.Outcome | None``: what only the running trainer can see."""

_UPDATERS: List[Tuple[str, Updater]] = []
"""Named steps run by :func:`update_manifest`, in order; the name is the key under ``collection.probes``.
``ray_live`` (:func:`_ray_live`) is registered at the end of this module; others with :func:`register_updater`."""

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
    with _NeverRaise("collect a manifest"):
        # lazy: ~18 ms (the collection context, redaction policy); `import relaxrepro.api` stays cheap for
        # trainers that only call trace() or result()
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
        found: Dict[str, Any] = {}
        built = deadline.call(functools.partial(_build, ctx, limit, adopting, explicit, found), limit + _GRACE_S,
                              name="relaxrepro-collect")
        if found.get("warning"):
            log.warning("relaxrepro: %s", found["warning"])
        if not built.ok:
            log.warning("relaxrepro: could not collect a manifest: %s",
                        built.why("still running after %.0f s; gave up waiting" % (limit + _GRACE_S)))
            return None
        m: Manifest = built.value
        _warn_problems(m, "partial manifest")
        seeding.note(m, "entry", sys.modules, ctx.env)  # the generators as the trainer left them, seeded or not
        _collected(m)
        return m
    return None


def _build(ctx: Any, limit: float, adopting: bool, explicit: Any, found: Dict[str, Any]) -> Manifest:
    """The manifest of ``ctx`` (in the collect thread); adopting run's manifest when ``adopting``.
    ``found["warning"]``: why run's manifest was not adopted, if it was looked for."""
    from .collect.assemble import build as assemble  # lazy: ~56 ms (every probe), only when collecting

    outer = None
    if adopting:  # read in this thread: RELAXREPRO_MANIFEST may sit on a hung network filesystem
        from .record import adopt  # lazy: ~61 ms (the writer and reader), only under `relaxrepro run`

        answer = deadline.call(functools.partial(adopt.find, ctx.env), min(_ADOPT_S, limit), name="relaxrepro-adopt")
        if answer.ok:
            outer, found["warning"] = answer.value
        else:
            found["warning"] = "%s=%s: %s; this process writes a manifest of its own" % (
                adopt.ENV_MANIFEST, ctx.env.get(adopt.ENV_MANIFEST),
                answer.why("no answer within %g s" % min(_ADOPT_S, limit)))
    m = assemble(ctx, run_id=outer.run_id if outer is not None else None)
    if outer is not None:
        adopt.adopt_lineage(m, outer.doc, explicit)
        m.outer = outer  # where write_manifest folds it
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
    from .collect.assemble import probe_problems  # lazy: imported already by the collection (~56 ms otherwise)

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
    with _NeverRaise("update the manifest"):
        from .collect import runner  # lazy: ~24 ms (the collection context), only when updating
        from .collect.context import DEADLINE  # lazy: 0 ms after the runner (which imports it)

        with _lock:
            updaters = list(_UPDATERS)
        given = options.pop("deadline_s", None)
        per_node = bool(options.pop("per_node", False))
        limit = float(given or DEADLINE)
        problems: List[str] = []
        for name, fn in updaters:
            t0 = time.monotonic()
            step = deadline.call(functools.partial(fn, manifest, dict(options)), limit,
                                 name="relaxrepro-update-" + name)
            seconds = round(time.monotonic() - t0, 4)
            value = step.value
            if not step.ok:
                warning = "%s crashed: %s" % (name, step.why("")) if step.done else \
                    "%s did not finish within %.0f s" % (name, limit)
                entry: Dict[str, Any] = {"status": "failed" if step.done else "timeout", "seconds": seconds,
                                         "warnings": [warning]}
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
            # One zero-CPU Ray task per alive node collects that node's fragment.
            from .collect import node  # lazy: ~41 ms (the node fragment and its merge), only with per_node

            wait = float(given) if given else node.PER_NODE_DEADLINE
            merged = deadline.call(functools.partial(node.update_per_node, manifest, wait), wait + _GRACE_S,
                                   name="relaxrepro-update-per-node")
            if merged.ok and isinstance(merged.value, dict) and merged.value is not manifest:
                with _lock:
                    manifest.clear()
                    manifest.update(merged.value)
            elif not merged.ok:
                problems.append("per-node collection: %s" % merged.why("did not finish in time"))
        if problems:
            log.warning("relaxrepro: could not update the manifest: %s", "; ".join(problems))
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


def _foreign(manifest: Any) -> bool:
    """Whether ``manifest`` is a copy another process made (this one was forked from it): never written here."""
    owned = getattr(manifest, "owned", None)  # a Manifest's; a plain dict belongs to whoever writes it
    return owned is not None and not owned()


def _write(manifest: Dict[str, Any], directory: "os.PathLike[str] | str | None") -> Optional[str]:
    if _foreign(manifest):
        return None
    with _NeverRaise("write the manifest"):
        target = output_dir(directory, os.environ)
        with _lock:
            outer = getattr(manifest, "outer", None)  # a Manifest's; a plain dict has none
            if outer is not None:
                from .record import adopt  # lazy: ~61 ms (the writer and reader), only under `relaxrepro run`

                path, why = adopt.write(outer, manifest, first=getattr(manifest, "path", None) != outer.path)
                if path is not None:
                    if why:
                        log.warning("relaxrepro: %s", why)
                    manifest.path = path
                    return path
                log.warning("relaxrepro: %s; writing a manifest of its own", why)
                manifest.outer = None  # type: ignore[attr-defined]  # set only on a Manifest
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
    return None


def _find_trackers(manifest: Dict[str, Any], integrations: Optional[bool], tensorboard: Any) -> List[Any]:
    """The tracker runs of the trainer (never imported here), noted under ``lineage.trackers``; [] when off."""
    with _NeverRaise("look for tracker runs"):
        from .record import trackers  # lazy: ~8 ms, only when a manifest is written

        if not trackers.enabled(integrations, os.environ):
            return []
        found = trackers.find(sys.modules, sys._getframe(1), tensorboard)
        if found:
            from .collect.context import policy_of  # lazy: ~32 ms, only when the trainer has a tracker run

            with _lock:
                trackers.note(manifest, found, policy_of(manifest))
        return found
    return []


def _send_trackers(found: List[Any], path: str, manifest: Dict[str, Any], final: bool = False) -> None:
    """Hand the written manifest to the tracker runs, waiting at most ``trackers.SEND_S`` (one warning)."""
    with _NeverRaise("attach the manifest"):
        from .collect.context import policy_of  # lazy: ~32 ms, only when the trainer has a tracker run
        from .record import trackers  # lazy: ~8 ms, only when a manifest is written

        with _lock:
            info = trackers.summary(manifest, policy_of(manifest))
        sent = deadline.call(functools.partial(trackers.send, found, path, info, sys.modules, final),
                             trackers.SEND_S, name="relaxrepro-trackers")
        warnings = sent.value if sent.ok else [
            "%s: %s" % (", ".join(trackers.NAMES[a.tool] for a in found),
                        sent.why("no answer within %g s; the trainer carries on" % trackers.SEND_S))]
        if warnings:
            log.warning("relaxrepro: could not attach the manifest to %s", "; ".join(warnings))


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
    ``seed=N`` (``deterministic=True``) calls :func:`seed_everything` first, on every rank.
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
        self._seed = (options.pop("seed", None), bool(options.pop("deterministic", False)))
        self._options = options
        self._local = threading.local()

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with recorded(self._args, self._output_dir, all_ranks=self._all_ranks, metrics=self._metrics,
                          outputs=self._outputs, seed=self._seed[0], deterministic=self._seed[1], **self._trackers,
                          **self._options):
                return func(*a, **kw)

        return wrapper

    def __enter__(self) -> Optional[Manifest]:
        started = time.monotonic()
        state = _State(None, None, started)
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append(state)
        _active.__dict__.setdefault("stack", []).append(state)  # trace()/result() act on the innermost block
        with _NeverRaise("record this run"):  # every call below keeps the promise already
            env = self._options.get("env") or os.environ
            if self._seed[0] is not None:
                seed_everything(self._seed[0], deterministic=self._seed[1], env=env)
            if not session.records_here(env, self._all_ranks):
                return None
            out = output_dir(self._output_dir, env)
            state.out = out
            m = collect_manifest(self._args, output_dir=out, **self._options)
            m = update_manifest(m)
            state.manifest = m
            state.path = write_manifest(m, out, **self._trackers)
            return m
        return state.manifest  # pragma: no cover

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        with _NeverRaise("record the outcome"):  # never replace the trainer's own exception with ours
            stack = self._local.__dict__.get("stack") or []
            state = stack.pop() if stack else None
            active = _active.__dict__.get("stack") or []
            if state in active:
                active.remove(state)
            if state is None or state.path is None or state.manifest is None or _foreign(state.manifest):
                return False  # a child forked inside the block leaves it: the parent records the run
            from .record import outcome  # lazy: ~33 ms (the manifest reader and writer), only at a block's end

            ended = outcome.from_exit(exc_type, exc, state.started)
            if not (exc_type is not None and issubclass(exc_type, KeyboardInterrupt)):  # ^C: leave at once
                result(self._metrics, None, manifest=state.manifest)
                if self._outputs is not None and state.manifest.outer is None:
                    _outcome_first(outcome, state, ended, self._outputs)
                result(None, self._outputs, manifest=state.manifest)
            settle(state.manifest)
            state.manifest.flushed = True  # written here, not again at exit
            if state.manifest.outer is not None:
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
        return False


def _outcome_first(outcome: Any, state: _State, ended: Dict[str, Any], outputs: Any) -> None:
    """The outcome and the trace written before ``outputs`` are hashed, the outputs marked not hashed yet:
    hashing a checkpoint takes minutes, and a SIGTERM meanwhile (a job's time limit) must not lose them."""
    m = state.manifest
    with _NeverRaise("record the outcome"):
        paths = [outputs] if isinstance(outputs, (str, bytes, os.PathLike)) else list(outputs)
        with _lock:
            outcome.mark_unhashed(m, paths)  # type: ignore[arg-type]
        settle(m)
        if outcome.record(state.path, ended, run_id=m.run_id, doc=m) is None:  # type: ignore[union-attr]
            m["outcome"] = ended  # type: ignore[index]


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
        atexit.register(_flush_last)


def current_manifest() -> Optional[Manifest]:
    """The manifest :func:`trace` and :func:`result` act on: the innermost open ``recorded`` block's in this
    thread (None on a rank that does not record), else the one collected last in this process."""
    stack = _active.__dict__.get("stack")
    return stack[-1].manifest if stack else _last


_unheard: List[str] = []
"""The first API call that found no manifest at all, once warned about (a list: no ``global`` needed)."""


def _nowhere(call: str) -> None:
    """One warning per process when ``trace``/``result`` find no manifest, neither an open ``recorded`` block
    nor a collected one, on a rank that would record: otherwise the values vanish without a word."""
    if _unheard or _active.__dict__.get("stack") or not session.records_here(os.environ, False):
        return
    _unheard.append(call)
    log.warning("relaxrepro: %s() called outside recorded(): nothing is recorded (open a "
                "`with relaxrepro.recorded(...)` block, or call collect_manifest first)", call)


def trace(step: Any, loss: Any = None, **scalars: Any) -> None:
    """:meth:`Manifest.trace` on :func:`current_manifest`; without one, only the stop at
    ``$RELAXREPRO_MAX_STEPS`` (every rank of a quick replay stops at the same step) and one warning."""
    m = current_manifest()
    if m is not None:
        first = m.tracer is None
        m.trace_values(step, loss, scalars)
        if first:  # the DataLoaders exist by now: unseeded workers are flagged at once
            seeding.at_first_step(m, sys._getframe(1), sys.modules)
        return
    _nowhere("trace")
    if should_stop(step):
        stop_run(step)


def result(metrics: Optional[Mapping[str, Any]] = None, outputs: Optional[Sequence[Any]] = None,
           manifest: Optional[Manifest] = None) -> Optional[Dict[str, Any]]:
    """Record final ``metrics`` ({name: number}) and fingerprint ``outputs`` (files or directories) into
    ``results`` of ``manifest`` (default :func:`current_manifest`); written with the outcome at exit.
    Returns the ``results`` section so far, or None without a manifest. Never raises: one warning instead."""
    m = manifest if manifest is not None else current_manifest()
    if m is None:
        _nowhere("result")
    if m is None or (metrics is None and outputs is None) or _foreign(m):
        return m.get("results") if m is not None else None
    with _NeverRaise("record the results"):
        from .collect.context import safe_getcwd  # lazy: ~18 ms, only for outputs, once per run

        results = _results()
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
    return None


def _results() -> Any:
    """``record.results``, imported once a run has results."""
    from .record import results  # lazy: ~7 ms (fingerprints, metrics), only once a run has results

    return results


def settle(m: Manifest) -> None:
    """The trace collected in memory, laid into ``results.trace`` before a write."""
    with _lock:
        _results().settle(m)
        seeding.note(m, "exit", sys.modules, os.environ, sys._getframe(1))


def _flush_last() -> None:
    """At interpreter exit: the trace and results of a manifest recorded without ``recorded`` (by
    ``collect_manifest`` + ``write_manifest``) go into its file, as ``recorded`` does at the block's end."""
    m = _last
    if m is None or m.path is None or m.flushed or _foreign(m):
        return
    if any(s.manifest is m for s in _active.__dict__.get("stack") or ()) or not _results().pending(m):
        return
    with _NeverRaise("record the results"):
        settle(m)
        if m.outer is not None:
            write_manifest(m)
            return
        from .record import outcome  # lazy: ~33 ms, as in recorded.__exit__

        warning = outcome.record(m.path, None, run_id=m.run_id, doc=m)
        if warning:
            log.warning("relaxrepro: %s", warning)


def _ray_live(manifest: Manifest, options: Dict[str, Any]) -> Any:
    """The live Ray topology from the trainer's own driver (:func:`relaxrepro.collect.probes.ray.update_live`)."""
    # lazy: ~38 ms, paid only by update_manifest without collect_manifest (the collection imports it already)
    from .collect.probes import ray as ray_probe

    return ray_probe.update_live(manifest, sys.modules, _lock)


register_updater("ray_live", _ray_live)
