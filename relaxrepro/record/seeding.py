"""Seeds as set, not as passed: :func:`seed_everything`, what the trainer's generators show, and the lint.

An argument named ``seed`` says what a trainer was given, not what it did with it: ``--seed 0`` of an argparse
default that never reached a generator reads the same as a seeded run. This module records what was set
(by :func:`seed_everything`) and what the running process shows at a ``recorded`` block's entry and exit:
``torch.initial_seed()`` (the seed last given to torch, else a random 64-bit number drawn at start), digests of
``random.getstate()`` and numpy's global state, and the determinism flags as they are. A generator counts as
seeded with ``N`` when its state is the one ``N`` gives it (``random``, numpy: at entry, before any draw) or its
initial seed is ``N`` (torch, at any time); torch's start seed is 64 random bits, so one below 2**32 was chosen.

Nothing here imports torch or numpy: they are read from ``sys.modules`` when the trainer has imported them.
"""

from __future__ import annotations

import logging
import os
import sys

from ..std.records import Factory, Record
from ..std.sha import sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional

log = logging.getLogger("relaxrepro")

GENERATORS = ("random", "numpy", "torch")
"""The process-wide generators looked at, in the order they are reported."""

CUBLAS = ":4096:8"
"""The cuBLAS workspace setting :func:`seed_everything` sets (cuBLAS documents it and ``:16:8`` as deterministic)."""

_CHOSEN_BELOW = 2 ** 32
"""A torch initial seed below this was set by someone: the one torch draws at start is 64 random bits."""

_NUMPY_MAX = 2 ** 32
"""numpy's legacy ``seed`` takes 0..2**32-1: larger seeds are reduced modulo it (and recorded so)."""


class Seeded(Record):
    """What :func:`seed_everything` did and what it hands back for DataLoaders.

    ``loader``: ``DataLoader(..., **seeded.loader)`` gives the loader the seeded ``generator`` and
    ``worker_init_fn`` (empty without torch or with ``workers=False``); ``rng``: a numpy ``Generator`` seeded
    with the seed (None without numpy), as ``numpy.random.default_rng`` has no global state to seed."""

    seed: Any
    set: Dict[str, Any] = Factory(dict)
    warnings: List[str] = Factory(list)
    generator: Any = None
    worker_init_fn: Any = None
    rng: Any = None

    @property
    def loader(self) -> Dict[str, Any]:
        if self.generator is None or self.worker_init_fn is None:
            return {}
        return {"generator": self.generator, "worker_init_fn": self.worker_init_fn}


_last: Optional[Seeded] = None
"""What the last :func:`seed_everything` of this process set (recorded into ``seeds.set``)."""


def seed_worker(worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: seeds the worker's ``random`` and numpy from its torch seed, which the
    loader derives from its generator and the worker's id (module level, so spawned workers can pickle it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    seed = int(torch.initial_seed()) % _NUMPY_MAX
    import random  # the worker's own; stdlib, already imported by torch's DataLoader worker loop

    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed)


def seed_everything(seed: Any, *, deterministic: bool = False, workers: bool = True,
                    env: Optional[Mapping[str, str]] = None) -> Seeded:
    """Seed ``random``, numpy's global generator and torch (CPU and every CUDA device) with ``seed``; numpy and
    torch only when the trainer has imported them (import them first). ``deterministic=True`` also turns on
    ``torch.use_deterministic_algorithms``, ``cudnn.deterministic``, turns ``cudnn.benchmark`` off and sets
    ``CUBLAS_WORKSPACE_CONFIG`` (when unset). What was set is recorded in the manifest's ``seeds.set``.

    Never raises: a seed that is not an integer, or a torch that refuses, is one warning (logged, and in
    ``seeds.warnings``) and the rest is still done."""
    out = Seeded(seed)
    env = os.environ if env is None else env
    try:
        value = int(seed)
        if isinstance(seed, bool) or (not isinstance(seed, int) and value != seed):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        out.warnings.append("seed_everything: seed %r is not an integer: no generator seeded" % (seed,))
        _finish(out)
        return out
    value = abs(value)
    out.seed = value
    out.set = {"by": "seed_everything", "seed": value, "deterministic": bool(deterministic),
               "workers": bool(workers)}
    _step(out, "random", lambda: _seed_random(value))
    np = sys.modules.get("numpy")
    if np is None:
        out.set["numpy"] = "not imported"
    else:
        _step(out, "numpy", lambda: (np.random.seed(value % _NUMPY_MAX), value % _NUMPY_MAX)[1])
        try:
            out.rng = np.random.default_rng(value)
        except Exception:  # a stubbed or broken numpy: the legacy seed above is what counts
            pass
    torch = sys.modules.get("torch")
    if torch is None:
        out.set["torch"] = "not imported"
    else:
        _step(out, "torch", lambda: (torch.manual_seed(value), value)[1])
        # manual_seed seeds the CUDA devices too; said again for a torch that defers it (lazily until CUDA starts)
        _step(out, "cuda", lambda: (torch.cuda.manual_seed_all(value), "all devices")[1])
        if workers:
            try:
                out.generator = torch.Generator()
                out.generator.manual_seed(value)
                out.worker_init_fn = seed_worker
            except Exception as exc:  # noqa: BLE001 - never raise into the trainer
                out.warnings.append("seed_everything: no DataLoader generator: %s: %s" % (type(exc).__name__, exc))
    if deterministic:
        _deterministic(out, torch, env)
    _finish(out)
    return out


def _seed_random(value: int) -> int:
    import random  # stdlib, ~1 ms; a trainer that imports it later gets the seeded module

    random.seed(value)
    return value


def _step(out: Seeded, name: str, do: Any) -> None:
    try:
        out.set[name] = do()
    except Exception as exc:  # noqa: BLE001 - never raise into the trainer
        out.set[name] = "failed"
        out.warnings.append("seed_everything: could not seed %s: %s: %s" % (name, type(exc).__name__, exc))


def _deterministic(out: Seeded, torch: Any, env: Mapping[str, str]) -> None:
    if "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS  # read by cuBLAS when CUDA starts: set it before that
    out.set["CUBLAS_WORKSPACE_CONFIG"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    if torch is not None:
        _step(out, "deterministic_algorithms", lambda: (torch.use_deterministic_algorithms(True), True)[1])
        _step(out, "cudnn_deterministic", lambda: (setattr(torch.backends.cudnn, "deterministic", True), True)[1])
        _step(out, "cudnn_benchmark", lambda: (setattr(torch.backends.cudnn, "benchmark", False), False)[1])
    if env.get("PYTHONHASHSEED") in (None, "", "random"):
        out.warnings.append(
            "PYTHONHASHSEED is not set: str hashes (set order, hash-based sharding) differ per process, and Python "
            "reads it only at start: run the trainer as PYTHONHASHSEED=%d python ..." % out.seed)


def _finish(out: Seeded) -> None:
    global _last
    _last = out
    for warning in out.warnings:
        log.warning("relaxrepro: %s", warning)


def last_set() -> Optional[Seeded]:
    """What the last :func:`seed_everything` of this process did, or None."""
    return _last


# -- what the process shows ----------------------------------------------------------------------------


def _digest(data: bytes) -> str:
    return sha256_hex(data)[:16]


def _random_digest(state: Any) -> str:
    return _digest(repr(state).encode())


def _numpy_digest(state: Any) -> str:
    kind, keys, pos = state[0], state[1], state[2:]
    return _digest(repr(kind).encode() + bytes(memoryview(keys)) + repr(tuple(pos)).encode())


def observe(modules: Mapping[str, Any]) -> Dict[str, Any]:
    """The generators' state and the torch determinism flags, of modules already imported (never imports)."""
    seen: Dict[str, Any] = {}
    rnd = modules.get("random")
    if rnd is not None:
        _read(seen, "random", lambda: {"state": _random_digest(rnd.getstate())})
    np = modules.get("numpy")
    if np is not None:
        _read(seen, "numpy", lambda: {"state": _numpy_digest(np.random.get_state())})
    torch = modules.get("torch")
    if torch is not None:
        _read(seen, "torch", lambda: {"initial_seed": int(torch.initial_seed())})
        _read(seen, "flags", lambda: _torch_flags(torch))
    return seen


def _read(seen: Dict[str, Any], name: str, read: Any) -> None:
    try:
        seen[name] = read()
    except Exception as exc:  # a half-imported or stubbed module: say so, record the rest
        seen[name] = {"error": "%s: %s" % (type(exc).__name__, exc)}


def _torch_flags(torch: Any) -> Dict[str, Any]:
    flags = {"deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
             "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
             "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}
    cuda = getattr(torch, "cuda", None)
    flags["cuda"] = bool(cuda is not None and cuda.is_available())
    return flags


def seeded_with(name: str, seen: Mapping[str, Any], candidates: List[int], modules: Mapping[str, Any],
                fresh: bool) -> Optional[int]:
    """The seed ``name``'s observed state shows, among ``candidates`` (torch: any chosen one); None if none.
    ``fresh``: the state was read before the trainer could draw from it (entry), so a state comparison holds."""
    got = seen.get(name)
    if not isinstance(got, dict) or "error" in got:
        return None
    if name == "torch":
        value = got.get("initial_seed")
        return value if isinstance(value, int) and (value in candidates or value < _CHOSEN_BELOW) else None
    if not fresh:
        return None
    for seed in candidates:
        try:
            if name == "random" and got["state"] == _random_digest(modules["random"].Random(seed).getstate()):
                return seed
            if name == "numpy" and got["state"] == _numpy_digest(
                    modules["numpy"].random.RandomState(seed % _NUMPY_MAX).get_state()):
                return seed
        except Exception:  # noqa: BLE001 - a stubbed module: not known to be seeded
            return None
    return None


# -- the seeds section and its lint --------------------------------------------------------------------

_PHS_UNSET = (None, "", "random")
_CUBLAS_OK = (":4096:8", ":16:8")
_FRAMES = 64
"""How far up the stack DataLoaders are looked for (the trainer's frames, from the API call up)."""


def note(m: Dict[str, Any], when: str, modules: Mapping[str, Any], env: Mapping[str, str],
         frame: Any = None) -> List[str]:
    """Lay what the process shows at ``when`` (``entry``, ``exit``) into ``m["seeds"]``: ``observed``, ``set``,
    ``generators`` ({name: the seed it shows, None, or "not imported"}), ``seeded``, ``unused_values`` (argument
    seeds that reached no generator) and ``warnings`` (the lint). Returns the lint's warnings; at entry they are
    logged too when :func:`_speaks` says so. Never raises."""
    try:
        seeds = m.get("seeds")
        if not isinstance(seeds, dict):
            seeds = m["seeds"] = {}
        seen = observe(modules)
        seeds.setdefault("observed", {})[when] = seen
        helper = _last
        if helper is not None:
            seeds["set"] = dict(helper.set)
        values = seeds.get("values") if isinstance(seeds.get("values"), dict) else {}
        candidates = [v for v in values.values() if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
        if helper is not None and isinstance(helper.seed, int):
            candidates.insert(0, helper.seed)
        generators = seeds.get("generators") if isinstance(seeds.get("generators"), dict) else {}
        for name in GENERATORS:
            if name not in seen:
                generators.setdefault(name, "not imported")
                continue
            got = seeded_with(name, seen, candidates, modules, fresh=when == "entry")
            by_helper = helper.set.get(name) if helper is not None else None
            if got is None and isinstance(by_helper, int) and not isinstance(by_helper, bool):
                got = helper.seed  # numpy's state after a draw no longer shows it; the helper's word does
            if got is not None or not isinstance(generators.get(name), int):
                generators[name] = got
        seeds["generators"] = generators
        reached = {v for v in generators.values() if isinstance(v, int)}
        seeds["seeded"] = [n for n in GENERATORS if isinstance(generators.get(n), int)]
        seeds["unused_values"] = sorted(k for k, v in values.items() if v not in reached or isinstance(v, bool))
        if frame is not None:
            loaders = find_loaders(frame, modules)
            if loaders:
                seeds["dataloaders"] = loaders
        seeds["warnings"] = lint(seeds, seen, env)
        if "bit_reproducible" not in seeds:  # no seeds deriver ran (no arguments, no switch): the lint says it
            seeds["bit_reproducible"], seeds["missing"] = not seeds["warnings"], list(seeds["warnings"])
        if when == "entry" and seeds["warnings"] and _speaks(seeds, modules):
            log.warning("relaxrepro: determinism: %s", "; ".join(seeds["warnings"]))
        return list(seeds["warnings"])
    except Exception as exc:  # noqa: BLE001 - the trainer's run comes first
        log.warning("relaxrepro: could not record the seeds: %s: %s", type(exc).__name__, exc)
        return []


def _speaks(seeds: Mapping[str, Any], modules: Mapping[str, Any]) -> bool:
    """Whether the lint is logged, not only recorded: for a torch trainer that means to rerun alike (it has a seed
    argument or called :func:`seed_everything`); any other run would get the same lines every time, unasked."""
    return "torch" in modules and (bool(seeds.get("values")) or _last is not None)


def at_first_step(m: Dict[str, Any], frame: Any, modules: Mapping[str, Any]) -> None:
    """At the first traced step the DataLoaders exist: unseeded workers are flagged (logged) then, not at the end."""
    try:
        loaders = find_loaders(frame, modules)
        seeds = m.get("seeds")
        if not loaders or not isinstance(seeds, dict):
            return
        seeds["dataloaders"] = loaders
        before = set(seeds.get("warnings") or [])
        seen = (seeds.get("observed") or {}).get("entry") or {}
        seeds["warnings"] = lint(seeds, seen, os.environ)
        new = [w for w in seeds["warnings"] if w not in before]
        if new and _speaks(seeds, modules):
            log.warning("relaxrepro: determinism: %s", "; ".join(new))
    except Exception as exc:  # noqa: BLE001 - called in the training loop: never raise there
        log.warning("relaxrepro: could not look at the DataLoaders: %s: %s", type(exc).__name__, exc)


def find_loaders(frame: Any, modules: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The torch DataLoaders held by the frames from ``frame`` up: their workers and whether they were seeded
    (a ``generator`` or a ``worker_init_fn`` given). Never imports torch."""
    data = modules.get("torch.utils.data")
    kind = getattr(data, "DataLoader", None)
    if kind is None:
        return []
    found: Dict[int, Dict[str, Any]] = {}
    depth = 0
    while frame is not None and depth < _FRAMES:
        for value in list(frame.f_locals.values()):
            if isinstance(value, kind) and id(value) not in found:
                found[id(value)] = {
                    "workers": int(getattr(value, "num_workers", 0) or 0),
                    "generator": getattr(value, "generator", None) is not None,
                    "worker_init_fn": getattr(getattr(value, "worker_init_fn", None), "__qualname__", None),
                }
        frame = frame.f_back
        depth += 1
    return list(found.values())


def lint(seeds: Mapping[str, Any], seen: Mapping[str, Any], env: Mapping[str, str]) -> List[str]:
    """The determinism lint over a seeds section and what the process showed: a list of plain sentences."""
    out: List[str] = []
    generators = seeds.get("generators") if isinstance(seeds.get("generators"), dict) else {}
    looked = [n for n in GENERATORS if generators.get(n) != "not imported" and n in generators]
    unused = seeds.get("unused_values") or []
    values = seeds.get("values") if isinstance(seeds.get("values"), dict) else {}
    shown = ", ".join("%s=%s" % (k, values.get(k)) for k in unused)
    if looked and not seeds.get("seeded"):
        out.append("no generator seeded (%s at a state no recorded seed gives them)%s" % (
            ", ".join(looked), "; the argument %s never reached one" % shown if shown else ""))
    elif shown:
        out.append("argument %s reached no generator" % shown)
    for loader in seeds.get("dataloaders") or []:
        if loader.get("workers") and not loader.get("generator") and not loader.get("worker_init_fn"):
            out.append("a DataLoader with %d workers has neither a generator nor a worker_init_fn: its workers' "
                       "seeds follow the global torch RNG (pass **seed_everything(seed).loader)" % loader["workers"])
    flags = seen.get("flags") if isinstance(seen.get("flags"), dict) else {}
    if flags.get("cudnn_benchmark") is True:
        out.append("cudnn.benchmark is on: autotuning may pick other kernels in each run")
    if flags.get("deterministic_algorithms") is False:
        out.append("non-deterministic algorithms allowed (torch.use_deterministic_algorithms is off)")
    if env.get("PYTHONHASHSEED") in _PHS_UNSET:
        out.append("PYTHONHASHSEED is not set: set order and str hashes differ per process (it is read at start: "
                   "run the trainer as PYTHONHASHSEED=0 python ...)")
    if flags.get("cuda") is True and env.get("CUBLAS_WORKSPACE_CONFIG") not in _CUBLAS_OK:
        out.append("CUBLAS_WORKSPACE_CONFIG is not :4096:8 or :16:8 on a CUDA machine: cuBLAS may reduce in a "
                   "varying order")
    return out
