"""How the run was configured: resolved arguments, allow-listed environment, config files, one hash.

The resolved arguments come, in order of trust, from the API (the trainer's own parsed args), from
``generate --args-json FILE``, or from parsing the recorded command. They are computed once per
collection (:func:`resolved_args`) and shared with the data probe through ``ctx.memo``.
"""

from __future__ import annotations

import json
import os
import stat

from ...manifest.model import config_file_maps
from ...std.files import open_regular
from ...std.sha import sha256_hex
from ..arguments import parse_argv_args, render
from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

ENV_PREFIXES = (
    "CUDA_", "NCCL_", "RAY_", "SLURM_", "HF_", "SGLANG_", "TORCH_", "PYTORCH_", "NVTE_", "CUBLAS_", "CUDNN_",
    "OMP_", "MKL_", "VLLM_", "MEGATRON_", "WANDB_",
)
ENV_NAMES = ("PYTHONHASHSEED",)
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
INLINE_MAX = 8 * 1024
"""Config files up to this size are inlined in ``config.file_contents`` (the writer drops them first when over
the cap)."""
HASH_MAX = 64 * 1024 * 1024
"""A "config" bigger than this is a data file named like one: sized, not read at launch."""
MAX_FILES = 16
PROGRAM_RUNNERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "python", "pypy"})
"""Commands whose own ``-c`` takes a program's text (``python3.11`` counts as ``python``)."""
INPUT_KEYS = frozenset({
    # inputs the data probe fingerprints; never read here as config files, whatever their suffix
    # models and checkpoints (Megatron, slime, verl, HF Trainer, NeMo)
    "hf_checkpoint", "actor_model_path", "critic_model_path", "ref_model_path", "reward_model_path", "load",
    "ref_load", "pretrained_checkpoint", "model_path", "model_name_or_path", "checkpoint", "checkpoint_path",
    "init_from", "resume_from_checkpoint", "base_model", "model_dir",
    # tokenizers
    "tokenizer_path", "tokenizer_model", "tokenizer_name_or_path", "tokenizer_dir", "vocab_file", "merge_file",
    # data (a bare --data is common too: ultralytics' --data coco.yaml, many scripts' --data DIR)
    "data", "prompt_data", "eval_prompt_data", "data_path", "train_data", "valid_data", "test_data", "eval_data",
    "train_data_path", "valid_data_path", "dataset", "dataset_name", "dataset_path", "data_dir", "train_files",
    "val_files", "train_file", "validation_file", "data_files", "train_dataset", "eval_dataset",
})


def resolved_args(ctx: Context) -> Tuple[Dict[str, Any], str, List[str]]:
    """``(args, source, notes)``: source is ``api``, ``args_json``, ``argv`` or ``none``. Memoized."""
    return ctx.memo("config.resolved_args", lambda: _resolve(ctx))


def _resolve(ctx: Context) -> Tuple[Dict[str, Any], str, List[str]]:
    for option, source in (("args", "api"), ("args_json", "args_json")):
        if ctx.options.get(option) is not None:
            value, notes = render(ctx.options[option])
            if not isinstance(value, dict):  # a list or a scalar handed over as "args": keep it, keyed
                value = {"value": value}
            return value, source, notes
    if ctx.argv:
        return parse_argv_args(ctx.argv), "argv", []
    return {}, "none", []


def select_env(env: Dict[str, str], extra_prefixes: Iterable[str] = ()) -> Dict[str, str]:
    """The allow-listed variables (values are redacted later, by the document-wide pass)."""
    prefixes = tuple(ENV_PREFIXES) + tuple(p for p in extra_prefixes if p)
    return {k: v for k, v in sorted(env.items()) if k in ENV_NAMES or k.startswith(prefixes)}


def config_hash(args: Dict[str, Any], env: Dict[str, str], files: Sequence[Dict[str, Any]]) -> str:
    """One digest over what configured the run: two runs with equal hashes were configured alike."""
    payload = {
        "resolved_args": args,
        "selected_env": env,
        "files": sorted([f.get("path"), f.get("sha256")] for f in files),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8", "surrogatepass")
    return "sha256:" + sha256_hex(blob)


# -- which files configured the run ----------------------------------------------------------------

def _is_config_key(key: str) -> bool:
    k = key.lower().replace("-", "_").lstrip("_")
    return k in ("config", "c", "cfg", "config_file", "config_path", "yaml", "yaml_config") or \
        k.endswith(("_config", "_config_file", "_config_path", "_cfg", "_yaml")) or k.startswith("config_")


def config_candidates(argv: Sequence[str], args: Dict[str, Any]) -> List[Tuple[str, bool]]:
    """``(path, explicit)`` pairs named in the command or args; explicit ones are reported if missing.

    Explicit: the value of a config-named flag (``--config x.yaml``) or a positional ``*.yaml``.
    A ``*.json`` value of any other flag is recorded only if it exists: it may be an output path.
    """
    found: List[Tuple[str, bool]] = []
    tokens = [str(t) for t in argv]
    hydra_dir: Optional[str] = None
    hydra_name: Optional[str] = None
    prev_key: Optional[str] = None
    runner = bool(tokens) and os.path.basename(tokens[0]).rstrip("0123456789.") in PROGRAM_RUNNERS
    program: Optional[str] = None
    for i, token in enumerate(tokens[1:]):
        if token == "-c" and runner and not any(not t.startswith("-") for t in tokens[1:i + 1]):
            # sh -c 'SCRIPT', python -c 'CODE': a program's text, not a config file (train.py -c conf.yaml)
            program = tokens[i + 2] if i + 2 < len(tokens) else ""
            break
        if token.startswith("-") and len(token) > 1:
            name, eq, value = token.partition("=")
            key = name.lstrip("-")
            if eq:
                _consider(found, key, value)
                hydra_dir, hydra_name = _hydra(key, value, hydra_dir, hydra_name)
                prev_key = None
            else:
                prev_key = key
            continue
        if prev_key is not None:
            _consider(found, prev_key, token)
            hydra_dir, hydra_name = _hydra(prev_key, token, hydra_dir, hydra_name)
            prev_key = None
        elif "=" in token:  # a Hydra override: data.config=conf/data.yaml
            key, _, value = token.partition("=")
            _consider(found, key.lstrip("+~"), value)
        elif token.lower().endswith(CONFIG_SUFFIXES):
            found.append((token, True))
    if hydra_name:
        name = hydra_name if hydra_name.endswith((".yaml", ".yml")) else hydra_name + ".yaml"
        found.append((os.path.join(hydra_dir or ".", name), True))
    for key, value in _flat_strings(args):
        if not (key == "c" and program is not None):  # the program text (and its arguments), parsed again
            _consider(found, key, value)
    return found


def _hydra(key: str, value: str, d: Optional[str], n: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    # Hydra apps: --config-path conf --config-name train (the file is conf/train.yaml)
    k = key.replace("-", "_")
    if k in ("config_path", "cp"):
        return value, n
    if k in ("config_name", "cn"):
        return d, value
    return d, n


def _consider(found: List[Tuple[str, bool]], key: str, value: str) -> None:
    if not value or "\n" in value or len(value) > 4096:
        return
    k = key.replace("-", "_").split(".")[-1]
    if k in ("config_path", "cp", "config_name", "cn"):
        return  # a Hydra directory and name, joined above
    if k.lower() in INPUT_KEYS:
        return  # --train-data corpus.json is data (a 10 GB JSON file is not hashed at launch)
    if _is_config_key(k) and not value.startswith(("{", "[")):
        found.append((value, True))
    elif value.lower().endswith(CONFIG_SUFFIXES):
        found.append((value, False))


def _flat_strings(value: Any, key: str = "", depth: int = 0) -> Iterable[Tuple[str, str]]:
    if depth > 8:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat_strings(v, str(k), depth + 1)
    elif isinstance(value, list):
        for v in value[:64]:
            yield from _flat_strings(v, key, depth + 1)
    elif isinstance(value, str):
        yield key, value


def describe_file(path: str, cwd: str) -> Dict[str, Any]:
    """``{path, size, sha256, content?, binary?}`` or ``{path, error}``; never blocks on a FIFO."""
    entry: Dict[str, Any] = {"path": path}
    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    try:
        st = os.stat(full)
    except OSError as exc:
        entry["error"] = _reason(exc)
        return entry
    if not stat.S_ISREG(st.st_mode):
        entry["error"] = "is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        return entry
    entry["size"] = st.st_size
    if st.st_size > HASH_MAX:
        entry["error"] = "not hashed: over %d MB" % (HASH_MAX >> 20)
        return entry
    import hashlib  # a whole file: OpenSSL is faster per byte

    h = hashlib.sha256()
    head = b""
    seen = 0
    try:
        fh, _st = open_regular(full)  # swapped for a FIFO since the stat: refused, not waited on
        with fh:
            while seen <= HASH_MAX:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                seen += len(chunk)
                if len(head) <= INLINE_MAX:
                    head += chunk[: INLINE_MAX + 1 - len(head)]
                h.update(chunk)
    except OSError as exc:
        return {"path": path, "size": st.st_size, "error": _reason(exc)}
    if seen > HASH_MAX:  # it grew past the bound while we read (a log being written)
        return {"path": path, "size": seen, "error": "not hashed: over %d MB" % (HASH_MAX >> 20)}
    entry["sha256"] = h.hexdigest()
    if b"\0" in head:
        entry["binary"] = True
    elif st.st_size <= INLINE_MAX:
        try:
            entry["content"] = head.decode("utf-8")
        except UnicodeDecodeError:
            entry["binary"] = True
    return entry


def _reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower() if isinstance(exc, OSError) else str(exc)


def collect(ctx: Context) -> Outcome:
    out = Outcome()
    args, source, notes = resolved_args(ctx)
    for note in notes:
        out.warn("resolved_args: " + note)
    env = select_env(ctx.env, ctx.options.get("env_prefixes") or ())
    files: List[Dict[str, Any]] = []
    seen = set()
    for path, explicit in config_candidates(ctx.argv, args):
        full = os.path.normpath(path if os.path.isabs(path) else os.path.join(ctx.cwd, path))
        if full in seen:
            continue
        if not explicit and not os.path.isfile(full):
            continue  # "--save-to out.json" names an output, not a config
        seen.add(full)
        if len(files) >= MAX_FILES:
            out.warn("more than %d config files named; the rest are left out" % MAX_FILES)
            break
        if ctx.budget() < 0.5:
            out.warn("config files: out of time after %d" % len(files))
            break
        entry = describe_file(path, ctx.cwd)
        if "error" in entry:
            out.warn("config file %s: %s" % (path, entry["error"]))
        files.append(entry)
    config: Dict[str, Any] = {
        "resolved_args": args,
        "resolved_args_source": source,
        "selected_env": env,
        "hash": config_hash(args, env, files),
    }
    config.update(config_file_maps(files))
    out.data = {"config": config}
    return out
