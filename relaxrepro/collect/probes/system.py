"""Operating system, kernel, C library, CPU, NUMA and memory, read from ``/etc/os-release``, ``/proc`` and ``/sys``."""

from __future__ import annotations

import os
import re

from ..context import Context
from ..runner import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Optional, Tuple


def parse_os_release(text: str) -> Dict[str, str]:
    """``KEY=value`` lines of os-release(5), with shell quoting removed."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        out[key.strip()] = value
    return out


def parse_cpuinfo(text: str) -> Dict[str, Any]:
    """Model name, logical CPUs and sockets from ``/proc/cpuinfo`` (x86 and Arm layouts)."""
    model: Optional[str] = None
    logical = 0
    sockets = set()
    cores = set()
    socket_id = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            logical += 1
        elif key in ("model name", "Model", "cpu model", "Processor") and model is None and value:
            model = value
        elif key == "physical id":
            sockets.add(value)
            socket_id = value
        elif key == "core id":
            # physical id precedes core id in each x86 block; Arm kernels print neither.
            cores.add((socket_id, value))
    out: Dict[str, Any] = {}
    if model:
        out["model"] = model
    if logical:
        out["logical_cpus"] = logical
    if sockets:
        out["sockets"] = len(sockets)
    if cores:
        out["cores"] = len(cores)
    return out


def parse_ldd_version(text: str) -> Dict[str, str]:
    """``ldd --version``: glibc's ``ldd (Debian GLIBC 2.36-9) 2.36`` or musl's ``Version 1.2.4`` (on stderr)."""
    if "musl" in text.lower():
        m = re.search(r"^Version\s+(\d+(?:\.\d+)+)", text, re.MULTILINE)
        return {"name": "musl", "version": m.group(1)} if m else {"name": "musl"}
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "libc" in first.lower() or first.startswith("ldd"):
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)\s*$", first)
        if m:
            return {"name": "glibc", "version": m.group(1)}
    return {}


def count_numa_nodes(names: Any) -> int:
    """``/sys/devices/system/node`` entries named ``nodeN``."""
    return sum(1 for n in names if re.match(r"^node\d+$", n))


def _libc(ctx: Context, out: Outcome) -> Dict[str, str]:
    if ctx.root in ("", "/"):
        try:
            value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"; not on musl: no fork needed
        except (ValueError, OSError, AttributeError):
            value = None
        if value and value.startswith("glibc "):
            return {"name": "glibc", "version": value.split()[1]}
    if not ctx.which("ldd"):
        return {}
    res = ctx.run(["ldd", "--version"], timeout=1.0)
    # musl's ldd prints its banner on stderr and exits 1: read both streams whatever the status.
    text = (res.stdout if isinstance(res.stdout, str) else "") + "\n" + res.stderr
    parsed = parse_ldd_version(text.strip()) if not res.timed_out and res.error is None else {}
    if not parsed:
        out.warn("C library version unknown: " + (res.describe() if not res.ok else "ldd --version unrecognised"))
    return parsed


def parse_meminfo(text: str) -> Optional[float]:
    """MemTotal in GiB (two decimals), or None."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return round(int(parts[1]) / 1024.0 / 1024.0, 2)
    return None


def _uname() -> Tuple[str, str, str]:
    """(system, release, machine) as ``platform.uname()`` gives them, from ``os.uname()`` where there is one
    (the same fields on POSIX) rather than importing ``platform`` (~1.5 ms)."""
    try:
        u = os.uname()
        return u.sysname, u.release, u.machine
    except AttributeError:  # Windows
        import platform  # lazy: ~4 ms, only where os.uname is missing

        p = platform.uname()
        return p.system, p.release, p.machine


def collect(ctx: Context) -> Outcome:
    out = Outcome()
    sysname, release, machine = _uname()
    system: Dict[str, Any] = {"os": sysname, "kernel": release, "arch": machine}
    hostname = ctx.machine.hostname
    if hostname is not None:
        system["hostname"] = hostname
    osr = ctx.read_text("/etc/os-release") or ctx.read_text("/usr/lib/os-release")
    if osr:
        info = parse_os_release(osr)
        if info.get("PRETTY_NAME"):
            system["distribution"] = info["PRETTY_NAME"]
        if info.get("ID"):
            system["distribution_id"] = info["ID"]
        if info.get("VERSION_ID"):
            system["distribution_version"] = info["VERSION_ID"]
    hardware: Dict[str, Any] = {}
    cpuinfo = ctx.read_text("/proc/cpuinfo", limit=4 << 20)
    cpu = parse_cpuinfo(cpuinfo) if cpuinfo else {}
    if cpuinfo is None and sysname == "Linux":
        out.warn("/proc/cpuinfo unreadable: CPU model, cores and sockets not recorded")
    if not cpu.get("model"):
        import platform  # rarely: its processor() may run ``uname -p``

        if platform.processor():
            cpu["model"] = platform.processor()
    cpu.setdefault("logical_cpus", os.cpu_count())
    try:
        numa = count_numa_nodes(os.listdir(ctx.path("/sys/devices/system/node")))
    except OSError:
        numa = 0
    if numa:
        cpu["numa_nodes"] = numa
    hardware["cpu"] = cpu
    libc = _libc(ctx, out)
    if libc:
        system["libc"] = libc
    meminfo = ctx.read_text("/proc/meminfo")
    mem = parse_meminfo(meminfo) if meminfo else None
    if mem is not None:
        hardware["memory_total_gb"] = mem
    elif sysname == "Linux":
        out.warn("/proc/meminfo unreadable: memory total not recorded")
    out.data = {"environment": {"system": system}, "hardware": hardware}
    return out
