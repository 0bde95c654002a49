"""Helpers for the Ray tests: fake /proc roots from captured raylet command lines, and a real Ray
cluster (head + a second raylet on 127.0.0.2) inside a loopback-only network namespace.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from tests.helpers.common import FIXTURES, ROOT

RAY_FIXTURES = FIXTURES / "ray"


def raylet_cmdlines() -> Dict[str, List[str]]:
    """pid -> argv of the two raylets in ``raylet_proc_cmdline_2node.txt`` (one argument a line)."""
    out: Dict[str, List[str]] = {}
    pid = None
    for line in (RAY_FIXTURES / "raylet_proc_cmdline_2node.txt").read_text().splitlines():
        if line.startswith("### pid "):
            pid = line.split()[-1]
            out[pid] = []
        elif pid is not None and line:
            out[pid].append(line)
    return out


def fake_root(tmp: Path, *, pids: Sequence[str] = (), address_file: Optional[str] = None,
              ray_version: Optional[str] = None) -> Path:
    """A filesystem root with ``/proc/<pid>/cmdline`` of the chosen captured raylets (plus a shell
    process that must be ignored) and, optionally, ``/tmp/ray/ray_current_cluster``."""
    root = tmp / "root"
    (root / "proc" / "1").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "1" / "cmdline").write_bytes(b"/bin/bash\0-c\0echo raylet\0")
    (root / "proc" / "self").mkdir(exist_ok=True)
    lines = raylet_cmdlines()
    for pid in pids:
        (root / "proc" / pid).mkdir(parents=True, exist_ok=True)
        (root / "proc" / pid / "cmdline").write_bytes("\0".join(lines[pid]).encode() + b"\0")
    if address_file is not None:
        (root / "tmp" / "ray").mkdir(parents=True, exist_ok=True)
        (root / "tmp" / "ray" / "ray_current_cluster").write_text(address_file + "\n")
    if ray_version is not None:
        site = root / "opt/venv/lib/python3.11/site-packages"
        (site / ("ray-%s.dist-info" % ray_version)).mkdir(parents=True, exist_ok=True)
    return root


# -- a real cluster in a loopback-only network namespace ------------------------------------------

RAY_BIN = Path(sys.executable).parent / "ray"


def ray_cluster_unavailable() -> Optional[str]:
    """Why the real-cluster tests cannot run here, or None."""
    if not RAY_BIN.exists():
        return "ray is not installed beside %s (tests/requirements-ray.txt via tests/run.sh)" % sys.executable
    if os.geteuid() != 0:
        return "needs root for a loopback-only network namespace"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return "%s not found" % tool
    return None


def namespace_pids(ns_inode: int) -> List[int]:
    """Every process whose network namespace is the one with inode ``ns_inode``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat("/proc/%s/ns/net" % entry).st_ino == ns_inode:
                    out.append(int(entry))
            except OSError:
                pass
    return out


def stop_namespace(netns: Path, ns_inode: Optional[int]) -> None:
    """Kill exactly the processes in our namespace (the ones the test started), then unmount it.

    Never ``ray stop``: it kills every Ray process on the machine by name, other clusters included.
    """
    try:
        if ns_inode is not None:
            for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
                for pid in namespace_pids(ns_inode):
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
                end = time.monotonic() + wait
                while namespace_pids(ns_inode) and time.monotonic() < end:
                    time.sleep(0.2)
    finally:
        if netns.exists():
            subprocess.run(["umount", str(netns)], capture_output=True, timeout=30)


class NetnsCluster:
    """Ray head + a second raylet, confined to a private network namespace with only ``lo``."""

    def __init__(self) -> None:
        # Short paths: Ray's Unix sockets live under RAY_TMPDIR and must fit in 107 bytes.
        self.tmp = Path(tempfile.mkdtemp(prefix="rrray"))
        self.netns = self.tmp / "netns"
        self.raytmp = self.tmp / "t"
        self.raytmp.mkdir()
        self.bindir = self.tmp / "bin"
        self.bindir.mkdir()
        # Only the ray CLI of the test venv goes on PATH, so `ray` resolves to it and nothing else does.
        (self.bindir / "ray").symlink_to(RAY_BIN)
        self.python = sys.executable
        self.started = False
        self.ns_inode: Optional[int] = None

    def env(self, **extra: str) -> Dict[str, str]:
        env = {
            "PATH": "%s:/usr/bin:/bin" % self.bindir,
            "HOME": str(self.tmp),
            "LANG": "C.UTF-8",
            "RAY_USAGE_STATS_ENABLED": "0",  # otherwise Ray reports to usage-stats.ray.io
            "RAY_TMPDIR": str(self.raytmp),
            "TMPDIR": str(self.raytmp),
            "PYTHONPATH": str(ROOT),
        }
        env.update(extra)
        return env

    def run(self, *argv: str, env: Optional[Dict[str, str]] = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run ``argv`` inside the namespace."""
        res = subprocess.run(["nsenter", "--net=%s" % self.netns, *argv], env=env or self.env(),
                             capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("%s failed (rc %d):\n%s\n%s" % (argv, res.returncode, res.stdout, res.stderr[-3000:]))
        return res

    def start(self) -> None:
        self.netns.touch()
        subprocess.run(["unshare", "--net=%s" % self.netns, "true"], check=True, timeout=30)
        self.ns_inode = os.stat(self.netns).st_ino
        self.run("ip", "link", "set", "lo", "up")
        self.started = True
        self.run("ray", "start", "--head", "--port=6379", "--node-ip-address=127.0.0.1", "--num-cpus=2",
                 "--include-dashboard=true", "--dashboard-host=127.0.0.1", "--disable-usage-stats")
        self.run("ray", "start", "--address=127.0.0.1:6379", "--node-ip-address=127.0.0.2", "--num-cpus=1",
                 "--num-gpus=1", '--resources={"accelerator_type:H100": 1}',
                 "--labels=ray.io/accelerator-type=H100", "--dashboard-agent-listen-port=52366",
                 "--disable-usage-stats")

    def stop(self) -> None:
        try:
            stop_namespace(self.netns, self.ns_inode)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
