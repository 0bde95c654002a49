"""CUDA runtime, cuDNN and NCCL versions the training would load, without importing torch.

The libraries are searched where the training interpreter's torch would find them first (its
``torch/lib`` and the ``nvidia/*/lib`` wheel directories), then ``LD_LIBRARY_PATH``, the ldconfig
cache and the standard directories, and asked for their versions by ctypes calls made in ONE child
interpreter: a library that aborts or hangs on load costs that child, never relaxrepro. Also read:
NGC images' ``CUDA_VERSION``/``NCCL_VERSION``/``CUDNN_VERSION``/``NVIDIA_PYTORCH_VERSION``,
``nvcc --version`` and torch's ``+cuXYZ`` build tag. Which value came from where is recorded; the
disagreements (including the GPU probe's driver CUDA) are found by the ``cuda-consistency`` deriver.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import signal

from ...std import cache as facts
from ...std import proc
from ...std.files import read_regular
from .. import interpreter
from ..context import Context, env_list
from ..runner import Outcome
from . import packages as packages_probe

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Tuple

LIBRARIES = ("cudart", "cudnn", "nccl")
_FILES = {"cudart": "libcudart", "cudnn": "libcudnn", "nccl": "libnccl"}
_PREFIXES = tuple(_FILES.values())
_MAX_CANDIDATES = 3
_CHILD_TIMEOUT = 2.5

STANDARD_DIRS = (
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda/targets/sbsa-linux/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib64",
)

NGC_ENV = ("CUDA_VERSION", "NCCL_VERSION", "CUDNN_VERSION", "NVIDIA_PYTORCH_VERSION", "CUDA_DRIVER_VERSION",
           "NVIDIA_REQUIRE_CUDA")

# The child: for each library kind, try its candidates in order; announce each load before doing
# it, and print each answer at once, so that when a library kills the child the parent still
# knows which one did it and keeps the answers already printed.
_CHILD = r"""
import ctypes, json, sys
CALLS = {"cudart": ("cudaRuntimeGetVersion", ctypes.c_int),
         "cudnn": ("cudnnGetVersion", None),
         "nccl": ("ncclGetVersion", ctypes.c_int)}
def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for kind, paths in json.loads(sys.argv[1]):
    fn_name, out_type = CALLS[kind]
    for path in paths:
        say({"try": kind, "path": path})
        try:
            lib = ctypes.CDLL(path)
            fn = getattr(lib, fn_name)
            if out_type is None:
                fn.restype = ctypes.c_size_t
                value, rc = int(fn()), 0
            else:
                box = out_type(0)
                rc = int(fn(ctypes.byref(box)))
                value = int(box.value)
        except Exception as exc:
            say({"kind": kind, "path": path, "error": "%s: %s" % (type(exc).__name__, exc)})
            continue
        if rc != 0:
            say({"kind": kind, "path": path, "error": "%s returned error %d" % (fn_name, rc)})
            continue
        say({"kind": kind, "path": path, "value": value})
        break
"""


# -- pure decoders --------------------------------------------------------------------------------

def decode_cuda(value: int) -> Optional[str]:
    """``cudaRuntimeGetVersion`` / ``cudaDriverGetVersion``: 1000*major + 10*minor (12090 -> 12.9)."""
    if value <= 0:
        return None
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def decode_cudnn(value: int) -> Optional[str]:
    """``cudnnGetVersion``: 10000*major + 100*minor + patch since 9 (90100 -> 9.1.0), 1000*major before (8902)."""
    return _decode_three(value, wide_from=90000)


def decode_nccl(value: int) -> Optional[str]:
    """``ncclGetVersion``: 10000*major + 100*minor + patch since 2.9 (22304 -> 2.23.4), 1000*major before (2708)."""
    return _decode_three(value, wide_from=10000)


def _decode_three(value: int, *, wide_from: int) -> Optional[str]:
    """major.minor.patch of a library's version number: 10000*major + 100*minor + patch from ``wide_from``
    on, 1000*major + 100*minor + patch below it; None for 0 or less (no answer)."""
    if value <= 0:
        return None
    major = 10000 if value >= wide_from else 1000
    return "%d.%d.%d" % (value // major, (value % major) // 100, value % 100)


_DECODE = {"cudart": decode_cuda, "cudnn": decode_cudnn, "nccl": decode_nccl}


def parse_nvcc(text: str) -> Dict[str, str]:
    """``nvcc --version``: ``release 12.5, V12.5.82`` -> {version: 12.5, full: 12.5.82}."""
    m = re.search(r"release\s+(\d+\.\d+)\s*,\s*V(\d+(?:\.\d+)+)", text)
    if m:
        return {"version": m.group(1), "full": m.group(2)}
    m = re.search(r"release\s+(\d+\.\d+)", text)
    return {"version": m.group(1)} if m else {}


def parse_ldconfig(text: str) -> Dict[str, List[str]]:
    """``ldconfig -p``: soname -> paths (``libnccl.so.2 (libc6,x86-64) => /lib/…/libnccl.so.2``)."""
    out: Dict[str, List[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(3))
    return out


def torch_cuda_tag(version: Optional[str]) -> Optional[str]:
    """torch's local version tag ``2.3.0+cu121`` -> ``12.1`` (``cu92`` -> 9.2); None for CPU/ROCm/untagged."""
    if not version:
        return None
    m = re.search(r"\+cu(\d+)(\d)$", version)
    return "%d.%s" % (int(m.group(1)), m.group(2)) if m else None


def ngc_version(value: Optional[str]) -> Optional[str]:
    """NGC/Debian package style ``2.21.5-1`` / ``9.1.0.70-1`` -> the upstream version."""
    if not value:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)+)", value)
    return m.group(1) if m else None


def major_minor(version: Optional[str]) -> Optional[str]:
    if not version:
        return None
    m = re.match(r"^(\d+)\.(\d+)", version)
    return "%s.%s" % (m.group(1), m.group(2)) if m else None


def parse_child(text: str) -> Tuple[Dict[str, Dict[str, Any]], List[Dict[str, str]], Optional[Dict[str, str]]]:
    """The child's lines -> (answers by kind, per-candidate errors, the load in progress when it stopped)."""
    answers: Dict[str, Dict[str, Any]] = {}
    errors: List[Dict[str, str]] = []
    pending: Optional[Dict[str, str]] = None
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "try" in obj:
            pending = {"kind": str(obj["try"]), "path": str(obj.get("path"))}
        elif "value" in obj and isinstance(obj.get("value"), int):
            answers[str(obj.get("kind"))] = {"path": obj.get("path"), "value": obj["value"]}
            pending = None
        elif "error" in obj:
            errors.append({"kind": str(obj.get("kind")), "path": str(obj.get("path")), "error": str(obj["error"])})
            pending = None
    return answers, errors, pending


# -- where the libraries are ---------------------------------------------------------------------------

def _glob_lib(directory: str, kind: str, listings: Optional[Dict[str, List[str]]] = None) -> List[str]:
    # libnccl.so.2, and torch 1.x's bundled libcudart-<hash>.so.11.0; not libcudnn_ops.so.9 & co.
    # What glob(<dir>/libX.so*) + glob(<dir>/libX-*.so*) return, from one listing of each directory per
    # collection: three kinds x two patterns x two searches re-read /usr/lib/x86_64-linux-gnu (~1,000
    # entries) twelve times otherwise.
    # Only the names of our three libraries are kept per directory: the rest is cut once, cheaply.
    if listings is None:
        listings = {}
    names = listings.get(directory)
    if names is None:
        try:
            names = sorted(n for n in os.listdir(directory) if n.startswith(_PREFIXES))
        except OSError:
            names = []
        listings[directory] = names
    base = _FILES[kind]
    plain = [n for n in names if fnmatch.fnmatchcase(n, base + ".so*")]
    hashed = [n for n in names if fnmatch.fnmatchcase(n, base + "-*.so*")]
    return [os.path.join(directory, n) for n in plain + hashed]


def _sort_libs(paths: List[str]) -> List[str]:
    # Prefer the soname (libnccl.so.2) over the dev symlink; skip static/stub archives.
    return [p for p in paths if not p.endswith(".a") and "stubs" not in p]


def search(
    ctx: Context, interp: interpreter.Interpreter, ldconfig: Optional[Dict[str, List[str]]],
    listings: Optional[Dict[str, List[str]]] = None,
) -> Dict[str, List[str]]:
    """Candidate library paths per kind, in the order the training would most likely load them
    (``listings``: directory contents already read, shared between calls)."""
    listings = {} if listings is None else listings
    dirs: List[str] = []
    for site in interp.site_dirs:
        dirs.append(os.path.join(site, "torch", "lib"))
        dirs.extend(sorted(glob.glob(os.path.join(glob.escape(site), "nvidia", "*", "lib"))))
    if interp.prefix:
        dirs.append(os.path.join(interp.prefix, "lib"))  # conda's cudatoolkit / nccl packages
    dirs.extend(env_list(ctx.env.get("LD_LIBRARY_PATH")))
    found: Dict[str, List[str]] = {k: [] for k in LIBRARIES}
    for kind in LIBRARIES:
        for d in dirs:
            found[kind].extend(_sort_libs(_glob_lib(d, kind, listings)))
        for soname, paths in sorted((ldconfig or {}).items()):
            if soname.startswith(_FILES[kind] + ".so"):
                found[kind].extend(ctx.path(p) for p in paths)
        for d in STANDARD_DIRS:
            found[kind].extend(_sort_libs(_glob_lib(ctx.path(d), kind, listings)))
        seen = set()
        unique = []
        for p in found[kind]:
            key = os.path.realpath(p)
            if key not in seen and os.path.isfile(p):
                seen.add(key)
                unique.append(p)
        found[kind] = unique[:_MAX_CANDIDATES]
    return found


def _ldconfig(ctx: Context, out: Outcome) -> Optional[Dict[str, List[str]]]:
    tool = ctx.which("ldconfig")
    if tool is None and os.access(ctx.path("/sbin/ldconfig"), os.X_OK):
        tool = ctx.path("/sbin/ldconfig")
    if tool is None:
        return None
    # `ldconfig -p` prints /etc/ld.so.cache: the same tool over the same cache file prints the same
    # listing, of which only these libraries' entries are kept (the whole is ~40 KB on a workstation).
    known = facts.for_context(ctx)
    key = facts.file_key(tool)
    cache_key = facts.file_key(ctx.path("/etc/ld.so.cache"))
    key = None if key is None or cache_key is None else "ldconfig -p|%s|%s" % (key, cache_key)
    listing = known.get("tool-output", key)
    if isinstance(listing, dict):
        return {k: [str(p) for p in v] for k, v in listing.items() if isinstance(v, list)}
    res = ctx.run([tool, "-p"], timeout=1.0)
    if not res.ok:
        out.warn("ldconfig -p: " + res.describe())
        return None
    listing = {k: v for k, v in parse_ldconfig(res.stdout).items() if k.startswith(_PREFIXES)}
    known.put("tool-output", key, listing)
    return listing


def _signal_name(rc: Optional[int]) -> str:
    if rc is not None and rc < 0:
        try:
            return "signal %d (%s)" % (-rc, signal.Signals(-rc).name)
        except ValueError:
            return "signal %d" % -rc
    return "exit %s" % rc


def _cached_versions(
    known: facts.Facts, candidates: Dict[str, List[str]],
) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, List[str]]]:
    """(answers known from the cache, candidates still to ask) per kind, in the child's order: the
    candidates before the first cached one are asked first, as the child would have tried them."""
    cached: Dict[str, Dict[str, Any]] = {}
    ask: Dict[str, List[str]] = {}
    for kind in LIBRARIES:
        before: List[str] = []
        for path in candidates.get(kind) or []:
            value = known.get("libversion", facts.file_key(path))
            if isinstance(value, int) and not isinstance(value, bool):
                cached[kind] = {"path": path, "value": value}
                break
            before.append(path)
        if before:
            ask[kind] = before
    return cached, ask


def probe_libraries(ctx: Context, candidates: Dict[str, List[str]], out: Outcome) -> Dict[str, Dict[str, Any]]:
    """Each candidate's version, from the cache of known files or by asking the rest in one child
    interpreter; never raises."""
    known = facts.for_context(ctx)
    cached, ask = _cached_versions(known, candidates)
    plan = [[k, ask[k]] for k in LIBRARIES if ask.get(k)]
    if not plan:
        return cached
    res = proc.run_python(proc.current_python(), _CHILD, timeout=min(ctx.budget(), _CHILD_TIMEOUT),
                          args=[json.dumps(plan)], env=ctx.env)
    answers, errors, pending = parse_child(res.stdout if isinstance(res.stdout, str) else "")
    for got in answers.values():
        known.put("libversion", facts.file_key(str(got["path"])), got["value"])
    for e in errors:
        out.warn("%s: %s" % (e["path"], e["error"]))
    if not res.ok:
        if pending is not None:
            how = "timed out" if res.timed_out else "died with " + _signal_name(res.rc)
            out.warn("loading %s %s; libraries after it were not asked" % (pending["path"], how))
        else:
            out.warn("version child: " + res.describe())
        out.status = "partial" if answers or cached else "failed"
    for kind, got in cached.items():
        answers.setdefault(kind, got)
    return {k: answers[k] for k in LIBRARIES if k in answers}


# -- collector ----------------------------------------------------------------------------------------

def _is_elf(path: str) -> bool:
    try:
        return read_regular(path, 4) == b"\x7fELF"
    except OSError:
        return False


def _nvcc(ctx: Context, out: Outcome) -> Dict[str, str]:
    tool = ctx.which("nvcc")
    if tool is None:
        for candidate in (ctx.env.get("CUDA_HOME"), ctx.env.get("CUDA_PATH"), "/usr/local/cuda"):
            if candidate and os.access(ctx.path(candidate, "bin", "nvcc"), os.X_OK):
                tool = ctx.path(candidate, "bin", "nvcc")
                break
    if tool is None:
        return {}
    # A real nvcc binary always prints the same version; a wrapper script may depend on the environment
    # (CUDA_HOME, modules), so only an ELF file's answer is remembered.
    known = facts.for_context(ctx)
    key = facts.file_key(tool) if _is_elf(tool) else None
    key = None if key is None else "nvcc --version|" + key
    text = known.get("tool-output", key)
    if not isinstance(text, str):
        res = ctx.run([tool, "--version"], timeout=2.0)
        if not res.ok:
            out.warn("nvcc --version: " + res.describe())
            return {}
        text = res.stdout
    parsed = parse_nvcc(text)
    if not parsed:
        out.warn("nvcc --version printed no release line")
    else:
        known.put("tool-output", key, text)  # a None key stores nothing
    return parsed


def collect(ctx: Context) -> Outcome:
    out = Outcome()
    interp = interpreter.resolve(ctx)
    listings: Dict[str, List[str]] = {}
    candidates = search(ctx, interp, None, listings)
    if not all(candidates.values()):
        ldconfig = _ldconfig(ctx, out)
        if ldconfig:
            candidates = search(ctx, interp, ldconfig, listings)
    answers = probe_libraries(ctx, candidates, out)

    cuda: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    libraries: Dict[str, str] = {}
    raw: Dict[str, int] = {}
    decoded: Dict[str, Optional[str]] = {}
    for kind, got in answers.items():
        decoded[kind] = _DECODE[kind](got["value"])
        raw[kind] = got["value"]
        libraries[kind] = str(got["path"])
    if decoded.get("cudart"):
        cuda["runtime"] = decoded["cudart"]

    dists = packages_probe.installed(ctx)["dists"]
    torch = dists.get("torch")
    tag = torch_cuda_tag(torch.version if torch is not None else None)
    if tag:
        cuda["torch_cuda"] = tag
    ngc = {k: ctx.env[k] for k in NGC_ENV if ctx.env.get(k)}
    if ngc:
        cuda["ngc"] = ngc
    nvcc = _nvcc(ctx, out)
    if nvcc.get("version"):
        cuda["nvcc"] = nvcc["version"]
        if nvcc.get("full"):
            cuda["nvcc_full"] = nvcc["full"]
    if libraries:
        cuda["libraries"] = libraries
        cuda["raw"] = raw

    hardware: Dict[str, Any] = {}
    for value, where in (
        (cuda.get("runtime"), "libcudart (cudaRuntimeGetVersion)"),
        (tag, "torch build tag (+cu)"),
        (major_minor(ngc.get("CUDA_VERSION")), "CUDA_VERSION (image environment)"),
        (cuda.get("nvcc"), "nvcc --version"),
    ):
        if value:
            hardware["cuda_version"], sources["cuda_version"] = value, where
            break
    for field_name, kind, env_name, fn in (
        ("nccl_version", "nccl", "NCCL_VERSION", "ncclGetVersion"),
        ("cudnn_version", "cudnn", "CUDNN_VERSION", "cudnnGetVersion"),
    ):
        if decoded.get(kind):
            hardware[field_name], sources[field_name] = decoded[kind], "lib%s (%s)" % (kind, fn)
        elif ngc_version(ngc.get(env_name)):
            hardware[field_name] = ngc_version(ngc.get(env_name))
            sources[field_name] = env_name + " (image environment)"
    if sources:
        cuda["sources"] = sources
    if cuda:
        hardware["cuda"] = cuda
    if not hardware and out.status == "ok":
        out.status = "absent"
        out.warnings.append("no CUDA runtime, cuDNN, NCCL, nvcc, NGC variables or CUDA torch build found")
    out.data = {"hardware": hardware} if hardware else {}
    facts.for_context(ctx).save()
    return out


# -- deriver: the driver's CUDA vs the runtime's vs torch's build ---------------------------------------

def _mm_tuple(version: Optional[str]) -> Optional[Tuple[int, int]]:
    mm = major_minor(version)
    if mm is None:
        return None
    a, b = mm.split(".")
    return int(a), int(b)


def disagreements(hardware: Dict[str, Any]) -> List[str]:
    """Human sentences for CUDA versions that do not agree (pure; over the merged ``hardware``)."""
    cuda = hardware.get("cuda") if isinstance(hardware.get("cuda"), dict) else {}
    driver = hardware.get("cuda_driver_version")
    runtime = cuda.get("runtime")
    torch = cuda.get("torch_cuda")
    nvcc = cuda.get("nvcc")
    ngc = cuda.get("ngc") if isinstance(cuda.get("ngc"), dict) else {}
    image = major_minor(ngc.get("CUDA_VERSION"))
    out: List[str] = []
    d = _mm_tuple(driver if isinstance(driver, str) else None)
    for label, value in (("runtime library", runtime), ("torch build", torch)):
        v = _mm_tuple(value)
        if d and v and v > d:
            how = "minor-version compatibility only" if v[0] == d[0] else "will not run"
            out.append("CUDA %s %s is newer than the driver supports (%s): %s" % (label, value, driver, how))
    pairs = (("runtime library", runtime, "torch build", torch), ("torch build", torch, "nvcc", nvcc),
             ("runtime library", runtime, "image CUDA_VERSION", image))
    for la, a, lb, b in pairs:
        if a and b and major_minor(a) != major_minor(b):
            out.append("CUDA %s %s differs from %s %s" % (la, a, lb, b))
    return out


def derive(doc: Dict[str, Any], ctx: Context) -> Optional[Outcome]:
    hardware = doc.get("hardware") if isinstance(doc.get("hardware"), dict) else {}
    if not isinstance(hardware.get("cuda"), dict):
        return None  # nothing to compare: no entry in collection.probes
    found = disagreements(hardware)
    return Outcome(data={"hardware": {"cuda": {"disagreements": found}}} if found else {})
