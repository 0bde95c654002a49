"""The rules of ``check``: a pure judgement of a recorded document against this machine's (or another run's).

It judges what matters, not what merely differs: a new SLURM job id, run id, hostname, time, a new
untracked file or a bookkeeping env var are information, never a failure. An item the manifest lacks
is "not recorded", never PASS; one this machine cannot tell is a WARN.
"""

from __future__ import annotations

import json

from ..manifest import fields
from ..manifest.fields import MISSING, get, scalar, section
from ..manifest.model import DECISIVE_PACKAGES
from ..std.records import Factory, Record
from . import container

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple


PASS, WARN, FAIL, INFO, NOT_RECORDED = "PASS", "WARN", "FAIL", "INFO", "not recorded"
VERDICTS = (FAIL, WARN, PASS, INFO, NOT_RECORDED)
NOTHING = "NOTHING"
"""The report's verdict when the manifest records nothing check can compare (``{"schema_version": "1.7",
"cli_args": [...]}``): not PASS, since nothing was shown to match."""
_ABOUT_THE_RECORD = ("run id", "node")  # rows that say which run and node, not whether this machine fits

# Env vars that are bookkeeping, not computation: they differ from job to job by design.
_INFO_ENV_NAMES = frozenset({
    "RAY_ADDRESS", "RAY_USAGE_STATS_ENABLED", "RAY_DEDUP_LOGS", "RAY_TMPDIR", "RAY_LOG_TO_STDERR",
    "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_HUB_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER",
    "HF_HUB_DISABLE_TELEMETRY", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "TORCH_HOME",
    "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
})
_INFO_ENV_PREFIXES = ("SLURM_", "WANDB_")
_INFO_ENV_SUFFIXES = ("_DIR", "_HOME", "_CACHE", "_LOG", "_LOGS", "_LOG_LEVEL", "_TOKEN", "_API_KEY", "_KEY")
# ... except the SLURM variables that size the job: they change the topology of the computation.
_SLURM_SHAPE = frozenset({
    "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURM_CPUS_PER_TASK", "SLURM_GPUS_PER_TASK",
})


def is_info_env(name: str) -> bool:
    """True for an allow-listed variable whose value does not change what the run computes."""
    if name in _SLURM_SHAPE:
        return False
    return name in _INFO_ENV_NAMES or name.startswith(_INFO_ENV_PREFIXES) or name.endswith(_INFO_ENV_SUFFIXES)


class Item(Record):
    """One row of the report."""

    item: str
    recorded: str
    here: str
    verdict: str
    note: str = ""


class Report(Record):
    items: List[Item] = Factory(list)
    warnings: List[str] = Factory(list)
    run_id: str = ""

    def counts(self) -> Dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for it in self.items:
            out[it.verdict] = out.get(it.verdict, 0) + 1
        return out

    @property
    def verdict(self) -> str:
        counts = self.counts()
        if not any(i.verdict != NOT_RECORDED and i.item not in _ABOUT_THE_RECORD for i in self.items):
            return NOTHING
        return FAIL if counts[FAIL] else WARN if counts[WARN] else PASS

    def failed(self, strict: bool = False) -> bool:
        """Whether the run cannot be reproduced here: any FAIL, nothing to compare, or (``strict``) any WARN."""
        verdict = self.verdict
        return verdict in (FAIL, NOTHING) or (strict and verdict == WARN)

    def summary_line(self, *, strict: bool = False) -> str:
        """One line: the verdict, what it means, and how many items had each verdict."""
        counts = self.counts()
        verdict = self.verdict
        if verdict == NOTHING:
            return "nothing to compare: the manifest records none of the items check judges (%d not recorded)" % (
                counts[NOT_RECORDED])
        meaning = {PASS: "compatible", WARN: "compatible, with warnings", FAIL: "not compatible"}[verdict]
        if strict and verdict == WARN:
            meaning = "fails under --strict"
        return "%s (%s): %d FAIL, %d WARN, %d PASS, %d INFO, %d not recorded" % (
            verdict, meaning, counts[FAIL], counts[WARN], counts[PASS], counts[INFO], counts[NOT_RECORDED])


# -- the pure judgement -------------------------------------------------------------------------

def cell(value: Any, short_sha: bool = False) -> str:
    """A recorded value as a table cell: ``-`` when absent or not a scalar, a full SHA cut to 12."""
    s = scalar(value)
    if s is None:
        return "-"
    if short_sha and len(s) >= 40:
        return s[:12]
    return s


def _version_item(item: str, rec: Any, here: Any, *, minor: str, major: str, other: str = PASS,
                  missing_here: str = WARN) -> Item:
    """A version judged by how far it moved: ``major``/``minor`` verdicts, ``other`` for patch/local."""
    a, b = scalar(rec), scalar(here)
    if a is None:
        return Item(item, "-", cell(b), NOT_RECORDED)
    if b is None:
        return Item(item, a, "-", missing_here, "not found here")
    level = fields.change_level(a, b)
    if level == "equal":
        return Item(item, a, b, PASS)
    if level == "major":
        return Item(item, a, b, major, "another major version")
    if level == "minor":
        return Item(item, a, b, minor, "another minor version")
    if level == "unknown":
        return Item(item, a, b, WARN, "versions not comparable")
    return Item(item, a, b, other, "%s version differs" % level)


def _equal_item(item: str, rec: Any, here: Any, differ: str, *, missing_here: str = WARN,
                norm: Callable[[str], str] = lambda s: s) -> Item:
    a, b = scalar(rec), scalar(here)
    if a is None:
        return Item(item, "-", cell(b), NOT_RECORDED)
    if b is None:
        return Item(item, a, "-", missing_here, "not found here" if missing_here != INFO else "")
    return Item(item, a, b, PASS if norm(a) == norm(b) else differ)


def judge(rec: Mapping[str, Any], here: Mapping[str, Any], hints: Optional[Dict[str, Any]] = None,
          notes: Optional[List[str]] = None) -> Report:
    """The report on ``rec`` judged against ``here`` (this machine as collected, or another run's document)."""
    return Report(items=compare_documents(rec, here, hints), warnings=list(notes or []), run_id=cell(rec.get("run_id")))


def compare_documents(rec: Mapping[str, Any], here: Mapping[str, Any],
                      hints: Optional[Dict[str, Any]] = None) -> List[Item]:
    """Judge ``here`` (this machine, repos keyed by the recorded names) against ``rec``."""
    hints = hints or {}
    items: List[Item] = []
    items.append(Item("run id", cell(rec.get("run_id")), "-", INFO, "recorded at %s" % cell(rec.get("generated_at"))))
    rec, node_item = _as_seen_by_matching_node(rec, here)
    if node_item is not None:
        items.append(node_item)
    items.extend(_code_items(rec, here))
    items.extend(_python_items(rec, here, hints))
    items.extend(_package_items(rec, here))
    items.extend(_hardware_items(rec, here))
    items.extend(_system_items(rec, here))
    items.append(_container_item(rec, here))
    items.extend(_seed_items(rec, here))
    items.extend(_env_items(rec, here))
    items.extend(_config_items(rec, here))
    items.extend(_data_items(rec, here))
    items.extend(_runtime_items(rec, here))
    return items


def _has_node_data(doc: Mapping[str, Any]) -> bool:
    nodes = get(doc, "runtime.nodes")
    return isinstance(nodes, list) and any(isinstance(n, dict) and ("hardware" in n or "environment" in n)
                                           for n in nodes)


def _as_seen_by_matching_node(rec: Mapping[str, Any], here: Mapping[str, Any]
                              ) -> Tuple[Mapping[str, Any], Optional[Item]]:
    """With per-node data (``merge``), judge this machine against the recorded node that matches it.

    In a cluster of A100 and H100 nodes, an H100 node is compared with a recorded H100 node (same
    GPU model, the head first), not with whatever rank 0 ran on.
    """
    if not _has_node_data(rec):
        return rec, None
    model = get(here, "hardware.gpu_model")
    nodes = [n for n in get(rec, "runtime.nodes") if isinstance(n, dict) and isinstance(n.get("hardware"), dict)]
    same = [n for n in nodes if get(n, "hardware.gpu_model") == model]
    if not same:
        return rec, Item("node", "%d nodes recorded" % len(nodes), cell(model), INFO,
                         "no recorded node has this GPU model; compared with rank 0")
    same.sort(key=lambda n: (n.get("role") != "head", str(n.get("name"))))
    ref = same[0]
    out = dict(rec)
    for name in ("hardware", "environment"):
        merged = dict(section(rec, name))
        merged.update(ref.get(name) or {})
        out[name] = merged
    return out, Item("node", cell(ref.get("name")), "-", INFO,
                     "compared with the recorded node of the same GPU model (%d of %d nodes)" % (len(same), len(nodes)))


def _code_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    repos = section(rec, "code")
    if not repos:
        return [Item("code", "-", "-", NOT_RECORDED, "no repository recorded")]
    items: List[Item] = []
    here_repos = section(here, "code")
    for name in sorted(repos, key=str):
        r = repos[name] if isinstance(repos[name], dict) else {}
        h = here_repos.get(name)
        label = "code %s" % name
        commit = scalar(r.get("commit"))
        if not isinstance(h, dict):
            where = scalar(r.get("path"))
            note = ("no git repository at %s" % where if where else
                    "no path recorded, and no repo holding this commit at the recorded working directory (%s)"
                    % cell(get(rec, "command.cwd", None)))
            items.append(Item(label + " commit", cell(commit, True), "repo not found",
                              FAIL if commit else NOT_RECORDED, "%s; give --repo %s=PATH" % (note, name)))
            continue
        here_commit = scalar(h.get("commit"))
        if commit is None:
            items.append(Item(label + " commit", "-", cell(here_commit, True), NOT_RECORDED))
        elif here_commit is None:
            items.append(Item(label + " commit", commit[:12], "-", FAIL, "commit unknown here"))
        else:
            items.append(Item(label + " commit", commit[:12], here_commit[:12],
                              PASS if commit == here_commit else FAIL))
        items.append(_changes_item(label, r, h))
        operation = _operation_item(label, r, h)
        if operation is not None:
            items.append(operation)
        untracked = _untracked_item(label, r, h)
        if untracked is not None:
            items.append(untracked)
        items.extend(_submodule_items(label, r, h))
    return items


def _patch_files(patch: Any) -> List[str]:
    files = patch.get("files") if isinstance(patch, dict) else None
    if not isinstance(files, list):
        return []
    return [str(f.get("path") if isinstance(f, dict) else f) for f in files]


def _untracked_files(repo: Mapping[str, Any]) -> List[str]:
    u = repo.get("untracked")
    if isinstance(u, dict):
        return _patch_files(u)
    return []


def _changes_item(label: str, r: Mapping[str, Any], h: Mapping[str, Any]) -> Item:
    """Uncommitted changes, judged by the patch digest: a second edit to a dirty file changes it."""
    rp, hp = r.get("patch"), h.get("patch")
    rdig, hdig = fields.patch_digest(rp), fields.patch_digest(hp)
    rdirty, hdirty = r.get("dirty"), h.get("dirty")
    item = label + " changes"
    rwhy, hwhy = fields.patch_incomplete(rp), fields.patch_incomplete(hp)
    if rwhy:  # an empty diff after a timeout must not match another one
        return Item(item, "patch incomplete", "patch incomplete" if hwhy else _dirty_text(hdirty, hdig), WARN,
                    "uncommitted changes not fully recorded (%s): cannot verify" % rwhy)
    if rdig is not None and hwhy:
        return Item(item, "patch " + rdig[:12], "patch incomplete", WARN,
                    "uncommitted changes here not fully read (%s): cannot compare" % hwhy)
    if rdig is not None:
        if hdig == rdig:
            return Item(item, "patch " + rdig[:12], "patch " + rdig[:12], PASS, "same uncommitted changes")
        if hdig is not None:
            fa, fb = _patch_files(rp), _patch_files(hp)
            new = sorted(set(fb) - set(fa))
            gone = sorted(set(fa) - set(fb))
            note = "uncommitted changes differ"
            if new or gone:
                note += ": " + ", ".join(["+" + f for f in new] + ["-" + f for f in gone])[:200]
            elif fa:
                note += " in " + ", ".join(fa)[:200]
            return Item(item, "patch " + rdig[:12], "patch " + hdig[:12], WARN, note)
        if hdirty is False and not isinstance(hp, dict):
            return Item(item, "patch " + rdig[:12], "clean", WARN,
                        "the recorded uncommitted changes are not here (relaxrepro restore rebuilds them)")
        return Item(item, "patch " + rdig[:12], "dirty" if hdirty else "-", WARN,
                    "cannot compare: no patch digest computed here")
    if rdirty is True:
        return Item(item, "dirty, no patch digest", "dirty" if hdirty else "clean" if hdirty is False else "-",
                    WARN, "the run had uncommitted changes that were not recorded: cannot verify")
    if rdirty is None:
        return Item(item, "-", _dirty_text(hdirty, hdig), NOT_RECORDED)
    # recorded clean
    if hdirty is True:
        files = _patch_files(hp)
        return Item(item, "clean", "dirty", WARN,
                    "uncommitted changes here" + (": " + ", ".join(files)[:200] if files else ""))
    if hdirty is None:
        return Item(item, "clean", "-", WARN, "dirty state unknown here")
    if hdig is not None:
        # Clean tracked files but a patch: it carries only new untracked files (the git probe embeds them).
        return Item(item, "clean", "clean + untracked", INFO, "new untracked files only")
    return Item(item, "clean", "clean", PASS)


def _operation_item(label: str, r: Mapping[str, Any], h: Mapping[str, Any]) -> Optional[Item]:
    """A merge, rebase, cherry-pick, revert or bisect under way when the run started (or here): the
    tree then is no commit's, and conflict markers may be in it."""
    a, b = scalar(r.get("operation")), scalar(h.get("operation"))
    if a is None and b is None:
        return None
    if a is not None:
        note = "the run started in the middle of a git %s%s" % (a, " (as this repo is here)" if a == b else "")
    else:
        note = "this repo is in the middle of a git %s here" % b
    return Item(label + " operation", cell(a), cell(b), WARN, note)


def _dirty_text(dirty: Any, digest: Optional[str]) -> str:
    if digest:
        return "patch " + digest[:12]
    return "dirty" if dirty is True else "clean" if dirty is False else "-"


def _untracked_item(label: str, r: Mapping[str, Any], h: Mapping[str, Any]) -> Optional[Item]:
    def count(repo: Mapping[str, Any]) -> Optional[int]:
        u = repo.get("untracked")
        if isinstance(u, dict) and isinstance(u.get("count"), int):
            return u["count"]
        return None

    a, b = count(r), count(h)
    if a is None and b is None:
        return None
    new = sorted(set(_untracked_files(h)) - set(_untracked_files(r)))
    note = ("new: " + ", ".join(new))[:200] if new else ""
    return Item(label + " untracked", cell(a), cell(b), INFO, note)


def _submodule_items(label: str, r: Mapping[str, Any], h: Mapping[str, Any]) -> List[Item]:
    def table(repo: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
        subs = repo.get("submodules")
        out: Dict[str, Dict[str, Any]] = {}
        if isinstance(subs, list):
            for s in subs:
                if isinstance(s, dict) and isinstance(s.get("path"), str):
                    out[s["path"]] = s
        return out

    def sha(s: Mapping[str, Any]) -> Optional[str]:
        return scalar(s.get("checked_out_sha")) or scalar(s.get("recorded_sha"))

    rec, cur = table(r), table(h)
    items = []
    for path in sorted(rec):
        a = sha(rec[path])
        b = sha(cur[path]) if path in cur else None
        item = "%s submodule %s" % (label, path)
        if a is None:
            items.append(Item(item, "-", cell(b, True), NOT_RECORDED))
        elif path not in cur or b is None:
            items.append(Item(item, a[:12], "-", FAIL, "submodule not checked out here"))
        elif a != b:
            items.append(Item(item, a[:12], b[:12], FAIL))
        elif cur[path].get("dirty") is True and rec[path].get("dirty") is not True:
            items.append(Item(item, a[:12], b[:12] + " dirty", WARN, "uncommitted changes in the submodule here"))
        else:
            items.append(Item(item, a[:12], b[:12], PASS))
    return items


def _python_items(rec: Mapping[str, Any], here: Mapping[str, Any], hints: Dict[str, Any]) -> List[Item]:
    items = [_version_item("python", fields.python_version(rec), fields.python_version(here), minor=WARN, major=FAIL)]
    ri = scalar(get(rec, "environment.python.implementation", None))
    hi = scalar(get(here, "environment.python.implementation", None))
    if ri and hi and ri.lower() != hi.lower():
        items.append(Item("python implementation", ri, hi, FAIL))
    exe = scalar(get(rec, "environment.python.executable", None))
    interp = hints.get("interpreter")
    if exe and isinstance(interp, dict):
        if interp.get("exists"):
            items.append(Item("python interpreter", exe, "present", PASS))
        else:
            closest = interp.get("closest")
            items.append(Item("python interpreter", exe, "gone", WARN,
                              "closest match: %s" % closest if closest else "no close match on PATH"))
    return items


def _package_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    rp, hp = fields.packages(rec), fields.packages(here)
    if rp is None:
        return [Item("packages", "-", "-", NOT_RECORDED, "the manifest has no package list")]
    if hp is None:
        return [Item("packages", "%d recorded" % len(rp), "-", WARN, "package versions not collected here")]
    items: List[Item] = []
    for name in DECISIVE_PACKAGES:
        a, b = rp.get(name), hp.get(name)
        if a is None and b is None:
            continue
        label = "package " + name
        if b is None:
            items.append(Item(label, a or "-", "not installed", FAIL))
        elif a is None:
            items.append(Item(label, "not installed", b, WARN, "installed here, not in the run"))
        else:
            items.append(_version_item(label, a, b, minor=FAIL, major=FAIL, other=WARN))
    others = [n for n in sorted(set(rp) | set(hp)) if n not in DECISIVE_PACKAGES and rp.get(n) != hp.get(n)]
    if others:
        shown = ", ".join("%s %s->%s" % (n, rp.get(n, "none"), hp.get(n, "none")) for n in others[:5])
        items.append(Item("other packages", "%d" % len(rp), "%d" % len(hp), INFO,
                          "%d differ: %s%s" % (len(others), shown, " ..." if len(others) > 5 else "")))
    else:
        items.append(Item("other packages", "%d" % len(rp), "%d" % len(hp), PASS))
    return items


def _hardware_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    r, h = section(rec, "hardware"), section(here, "hardware")
    items: List[Item] = []
    items.append(_version_item("cuda", r.get("cuda_version"), h.get("cuda_version"), minor=WARN, major=FAIL))
    model, here_model = scalar(r.get("gpu_model")), scalar(h.get("gpu_model"))
    if model is None:
        items.append(Item("gpu model", "-", cell(here_model), NOT_RECORDED))
    elif here_model is None:
        # Zero GPUs is an answer (no tool and no driver, or "No devices were found"); no answer is not.
        none_here = h.get("gpu_count") == 0 or h.get("gpus") == []
        count = r.get("gpu_count")
        recorded = "%d x %s" % (count, model) if isinstance(count, int) and not isinstance(count, bool) else model
        items.append(Item("gpu model", model, "none" if none_here else "-", FAIL if none_here else WARN,
                          "recorded %s, no GPU here" % recorded if none_here else "not found here"))
    else:
        items.append(Item("gpu model", model, here_model,
                          PASS if model.strip().lower() == here_model.strip().lower() else FAIL))
    for key, label in (("gpu_count", "gpu count"), ("visible_gpu_count", "visible gpus")):
        if key == "gpu_count" and r.get(key) == 0 and scalar(h.get(key)) is None and not h.get("gpus"):
            # The run used no GPU, and none was found here (no tool answered): nothing is missing.
            items.append(Item(label, "0", "none found", PASS))
        elif key in r:
            items.append(_equal_item(label, r.get(key), h.get(key), WARN))
    if "gpu_memory_gb" in r:
        items.append(_equal_item("gpu memory (GB)", r.get("gpu_memory_gb"), h.get("gpu_memory_gb"), INFO,
                                 missing_here=INFO))
    items.append(_equal_item("driver", r.get("driver_version"), h.get("driver_version"), WARN))
    if "cuda_driver_version" in r:
        items.append(_equal_item("cuda driver api", r.get("cuda_driver_version"), h.get("cuda_driver_version"), WARN))
    items.append(_version_item("nccl", r.get("nccl_version"), h.get("nccl_version"), minor=WARN, major=FAIL,
                               other=WARN))
    items.append(_version_item("cudnn", r.get("cudnn_version"), h.get("cudnn_version"), minor=WARN, major=FAIL,
                               other=WARN))
    cpu_a, cpu_b = get(r, "cpu.model", None), get(h, "cpu.model", None)
    if scalar(cpu_a):
        items.append(_equal_item("cpu", cpu_a, cpu_b, INFO, missing_here=INFO))
    return items


def _system_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    r, h = section(rec, "environment.system"), section(here, "environment.system")
    items = [_equal_item("arch", r.get("arch"), h.get("arch"), WARN)]
    for key, label in (("os", "os"), ("distribution", "distribution"), ("kernel", "kernel")):
        if scalar(r.get(key)):
            items.append(_equal_item(label, r.get(key), h.get(key), INFO, missing_here=INFO))
    if scalar(r.get("hostname")):  # another node is the normal case: information, whatever it says
        items.append(Item("hostname", cell(r.get("hostname")), cell(h.get("hostname")), INFO))
    return items


_CONTAINER_VERDICTS = {
    container.SAME: PASS, container.NAME_ONLY: WARN, container.OTHER_DIGEST: WARN, container.UNKNOWN: WARN,
    container.OTHER_IMAGE: FAIL, container.NONE_HERE: FAIL, container.NOT_RECORDED: NOT_RECORDED,
}


def _container_item(rec: Mapping[str, Any], here: Mapping[str, Any]) -> Item:
    j = container.compare(rec.get("container"), here.get("container"))
    return Item("container", j.recorded, j.here, _CONTAINER_VERDICTS[j.outcome], j.note)


def _seed_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    r = rec.get("seeds")
    if not isinstance(r, dict) or not r:
        return [Item("seeds", "-", "-", NOT_RECORDED)]
    h = here.get("seeds")
    if not isinstance(h, dict):
        return [Item("seeds", "recorded", "-", WARN, "seeds and determinism switches not collected here")] + \
            _lint_items(r)
    items: List[Item] = []
    # Seeds are top-level scalars in 1.0 manifests and under ``values`` since (Relax's ``config.arguments.seed``
    # is read as the latter); the switches are ``switches`` in 1.0 and ``env`` since.
    rv, hv = _seed_values(r), _seed_values(h)
    for key in sorted(rv, key=str):
        # Missing here is information: the seed comes with the command rerun, not with this machine.
        items.append(_equal_item("seed " + key, rv[key], hv.get(key), WARN, missing_here=INFO))
    rs, hs = _switches(r), _switches(h)
    if rs is None:  # not recorded: a switch set here is no difference from the run
        rs = hs = {}
    hs = hs if hs is not None else {}
    for key in sorted(set(rs) | set(hs)):
        a, b = rs.get(key, MISSING), hs.get(key, MISSING)
        if a == b:
            items.append(Item("switch " + key, cell(a), cell(b), PASS))
        else:
            items.append(Item("switch " + key, cell(a) if a is not MISSING else "unset",
                              cell(b) if b is not MISSING else "unset", WARN, "determinism switch differs"))
    items.extend(_lint_items(r))
    if r.get("bit_reproducible") is False:
        missing = r.get("missing")
        note = ", ".join(str(m) for m in missing)[:200] if isinstance(missing, list) else ""
        items.append(Item("bit reproducible", "no", "-", INFO, ("missing: " + note) if note else ""))
    return items


def _lint_items(seeds: Mapping[str, Any]) -> List[Item]:
    """The determinism lint the running trainer recorded (``seeds.warnings``): one row, whatever here is; INFO,
    as ``bit reproducible``: it says how the run was set up, not whether this machine can rerun it."""
    lint = seeds.get("warnings")
    if not isinstance(lint, list) or not lint:
        return []
    return [Item("determinism lint", "%d warning%s" % (len(lint), "" if len(lint) == 1 else "s"), "-", INFO,
                 "; ".join(str(w) for w in lint)[:300])]


def _seed_values(seeds: Mapping[str, Any]) -> Dict[str, Any]:
    values = seeds.get("values")
    out = {str(k): v for k, v in values.items() if not isinstance(v, (dict, list))} if isinstance(values, dict) else {}
    for key, value in seeds.items():
        if key not in _SEED_SECTION_KEYS and not isinstance(value, (dict, list)):
            out.setdefault(str(key), value)
    return out


_SEED_SECTION_KEYS = ("switches", "env", "flags", "torch", "values", "missing", "bit_reproducible", "set", "observed",
                      "generators", "seeded", "unused_values", "dataloaders", "warnings")


def _switches(seeds: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    for key in ("switches", "env"):
        if isinstance(seeds.get(key), dict):
            return seeds[key]
    return None


def _env_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    r = get(rec, "config.selected_env", None)
    if not isinstance(r, dict):
        return [Item("selected env", "-", "-", NOT_RECORDED)]
    h = get(here, "config.selected_env", None)
    if not isinstance(h, dict):
        return [Item("selected env", "%d vars" % len(r), "-", WARN, "not collected here")] if r else []
    items: List[Item] = []
    same = 0
    for name in sorted(set(r) | set(h), key=str):
        a, b = r.get(name, MISSING), h.get(name, MISSING)
        if a == b:
            same += 1
            continue
        shown_a = "unset" if a is MISSING else cell(a)
        shown_b = "unset" if b is MISSING else cell(b)
        if fields.redacted_parts(a if isinstance(a, str) else ""):
            items.append(Item("env " + name, shown_a, shown_b, INFO, "recorded value redacted: cannot compare"))
        elif is_info_env(str(name)):
            items.append(Item("env " + name, shown_a, shown_b, INFO))
        else:
            items.append(Item("env " + name, shown_a, shown_b, WARN))
    if same:
        items.insert(0, Item("selected env", "%d equal" % same, "%d equal" % same, PASS))
    return items


def _config_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    files = fields.config_files(rec)
    if not files:
        return []
    current = fields.config_files(here)
    by_path = current or {}
    items = []
    for path in sorted(files):
        f = files[path]
        label = "config " + path
        digest = scalar(f.get("sha256"))
        g = by_path.get(path)
        here_digest = scalar(g.get("sha256")) if isinstance(g, dict) else None
        if digest is None:
            items.append(Item(label, "-", cell(here_digest, True), NOT_RECORDED))
        elif fields.redacted_parts(digest):  # Relax's redaction can eat into a digest ("<internal-host>abfe…")
            items.append(Item(label, digest[:24], cell(here_digest, True), INFO,
                              "recorded digest redacted: cannot compare"))
        elif here_digest is None:
            items.append(Item(label, digest[:12], "-", WARN, "not found here" if isinstance(current, dict)
                              else "config files not collected here"))
        else:
            items.append(Item(label, digest[:12], here_digest[:12], PASS if digest == here_digest else WARN,
                              "" if digest == here_digest else "config file changed"))
    return items


def _input_key(entry: Mapping[str, Any]) -> Optional[str]:
    return scalar(entry.get("path")) or scalar(entry.get("id"))


def _fingerprint(entry: Mapping[str, Any], kind: str) -> Optional[str]:
    value = entry.get(kind)
    if isinstance(value, dict):
        for key in ("sha256", "digest", "fingerprint"):
            if scalar(value.get(key)):
                return scalar(value.get(key))
        return json.dumps(value, sort_keys=True, default=str)
    return scalar(value)


def _data_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    inputs = get(rec, "data.inputs", None)
    if not isinstance(inputs, list) or not inputs:
        return []
    current = get(here, "data.inputs", None)
    by_key = {}
    if isinstance(current, list):
        by_key = {_input_key(e): e for e in current if isinstance(e, dict)}
    items = []
    for e in inputs:
        if not isinstance(e, dict) or _input_key(e) is None:
            continue
        key = _input_key(e) or ""
        g = by_key.get(key)
        label = "data " + key
        if not isinstance(g, dict):
            items.append(Item(label, "recorded", "-", WARN, "not fingerprinted here"))
            continue
        for kind in ("full", "quick"):
            a, b = _fingerprint(e, kind), _fingerprint(g, kind)
            if a is not None and b is not None:
                items.append(Item(label, a[:12], b[:12], PASS if a == b else WARN,
                                  "%s fingerprint%s" % (kind, "" if a == b else " differs")))
                break
        else:
            if scalar(e.get("kind")) in ("hub", "id") or ("id" in e and "path" not in e):
                items.append(Item(label, "identifier", "identifier", INFO))
            else:
                items.append(Item(label, "-", "-", NOT_RECORDED, "no comparable fingerprint"))
    return items


def _runtime_items(rec: Mapping[str, Any], here: Mapping[str, Any]) -> List[Item]:
    r, h = section(rec, "runtime"), section(here, "runtime")
    items = []
    if scalar(r.get("mode")):
        items.append(_equal_item("runtime mode", r.get("mode"), h.get("mode"), WARN, missing_here=INFO))
    if scalar(r.get("node_count")):
        items.append(_equal_item("nodes", r.get("node_count"), h.get("node_count"), WARN, missing_here=INFO))
    job = _slurm_job(rec)
    if scalar(job):
        items.append(Item("slurm job", cell(job), cell(_slurm_job(here)), INFO))
    return items


def _slurm_job(doc: Mapping[str, Any]) -> Any:
    """The SLURM job id: ``scheduler.job_id`` as the scheduler probe writes it, ``scheduler.slurm.job_id`` in 1.0."""
    job = get(doc, "scheduler.job_id", None)
    return job if scalar(job) else get(doc, "scheduler.slurm.job_id", None)
