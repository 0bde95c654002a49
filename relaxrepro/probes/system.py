"""Operating system, kernel, CPU and memory, read from ``/etc/os-release`` and ``/proc``."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any, Dict, Optional

from ..context import Context
from ..runner import Outcome


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
    out: Dict[str, Any] = {}
    if model:
        out["model"] = model
    if logical:
        out["logical_cpus"] = logical
    if sockets:
        out["sockets"] = len(sockets)
    return out


def parse_meminfo(text: str) -> Optional[float]:
    """MemTotal in GiB (two decimals), or None."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return round(int(parts[1]) / 1024.0 / 1024.0, 2)
    return None


def collect(ctx: Context) -> Outcome:
    out = Outcome()
    uname = platform.uname()
    system: Dict[str, Any] = {"os": uname.system, "kernel": uname.release, "arch": uname.machine}
    try:
        system["hostname"] = socket.gethostname()
    except OSError:
        pass
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
    if not cpu.get("model") and uname.processor:
        cpu["model"] = uname.processor
    cpu.setdefault("logical_cpus", os.cpu_count())
    hardware["cpu"] = cpu
    meminfo = ctx.read_text("/proc/meminfo")
    mem = parse_meminfo(meminfo) if meminfo else None
    if mem is not None:
        hardware["memory_total_gb"] = mem
    elif uname.system == "Linux":
        out.warn("/proc/meminfo unreadable: memory total not recorded")
    out.data = {"environment": {"system": system}, "hardware": hardware}
    return out
