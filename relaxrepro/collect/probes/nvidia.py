"""NVIDIA GPUs through ``nvidia-smi`` (and ``/proc/driver/nvidia``); :mod:`.gpu` picks NVIDIA or AMD.

Sources, best first: ``nvidia-smi -q -x``; ``--query-gpu=... --format=csv,noheader,nounits``
(it also gives the compute capability the XML lacks); ``nvidia-smi -L`` (the only source of MIG
profile names); the default table; ``/proc/driver/nvidia/version``. The first three and
``nvidia-smi topo -m`` run concurrently; the topology is kept when it answers within the budget.

The parsers of each output are pure, in :mod:`.nvidia_parse`. Which source wins is pure too:
:func:`follow_up` names the call after the first round and :func:`choose` turns every answer (a
:class:`Captured`) into the probe's report; :func:`collect` only runs the calls.
"""

from __future__ import annotations

import functools
import os
import re
import time

from ...std.deadline import call_all
from ...std.proc import ProcResult
from ...std.records import Record
from ..context import Context
from ..runner import Outcome
from . import nvidia_parse
from .gpu_fields import summarize

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

SMI = "nvidia-smi"

SMI_PLACES: Tuple[str, ...] = (
    "/usr/bin/nvidia-smi",
    "/usr/lib/wsl/lib/nvidia-smi",  # WSL 2: the Windows driver's copy, not always on PATH
    "/usr/local/nvidia/bin/nvidia-smi",  # GKE and other Kubernetes device plugins mount it here
)
"""Where nvidia-smi is when a job's PATH (SLURM, cron, a minimal container) lacks it."""

PROC_VERSION = "/proc/driver/nvidia/version"
PROC_GPUS = "/proc/driver/nvidia/gpus"

_MAIN_SHARE = 0.75
"""Share of the probe budget the concurrent first round (-q -x, CSV, -L, topo) may use; the rest is
left for the fallbacks, so one hung nvidia-smi does not cost every later source."""

# ------------------------------------------------------------------------------- the choice
FIRST_ROUND: Tuple[str, ...] = ("xml", "csv", "list", "topo")
"""The calls that run concurrently first, by the names their answers are captured under."""


def smi_calls(smi: str) -> Dict[str, List[str]]:
    """Every nvidia-smi call the probe may make, by the name its answer is captured under: the
    first round (:data:`FIRST_ROUND`), then the follow-ups :func:`follow_up` asks for."""
    return {
        "xml": [smi, "-q", "-x"],
        "csv": [smi, "--query-gpu=" + ",".join(nvidia_parse.QUERY_FIELDS), "--format=csv,noheader,nounits"],
        "list": [smi, "-L"],
        "topo": [smi, "topo", "-m"],
        "csv_basic": [smi, "--query-gpu=" + ",".join(nvidia_parse.BASIC_QUERY_FIELDS), "--format=csv,noheader,nounits"],
        "version": [smi, "--version"],
        "table": [smi],
    }


_PARSERS: Dict[str, Callable[[str], Dict[str, Any]]] = {
    "xml": nvidia_parse.parse_smi_xml,
    "csv": lambda text: nvidia_parse.parse_query_csv(text, nvidia_parse.QUERY_FIELDS),
    "csv_basic": lambda text: nvidia_parse.parse_query_csv(text, nvidia_parse.BASIC_QUERY_FIELDS),
    "list": nvidia_parse.parse_list,
    "table": nvidia_parse.parse_table,
    "version": nvidia_parse.parse_smi_version,
}


class Captured(Record):
    """Everything the collector saw, handed to :func:`choose` as it came.

    ``smi``: the nvidia-smi found, None when there is none. ``answers``: its answers by call name
    (:func:`smi_calls`); a call not made is missing. The order counts: it is the order the error
    banners are reported in (the first round as its answers came back, then the follow-ups).
    ``proc_version``: the text of ``/proc/driver/nvidia/version``, None when unreadable;
    ``proc_gpus``: the entries of ``/proc/driver/nvidia/gpus``, None when it could not be listed.
    ``visible_devices``: ``CUDA_VISIBLE_DEVICES`` (None: unset). ``first_round_s``: the seconds the
    first round was given, for the warning when nothing answered within them.
    """

    _fields = ("smi", "answers", "proc_version", "proc_gpus", "visible_devices", "first_round_s")

    def __init__(self, smi: Optional[str] = None, answers: Optional[Dict[str, ProcResult]] = None,
                 proc_version: Optional[str] = None, proc_gpus: Optional[List[str]] = None,
                 visible_devices: Optional[str] = None, first_round_s: float = 0.0) -> None:
        self.smi = smi
        self.answers: Dict[str, ProcResult] = {} if answers is None else answers
        self.proc_version = proc_version
        self.proc_gpus = proc_gpus
        self.visible_devices = visible_devices
        self.first_round_s = first_round_s
        self._parsed: Dict[str, Dict[str, Any]] = {}

    def parsed(self, name: str) -> Dict[str, Any]:
        """What one call's stdout parses to ({} when the call was not made), parsed once:
        :func:`follow_up` and :func:`choose` both ask, and an 8-GPU XML costs ~8 ms to read.
        Shared, so callers copy before they change it."""
        res = self.answers.get(name)
        if res is None:
            return {}
        if name not in self._parsed:
            self._parsed[name] = _PARSERS[name](res.stdout if isinstance(res.stdout, str) else "")
        return self._parsed[name]


def _csv_in_force(cap: Captured) -> Dict[str, Any]:
    """The CSV answer that counts: the basic field set's once it was asked."""
    return cap.parsed("csv_basic") if "csv_basic" in cap.answers else cap.parsed("csv")


def needs_basic_csv(cap: Captured) -> bool:
    """The CSV was refused for a field and the XML gave no GPUs: drivers before 510 refuse
    ``compute_cap``, before 450 ``mig.mode.current``, so the basic field set is asked instead."""
    res = cap.answers.get("csv")
    if res is None or cap.parsed("csv").get("gpus"):
        return False
    return "not a valid field" in (res.stdout + res.stderr).lower() and not cap.parsed("xml").get("gpus")


def follow_up(cap: Captured) -> Optional[str]:
    """The next call the answers so far ask for (a :func:`smi_calls` name), or None when done.

    None while the XML has GPUs. Else the basic CSV after a refused field; then ``--version`` when
    the CSV has GPUs (it has no field for the driver's CUDA version, ``--version`` has, on 5xx+),
    else the plain table. Each at most once.
    """
    if cap.smi is None or cap.parsed("xml").get("gpus"):
        return None
    if "csv_basic" not in cap.answers and needs_basic_csv(cap):
        return "csv_basic"
    wanted = "version" if _csv_in_force(cap).get("gpus") else "table"
    return None if wanted in cap.answers else wanted


def _fresh(gpus: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """A copy of parsed GPUs the merges may change (the parses stay as :meth:`Captured.parsed` gave them)."""
    return [{k: [dict(d) for d in v] if k == "mig_devices" else v for k, v in g.items()} for g in gpus]


def _merge_gpus(base: List[Dict[str, Any]], extra: List[Dict[str, Any]], keys: Sequence[str]) -> None:
    """Copy ``keys`` from ``extra`` GPUs into the matching ``base`` GPUs (by UUID, else index)."""
    for gpu in base:
        match = None
        if gpu.get("uuid_hash"):
            match = next((e for e in extra if e.get("uuid_hash") == gpu["uuid_hash"]), None)
        if match is None:
            match = next((e for e in extra if e.get("index") == gpu.get("index") and not (
                e.get("uuid_hash") and gpu.get("uuid_hash"))), None)
        if match is None:
            continue
        for key in keys:
            if key in match and key not in gpu:
                gpu[key] = match[key]


def _merge_mig(gpus: List[Dict[str, Any]], listed: List[Dict[str, Any]]) -> None:
    """MIG profiles ("3g.40gb") and MIG UUID hashes exist only in ``-L``: add them by index."""
    for gpu in gpus:
        other = next((g for g in listed if g.get("index") == gpu.get("index")), None)
        if other is None or not gpu.get("mig_devices"):
            continue
        for dev in gpu["mig_devices"]:
            match = next((d for d in other.get("mig_devices", []) if d.get("index") == dev.get("index")), None)
            if match:
                for key in ("profile", "uuid_hash"):
                    if key in match:
                        dev.setdefault(key, match[key])


def _lead(cap: Captured) -> Dict[str, Any]:
    """The hardware record of the best source that has GPUs, with what the others add to it.

    The XML leads, the CSV adding compute capability and ``-L`` the MIG profiles; else the CSV,
    ``-L`` adding MIG devices and ``--version`` the driver's CUDA; else ``-L``, the table adding
    memory, bus, MIG mode and the driver; else the table alone. {} when none has anything.
    """
    xml, listed, csv_data = cap.parsed("xml"), cap.parsed("list"), _csv_in_force(cap)
    hw: Dict[str, Any] = {}
    if xml.get("gpus"):
        hw.update(xml, gpus=_fresh(xml["gpus"]), gpu_source="nvidia-smi -q -x")
        _merge_gpus(hw["gpus"], csv_data.get("gpus") or [], ("compute_capability",))
        _merge_mig(hw["gpus"], listed.get("gpus") or [])
    elif csv_data.get("gpus"):
        hw.update(csv_data, gpus=_fresh(csv_data["gpus"]), gpu_source="nvidia-smi --query-gpu")
        if listed.get("gpus"):
            _merge_gpus(hw["gpus"], listed["gpus"], ("mig_devices",))
        for key, value in cap.parsed("version").items():
            if key != "smi_version":
                hw.setdefault(key, value)
    else:
        table = cap.parsed("table")
        if listed.get("gpus"):
            hw.update(listed, gpus=_fresh(listed["gpus"]), gpu_source="nvidia-smi -L")
            _merge_gpus(hw["gpus"], table.get("gpus") or [], ("memory_total_mib", "pci_bus_id", "mig_mode"))
            for key in ("driver_version", "kmd_version", "cuda_driver_version"):
                if key in table:
                    hw[key] = table[key]
        elif table.get("gpus") or table.get("driver_version"):
            hw.update(table, gpu_source="nvidia-smi")
            if "gpus" in table:
                hw["gpus"] = _fresh(table["gpus"])
    return hw


def _texts(cap: Captured) -> List[str]:
    """What the error banners are looked for in, in :attr:`Captured.answers` order: each answer's
    stdout and stderr, except ``--version``'s stdout alone."""
    texts: List[str] = []
    for name, res in cap.answers.items():
        texts.append(res.stdout if isinstance(res.stdout, str) else "")
        if name != "version":
            texts.append(res.stderr)
    return texts


def _raw_uuids(*texts: str) -> List[str]:
    return sorted(set(re.findall(r"\bGPU-[0-9a-fA-F-]{8,}", "\n".join(texts))))


def _xml_answer(cap: Captured) -> ProcResult:
    """The ``-q -x`` answer, for the warnings that say how it ended; a stand-in when it was not asked."""
    found = cap.answers.get("xml")
    return found if found is not None else ProcResult(argv=smi_calls(cap.smi or SMI)["xml"], error="not run")


def choose(cap: Captured) -> Optional[Outcome]:
    """Which source wins and what the probe reports: the ``hardware`` record, status and warnings.

    None when there is neither nvidia-smi nor a readable ``/proc`` driver version (:mod:`.gpu`
    then asks AMD's tools). Pure: everything it reads is in ``cap``.
    """
    out = Outcome()
    proc_info = nvidia_parse.parse_proc_version(cap.proc_version) if cap.proc_version else {}
    if cap.smi is None:
        if proc_info:
            return _from_proc(cap, out, proc_info, "nvidia-smi not found on PATH")
        return None

    hw = _lead(cap)
    texts = _texts(cap)
    errors = nvidia_parse.parse_errors("\n".join(texts)).get("errors", [])
    for err in errors:
        if err["kind"] not in ("invalid-field", "usage-error"):
            out.warn("nvidia-smi: " + err["message"])
    if not hw.get("gpus") and not hw.get("driver_version"):
        return _without_gpu_data(cap, out, errors, proc_info)

    if proc_info.get("kernel_module"):
        hw["nvidia_kernel_module"] = proc_info["kernel_module"]
    hw.setdefault("gpus", [])
    hw["gpu_vendor"] = "nvidia"
    # A GPU nvidia-smi cannot reach is left out of its lists but named in a banner: still counted.
    handle_errors = sum(1 for e in errors if e["kind"] in ("device-handle", "gpu-lost"))
    hw["gpu_count"] = max(hw.get("gpu_count") or 0, len(hw["gpus"]) + handle_errors)
    if hw["gpu_source"] != "nvidia-smi -q -x" and not out.warnings:
        out.warn("nvidia-smi -q -x gave no data; used %s (%s)" % (hw["gpu_source"], _xml_answer(cap).describe()))
    visible = nvidia_parse.parse_visible_devices(cap.visible_devices, hw["gpu_count"], _raw_uuids(*texts))
    if visible is None:
        hw["visible_gpu_count"] = hw["gpu_count"]
    else:
        hw.update(visible)
    topo = cap.answers.get("topo")
    topology = nvidia_parse.parse_topo(topo.stdout) if topo is not None and topo.ok else {}
    if topology:
        hw["topology"] = topology
    elif topo is not None and topo.timed_out:
        out.warn("nvidia-smi topo -m did not answer within the budget; topology left out")
    summarize(hw)
    out.data = {"hardware": hw}
    return out


def _without_gpu_data(cap: Captured, out: Outcome, errors: List[Dict[str, str]],
                      proc_info: Dict[str, Any]) -> Outcome:
    """No source had GPUs or a driver: "No devices were found" is an answer (absent, zero GPUs);
    else the ``/proc`` driver version when there is one; else why nothing came (timeout or failed)."""
    kinds = {e["kind"] for e in errors}
    timed_out = any(cap.answers[n].timed_out for n in FIRST_ROUND if n in cap.answers)
    if "no-devices" in kinds:
        hw: Dict[str, Any] = {"gpu_count": 0, "gpus": [], "gpu_vendor": "nvidia", "gpu_source": "nvidia-smi"}
        hw.update(proc_info)
        out.data = {"hardware": hw}
        out.status = "absent"
        return out
    if proc_info:
        why = "nvidia-smi timed out" if timed_out else "nvidia-smi gave no GPU data"
        return _from_proc(cap, out, proc_info, why)
    if timed_out:
        out.warn("nvidia-smi did not answer within %.1f s" % cap.first_round_s, status="timeout")
    else:
        if not errors:
            out.warn("nvidia-smi gave no GPU data: " + _xml_answer(cap).describe())
        out.status = "failed"
    return out


def _from_proc(cap: Captured, out: Outcome, info: Dict[str, Any], why: str) -> Outcome:
    """Last resort: the loaded kernel module's version and the GPUs it lists under /proc."""
    hw: Dict[str, Any] = {"driver_version": info["driver_version"], "gpu_vendor": "nvidia",
                          "nvidia_kernel_module": info["kernel_module"], "gpu_source": PROC_VERSION}
    if cap.proc_gpus is not None:
        hw["gpu_count"] = len([d for d in cap.proc_gpus if nvidia_parse.BUS_ID_RE.search(d)])
    out.data = {"hardware": hw}
    out.warn("%s; driver version from %s only" % (why, PROC_VERSION))
    return out


# ------------------------------------------------------------------------------------ collector
def _run_all(ctx: Context, jobs: Dict[str, List[str]], timeout: float) -> Dict[str, ProcResult]:
    """Run several nvidia-smi calls at once (each its own process group and timeout).

    The answers are keyed in the order they came back (abandoned ones last)."""
    names = list(jobs)
    calls = call_all([functools.partial(ctx.run, jobs[n], timeout=timeout) for n in names],
                     time.monotonic() + timeout, grace=1.0, name="relaxrepro-nvidia-smi")
    came_back = sorted((c.ended_at, n, c.value) for n, c in zip(names, calls) if c.ok)
    results: Dict[str, ProcResult] = {n: value for _, n, value in came_back}
    for name, argv in jobs.items():
        results.setdefault(name, ProcResult(argv=argv, timed_out=True, error="abandoned"))
    return results


def find_smi(ctx: Context) -> Optional[str]:
    """nvidia-smi on the context's PATH, else where drivers put it off PATH (under ctx.root)."""
    found = ctx.which(SMI)
    if found:
        return found
    for place in SMI_PLACES:
        path = ctx.path(place)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _listdir(path: str) -> Optional[List[str]]:
    try:
        return os.listdir(path)
    except OSError:
        return None


def collect(ctx: Context) -> Optional[Outcome]:
    """NVIDIA GPUs through nvidia-smi, else the driver's ``/proc`` files; None when there is neither.

    Only runs the calls and reads the files: :func:`follow_up` says which calls come after the
    first round, :func:`choose` what they all add up to.
    """
    proc_text = ctx.read_text(PROC_VERSION)
    cap = Captured(smi=find_smi(ctx), proc_version=proc_text,
                   proc_gpus=_listdir(ctx.path(PROC_GPUS)) if proc_text else None,
                   visible_devices=ctx.env.get("CUDA_VISIBLE_DEVICES"))
    if cap.smi is not None:
        calls = smi_calls(cap.smi)
        # One concurrent round: each call costs nvidia-smi's start-up (NVML init, up to seconds on a
        # node without persistence mode), so waiting for them in turn would spend the budget twice.
        cap.first_round_s = max(ctx.budget() * _MAIN_SHARE, 0.0)
        cap.answers.update(_run_all(ctx, {name: calls[name] for name in FIRST_ROUND}, cap.first_round_s))
        while True:
            name = follow_up(cap)
            if name is None or ctx.budget() <= 0.2:
                break
            cap.answers[name] = ctx.run(calls[name])
    return choose(cap)
