"""Shared setup for the benchmarks: cached venvs and trees, small repos, a one-node Ray cluster in a
loopback-only network namespace. The per-area scripts keep their own builders; this module imports them.

Everything slow to build (the ML venv, the peers venv, the 40k-file repo, the 10,000-manifest tree) lives
under ``CACHE`` (``$RELAXREPRO_BENCH_CACHE``, else ``bench/.cache``, git-ignored) and is reused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.environ.get("RELAXREPRO_BENCH_CACHE") or os.path.join(HERE, ".cache")
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import git_probe  # noqa: E402  (its builders: the 40k-file repo, dirtied, with a 50 MB untracked file)

GIT_ENV = dict(git_probe.ENV)

FULL = {"bigrepo": 40000, "ls": 10000, "report": 1000, "index": 100000, "merge": 1000, "mlflowq": 10000}
QUICK = {"bigrepo": 2000, "ls": 1000, "report": 200, "index": 2000, "merge": 200, "mlflowq": 1000}
"""The fixtures' sizes: files of the big repository, manifests of the ls, report and index trees, merge's fragments,
runs of the tree and MLflow store the in-process queries compare (bench/mlflow_query.py).
``--quick`` builds the small ones (seconds, not the 10+ minutes of the full set on a fresh machine)."""


class Progress:
    """One line on stderr per fixture built and per case started, and a line per round, when stderr is a
    terminal: a long run says what it is doing; a run into a file or a pipe stays quiet."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.on = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()

    def say(self, what: str) -> None:
        if self.on:
            print("[%6.1f s] %s" % (time.monotonic() - self.t0, what), file=self.stream, flush=True)

    def fixture(self, name: str, build):
        """``build()``'s result, the time it took said as one line."""
        t = time.monotonic()
        out = build()
        self.say("fixture %s: %.1f s" % (name, time.monotonic() - t))
        return out

# torch 2.13.0 is a CPU wheel on local disk for CPython 3.11; the rest comes from the package index.
ML_REQUIREMENTS = ["torch==2.13.0", "numpy", "scipy", "pandas", "transformers", "datasets", "accelerate",
                   "pyarrow", "ray[default]", "scikit-learn", "matplotlib", "tensorboard", "jupyter", "evaluate",
                   "peft", "sentencepiece"]
PEER_REQUIREMENTS = ["wandb", "mlflow"]


def real_binary(path: str) -> str:
    """The interpreter binary itself: a pyenv shim is a bash script that adds ~130 ms per start."""
    return os.path.realpath(path)


def base_python() -> str:
    """A CPython 3.11 binary (torch 2.13.0's CPU wheel here is cp311), never a shim."""
    if sys.version_info[:2] == (3, 11):
        return real_binary(sys.executable)
    found = shutil.which("python3.11") or shutil.which("python3")
    if not found:
        raise SystemExit("no python3.11 found to build the ML venv")
    out = subprocess.run([found, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    return real_binary(out.stdout.strip())


def venv_python(venv: str) -> str:
    """``venv/bin/python``: a symlink to the real binary (its path, not its target, selects the venv)."""
    return os.path.join(venv, "bin", "python")


def ensure_venv(name: str, requirements: Sequence[str], create: bool = True) -> Optional[str]:
    """The cached venv ``CACHE/name`` with ``requirements`` installed, built once; None when absent and
    ``create`` is false. A venv is complete only once its marker file names the same requirements."""
    venv = os.path.join(CACHE, name)
    marker = os.path.join(venv, ".bench-complete")
    want = "\n".join(requirements) + "\n"
    try:
        with open(marker) as fh:
            if fh.read() == want:
                return venv
    except OSError:
        pass
    if not create:
        return None
    print("building %s (%s): a few minutes, once" % (venv, " ".join(requirements)), file=sys.stderr)
    if not os.path.exists(venv_python(venv)):
        subprocess.run([base_python(), "-m", "venv", venv], check=True)
    subprocess.run([venv_python(venv), "-m", "pip", "install", "-q", *requirements], check=True)
    with open(marker, "w") as fh:
        fh.write(want)
    return venv


def count_distributions(venv: str) -> int:
    site = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    if not os.path.isdir(site):
        site = next((os.path.join(r, d) for r, ds, _ in os.walk(os.path.join(venv, "lib")) for d in ds
                     if d == "site-packages"), site)
    return sum(1 for n in os.listdir(site) if n.endswith(".dist-info")) if os.path.isdir(site) else 0


def make_repo(path: str, files: int = 20) -> str:
    """A small git repository with one modified file."""
    os.makedirs(path)
    git_probe.sh("git", "init", "-q", cwd=path)
    for i in range(files):
        with open(os.path.join(path, "f%d.py" % i), "w") as fh:
            fh.write("x = %d\n" % i)
    git_probe.sh("git", "add", "-A", cwd=path)
    git_probe.sh("git", "commit", "-qm", "init", cwd=path)
    with open(os.path.join(path, "f0.py"), "a") as fh:
        fh.write("y = 1\n")
    return path


def big_repo(files: int = 40000) -> str:
    """``CACHE/gitbig[-<files>]/big``: ``files`` tracked files, 20 modified, a 50 MB untracked file (git_probe's)."""
    root = os.path.join(CACHE, "gitbig" if files == 40000 else "gitbig-%d" % files)
    os.makedirs(root, exist_ok=True)
    repo = git_probe.build(root, files)
    git_probe.dirty(repo)
    return repo


def ls_tree(runs: int = 10000, kb: int = 50) -> str:
    """``CACHE/ls-<runs>``: ``runs`` manifests of ~``kb`` KB in group/run directories (bench/ls.py's)."""
    import ls

    base = os.path.join(CACHE, "ls-%d" % runs)
    done = os.path.join(base, ".bench-complete")
    if not os.path.exists(done):
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        ls.build_tree(base, runs, kb)
        open(done, "w").close()
    return base


def read_manifests(work: str) -> List[str]:
    """Two ~30 KB manifests that differ a little (bench/read_commands.py's)."""
    import read_commands

    paths = []
    for seed in (0, 1):
        p = os.path.join(work, "m%d.json" % seed)
        with open(p, "w") as fh:
            json.dump(read_commands.manifest(seed), fh, indent=1)
        paths.append(p)
    return paths


def merge_inputs(work: str, n: int = 1000) -> List[str]:
    """(manifest, fragment dir) with ``n`` node fragments from a real A100 capture (bench/merge.py's)."""
    import merge

    from relaxrepro.manifest import nodes as node

    d = os.path.join(work, "nodes")
    os.makedirs(d)
    for f in merge.make_fragments(work, n):
        with open(os.path.join(d, node.fragment_filename(f)), "w") as fh:
            json.dump(f, fh, indent=1)
    manifest = {"schema_version": "1.0", "run_id": "bench", "generated_at": "2026-12-02T00:00:00Z"}
    manifest.update({s: {} for s in ("command", "code", "config", "environment", "hardware", "runtime",
                                     "training", "collection")})
    mpath = os.path.join(work, "manifest_bench.json")
    with open(mpath, "w") as fh:
        json.dump(manifest, fh)
    return [mpath, d]


class NetnsRay:
    """A one-node Ray cluster (head with dashboard) in a network namespace that has only ``lo``.

    Ray rewrites 127.0.0.1 to the host's own address unless the namespace has no other interface
    (/work/shared/fixtures/ray/REPORT.md section 0); usage stats are off. ``ray stop`` would kill every
    Ray process on the machine (it matches by name), so ``stop`` kills only the processes whose network
    namespace is ours.
    """

    def __init__(self, venv: str) -> None:
        self.tmp = tempfile.mkdtemp(prefix="rrb")  # short: Ray's socket paths must fit in 107 bytes
        self.netns = os.path.join(self.tmp, "netns")
        self.raytmp = os.path.join(self.tmp, "t")
        os.mkdir(self.raytmp)
        self.bindir = os.path.join(venv, "bin")
        self.started = False

    def env(self, **extra: str) -> Dict[str, str]:
        env = {"PATH": "%s:/usr/bin:/bin" % self.bindir, "HOME": self.tmp, "LANG": "C.UTF-8",
               "RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": self.raytmp, "TMPDIR": self.raytmp}
        env.update(extra)
        return env

    def argv(self, *argv: str) -> List[str]:
        """``argv`` run inside the namespace."""
        return ["nsenter", "--net=%s" % self.netns, *argv]

    def start(self) -> None:
        open(self.netns, "w").close()
        subprocess.run(["unshare", "--net=%s" % self.netns, "true"], check=True, timeout=30)
        self.started = True
        subprocess.run(self.argv("ip", "link", "set", "lo", "up"), check=True, timeout=30)
        subprocess.run(self.argv("ray", "start", "--head", "--port=6379", "--node-ip-address=127.0.0.1",
                                 "--num-cpus=2", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                                 "--disable-usage-stats"),
                       env=self.env(), check=True, timeout=180, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def _our_pids(self) -> List[int]:
        try:
            ours = os.stat(self.netns).st_ino  # the bind-mounted nsfs inode
        except OSError:
            return []
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                try:
                    if os.stat("/proc/%s/ns/net" % name).st_ino == ours:
                        pids.append(int(name))
                except OSError:
                    pass
        return pids

    def stop(self) -> None:
        try:
            if self.started:
                for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
                    for pid in self._our_pids():
                        try:
                            os.kill(pid, sig)
                        except OSError:
                            pass
                    deadline = time.monotonic() + wait
                    while self._our_pids() and time.monotonic() < deadline:
                        time.sleep(0.2)
                left = self._our_pids()
                if left:
                    print("warning: Ray processes left in the namespace: %s" % left, file=sys.stderr)
        finally:
            if os.path.exists(self.netns):
                subprocess.run(["umount", self.netns], capture_output=True, timeout=30)
            shutil.rmtree(self.tmp, ignore_errors=True)
