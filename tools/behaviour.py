#!/usr/bin/env python3
"""Prove that relaxrepro's observable behaviour is unchanged between two source trees.

What it proves: for a fixed list of named CLI invocations (every subcommand's help, usage errors,
generate/run/check/diff/rerun/restore/merge/ls/lineage/compare/fingerprint on real inputs), the
baseline tree and the new tree give the same exit code, the same stdout, the same stderr and write
the same files with the same modes and contents, once run-varying values are masked (times,
durations, probe seconds, fresh run ids, temp-file names). A case listed in EXPECTED is a
deliberate behaviour change: it is reported as ``changed (expected: reason)`` and does not fail.

How: the baseline is ``git archive REF`` of the repository holding this script, the new tree is a
copy of DIR taken once at the start (so concurrent edits can't tear it; in a git work tree only the
files git would commit: tracked and untracked-but-not-ignored, so no .venv or *.egg-info). Both are moved in turn to
the same path, ``<tmp>/src``, and put on PYTHONPATH. For each side a scenario is built from scratch
at the same path ``<tmp>/scn`` (a temp HOME with git repos whose commits have fixed names and
dates, a dirty change, an untracked file, fixture files with fixed mtimes) and every case runs in
order as ``python3 -m relaxrepro ARGS`` with a fixed clean environment (HOME and TMPDIR in the
scenario, a fixed PATH, LC_ALL=C, TZ=UTC, COLUMNS=100, PYTHONHASHSEED=0, RAY_USAGE_STATS_ENABLED=0,
RELAXREPRO_NO_CACHE=1, no RANK/SLURM variables unless a case sets them) and a 60 s timeout. Later
cases read what earlier ones wrote (diff reads generate's manifests), each side its own; before the
readers run, a Freeze step pins the probe seconds and times inside those manifests, so that what
diff, ls, lineage and compare print (and ls's order) does not depend on timing. Nothing is left
behind: the temp directory is removed at the end.

Compared per case: the exit code, stdout, stderr, and every file or directory created, changed or
removed below the scenario (mode and content; JSON with generated_at, *seconds, duration_s, *_at
masked; the fingerprint cache's sqlite rows with inodes and times masked; .git internals skipped).
Everywhere: fresh run ids (``YYYYMMDD_HHMMSS_<hex>``, also in file names), ISO times, measured
durations ("0.12 s") and tempfile names are masked, and the temp root prints as <ROOT>.

    python3 tools/behaviour.py                      # baseline 8754467 vs this working tree
    python3 tools/behaviour.py --baseline REF --new DIR
    python3 tools/behaviour.py --show diff-json -v  # only that case's diff, and both outputs
    python3 tools/behaviour.py -v                   # also time every case (on stderr)

Exit status: 0 every case same (or an expected change), 1 some case DIFFERS, 2 setup failed.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple, Union

DEFAULT_BASELINE = "8754467"
TIMEOUT_S = 60
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBCOMMANDS = ["generate", "run", "ls", "lineage", "compare", "fingerprint", "merge", "check", "diff", "rerun",
               "restore"]

# Deliberate behaviour changes since the baseline: case name -> why it differs.
EXPECTED: Dict[str, str] = {
    "generate-keep-paths": "issue 15: --keep-paths now keeps home paths in patches too",
}

# What a copy of a new tree that is not a git work tree leaves out: at its top, VCS data, virtual environments,
# build outputs; anywhere, caches (bench/.cache holds whole venvs) and *.egg-info.
TOP_IGNORE = {".git", "dist", "build"}
ANY_IGNORE = {"__pycache__", ".cache", ".pytest_cache", ".ruff_cache", ".mypy_cache"}

# Fixed identity and dates for the scenario's commits, so both sides see the same SHAs.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada Example", "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Example", "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_AUTHOR_DATE": "2024-01-02T03:04:05+00:00", "GIT_COMMITTER_DATE": "2024-01-02T03:04:05+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
}
FIXED_MTIME = 1704164645  # 2024-01-02T03:04:05Z, for every file the scenario writes
FIXED_TIME = "2024-01-02T03:04:05Z"  # what Freeze puts in generated_at, ended_at, ...


# --------------------------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class Case:
    """One invocation: ``python3 -m relaxrepro *args`` in scenario directory ``cwd`` with ``env`` added.

    ``{name}`` in args, cwd and env values is replaced by the scenario path ``name`` (see Scenario.paths).
    """

    name: str
    args: Tuple[str, ...]
    cwd: str = "{proj}"
    env: Dict[str, str] = field(default_factory=dict)


def case(name: str, *args: str, cwd: str = "{proj}", env: Optional[Dict[str, str]] = None) -> Case:
    return Case(name, tuple(args), cwd, dict(env or {}))


@dataclass(frozen=True)
class Freeze:
    """Not a case: set the run-varying fields of every manifest_*.json and node_*.json in ``dirs`` to fixed values.

    Probe seconds and times differ between any two runs, so a command that reads manifests would print
    different numbers (diff --all), counts (how many volatile fields differ) or orders (ls sorts by
    generated_at, then run id) for reasons that are not behaviour. Freezing the inputs makes them stable;
    the files as generate wrote them were already compared by the cases that wrote them.
    """

    dirs: Tuple[str, ...]


Step = Union[Case, Freeze]


# A token-shaped fake, assembled at run time so that no secret-shaped literal sits in the source.
FAKE_HF_TOKEN = "hf_" + "aBcDeFgHiJkLmNoPq" * 2
TRAIN = ("--", "python", "train.py", "--lr", "3e-4", "--data", "{home}/proj/data")
M1 = "{runs}/manifest_r01-base.json"
M2 = "{runs}/manifest_r02-sweep.json"
M3 = "{runs}/manifest_r03-sweep.json"


def build_steps() -> List[Step]:
    """The fixed list, in run order (later cases read files earlier ones wrote)."""
    steps: List[Step] = [
        case("version", "--version"),
        case("help", "--help"),
        case("no-command"),
        case("unknown-command", "frobnicate"),
        case("bad-option", "--frobnicate"),
        case("generate-bad-option", "generate", "--frobnicate"),
    ]
    steps += [case("help-" + cmd, cmd, "--help") for cmd in SUBCOMMANDS]
    steps += [
        # generate: the runs that later cases list, diff, check, merge, rerun and restore
        case("generate", "generate", "--run-id", "r01-base", "--output-dir", "{runs}", *TRAIN),
        case("generate-sweep", "generate", "--run-id", "r02-sweep", "--output-dir", "{runs}", "--group", "lr-sweep",
             "--note", "higher lr", "--parent", "r01-base", "--", "python", "train.py", "--lr", "1e-3",
             "--data", "{home}/proj/data"),
        case("generate-redact-pattern", "generate", "--run-id", "r03-sweep", "--output-dir", "{runs}",
             "--group", "lr-sweep", "--note", "ticket proj-1234", "--parent", "r02-sweep",
             "--redact-pattern", "proj-[0-9]+", "--", "python", "train.py", "--lr", "3e-4", "--tag", "proj-42",
             "--data", "{home}/proj/data"),
        case("generate-print", "generate", "--run-id", "g-print", "--output-dir", "{misc}", "--print", *TRAIN),
        case("generate-strict", "generate", "--run-id", "g-strict", "--output-dir", "{misc}", "--strict", *TRAIN),
        case("generate-output-file", "generate", "--run-id", "g-file", "--output", "{misc}/single.json", *TRAIN),
        case("generate-output-existing", "generate", "--run-id", "g-exists", "--output", "{fx}/existing.json"),
        case("generate-strict-not-written", "generate", "--run-id", "g-exists", "--strict",
             "--output", "{fx}/existing.json"),
        case("generate-output-and-dir", "generate", "--output", "{misc}/x.json", "--output-dir", "{misc}"),
        case("generate-output-dir-missing", "generate", "--run-id", "g-nodir", "--output-dir", "{home}/nowhere"),
        case("generate-fresh-run-id", "generate", "--output-dir", "{fresh}", *TRAIN),
        case("generate-outside-repo", "generate", cwd="{misc}"),
        case("generate-bad-run-id", "generate", "--run-id", "bad/id", "--output-dir", "{misc}"),
        case("generate-bad-repo", "generate", "--run-id", "g-badrepo", "--output-dir", "{misc}", "--repo", "bad"),
        case("generate-extra-repo", "generate", "--run-id", "g-repo", "--output-dir", "{misc}",
             "--repo", "other={home}/kp"),
        case("generate-args-json-missing", "generate", "--run-id", "g-argsmiss", "--output-dir", "{misc}",
             "--args-json", "{fx}/missing.json"),
        case("generate-args-json", "generate", "--run-id", "g-args", "--output-dir", "{misc}",
             "--args-json", "{fx}/args.json", "--", "python", "train.py"),
        case("generate-data", "generate", "--run-id", "g-data", "--output-dir", "{misc}",
             "--data", "{fx}/data.bin", "--data", "{fx}/data"),
        case("generate-env-secrets", "generate", "--run-id", "g-env", "--output-dir", "{misc}",
             "--env-prefix", "MYAPP_", "--", "python", "train.py", "--wandb-key", "abc123def456",
             env={"MYAPP_LR": "0.1", "HF_TOKEN": FAKE_HF_TOKEN}),
        case("generate-private-patch", "generate", "--run-id", "g-private", "--output-dir", "{misc}",
             "--private-patch", *TRAIN),
        case("generate-large-patch", "generate", "--run-id", "g-big", "--output-dir", "{misc}", cwd="{home}/big"),
        case("generate-keep-paths", "generate", "--run-id", "g-keep", "--output-dir", "{misc}", "--keep-paths",
             "--", "python", "train.py", "--data", "{home}/proj/data", cwd="{home}/kp"),
        case("generate-rank-1", "generate", "--run-id", "g-rank1", "--output-dir", "{misc}", env={"RANK": "1"}),
        case("generate-all-ranks", "generate", "--run-id", "g-rank1all", "--output-dir", "{misc}", "--all-ranks",
             env={"RANK": "1"}),
        case("generate-node-report", "generate", "--node-report", "--run-id", "r01-base", "--output-dir", "{frag}"),
        case("generate-node-report-no-id", "generate", "--node-report", "--output-dir", "{misc}"),
        case("generate-true", "generate", "--run-id", "g-true", "--output-dir", "{misc}", "--", "true"),
        case("generate-false", "generate", "--run-id", "g-false", "--output-dir", "{misc}", "--", "false"),
        Freeze(("{runs}", "{misc}", "{frag}")),
        # check
        case("check", "check", M1),
        case("check-json", "check", "--json", M1),
        case("check-strict", "check", "--strict", M1),
        case("check-repo", "check", "--repo", "proj={home}/proj", M2),
        case("check-missing", "check", "{fx}/missing.json"),
        case("check-schema-2", "check", "{fx}/v2.json"),
        case("check-invalid-json", "check", "{fx}/invalid.json"),
        # diff
        case("diff", "diff", M1, M2),
        case("diff-json", "diff", "--json", M1, M3),
        case("diff-all", "diff", "--all", M2, M3),
        case("diff-same", "diff", M1, M1),
        case("diff-missing", "diff", M1, "{fx}/missing.json"),
        case("diff-schema-2", "diff", M1, "{fx}/v2.json"),
        case("diff-invalid-json", "diff", "{fx}/invalid.json", M1),
        # ls / lineage / compare (before anything else lands in {runs})
        case("ls", "ls", "{runs}"),
        case("ls-json", "ls", "--json", "{runs}"),
        case("ls-cwd", "ls", cwd="{runs}"),
        case("ls-empty", "ls", "{fx}/empty"),
        case("ls-missing-dir", "ls", "{home}/nowhere"),
        case("lineage", "lineage", "r03-sweep", "{runs}"),
        case("lineage-json", "lineage", "--json", "r03-sweep", "{runs}"),
        case("lineage-file", "lineage", M2, "{runs}"),
        case("lineage-unknown", "lineage", "no-such-run", "{runs}"),
        case("compare", "compare", "--group", "lr-sweep", "{runs}"),
        case("compare-json", "compare", "--group", "lr-sweep", "--json", "{runs}"),
        case("compare-unknown-group", "compare", "--group", "nope", "{runs}"),
        # fingerprint
        case("fingerprint-json", "fingerprint", "{fx}/data.bin", "--json"),
        case("fingerprint-tree", "fingerprint", "{fx}/data"),
        case("fingerprint-missing", "fingerprint", "{fx}/missing.bin"),
        case("generate-data-cached", "generate", "--run-id", "g-data-cached", "--output-dir", "{misc}",
             "--data", "{fx}/data.bin", "--data", "{fx}/data"),
        # merge
        case("merge", "merge", M1, "{frag}", "-o", "{misc}/merged.json"),
        case("merge-default-output", "merge", M1, "{frag}"),
        case("merge-output-existing", "merge", M1, "{frag}", "-o", "{fx}/existing.json"),
        case("merge-wrong-run", "merge", M2, "{frag}", "-o", "{misc}/merged-wrong.json"),
        case("merge-missing", "merge", "{fx}/missing.json", "{frag}"),
        # rerun
        case("rerun-dry-run", "rerun", M1, "--dry-run"),
        case("rerun-no-mode", "rerun", M1),
        case("rerun-dry-run-true", "rerun", "{misc}/manifest_g-true.json", "--dry-run", "--set", "<HOME>={home}"),
        case("rerun-confirm", "rerun", "{misc}/manifest_g-true.json", "--confirm", "--set", "<HOME>={home}"),
        case("rerun-confirm-false", "rerun", "{misc}/manifest_g-false.json", "--confirm",
             "--set", "<HOME>={home}"),
        case("rerun-confirm-redacted", "rerun", "{misc}/manifest_g-true.json", "--confirm"),
        case("rerun-missing", "rerun", "{fx}/missing.json", "--dry-run"),
        # restore
        case("restore", "restore", M1, "--into", "{home}/restored"),
        case("restore-large-patch", "restore", "{misc}/manifest_g-big.json", "--into", "{home}/restored-big"),
        case("restore-nonempty", "restore", M1, "--into", "{home}/proj"),
        case("restore-from", "restore", M1, "--into", "{home}/restored-from", "--from", "proj={home}/proj"),
        case("restore-missing", "restore", "{fx}/missing.json", "--into", "{home}/restored-none"),
        # run
        case("run-true", "run", "--run-id", "x-true", "--output-dir", "{runx}", "--", "true"),
        case("run-false", "run", "--run-id", "x-false", "--output-dir", "{runx}", "--", "false"),
        case("run-exit-3", "run", "--run-id", "x-exit3", "--output-dir", "{runx}", "--", "sh", "-c", "exit 3"),
        case("run-stdio", "run", "--run-id", "x-stdio", "--output-dir", "{runx}", "--",
             "sh", "-c", "echo out-line; echo err-line >&2"),
        case("run-signal", "run", "--run-id", "x-signal", "--output-dir", "{runx}", "--",
             "sh", "-c", "kill -TERM $$"),
        case("run-not-found", "run", "--run-id", "x-127", "--output-dir", "{runx}", "--", "{home}/no-such-cmd"),
        case("run-fresh-run-id", "run", "--output-dir", "{fresh-run}", "--", "true"),
        case("run-no-command", "run", "--run-id", "x-none", "--output-dir", "{runx}"),
        Freeze(("{runx}", "{fresh-run}")),
        case("ls-runs-with-outcomes", "ls", "{runx}"),
        case("ls-json-runs-with-outcomes", "ls", "--json", "{runx}", "{fresh-run}"),
    ]
    names = [c.name for c in cases_of(steps)]
    assert len(names) == len(set(names)), "case names must be unique"
    assert set(EXPECTED) <= set(names), "EXPECTED names a case that does not exist"
    return steps


def cases_of(steps: List[Step]) -> List[Case]:
    return [s for s in steps if isinstance(s, Case)]


# ------------------------------------------------------------------------------------------ scenario

class Scenario:
    """The directories one side runs in; ``build`` recreates them identically at the same paths."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.home = os.path.join(base, "home")
        self.tmp = os.path.join(base, "tmp")
        names = {"proj": "proj", "runs": "runs", "misc": "misc", "frag": "frag", "fx": "fx", "fresh": "fresh",
                 "runx": "runx", "fresh-run": "fresh-run"}
        self.paths = {key: os.path.join(self.home, sub) for key, sub in names.items()}
        self.paths.update(home=self.home, tmp=self.tmp, scn=base)

    def expand(self, text: str) -> str:
        return re.sub(r"\{([\w-]+)\}", lambda m: self.paths.get(m.group(1), m.group(0)), text)

    def build(self) -> None:
        if os.path.exists(self.base):
            shutil.rmtree(self.base)
        for d in ("runs", "misc", "frag", "fresh", "runx", "fresh-run"):
            os.makedirs(self.paths[d])
        os.makedirs(self.tmp)
        self._git_repo("proj", {"train.py": "import sys\nprint('train', sys.argv[1:])\n", "README": "proj\n"},
                       dirty={"train.py": "import sys\nprint('train', sys.argv[1:])\nLR = 3e-4\n"},
                       untracked={"notes.txt": "try a larger batch\n"})
        self._git_repo("kp", {"train.py": "print('kp')\n"},
                       dirty={"train.py": "print('kp')\nDATA = '%s/proj/data'\n" % self.home})
        big = "".join("line %05d of a long generated table\n" % i for i in range(1500))
        self._git_repo("big", {"table.txt": "header\n"}, dirty={"table.txt": "header\n" + big})
        self._fixtures()
        self._fix_mtimes()

    def _git_repo(self, name: str, files: Dict[str, str], dirty: Dict[str, str],
                  untracked: Optional[Dict[str, str]] = None) -> None:
        top = os.path.join(self.home, name)
        os.makedirs(top)
        write_files(top, files)
        git = ["git", "-C", top]
        env = dict(clean_env(self.home, self.tmp), **GIT_ENV)
        for cmd in (["init", "-q"], ["symbolic-ref", "HEAD", "refs/heads/main"], ["add", "-A"],
                    ["commit", "-q", "-m", "initial " + name]):
            subprocess.run(git + cmd, env=env, check=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        write_files(top, dirty)
        write_files(top, untracked or {})

    def _fixtures(self) -> None:
        fx = self.paths["fx"]
        write_files(fx, {
            "args.json": json.dumps({"lr": 0.001, "batch_size": 32, "seed": 7, "model": "tiny"}) + "\n",
            "v2.json": json.dumps({"schema_version": "2.0", "run_id": "future"}) + "\n",
            "invalid.json": '{"schema_version": "1.1", "run_id": \n',
            "existing.json": "{}\n",
            "data.bin": "0123456789abcdef" * 64,
            "data/a.txt": "alpha\n",
            "data/sub/b.txt": "beta\n",
        })
        os.makedirs(os.path.join(fx, "empty"))

    def _fix_mtimes(self) -> None:
        for top, dirs, files in os.walk(self.base):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in files + dirs:
                os.utime(os.path.join(top, name), (FIXED_MTIME, FIXED_MTIME))


def write_files(top: str, files: Dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def freeze(directory: str) -> None:
    """Rewrite each manifest or fragment in ``directory`` with fixed volatile values, in the writer's layout."""
    for name in sorted(os.listdir(directory)):
        if not (name.endswith(".json") and name.startswith(("manifest_", "node_"))):
            continue
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(fixed_volatile(doc), sort_keys=True, indent=1, ensure_ascii=False) + "\n")


def fixed_volatile(value: object) -> object:
    if isinstance(value, dict):
        return {k: (FIXED_TIME if is_volatile(k) and isinstance(v, str) else
                    1.0 if is_volatile(k) and isinstance(v, (int, float)) else fixed_volatile(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [fixed_volatile(v) for v in value]
    return value


def clean_env(home: str, tmp: str, src: Optional[str] = None) -> Dict[str, str]:
    """The whole environment of every child: nothing inherited but the locations of python and git."""
    bins = [os.path.dirname(sys.executable), os.path.dirname(shutil.which("git") or "/usr/bin/git"), "/usr/bin",
            "/bin"]
    env = {
        "HOME": home, "TMPDIR": tmp, "PATH": os.pathsep.join(dict.fromkeys(bins)), "LC_ALL": "C", "LANG": "C",
        "TZ": "UTC", "COLUMNS": "100", "PYTHONHASHSEED": "0", "RAY_USAGE_STATS_ENABLED": "0",
        "RELAXREPRO_NO_CACHE": "1",
    }
    if src is not None:
        env["PYTHONPATH"] = src
    return env


# ----------------------------------------------------------------------------------------- trees

class SetupError(Exception):
    """The trees or the scenario could not be prepared: nothing was compared (exit 2)."""


def materialise_ref(repo: str, ref: str, dest: str) -> None:
    """``git archive REF | tar -x``: the committed tree only, no worktree, no .git."""
    os.makedirs(dest)
    archive = subprocess.Popen(["git", "-C", repo, "archive", ref], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    tar = subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, capture_output=True, timeout=TIMEOUT_S)
    assert archive.stdout is not None
    archive.stdout.close()
    err = archive.stderr.read().decode(errors="replace") if archive.stderr else ""
    if archive.wait(timeout=TIMEOUT_S) != 0 or tar.returncode != 0:
        why = (err + tar.stderr.decode(errors="replace")).strip()
        raise SetupError("cannot archive %s in %s: %s" % (ref, repo, why))


def materialise_dir(src: str, dest: str) -> None:
    """Copy the tree as it would be committed: in a git work tree, the tracked and untracked-but-not-ignored
    files only (no .venv, no relaxrepro.egg-info that would add a 'relaxrepro' distribution to the packages
    probe); elsewhere everything but VCS data, virtual environments, build outputs and caches."""
    if not os.path.isdir(os.path.join(src, "relaxrepro")):
        raise SetupError("%s has no relaxrepro/ package" % src)
    listed = git_listed_files(src)
    if listed is None:
        shutil.copytree(src, dest, ignore=copy_ignore(src), symlinks=True)
        return
    for rel in listed:
        path = os.path.join(src, rel)
        if os.path.islink(path) or os.path.isfile(path):  # not a tracked file deleted since, nor a submodule
            os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(path, os.path.join(dest, rel), follow_symlinks=False)


def git_listed_files(top: str) -> Optional[List[str]]:
    """``git ls-files -co --exclude-standard`` when ``top`` is the top of a git work tree, else None."""
    try:
        shown = subprocess.run(["git", "-C", top, "rev-parse", "--show-toplevel"], capture_output=True,
                               text=True, timeout=TIMEOUT_S)
        if shown.returncode != 0 or not os.path.samefile(shown.stdout.strip(), top):
            return None
        listed = subprocess.run(["git", "-C", top, "ls-files", "-z", "-co", "--exclude-standard"],
                                capture_output=True, check=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted({p for p in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if p})


def copy_ignore(src: str) -> Callable[[str, List[str]], List[str]]:
    top = os.path.abspath(src)

    def ignore(directory: str, names: List[str]) -> List[str]:
        at_top = os.path.abspath(directory) == top
        return [n for n in names if n in ANY_IGNORE or n.endswith((".pyc", ".egg-info"))
                or (at_top and (n in TOP_IGNORE or n.startswith(".venv")))]

    return ignore


# ------------------------------------------------------------------------------------- snapshots

Snapshot = Dict[str, Tuple[int, str]]  # relative path -> (permission bits, what it is: a digest, a link, a dir)


def snapshot(top: str) -> Snapshot:
    """Every file, directory and link below ``top``, except the insides of .git and __pycache__."""
    out: Snapshot = {}
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__")]
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                what = "<link to %s>" % os.readlink(path)
            elif stat.S_ISDIR(st.st_mode):
                what = "<directory>"
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as fh:
                    what = hashlib.sha256(fh.read()).hexdigest()
            else:
                what = "<special file>"
            out[os.path.relpath(path, top)] = (stat.S_IMODE(st.st_mode), what)
    return out


# --------------------------------------------------------------------------------------- masking

_MASKS = [
    (re.compile(r"(?<![0-9A-Za-z])\d{8}_\d{6}_[0-9a-f]{7}(?![0-9A-Za-z])"), "<RUN-ID>"),  # a fresh run id
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<TIME>"),
    (re.compile(r"\btmp[a-z0-9_]{8}\b"), "tmpXXXXXXXX"),  # tempfile's random names
    (re.compile(r"(?<![\w.])\d+\.\d+ ?(?:ms|s)\b"), "<DURATION>"),  # "0.12 s", "87.5 ms": a measured time
]

# Keys whose values vary from run to run in any JSON written or printed (and every key ending in _at).
_VOLATILE_KEYS = {"generated_at", "seconds", "duration_s", "elapsed_s", "ended_at", "started_at"}


def is_volatile(key: str) -> bool:
    return key in _VOLATILE_KEYS or key.endswith("_at")


def mask_text(text: str, root: str) -> str:
    text = text.replace(root, "<ROOT>")
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


def mask_json(value: object, root: str) -> object:
    if isinstance(value, dict):
        return {mask_text(k, root): ("<masked>" if is_volatile(k) else mask_json(v, root))
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v, root) for v in value]
    if isinstance(value, str):
        return mask_text(value, root)
    return value


def mask_output(text: str, root: str) -> str:
    """Printed JSON is masked as JSON (key by key); anything else line by line."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.dumps(mask_json(json.loads(stripped), root), indent=1, sort_keys=True) + "\n"
        except ValueError:
            pass
    return mask_text(text, root)


def render_file(path: str, root: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read()
    if data.startswith(b"SQLite format 3\0"):
        return render_sqlite(path, root)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "<binary, sha256 %s>\n" % hashlib.sha256(data).hexdigest()
    if path.endswith(".json"):
        try:
            return json.dumps(mask_json(json.loads(text), root), indent=1, sort_keys=True) + "\n"
        except ValueError:
            pass
    return mask_text(text, root)


# Columns of relaxrepro's fingerprint cache that hold inode numbers (directly or digested): they differ per side;
# so do times (hashed_at: any column ending in _at).
_SQLITE_VOLATILE_COLUMNS = {"inode", "listing"}


def render_sqlite(path: str, root: str) -> str:
    """Every table's rows in a stable order, inode-bearing columns masked (the file's bytes never match)."""
    import sqlite3

    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        lines = []
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            cur = db.execute('SELECT * FROM "%s"' % table)
            cols = [d[0] for d in cur.description]
            lines.append("table %s (%s)" % (table, ", ".join(cols)))
            masked = [c in _SQLITE_VOLATILE_COLUMNS or is_volatile(c) for c in cols]
            rows = [tuple("<masked>" if m else v for m, v in zip(masked, row)) for row in cur.fetchall()]
            lines += ["  " + mask_text(repr(r), root) for r in sorted(rows, key=repr)]
        return "\n".join(lines) + "\n"
    finally:
        db.close()


# ------------------------------------------------------------------------------------------ running

@dataclass
class Result:
    report: str  # everything observable, normalised: exit code, stdout, stderr, files written
    seconds: float


def run_case(c: Case, scn: Scenario, src: str, root: str) -> Result:
    before = snapshot(scn.base)
    argv = [sys.executable, "-m", "relaxrepro"] + [scn.expand(a) for a in c.args]
    env = dict(clean_env(scn.home, scn.tmp, src), **{k: scn.expand(v) for k, v in c.env.items()})
    started = time.monotonic()
    try:
        code, out, err = run_bounded(argv, scn.expand(c.cwd), env)
    except OSError as exc:  # e.g. an earlier case removed this case's working directory
        code, out, err = "could not start: %s" % exc.strerror, "", ""
    seconds = time.monotonic() - started
    lines = [describe(c), "exit: %s" % code,
             "--- stdout", mask_output(out, root), "--- stderr", mask_text(err, root)]
    lines += written_files(before, snapshot(scn.base), scn.base, root)
    return Result("\n".join(lines), seconds)


def describe(c: Case) -> str:
    """The invocation as a shell line, with scenario placeholders rather than paths."""
    env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(c.env.items()))
    line = " ".join(x for x in (env, "relaxrepro", " ".join(shlex.quote(a) for a in c.args)) if x)
    return "$ (cd %s && %s)" % (c.cwd, line)


def run_bounded(argv: List[str], cwd: str, env: Dict[str, str]) -> Tuple[str, str, str]:
    """Run in a new session; on timeout kill the whole process group, never hang."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
        code = str(proc.returncode)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        code = "TIMEOUT after %d s" % TIMEOUT_S
    except BaseException:  # Ctrl-C: leave no process behind
        kill_group(proc.pid)
        proc.wait()
        raise
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def written_files(before: Snapshot, after: Snapshot, base: str, root: str) -> List[str]:
    """New, changed and removed files, each with its mode and masked content, in a stable order."""
    lines: List[str] = []
    for rel in sorted(set(before) | set(after), key=lambda r: mask_text(r, root)):
        name = mask_text(rel, root)
        if rel not in after:
            lines.append("=== removed %s" % name)
        elif before.get(rel) != after[rel]:
            mode, what = after[rel]
            lines.append("=== %s %s (mode %o)" % ("changed" if rel in before else "new", name, mode))
            if not what.startswith("<"):  # a regular file: its masked content
                lines.append(render_file(os.path.join(base, rel), root))
            elif what != "<directory>":
                lines.append(mask_text(what, root))
    return lines


def run_side(label: str, tree: str, steps: List[Step], root: str, verbose: bool) -> Dict[str, Result]:
    """Put ``tree`` at <root>/src, build the scenario afresh, run every case; the tree goes back after."""
    src = os.path.join(root, "src")
    os.rename(tree, src)
    try:
        scn = Scenario(os.path.join(root, "scn"))
        scn.build()
        results: Dict[str, Result] = {}
        for c in steps:
            if isinstance(c, Freeze):
                for d in c.dirs:
                    freeze(scn.expand(d))
                continue
            results[c.name] = run_case(c, scn, src, root)
            if verbose:
                print("  %-8s %-32s %5.2f s" % (label, c.name, results[c.name].seconds), file=sys.stderr)
        return results
    finally:
        os.rename(src, tree)


# ------------------------------------------------------------------------------------------- report

def compare(cases: List[Case], old: Dict[str, Result], new: Dict[str, Result], show: Optional[str],
            verbose: bool) -> bool:
    """Print one line per case and the diffs asked for; True when nothing differs unexpectedly."""
    ok = True
    width = max(len(c.name) for c in cases)
    for c in cases:
        a, b = old[c.name].report, new[c.name].report
        if a == b:
            verdict = "same"
        elif c.name in EXPECTED:
            verdict = "changed (expected: %s)" % EXPECTED[c.name]
        else:
            verdict, ok = "DIFFERS", False
        print("%-*s  %s" % (width, c.name, verdict))
        wanted = c.name == show if show else a != b
        if wanted and a != b:
            print(unified(a, b, c.name))
        if wanted and verbose and show:
            print("--- baseline output of %s\n%s\n--- new output of %s\n%s" % (c.name, a, c.name, b))
    return ok


def unified(a: str, b: str, name: str) -> str:
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "baseline/" + name, "new/" + name, lineterm="")
    return "\n".join("    " + line for line in diff)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default=DEFAULT_BASELINE, metavar="REF",
                   help="git ref of the baseline, archived from %s (default %s)" % (REPO_ROOT, DEFAULT_BASELINE))
    p.add_argument("--new", default=REPO_ROOT, metavar="DIR", help="the new source tree (default: %(default)s)")
    p.add_argument("--show", metavar="NAME", help="print the diff of this case only (and with -v both outputs)")
    p.add_argument("-v", "--verbose", action="store_true", help="time every case; with --show print both outputs")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    steps = build_steps()
    cases = cases_of(steps)
    if args.show and args.show not in {c.name for c in cases}:
        print("behaviour: no case named %r" % args.show, file=sys.stderr)
        return 2
    started = time.monotonic()
    print("baseline %s vs %s: %d cases" % (args.baseline, os.path.abspath(args.new), len(cases)), flush=True)
    root = os.path.realpath(tempfile.mkdtemp(prefix="relaxrepro-behaviour-"))
    try:
        base_tree, new_tree = os.path.join(root, "baseline"), os.path.join(root, "new")
        materialise_ref(REPO_ROOT, args.baseline, base_tree)
        materialise_dir(os.path.abspath(args.new), new_tree)
        old = run_side("baseline", base_tree, steps, root, args.verbose)
        new = run_side("new", new_tree, steps, root, args.verbose)
    except (SetupError, OSError, subprocess.SubprocessError) as exc:
        print("behaviour: setup failed: %s" % exc, file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ok = compare(cases, old, new, args.show, args.verbose)
    print("%s in %.1f s" % ("behaviour unchanged" if ok else "behaviour DIFFERS", time.monotonic() - started))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
