"""The trainer's arguments as a JSON record: parsed from a recorded command line, or rendered from
the objects a trainer hands to the API (``argparse.Namespace``, dicts, dataclasses, OmegaConf-like
objects). Both functions are pure and never raise.
"""

from __future__ import annotations

import enum
import math
import os
import re

from ..manifest.redact.names import KIND_SECRET, KIND_WEAK, name_kind
from ..std.sha import sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Sequence, Tuple

MAX_DEPTH = 8
"""Nesting kept from an args object; deeper values become ``"<too deep>"`` (the reader refuses 64)."""
MAX_STRING = 4096
MAX_ITEMS = 256

_HYDRA_RE = re.compile(r"^(\+\+|\+|~)?([A-Za-z_][\w.\-/@]*)(=(.*))?$", re.S)
_INT_RE = re.compile(r"^[-+]?\d+$")
_FLOAT_RE = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")
_ADDR_RE = re.compile(r" at 0x[0-9a-fA-F]+")
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "deepspeed", "accelerate")


def snake(key: str) -> str:
    """``--tensor-model-parallel-size`` -> ``tensor_model_parallel_size`` (dots of Hydra keys stay)."""
    return key.lstrip("-").replace("-", "_")


def typed(value: str) -> Any:
    """A command-line string as the value argparse most likely made of it: int, float, bool, None."""
    if _INT_RE.match(value):
        try:
            return int(value)
        except ValueError:  # pragma: no cover - the regex admits only digits
            return value
    if _FLOAT_RE.match(value):
        return float(value)
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    return value


def _is_option(token: str) -> bool:
    # "-1" and "-.5" are values (a negative learning-rate schedule offset), not short options.
    return token.startswith("-") and token != "-" and not _FLOAT_RE.match(token)


def _script_start(argv: Sequence[str]) -> int:
    """Index of the first argument that belongs to the training script, not to its launchers.

    ``torchrun --nproc-per-node 8 train.py --lr 1`` and ``python -m slime.train --lr 1`` both
    start after the script or module; a bare entry point (``megatron-train --lr 1``) after argv[0].
    """
    for i, token in enumerate(argv):
        if token == "--":
            continue
        if token.endswith(".py") and not _is_option(token) and "=" not in token:
            return i + 1
        if token == "-m" and i + 1 < len(argv) and not argv[i + 1].startswith(_LAUNCHER_MODULES):
            return i + 2
    return 1 if argv and not _is_option(argv[0]) else 0


def parse_argv_args(argv: Sequence[str]) -> Dict[str, Any]:
    """Parse a recorded command into ``{snake_key: typed value}``.

    Understands ``--key value``, ``--key=value``, bare ``--flag`` (True), several values after one
    flag (a list, as ``nargs='+'`` makes them: Megatron's ``--data-path 0.7 a 0.3 b``), short
    ``-k v`` options and Hydra overrides (``trainer.max_epochs=3``, ``+x=1``, ``++x=1``, ``~x``).
    A key given twice keeps its last value, as argparse does. Positional arguments are left out:
    the command section keeps the whole argv.
    """
    tokens = [str(t) for t in argv]
    return _parse_options(tokens, _script_start(tokens))


def _parse_options(tokens: List[str], i: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            continue
        if _is_option(token):
            name, eq, inline = token.partition("=")
            key = snake(name)
            if not key:
                continue
            if eq:
                out[key] = typed(inline)
                continue
            values: List[Any] = []
            # The word after a flag whose name says secret is its value, as the redaction reads it:
            # '--cookie session=abc' is the cookie, never a new key 'session' that no name would mask.
            secret = name_kind(key) in (KIND_SECRET, KIND_WEAK)
            while i < len(tokens) and not _is_option(tokens[i]) and tokens[i] != "--" \
                    and (not _looks_hydra(tokens[i]) or (secret and not values)):
                values.append(typed(tokens[i]))
                i += 1
            out[key] = True if not values else values[0] if len(values) == 1 else values
            continue
        m = _HYDRA_RE.match(token)
        if m and (m.group(3) or m.group(1) == "~"):
            key = m.group(2)
            out[key] = None if m.group(1) == "~" else typed(m.group(4))
    return out


_LAUNCHERS = {
    "torchrun": "torchrun", "torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun",
    "deepspeed": "deepspeed", "accelerate": "accelerate", "mpirun": "mpirun", "mpiexec": "mpirun",
}


def parse_launcher_args(argv: Sequence[str]) -> Tuple[Optional[str], Dict[str, Any]]:
    """The launcher in front of the training script and the options it was given, parsed as
    :func:`parse_argv_args` parses the script's: ``torchrun --nnodes 2 --nproc-per-node 8 train.py``
    -> ``("torchrun", {"nnodes": 2, "nproc_per_node": 8})``; ``(None, {})`` when there is none.
    A wrapper in front (``srun ... torchrun ...``) is skipped: the launcher nearest the script counts."""
    tokens = [str(t) for t in argv]
    end = _script_start(tokens)
    if end >= 1 and tokens[end - 1].endswith(".py"):
        end -= 1
    elif end >= 2 and tokens[end - 2] == "-m":
        end -= 2
    found: Tuple[Optional[str], int] = (None, end)
    for i in range(end):
        if tokens[i] == "-m" and i + 1 < end and tokens[i + 1] in _LAUNCHERS:
            found = (_LAUNCHERS[tokens[i + 1]], i + 2)
        elif not _is_option(tokens[i]) and os.path.basename(tokens[i]) in _LAUNCHERS:
            found = (_LAUNCHERS[os.path.basename(tokens[i])], i + 1)
    name, start = found
    return (name, _parse_options(tokens[:end], start)) if name else (None, {})


def _looks_hydra(token: str) -> bool:
    m = _HYDRA_RE.match(token)
    return bool(m and m.group(3)) and not token.startswith(("/", "."))


# -- rendering an args object ------------------------------------------------------------------

def render(obj: Any) -> Tuple[Any, List[str]]:
    """A JSON-ready copy of a trainer's args object, and notes on what was cut or unreadable.

    Never raises: attributes that raise become ``"<error: ...>"``, cycles ``"<recursive>"``, long
    strings and collections are cut with a note. Paths, enums, dataclasses and tensors become their
    faithful strings (``PosixPath`` -> the path, ``Color.RED``, a tensor -> its shape and dtype).
    """
    notes: List[str] = []
    value = _render(obj, "", 0, set(), notes)
    return value, notes


def _render(obj: Any, where: str, depth: int, seen: set, notes: List[str]) -> Any:
    try:
        return _render_inner(obj, where, depth, seen, notes)
    except Exception as exc:  # a hostile __repr__, __iter__ or property: that value only
        notes.append("%s: unreadable (%s)" % (where or "args", _describe_exc(exc)))
        return "<error: %s>" % _describe_exc(exc)


def _render_inner(obj: Any, where: str, depth: int, seen: set, notes: List[str]) -> Any:
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, _Unreadable):
        notes.append("%s: unreadable (%s)" % (where or "args", obj.message))
        return str(obj)
    if isinstance(obj, enum.Enum):  # before int/str: IntEnum members are ints
        return "%s.%s" % (type(obj).__name__, obj.name)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if math.isfinite(obj):
            return float(obj)
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, str):
        return _cut(str(obj), where, notes)
    if isinstance(obj, os.PathLike):
        return _cut(os.fspath(obj) if not isinstance(os.fspath(obj), bytes) else repr(os.fspath(obj)), where, notes)
    if isinstance(obj, (bytes, bytearray)):
        return _cut("<bytes %d: %r>" % (len(obj), bytes(obj[:64])), where, notes)
    if depth >= MAX_DEPTH:
        notes.append("%s: nested deeper than %d levels, cut" % (where, MAX_DEPTH))
        return "<too deep>"
    if id(obj) in seen:
        return "<recursive>"
    tensor = _tensor_summary(obj)
    if tensor is not None:
        return tensor
    seen.add(id(obj))
    try:
        mapping = _as_mapping(obj)
        if mapping is not None:
            out: Dict[str, Any] = {}
            for n, (k, v) in enumerate(mapping):
                if n >= MAX_ITEMS * 4:
                    notes.append("%s: kept %d entries of more" % (where or "args", n))
                    out["<truncated>"] = "more entries left out"
                    break
                key = k if isinstance(k, str) else _safe_str(k)
                child = "%s.%s" % (where, key) if where else key
                out[key] = _render(v, child, depth + 1, seen, notes)
            return out
        if isinstance(obj, (list, tuple, set, frozenset)) or _is_sequence_like(obj):
            items = list(obj)
            if isinstance(obj, (set, frozenset)):
                items.sort(key=_safe_str)
            kept = [_render(v, "%s[%d]" % (where, n), depth + 1, seen, notes) for n, v in enumerate(items[:MAX_ITEMS])]
            if len(items) > MAX_ITEMS:
                notes.append("%s: kept %d of %d items" % (where or "args", MAX_ITEMS, len(items)))
                kept.append("<truncated: %d more items>" % (len(items) - MAX_ITEMS))
            return kept
    finally:
        seen.discard(id(obj))
    return _cut(_safe_str(obj), where, notes)


def _as_mapping(obj: Any) -> Optional[List[Tuple[Any, Any]]]:
    """The (key, value) pairs of a mapping, a dataclass or an object with ``__dict__``; else None."""
    if isinstance(obj, dict):
        return list(obj.items())
    if hasattr(type(obj), "items") and hasattr(type(obj), "__getitem__") and not isinstance(obj, (str, bytes)):
        return list(obj.items())  # Mapping, OmegaConf DictConfig, ml_collections ConfigDict
    if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
        # dataclasses.is_dataclass's own test: no import of dataclasses (~8 ms with inspect) for a trainer
        # without one; a trainer that has one already imported the module.
        import dataclasses

        return [(f.name, _getattr_or_error(obj, f.name)) for f in dataclasses.fields(obj)]
    if isinstance(obj, type) or callable(obj):
        return None  # a class or function given as an arg value: its name says it all
    try:
        d = vars(obj)
    except TypeError:  # no __dict__ (slots, builtins): its str() is the record
        return None
    if not isinstance(d, dict) or not d:
        return None
    return [(k, v) for k, v in sorted(d.items(), key=lambda kv: str(kv[0])) if not str(k).startswith("_")]


class _Unreadable:
    def __init__(self, message: str) -> None:
        self.message = message

    def __str__(self) -> str:
        return "<error: %s>" % self.message


def _getattr_or_error(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except Exception as exc:
        return _Unreadable(_describe_exc(exc))


def _is_sequence_like(obj: Any) -> bool:
    # OmegaConf ListConfig and similar: indexable, sized, iterable, not a string or mapping.
    t = type(obj)
    return hasattr(t, "__len__") and hasattr(t, "__getitem__") and hasattr(t, "__iter__") and \
        t.__module__.split(".")[0] in ("omegaconf", "ml_collections", "torch")


def _tensor_summary(obj: Any) -> Optional[str]:
    """``tensor(shape=[2, 3], dtype=torch.float32)`` for torch/numpy/jax arrays, without importing them."""
    t = type(obj)
    if t.__module__.split(".")[0] not in ("torch", "numpy", "jax", "jaxlib", "tensorflow", "cupy"):
        return None
    if t.__name__ == "Size":  # torch.Size is a tuple of ints: keep it as a list
        return None
    shape = getattr(obj, "shape", None)
    dtype = getattr(obj, "dtype", None)
    if shape is None or dtype is None:
        return None
    if shape == () and hasattr(obj, "item"):  # numpy/torch scalars: the number itself
        try:
            return _safe_str(obj.item())
        except Exception:
            pass
    return "%s(shape=%s, dtype=%s)" % (t.__name__, list(shape), dtype)


def _cut(text: str, where: str, notes: List[str]) -> str:
    if len(text) <= MAX_STRING:
        return text
    digest = sha256_hex(text.encode("utf-8", "surrogatepass"))
    notes.append("%s: cut from %d characters" % (where or "args", len(text)))
    return text[:MAX_STRING] + "<truncated: %d chars, sha256:%s>" % (len(text), digest)


def _safe_str(obj: Any) -> str:
    try:
        text = str(obj)
    except Exception as exc:
        return "<unprintable %s: %s>" % (type(obj).__name__, _describe_exc(exc))
    # "<Foo object at 0x7f..>" differs on every run; without the address two runs compare equal.
    return _ADDR_RE.sub("", text)


def _describe_exc(exc: BaseException) -> str:
    try:
        return "%s: %s" % (type(exc).__name__, str(exc)[:200])
    except Exception:
        return type(exc).__name__
