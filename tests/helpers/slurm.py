"""A real one-node SLURM cluster on loopback for the tests: munged, slurmctld and slurmd (Debian's slurm-wlm).

:func:`start` writes a munge key and a minimal ``slurm.conf`` into a directory of its own, starts the three
daemons in the foreground as children of the test process (every one marked with ``RELAXREPRO_TEST_MARKER``,
which each job step and job inherits), and waits until ``sinfo`` shows the node idle. :meth:`Cluster.stop`
cancels every job, stops the daemons and kills any marked process left, so nothing outlives the tests.
Clients find the cluster through :attr:`Cluster.env` (``SLURM_CONF``). It needs root (slurmd runs jobs as
their user) and the binaries; :func:`why_not` says why it cannot start here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from tests.helpers.common import MARKER_VAR, marked_processes, survivors

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sinfo", "squeue", "scancel", "sacct")
# PATH for the daemons (Debian puts them in /usr/sbin, not on a plain user's PATH)
_SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def _which(name: str) -> Optional[str]:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", "")] + list(_SBIN)))


def why_not() -> Optional[str]:
    """None when a cluster can start here; else the one-line reason the SLURM tests skip."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "a real SLURM needs root (slurmd starts jobs as their user); run tests/run.sh as root"
    missing = [n for n in DAEMONS + CLIENTS if not _which(n)]
    if missing:
        return "SLURM not installed (%s missing): tests/run.sh installs slurm-wlm and munge with apt as root" % (
            ", ".join(missing))
    return None


def _free_ports(n: int) -> List[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _node_line() -> str:
    """This machine as slurmd sees it (CPUs, sockets, RealMemory), named ``localhost``."""
    out = subprocess.run([_which("slurmd") or "slurmd", "-C"], capture_output=True, text=True, timeout=20).stdout
    words = [w for w in out.split() if w.split("=")[0] in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket",
                                                          "ThreadsPerCore", "RealMemory")]
    return "NodeName=localhost NodeAddr=127.0.0.1 %s State=UNKNOWN" % " ".join(words or ["CPUs=%d" % os.cpu_count()])


def slurm_conf(d: Path, ctld_port: int, slurmd_port: int, socket_path: Path) -> str:
    """A minimal single-node slurm.conf with every file under ``d`` and every port on loopback."""
    return "\n".join([
        "ClusterName=relaxrepro",
        "SlurmctldHost=localhost(127.0.0.1)",
        "SlurmctldPort=%d" % ctld_port,
        "SlurmdPort=%d" % slurmd_port,
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "AuthInfo=socket=%s" % socket_path,
        "StateSaveLocation=%s" % (d / "state"),
        "SlurmdSpoolDir=%s" % (d / "spool"),
        "SlurmctldPidFile=%s" % (d / "slurmctld.pid"),
        "SlurmdPidFile=%s" % (d / "slurmd.pid"),
        "SlurmctldLogFile=%s" % (d / "slurmctld.log"),
        "SlurmdLogFile=%s" % (d / "slurmd.log"),
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/builtin",
        "SchedulerParameters=sched_min_interval=100000,batch_sched_delay=0",  # a job starts in 1 s, not 3 s
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=2",
        "MinJobAge=300",
        # a real Prolog: slurmd runs it as root on the node before the job; it runs each hook a test drops
        # into prolog.d/ (see Cluster.prolog_hook)
        "Prolog=%s" % (d / "prolog"),
        _node_line(),
        "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


class Cluster:
    """A started cluster: ``env`` for clients, ``dir`` with its logs, and :meth:`stop`."""

    def __init__(self, d: Path, env: Dict[str, str], marker: str) -> None:
        self.dir = d
        self.env = env
        self.marker = marker
        self.procs: List[subprocess.Popen] = []
        self.startup_s = 0.0

    def run(self, *argv: str, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=dict(self.env, **kw.pop("env", {})), capture_output=True, text=True,
                              timeout=timeout, **kw)

    def wait_job(self, job_id: str, timeout: float = 120) -> str:
        """Wait until the job has left the queue; returns its state from ``scontrol show job``."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            out = self.run("scontrol", "show", "job", job_id).stdout
            state = next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), "")
            if state and state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return state
            time.sleep(0.2)
        raise AssertionError("job %s still %s after %ds; logs in %s" % (job_id, state, timeout, self.dir))

    def prolog_hook(self, name: str, script: str) -> Path:
        """Run ``script`` (sh) in the Prolog of every job from now on, until the returned file is removed."""
        hook = self.dir / "prolog.d" / name
        hook.write_text("#!/bin/sh\n" + script)
        hook.chmod(0o755)
        return hook

    def logs(self) -> str:
        return "\n".join("== %s\n%s" % (p.name, p.read_text(errors="replace")[-3000:])
                         for p in sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("*.out")))

    def stop(self) -> None:
        """Cancel every job, stop the daemons (slurmd, slurmctld, munged) and kill what is left of them."""
        if self.procs:
            try:
                self.run("scancel", "--full", "--user=root", timeout=10)
            except (OSError, subprocess.SubprocessError):
                pass
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 2  # an idle slurmd stops in ms; one with a job step left waits 10 s
        for p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.procs = []
        self._kill_marked()
        survivors(self.marker)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _kill_marked(self) -> None:
        """SIGKILL every process of this cluster (slurmstepd and the jobs' processes carry the marker too)."""
        for pid in marked_processes(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _daemon(cluster: Cluster, argv: List[str], name: str) -> None:
    log = open(cluster.dir / (name + ".out"), "wb")
    cluster.procs.append(subprocess.Popen(argv, env=cluster.env, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
    log.close()


def start(timeout: float = 60) -> Cluster:
    """Start the cluster and wait until its node is idle; raises (after stopping what started) when it is not."""
    t0 = time.monotonic()
    d = Path(tempfile.mkdtemp(prefix="relaxrepro-slurm-"))
    d.chmod(0o755)
    for sub in ("state", "spool", "munge", "prolog.d"):
        (d / sub).mkdir()
    (d / "munge").chmod(0o700)
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = d / "munge" / "munge.socket"
    ctld_port, slurmd_port = _free_ports(2)
    prolog = d / "prolog"
    prolog.write_text('#!/bin/sh\nfor hook in %s/*; do [ -x "$hook" ] && "$hook"; done\nexit 0\n' % (d / "prolog.d"))
    prolog.chmod(0o755)
    conf = d / "slurm.conf"
    conf.write_text(slurm_conf(d, ctld_port, slurmd_port, sock))
    marker = "slurm-" + d.name
    path = os.pathsep.join([os.environ.get("PATH", "")] + list(_SBIN))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_CONF=str(conf), PATH=path, **{MARKER_VAR: marker})
    cluster = Cluster(d, env, marker)
    try:
        _daemon(cluster, [_which("munged") or "munged", "--foreground", "--force", "--key-file=%s" % key,
                          "--socket=%s" % sock, "--pid-file=%s" % (d / "munge" / "munged.pid"),
                          "--log-file=%s" % (d / "munged.log"), "--seed-file=%s" % (d / "munge" / "seed")], "munged")
        _wait(lambda: sock.exists(), timeout, cluster, "munged's socket")
        _daemon(cluster, [_which("slurmctld") or "slurmctld", "-D", "-i"], "slurmctld")
        _daemon(cluster, [_which("slurmd") or "slurmd", "-D", "-N", "localhost"], "slurmd")
        _wait(lambda: cluster.run("sinfo", "-h", "-N", "-o", "%t", timeout=10).stdout.strip() == "idle",
              timeout, cluster, "the node to be idle in sinfo")
    except BaseException:
        cluster.stop()
        raise
    cluster.startup_s = time.monotonic() - t0
    return cluster


def _wait(ready, timeout: float, cluster: Cluster, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, subprocess.SubprocessError):
            pass
        dead = [p.args[0] for p in cluster.procs if p.poll() is not None]
        if dead:
            raise RuntimeError("SLURM test cluster: %s exited while waiting for %s\n%s" % (
                ", ".join(dead), what, cluster.logs()))
        time.sleep(0.1)
    raise RuntimeError("SLURM test cluster: no %s after %ds\n%s" % (what, timeout, cluster.logs()))
