"""Per-node fragments and the cluster view: real GPU captures served by a fake nvidia-smi, combined
into mixed clusters; ``generate --node-report`` and ``merge`` as a user runs them; every refusal."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from relaxrepro.collect import node as node_collect
from relaxrepro.manifest import nodes as node
from tests.helpers.common import clean_env, run_cli, validate_manifest
from tests.helpers.nodes import (
    A100_40GB_MIG,
    A100_80GB_X4,
    RTX3090_525,
    RTX3090_590,
    as_node,
    base_manifest,
    cluster,
    fragment_from_capture,
    validate_fragment,
    write_fragments,
)


@pytest.fixture(scope="module")
def frags(tmp_path_factory) -> dict:
    """One real fragment per capture (collecting is the slow part; clusters copy them)."""
    tmp = tmp_path_factory.mktemp("frags")
    return {
        "3090-590": fragment_from_capture(tmp, RTX3090_590),
        "3090-525": fragment_from_capture(tmp, RTX3090_525),
        "a100-80gb-x4": fragment_from_capture(tmp, A100_80GB_X4),
        "a100-40gb-mig": fragment_from_capture(tmp, A100_40GB_MIG),
        "no-gpu": fragment_from_capture(tmp, None),
    }


def _fields(doc: dict) -> dict:
    return {e["field"]: e for e in doc["heterogeneity"]["fields"]}


# ------------------------------------------------------------------------------- the fragment
def test_fragment_from_a_real_capture(frags):
    frag = frags["3090-590"]
    validate_fragment(frag)
    assert frag["fragment_version"] == "1.0" and frag["kind"] == "node" and frag["run_id"] == "run-1"
    hw = frag["hardware"]
    assert (hw["gpu_model"], hw["driver_version"], hw["cuda_driver_version"]) == \
        ("NVIDIA GeForce RTX 3090", "590.44.01", "13.1")
    assert frag["collection"]["probes"]["gpu"]["status"] == "ok"
    assert set(frag["collection"]["probes"]) <= set(node_collect.NODE_PROBES)  # no command, git, config
    assert "command" not in frag and "code" not in frag


def test_node_name_is_stable_within_a_run_and_never_the_hostname(frags):
    host = socket.gethostname()
    name = frags["3090-590"]["node"]["name"]
    assert name == node.node_name("run-1", host) == frags["3090-525"]["node"]["name"]
    assert name != node.node_name("run-2", host)
    assert name != node.node_name("run-1", host, ray_node_id="ab" * 28)  # two raylets on one host
    assert host not in json.dumps(frags["3090-590"])
    assert "hostname" not in frags["3090-590"]["environment"].get("system", {})


# ------------------------------------------------------------------------------- mixed clusters
def test_one_driver_behind_in_sixteen_nodes(frags):
    nodes = cluster({"3090-590": 14, "3090-525": 2}, frags)
    doc = node.merge_fragments(base_manifest(), nodes)
    validate_manifest(doc)
    het = doc["heterogeneity"]
    assert het["node_count"] == 16 and het["homogeneous"] is False
    fields = _fields(doc)
    assert set(fields) == {"hardware.driver_version", "hardware.cuda_driver_version"}
    odd = sorted(n["node"]["name"] for n in nodes[14:])
    assert fields["hardware.driver_version"]["values"]["525.147.05"] == odd
    assert fields["hardware.driver_version"]["counts"] == {"590.44.01": 14, "525.147.05": 2}
    assert node.summarize_heterogeneity(doc) == [
        "2 of 16 nodes: cuda_driver_version 13.1 -> 12.0 (%s, %s)" % tuple(odd),
        "2 of 16 nodes: driver_version 590.44.01 -> 525.147.05 (%s, %s)" % tuple(odd),
    ]
    entry = next(n for n in doc["runtime"]["nodes"] if n["name"] == odd[0])
    assert entry["hardware"]["driver_version"] == "525.147.05" and "gpus" not in entry["hardware"]


def test_different_models_counts_and_a_node_without_gpus(frags):
    nodes = cluster({"a100-80gb-x4": 2, "a100-40gb-mig": 1, "no-gpu": 1}, frags)
    doc = node.merge_fragments(base_manifest(), nodes)
    validate_manifest(doc)
    fields = _fields(doc)
    assert fields["hardware.gpu_model"]["counts"] == {
        "NVIDIA A100-SXM4-80GB": 2, "NVIDIA A100-SXM4-40GB": 1, "<absent>": 1}
    # The GPU-less node has no tool and no driver file under its (empty) root: zero GPUs, not unknown.
    assert fields["hardware.gpu_count"]["counts"] == {"4": 2, "1": 1, "0": 1}
    assert fields["hardware.driver_version"]["values"]["<absent>"] == [nodes[3]["node"]["name"]]
    lines = node.summarize_heterogeneity(doc)
    assert "1 of 4 nodes: gpu_model NVIDIA A100-SXM4-80GB -> <absent> (%s)" % nodes[3]["node"]["name"] in lines


def test_identical_nodes_are_homogeneous(frags):
    doc = node.merge_fragments(base_manifest(), cluster({"a100-80gb-x4": 8}, frags))
    assert doc["heterogeneity"] == {"node_count": 8, "homogeneous": True, "fields": []}
    assert node.summarize_heterogeneity(doc) == []
    assert len(doc["runtime"]["nodes"]) == 8


def test_fragments_join_ray_nodes_by_id_and_the_rest_are_appended(frags):
    head = as_node(frags["3090-590"], 0)
    head["node"].update(ray_node_id="aa" * 28, role="head")
    other = as_node(frags["3090-590"], 1)
    ray_nodes = [{"node_id": "aa" * 28, "role": "head", "alive": True}, {"node_id": "bb" * 28, "role": "worker"}]
    manifest = base_manifest(nodes=ray_nodes)
    doc = node.merge_fragments(manifest, [head, other])
    nodes = doc["runtime"]["nodes"]
    assert [n.get("node_id") for n in nodes] == ["aa" * 28, "bb" * 28, None]
    assert nodes[0]["name"] == head["node"]["name"] and nodes[0]["role"] == "head"
    assert nodes[0]["hardware"]["gpu_model"] == "NVIDIA GeForce RTX 3090"
    assert "hardware" not in nodes[1]  # no fragment came from it
    assert nodes[2]["name"] == other["node"]["name"]
    assert manifest["runtime"]["nodes"][0] == {"node_id": "aa" * 28, "role": "head", "alive": True}  # input kept


def test_a_node_reported_twice_keeps_the_first(frags):
    a = as_node(frags["3090-590"], 0)
    b = as_node(frags["3090-525"], 0)
    doc = node.merge_fragments(base_manifest(), [a, b])
    assert len(doc["runtime"]["nodes"]) == 1 and doc["heterogeneity"]["homogeneous"] is True
    assert doc["collection"]["probes"]["nodes"]["warnings"] == ["%s reported twice; kept the first report"
                                                                % a["node"]["name"]]


def test_a_thousand_fragments(frags, tmp_path):
    nodes = cluster({"3090-590": 997, "3090-525": 2, "no-gpu": 1}, frags)
    doc = node.merge_fragments(base_manifest(), nodes)
    fields = _fields(doc)
    assert doc["heterogeneity"]["node_count"] == 1000
    # The manifest keeps 32 node entries, the three that differ (the last three) among them.
    kept = [n["name"] for n in doc["runtime"]["nodes"]]
    assert kept == [n["node"]["name"] for n in nodes[:29] + nodes[-3:]]
    assert doc["runtime"]["nodes_truncated"]["count"] == 1000
    assert doc["collection"]["truncated"] == [
        "runtime.nodes: kept 32 of 1000 nodes (those that differ first); heterogeneity counts all"]
    drv = fields["hardware.driver_version"]
    assert drv["counts"] == {"590.44.01": 997, "525.147.05": 2, "<absent>": 1}
    assert len(drv["values"]["590.44.01"]) == node.MAX_LISTED  # named up to 16; counted exactly
    assert drv["values"]["<absent>"] == [nodes[-1]["node"]["name"]]
    # Through the CLI, from a directory of 1,000 files: the written manifest fits the cap and is valid.
    d = tmp_path / "nodes"
    write_fragments(d, nodes)
    m = tmp_path / "manifest_run-1.json"
    m.write_text(json.dumps(base_manifest()))
    res = run_cli("merge", str(m), str(d))
    assert res.returncode == 0, res.stderr
    written = json.loads(Path(res.stdout.strip()).read_text())
    validate_manifest(written)
    assert written["heterogeneity"] == doc["heterogeneity"]
    # From a directory the files come in name order: other 29 kept, the same three odd ones among them.
    written_names = {n["name"] for n in written["runtime"]["nodes"]}
    assert len(written_names) == 32 and {n["node"]["name"] for n in nodes[-3:]} <= written_names
    assert written["collection"]["truncated"] == doc["collection"]["truncated"]
    assert "2 of 1000 nodes: driver_version 590.44.01 -> 525.147.05" in res.stderr


# ------------------------------------------------------------------------------- generate --node-report
def test_node_report_writes_a_fragment_on_every_rank(tmp_path):
    env = clean_env(SLURM_JOB_ID="4242", SLURM_PROCID="3", SLURM_NODEID="1")
    res = run_cli("generate", "--node-report", "--output-dir", str(tmp_path), env=env)
    assert res.returncode == 0, res.stderr
    path = Path(res.stdout.strip())
    frag = json.loads(path.read_text())
    validate_fragment(frag)
    assert path.name == "node_%s.json" % frag["node"]["name"]
    assert frag["run_id"] == "slurm-4242"
    assert frag["node"]["slurm_node_index"] == 1 and frag["node"]["slurm_procid"] == 3
    assert frag["node"]["name"] == node.node_name("slurm-4242", socket.gethostname())


def test_node_report_never_overwrites(tmp_path):
    env = clean_env(RELAXREPRO_RUN_ID="exp-1")
    first = run_cli("generate", "--node-report", "--output-dir", str(tmp_path), env=env)
    before = Path(first.stdout.strip()).read_bytes()
    again = run_cli("generate", "--node-report", "--output-dir", str(tmp_path), env=env)
    assert again.returncode == 0 and again.stdout == ""
    assert "already exists (manifests are never overwritten)" in again.stderr
    assert Path(first.stdout.strip()).read_bytes() == before and len(os.listdir(tmp_path)) == 1


def test_node_report_without_a_run_id_is_a_usage_error(tmp_path):
    res = run_cli("generate", "--node-report", "--output-dir", str(tmp_path))
    assert res.returncode == 2 and os.listdir(tmp_path) == []
    assert "--node-report needs a run id shared with rank 0's manifest" in res.stderr


def test_rank_zero_and_nodes_share_relaxrepro_run_id(tmp_path):
    env = clean_env(RELAXREPRO_RUN_ID="exp-7")
    assert run_cli("generate", "--output-dir", str(tmp_path), env=env).returncode == 0
    assert run_cli("generate", "--node-report", "--output-dir", str(tmp_path), env=env).returncode == 0
    res = run_cli("merge", str(tmp_path / "manifest_exp-7.json"), str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(tmp_path / "manifest_exp-7.merged.json")
    doc = json.loads((tmp_path / "manifest_exp-7.merged.json").read_text())
    validate_manifest(doc)
    assert doc["run_id"] == "exp-7" and doc["heterogeneity"]["node_count"] == 1
    assert doc["runtime"]["nodes"][0]["environment"]["python_version"]


def test_in_a_slurm_job_the_manifest_takes_the_node_reports_named_for_its_job(tmp_path):
    # generate in an sbatch script names the run itself; --node-report under srun names it for the job
    # (slurm-<id>): merge matches them by the manifest's scheduler.job_id (the real job: tests/commands/test_slurm.py)
    env = clean_env(SLURM_JOB_ID="4242", SLURM_JOB_NUM_NODES="1")
    assert run_cli("generate", "--output-dir", str(tmp_path), env=env).returncode == 0
    assert run_cli("generate", "--node-report", "--output-dir", str(tmp_path), env=env).returncode == 0
    (manifest,) = tmp_path.glob("manifest_*.json")
    res = run_cli("merge", str(manifest), str(tmp_path))
    assert res.returncode == 0, res.stderr
    doc = json.loads(Path(res.stdout.strip()).read_text())
    assert doc["heterogeneity"]["node_count"] == 1 and doc["scheduler"]["job_id"] == "4242"
    other = clean_env(SLURM_JOB_ID="4243")
    assert run_cli("generate", "--node-report", "--output-dir", str(tmp_path / "o"), env=other).returncode == 0
    res = run_cli("merge", str(manifest), str(tmp_path / "o"))
    assert res.returncode == 2 and "run id 'slurm-4243' is not the manifest's (%r or 'slurm-4242')" % (
        json.loads(manifest.read_text())["run_id"]) in res.stderr


# ------------------------------------------------------------------------------- merge refusals
@pytest.fixture
def merge_dir(tmp_path, frags):
    m = tmp_path / "manifest_run-1.json"
    m.write_text(json.dumps(base_manifest()))
    good = write_fragments(tmp_path / "nodes", cluster({"3090-590": 2}, frags))
    return tmp_path, m, good


def _refused(tmp_path: Path, manifest: Path, *paths: Path) -> str:
    res = run_cli("merge", str(manifest), *map(str, paths))
    assert res.returncode == 2 and res.stdout == ""
    assert not list(tmp_path.glob("*.merged.json"))  # nothing written
    assert len(res.stderr.strip().splitlines()) == 1
    return res.stderr.strip()


def test_fragment_of_another_run_is_refused(merge_dir, frags):
    tmp_path, m, good = merge_dir
    stranger = as_node(frags["3090-590"], 9)
    stranger["run_id"] = "run-2"
    bad = write_fragments(tmp_path / "other", [stranger])[0]
    assert _refused(tmp_path, m, *good, bad) == \
        "relaxrepro merge: error: %s: run id 'run-2' is not the manifest's ('run-1')" % bad


def test_fragment_of_another_major_is_refused(merge_dir, frags):
    tmp_path, m, good = merge_dir
    future = as_node(frags["3090-590"], 9)
    future["fragment_version"] = "2.0"
    bad = write_fragments(tmp_path / "other", [future])[0]
    assert _refused(tmp_path, m, good[0], bad) == \
        "relaxrepro merge: error: %s: unsupported fragment_version 2.0: this relaxrepro reads 1.x" % bad


def test_newer_minor_fragment_is_merged(merge_dir, frags):
    tmp_path, m, good = merge_dir
    newer = as_node(frags["3090-525"], 9)
    newer["fragment_version"] = "1.7"
    newer["node"]["future_field"] = "kept out of the manifest"
    res = run_cli("merge", str(m), *map(str, good), str(write_fragments(tmp_path / "o", [newer])[0]))
    assert res.returncode == 0, res.stderr
    assert "1 of 3 nodes: driver_version 590.44.01 -> 525.147.05" in res.stderr


@pytest.mark.parametrize("content, message", [
    (b"{not json", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    (b'{"fragment_version": "1.0", "kind": "node", "run_id": "run-1", "node": {"name": "n", "gpu_count": NaN}}',
     "not valid JSON: NaN literal is not allowed (JSON has no NaN) in 'node.gpu_count'"),
    (b'{"fragment_version": "1.0", "kind": "node", "run_id": "run-1", "node": {"name": "n", "rank": ' + b"9" * 5000
     + b"}}", "integer of 5000 digits is longer than the 4300 allowed in 'node.rank'"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[1, 2]", "not a node fragment: the top level is not an object"),
    (json.dumps(base_manifest()).encode(), "not a node fragment: no fragment_version (is it a manifest?)"),
    (b'{"fragment_version": "1.0", "kind": "cluster", "run_id": "run-1", "node": {"name": "x"}}',
     "not a node fragment: kind is 'cluster'"),
    (b'{"fragment_version": "1.0", "kind": "node", "run_id": "run-1", "node": {}}',
     "not a node fragment: node.name missing"),
    (b'{"fragment_version": "1.0", "kind": "node", "run_id": "run-1", "node": {"name": "n"}, "hardware": []}',
     "Unexpected type in 'hardware' (expected object)"),
], ids=["truncated-json", "nan", "huge-int", "utf16", "array", "a-manifest", "wrong-kind", "no-name",
        "hardware-array"])
def test_unreadable_fragment_is_refused(merge_dir, content, message):
    tmp_path, m, good = merge_dir
    bad = tmp_path / "node_bad.json"
    bad.write_bytes(content)
    assert _refused(tmp_path, m, good[0], bad) == "relaxrepro merge: error: %s: %s" % (bad, message)


def test_missing_fragment_and_empty_directory_are_refused(merge_dir):
    tmp_path, m, good = merge_dir
    missing = tmp_path / "node_gone.json"
    assert _refused(tmp_path, m, good[0], missing) == \
        "relaxrepro merge: error: %s: cannot read: No such file or directory" % missing
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _refused(tmp_path, m, empty) == "relaxrepro merge: error: no node fragments (node_*.json) in %s" % empty


def test_bad_manifest_is_refused(merge_dir):
    tmp_path, m, good = merge_dir
    m.write_text('{"schema_version": "2.0", "run_id": "run-1"}')
    assert _refused(tmp_path, m, *good) == \
        "relaxrepro merge: error: %s: unsupported schema_version 2.0: this relaxrepro reads 1.x" % m


def test_a_run_id_that_is_not_a_file_name_never_steers_the_default_output(merge_dir):
    tmp_path, m, good = merge_dir
    (tmp_path / "manifest_x").mkdir()  # manifest_x/../../out.merged.json: beside the manifest's folder
    m.write_text(json.dumps(dict(base_manifest(), run_id="x/../../out")))
    for f in good:
        f.write_text(json.dumps(dict(json.loads(f.read_text()), run_id="x/../../out")))
    assert _refused(tmp_path, m, *good) == (
        "relaxrepro merge: error: %s: run id x/../../out cannot name a file; name the output with -o" % m)
    assert not (tmp_path.parent / "out.merged.json").exists()
    res = run_cli("merge", str(m), *map(str, good), "-o", str(tmp_path / "named.json"))
    assert res.returncode == 0, res.stderr


def test_the_same_node_twice_is_merged_once_with_a_warning(merge_dir):
    tmp_path, m, good = merge_dir
    res = run_cli("merge", str(m), str(good[0]), str(good[0]))
    assert res.returncode == 0
    name = json.loads(good[0].read_text())["node"]["name"]
    assert "relaxrepro: warning: %s reported twice; kept the first report\n" % name in res.stderr
    assert len(json.loads(Path(res.stdout.strip()).read_text())["runtime"]["nodes"]) == 1


def test_merge_never_overwrites_and_honours_output(merge_dir):
    tmp_path, m, good = merge_dir
    out = tmp_path / "cluster.json"
    res = run_cli("merge", str(m), *map(str, good), "-o", str(out))
    assert res.returncode == 0 and res.stdout.strip() == str(out)
    before = out.read_bytes()
    again = run_cli("merge", str(m), *map(str, good), "-o", str(out))
    assert again.returncode == 1 and "already exists (manifests are never overwritten)" in again.stderr
    assert out.read_bytes() == before
    assert json.loads(m.read_text()) == base_manifest()  # the input manifest is untouched


# ------------------------------------------------------------------------------- over Ray, without Ray
class _Ref:
    def __init__(self, value=None, error=None, ready=True):
        self.value, self.error, self.ready = value, error, ready


class FakeRay:
    """Just enough of ``ray`` to drive collect_over_ray without a cluster (unit test only; the real
    cluster test is tests/test_nodes_ray.py): one node answers, one never does, one raises."""

    def __init__(self, answers):
        self.answers = answers  # node_id -> _Ref
        self.cancelled = []
        self.scheduled = []
        fake = self

        class _Strategy:
            def __init__(self, node_id, soft):
                self.node_id, self.soft = node_id, soft

        class _Remote:
            def __init__(self, fn, opts):
                self.fn, self.opts = fn, opts

            def options(self, **kw):
                return _Remote(self.fn, dict(self.opts, **kw))

            def remote(self, run_id, node_id, role, deadline_s):
                fake.scheduled.append((node_id, self.opts["num_cpus"], self.opts["scheduling_strategy"].soft))
                return fake.answers[node_id]

        self._Remote = _Remote
        self.util = type("util", (), {"scheduling_strategies": type("ss", (), {
            "NodeAffinitySchedulingStrategy": _Strategy})})

    def is_initialized(self):
        return True

    def nodes(self):
        return [{"NodeID": nid, "Alive": True, "NodeManagerAddress": "127.0.0.1",
                 "Resources": {"node:__internal_head__": 1.0} if i == 0 else {}}
                for i, nid in enumerate(self.answers)] + [{"NodeID": "dd" * 28, "Alive": False}]

    def remote(self, **opts):
        return lambda fn: self._Remote(fn, opts)

    def wait(self, refs, num_returns, timeout):
        ready = [r for r in refs if r.ready]
        return ready, [r for r in refs if not r.ready]

    def get(self, ref, timeout=None):
        if ref.error:
            raise ref.error
        return ref.value

    def cancel(self, ref):
        self.cancelled.append(ref)


def test_over_ray_nodes_that_do_not_answer_are_listed(frags):
    answer = as_node(frags["3090-590"], 0)
    answer["node"].update(ray_node_id="aa" * 28, role="head")
    silent = _Ref(ready=False)
    ray = FakeRay({"aa" * 28: _Ref(answer), "bb" * 28: silent,
                   "cc" * 28: _Ref(error=RuntimeError("ModuleNotFoundError: No module named 'relaxrepro'\nmore"))})
    got = node_collect.collect_over_ray(ray, deadline_s=0.5, run_id="run-1")
    assert ray.scheduled == [("aa" * 28, 0, False), ("bb" * 28, 0, False), ("cc" * 28, 0, False)]
    assert ray.cancelled == [silent]
    doc = node.merge_fragments(base_manifest(nodes=[{"node_id": "aa" * 28}, {"node_id": "bb" * 28}]), got)
    validate_manifest(doc)
    assert doc["runtime"]["nodes"][0]["hardware"]["driver_version"] == "590.44.01"
    assert doc["runtime"]["unresponsive_nodes"] == [
        {"name": "ray-bbbbbbbbbbbb", "node_id": "bb" * 28, "role": "worker", "reason": "no answer within 0.5 s"},
        {"name": "ray-cccccccccccc", "node_id": "cc" * 28, "role": "worker",
         "reason": "RuntimeError: ModuleNotFoundError: No module named 'relaxrepro'"},
    ]
    assert doc["collection"]["probes"]["nodes"]["status"] == "partial"
    assert node.summarize_heterogeneity(doc) == ["2 nodes did not answer: ray-bbbbbbbbbbbb, ray-cccccccccccc"]


def test_update_manifest_without_ray_returns_the_manifest_unchanged(monkeypatch):
    import relaxrepro

    monkeypatch.delitem(__import__("sys").modules, "ray", raising=False)
    m = base_manifest()
    assert relaxrepro.update_manifest(m, per_node=True) is m


# ------------------------------------------------------------------------------- helpers for check and diff
def test_diff_between_two_runs_counts_nodes_that_changed(frags):
    before = node.merge_fragments(base_manifest(), cluster({"3090-590": 16}, frags))
    after = node.merge_fragments(base_manifest(), cluster({"3090-590": 14, "3090-525": 2}, frags))
    assert node.diff_nodes(before, after) == [
        "2 of 16 nodes: cuda_driver_version 13.1 -> 12.0",
        "2 of 16 nodes: driver_version 590.44.01 -> 525.147.05",
    ]
    assert node.diff_nodes(after, before) == [
        "2 of 16 nodes: cuda_driver_version 12.0 -> 13.1",
        "2 of 16 nodes: driver_version 525.147.05 -> 590.44.01",
    ]
    assert node.diff_nodes(after, after) == []


def test_diff_is_exact_past_the_kept_node_entries(frags):
    # 100 nodes: only 32 entries are kept, but the counts come from heterogeneity and node_count.
    before = node.merge_fragments(base_manifest(), cluster({"3090-590": 100}, frags))
    after = node.merge_fragments(base_manifest(), cluster({"3090-590": 97, "3090-525": 3}, frags))
    assert len(after["runtime"]["nodes"]) == node.MAX_NODES_KEPT
    assert "3 of 100 nodes: driver_version 590.44.01 -> 525.147.05" in node.diff_nodes(before, after)


# ------------------------------------------------------------------------------- wired into diff and check
def test_relaxrepro_diff_reports_nodes_as_populations(tmp_path, frags):
    before = node.merge_fragments(base_manifest(), cluster({"3090-590": 16}, frags))
    after = node.merge_fragments(base_manifest(), cluster({"3090-590": 14, "3090-525": 2}, frags))
    (tmp_path / "a.json").write_text(json.dumps(before))
    (tmp_path / "b.json").write_text(json.dumps(after))
    res = run_cli("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), env=clean_env(NO_COLOR="1"))
    assert res.returncode == 1, res.stderr
    assert "nodes  2 of 16 nodes: driver_version 590.44.01 -> 525.147.05" in res.stdout
    assert "node-" not in res.stdout  # per-run node names never show up as added/removed entries
    same = run_cli("diff", str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert same.returncode == 0


def test_check_judges_against_the_recorded_node_of_this_gpu_model(frags):
    from relaxrepro.analyze import check as rules

    head = as_node(frags["a100-80gb-x4"], 0)
    head["node"]["role"] = "head"
    worker = as_node(frags["3090-590"], 1)
    rec = node.merge_fragments(base_manifest(), [head, worker])
    rec["hardware"] = dict(frags["a100-80gb-x4"]["hardware"])  # rank 0 ran on the A100 head
    here = {"hardware": dict(frags["3090-590"]["hardware"]), "environment": {}}
    items = {i.item: i for i in rules.compare_documents(rec, here)}
    assert items["node"].verdict == rules.INFO and items["node"].recorded == worker["node"]["name"]
    gpu = [i for i in items.values() if "GPU model" in i.item or i.item == "gpu model"]
    assert gpu and all(i.verdict == rules.PASS for i in gpu), [(i.item, i.verdict) for i in gpu]
    # Without per-node data the same machine is judged against rank 0: another GPU model fails.
    plain = dict(rec, runtime={})
    gpu_plain = [i for i in rules.compare_documents(plain, here) if i.item in {g.item for g in gpu}]
    assert gpu_plain and all(i.verdict == rules.FAIL for i in gpu_plain)


def test_nodes_in_two_images_of_the_same_name_are_heterogeneous(frags):
    nodes = cluster({"a100-80gb-x4": 3}, frags)
    for n, digest in zip(nodes, ("a", "a", "b")):
        n["container"] = {"runtime": "apptainer", "image": {"name": "pytorch.sif", "digest": "sha256:" + digest * 64,
                                                           "digest_source": "sif"}, "evidence": ["test"]}
    doc = node.merge_fragments(base_manifest(), nodes)
    validate_manifest(doc)
    assert _fields(doc)["container.image.digest"]["counts"] == {"sha256:" + "a" * 64: 2, "sha256:" + "b" * 64: 1}
