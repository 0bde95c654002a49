"""The Ray probe: pure parsers on real captures (2.9.3 and 2.60.0), detection without a subprocess,
and the collector driven by fake ``ray`` executables replaying those captures."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import ray, ray_parse
from tests.helpers.common import fake_tool
from tests.helpers.ray import RAY_FIXTURES, fake_root, raylet_cmdlines

HEAD_260 = "ddd9b9707a61ec373b6c7ed5266d9c22e2ed2e62664a5c91de6038f0"
WORKER_260 = "d48e65bfa24fa7080c05a7529c6ee5a2e5e8e9f32c1d1aaa9a1f4209"
HEAD_PID, WORKER_PID = "15237", "19927"


def fixture(name: str) -> str:
    return (RAY_FIXTURES / name).read_text()


# -- ray list nodes --------------------------------------------------------------------------------

H100_LABEL = {"ray.io/accelerator-type": "H100"}


@pytest.mark.parametrize("name,labels", [
    ("ray_list_nodes_2node.json", H100_LABEL), ("ray_list_nodes_2node_run2.json", H100_LABEL),
    ("ray_list_nodes_2node_2.9.3.json", {}),  # 2.9.3 sets no accelerator label, only the resource
    ("ray_list_nodes_RAY_ADDRESS_dashboard_url_2node.json", H100_LABEL),
    ("ray_list_nodes_detail_2node.json", H100_LABEL),
], ids=["ray-2.60-two-nodes", "ray-2.60-two-nodes-run2", "ray-2.9.3-two-nodes", "ray-2.60-dashboard-url",
        "ray-2.60-detail"])
def test_list_nodes_two_nodes_roles_resources_labels(name, labels):
    got = ray_parse.parse_list_nodes(fixture(name))
    assert got["node_count"] == 2
    head, worker = got["nodes"]
    assert (head["role"], worker["role"]) == ("head", "worker")
    assert head["address"] == "127.0.0.1" and worker["address"] == "127.0.0.2"
    assert worker["resources"]["GPU"] == 1 and worker["resources"]["accelerator_type:H100"] == 1
    assert worker["labels"] == labels
    assert head["labels"] == {}  # the node id label repeats node_id: dropped
    assert 13 < head["resources"]["memory_gb"] < 17 and 6 < head["resources"]["object_store_memory_gb"] < 8
    assert not any(k.startswith("node:") for n in got["nodes"] for k in n["resources"])
    assert got["totals"]["GPU"] == 1 and got["totals"]["CPU"] == 3
    assert "dead_nodes" not in got


def test_list_nodes_exact_head_of_2_60():
    got = ray_parse.parse_list_nodes(fixture("ray_list_nodes_2node.json"))
    assert got["nodes"][0] == {
        "node_id": HEAD_260, "address": "127.0.0.1", "role": "head", "alive": True, "labels": {},
        "resources": {"CPU": 2, "memory_gb": 16.16, "object_store_memory_gb": 6.92},
    }


def test_list_nodes_dead_worker_is_kept_apart():
    got = ray_parse.parse_list_nodes(fixture("ray_list_nodes_2node_worker_dead.json"))
    assert got["node_count"] == 1 and [n["role"] for n in got["nodes"]] == ["head"]
    [dead] = got["dead_nodes"]
    assert dead["alive"] is False and dead["state_message"] == "Expected termination: received SIGTERM"
    assert "GPU" not in got["totals"]


def test_list_nodes_head_from_resource_when_flag_missing():
    data = json.loads(fixture("ray_list_nodes_2node.json"))
    for node in data:
        del node["is_head_node"]
    roles = {n["node_id"]: n["role"] for n in ray_parse.parse_list_nodes(json.dumps(data))["nodes"]}
    assert roles == {HEAD_260: "head", WORKER_260: "worker"}


@pytest.mark.parametrize("text", ["", "{}", "Error: Failed to connect"], ids=["empty", "object", "text"])
def test_list_nodes_rejects_what_is_not_a_node_list(text):
    with pytest.raises(ValueError):
        ray_parse.parse_list_nodes(text)


# -- ray status text -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,nodes,gpu_node", [
    ("ray_status_v_2node.txt", 2, True),
    ("ray_status_v_2node_2.9.3.txt", 2, True),
    ("ray_status_2node.txt", 2, False),
    ("ray_status_2node_2.9.3.txt", 2, False),
    ("ray_status_v.txt", 1, False),
    ("ray_status.txt", 1, False),
    ("ray_status_2node_worker_dead.txt", 1, False),
], ids=["2.60-verbose-two-nodes", "2.9.3-verbose-two-nodes", "2.60-two-nodes", "2.9.3-two-nodes",
        "2.60-verbose-one-node", "2.60-one-node", "2.60-dead-worker"])
def test_status_text_counts_nodes_and_totals(name, nodes, gpu_node):
    got = ray_parse.parse_status_text(fixture(name))
    assert got["node_count"] == nodes == len(got["nodes"])
    assert all(n["role"] == "unknown" for n in got["nodes"])  # the text never shows roles
    assert got["totals"]["CPU"] == (3 if nodes == 2 else 2)
    assert got["totals"]["memory_gb"] > 10
    with_gpu = [n for n in got["nodes"] if n["resources"].get("GPU")]
    if gpu_node:
        [node] = with_gpu
        assert node["resources"]["accelerator_type:H100"] == 1
        assert node["labels"] == {"ray.io/accelerator-type": "H100"}
    else:
        assert with_gpu == []


def test_status_text_of_2_9_3_and_2_60_agree_on_totals():
    old = ray_parse.parse_status_text(fixture("ray_status_2node_2.9.3.txt"))["totals"]
    new = ray_parse.parse_status_text(fixture("ray_status_2node.txt"))["totals"]
    assert set(old) == set(new) == {"CPU", "GPU", "memory_gb", "object_store_memory_gb"}


def test_status_text_with_autoscaler_node_types():
    text = "Node status\n----\nActive:\n 2 ray.worker.gpu\n 1 ray.head.default\nIdle:\n 1 ray.worker.cpu\n" \
           "Pending:\n ray.worker.gpu, 1 launching\n"
    got = ray_parse.parse_status_text(text)
    assert got["node_count"] == 4 and got["nodes"] == []


def test_status_text_of_garbage_is_empty_not_an_error():
    assert ray_parse.parse_status_text("Traceback (most recent call last):\n  boom\n")["node_count"] == 0


# -- versions, raylet command lines ------------------------------------------------------------------

def test_versions():
    assert ray_parse.parse_cli_version(fixture("ray_version_flag.txt")) == "2.60.0"
    assert ray_parse.parse_cli_version(fixture("ray_version_2.9.3.txt")) == "2.9.3"
    assert ray_parse.parse_cli_version("") is None


@pytest.mark.parametrize("name,pair", [
    ("xver_ray_status_cli2.60_cluster2.9.3.txt.stderr", ("2.9.3", "2.60.0")),
    ("xver_ray_status_cli2.9.3_cluster2.60.txt.stderr", ("2.60.0", "2.9.3")),
    ("ray_status_no_cluster.txt.stderr", None),
], ids=["cli-2.60-cluster-2.9.3", "cli-2.9.3-cluster-2.60", "no-cluster"])
def test_version_mismatch_from_stderr(name, pair):
    assert ray_parse.parse_version_mismatch(fixture(name)) == pair


def test_raylet_cmdlines_give_role_resources_and_gcs():
    lines = raylet_cmdlines()
    head = ray_parse.parse_raylet_cmdline(lines[HEAD_PID])
    worker = ray_parse.parse_raylet_cmdline(lines[WORKER_PID])
    assert head["role"] == "head" and worker["role"] == "worker"
    assert head["gcs_address"] == worker["gcs_address"] == "127.0.0.1:6379"
    assert worker["address"] == "127.0.0.2"
    assert worker["resources"] == {"accelerator_type:H100": 1, "CPU": 1, "GPU": 1, "memory_gb": 16.11,
                                   "object_store_memory_gb": 6.9}
    assert ray_parse.parse_raylet_cmdline(["/usr/bin/python3", "--gcs-address=x"]) is None
    assert ray_parse.parse_raylet_cmdline(["/x/raylet", "--help"]) is None


# -- the collector -----------------------------------------------------------------------------------

def _ctx(root: Path, bindir: Path, dashboard: bool = False, port: int = 8265, **env: str) -> Context:
    # The dashboard leg is off unless a test serves one: an address file saying 127.0.0.1:6379 must
    # not make a unit test talk to whatever listens on this machine's port 8265.
    base = {"PATH": str(bindir), "TMPDIR": "/tmp"}
    base.update(env)
    return Context(env=base, root=str(root), deadline_s=6.0,
                   options={"ray_dashboard": dashboard, "ray_dashboard_port": port})


def _recording_ray(bindir: Path, log: Path, body: str = "exit 1") -> None:
    fake_tool(bindir, "ray", 'echo "$@" >> "%s"\n%s\n' % (log, body))


def test_no_ray_means_local_and_no_subprocess(tmp_path):
    log = tmp_path / "calls.log"
    _recording_ray(tmp_path / "bin", log)
    out = ray.collect(_ctx(fake_root(tmp_path), tmp_path / "bin"))
    assert out.status == "absent"
    assert out.data == {"runtime": {"mode": "local", "node_count": 1}}
    assert not log.exists(), "ray was called although nothing hinted at a cluster"


def _replay_ray(bindir: Path, log: Path, *, list_out: str = "", list_rc: int = 0, list_err: str = "",
                status_out: str = "", status_rc: int = 0, status_err: str = "", version: str = "2.60.0",
                sleep: float = 0) -> None:
    fixtures = bindir.parent / "replay"
    fixtures.mkdir(exist_ok=True)
    for name, text in (("list.out", list_out), ("list.err", list_err), ("status.out", status_out),
                       ("status.err", status_err)):
        (fixtures / name).write_text(text)
    _recording_ray(bindir, log, """
        [ "%(sleep)s" != 0 ] && /bin/sleep %(sleep)s
        case "$1" in
          --version) echo "ray, version %(version)s" ;;
          list) /bin/cat "%(d)s/list.out"; /bin/cat "%(d)s/list.err" >&2; exit %(list_rc)d ;;
          status) /bin/cat "%(d)s/status.out"; /bin/cat "%(d)s/status.err" >&2; exit %(status_rc)d ;;
        esac
        """ % {"d": fixtures, "version": version, "list_rc": list_rc, "status_rc": status_rc, "sleep": sleep})


def test_two_nodes_from_list_nodes(tmp_path):
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, list_out=fixture("ray_list_nodes_2node.json"))
    root = fake_root(tmp_path, address_file="127.0.0.1:6379")
    out = ray.collect(_ctx(root, tmp_path / "bin"))
    assert out.status == "ok", out.warnings
    rt = out.data["runtime"]
    assert rt["mode"] == "multi_node_ray" and rt["node_count"] == 2
    assert [n["role"] for n in rt["nodes"]] == ["head", "worker"]
    # No local raylet to read the cluster's version from, and `ray list` does not prove it: CLI only.
    assert rt["ray"] == {"cli_version": "2.60.0", "address": "127.0.0.1:6379", "address_source": "address_file",
                         "source": "list_nodes"}
    calls = sorted(log.read_text().splitlines())
    assert calls == ["--version", "list nodes --format json --limit 10000"]


def test_no_dashboard_falls_back_to_status_text_and_local_raylet_role(tmp_path):
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, list_rc=2, list_err=fixture("ray_list_nodes_2node_nodash.json.stderr"),
                status_out=fixture("ray_status_v_2node.txt"))
    # The captured raylets belong to the run of ray_status_v_2node.txt (same node ids).
    root = fake_root(tmp_path, pids=[HEAD_PID], ray_version="2.60.0")
    out = ray.collect(_ctx(root, tmp_path / "bin"))
    rt = out.data["runtime"]
    assert rt["mode"] == "multi_node_ray" and rt["node_count"] == 2
    assert rt["ray"]["source"] == "status_text" and rt["ray"]["address_source"] == "proc"
    assert (rt["ray"]["version"], rt["ray"]["cli_version"], rt["ray"]["mismatch"]) == ("2.60.0", "2.60.0", False)
    roles = sorted(n["role"] for n in rt["nodes"])
    assert roles == ["head", "unknown"]
    assert any("Failed to connect to API server" in w for w in out.warnings)
    assert out.status == "partial"
    assert "status -v" in log.read_text()


def test_stale_address_costs_no_more_than_the_budget(tmp_path):
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, sleep=30)  # the real CLI hangs ~41 s on a stale address
    root = fake_root(tmp_path, address_file="127.0.0.1:6379")
    t0 = time.monotonic()
    out = ray.collect(_ctx(root, tmp_path / "bin"))
    assert time.monotonic() - t0 < 4.0 + 1.0
    assert out.status == "timeout"
    assert out.data["runtime"]["mode"] == "ray_initialized_unknown"
    assert out.data["runtime"]["ray"]["reachable"] is False
    assert "status" not in log.read_text().split(), "no retry after a timeout"


def test_version_mismatch_is_recorded(tmp_path):
    log = tmp_path / "calls.log"
    err = fixture("xver_ray_status_cli2.60_cluster2.9.3.txt.stderr")
    _replay_ray(tmp_path / "bin", log, list_rc=1, list_err=err, status_rc=1, status_err=err)
    out = ray.collect(_ctx(fake_root(tmp_path, address_file="127.0.0.1:6379"), tmp_path / "bin"))
    info = out.data["runtime"]["ray"]
    assert (info["version"], info["cli_version"], info["mismatch"]) == ("2.9.3", "2.60.0", True)
    assert any("differs from the cluster" in w for w in out.warnings)


def test_raylet_but_no_ray_on_path_reports_local_nodes(tmp_path):
    (tmp_path / "bin").mkdir()
    root = fake_root(tmp_path, pids=[HEAD_PID, WORKER_PID], ray_version="2.60.0")
    out = ray.collect(_ctx(root, tmp_path / "bin"))
    rt = out.data["runtime"]
    assert rt["mode"] == "ray_initialized_unknown"
    assert rt["ray"]["source"] == "proc" and rt["ray"]["version"] == "2.60.0"
    assert [n["role"] for n in rt["local_nodes"]] == ["head", "worker"]
    assert out.warnings == ["the ray command is not on PATH"]


def test_ray_address_env_wins_and_is_passed_through(tmp_path):
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, list_out=fixture("ray_list_nodes_filter_head_2node.json"))
    out = ray.collect(_ctx(fake_root(tmp_path, address_file="127.0.0.1:6379"), tmp_path / "bin",
                           RAY_ADDRESS="http://127.0.0.1:8265"))
    rt = out.data["runtime"]
    assert rt["mode"] == "single_node_ray" and rt["nodes"][0]["role"] == "head"
    assert rt["ray"]["address"] == "http://127.0.0.1:8265" and rt["ray"]["address_source"] == "env"


def test_generate_without_ray_calls_no_ray_at_all(tmp_path):
    """End to end, in a fresh PID namespace (its own /proc: no raylet of any other cluster on this
    machine is visible): mode local, and a ``ray`` on PATH that records its calls is never run."""
    import os
    import shutil
    import subprocess

    from tests.helpers.common import ROOT, clean_env

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private /proc")
    if Path("/tmp/ray/ray_current_cluster").exists():
        pytest.skip("a Ray cluster on this machine left /tmp/ray/ray_current_cluster")
    log = tmp_path / "calls.log"
    _recording_ray(tmp_path / "bin", log)
    (tmp_path / "t").mkdir()
    env = clean_env(PATH="%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "/usr/bin")), TMPDIR=str(tmp_path / "t"))
    env.pop("RAY_ADDRESS", None)
    out = tmp_path / "m.json"
    res = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "relaxrepro",
                          "generate", "--output", str(out)], env=env, cwd=str(ROOT), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["runtime"]["mode"] == "local"
    assert doc["collection"]["probes"]["ray"]["status"] == "absent"
    assert not log.exists()


@pytest.mark.parametrize("name,rc,message", [
    ("ray_list_nodes_2node_nodash.json.stderr", 2, "Error: Failed to make request to http://127.0.0.1:8265/api/v0/nodes"),
    ("ray_list_nodes_stale_address_file.json.stderr", 1,
     "ray.exceptions.RpcError: Timed out while waiting for GCS to become available."),
    ("ray_status_format_json.txt.stderr", 2, "Error: No such option '--format'."),
    ("ray_status_no_cluster.txt.stderr", 1, "ConnectionError: Could not find any running Ray instance."),
], ids=["no-dashboard", "stale-address", "status-has-no-format-option", "no-cluster"])
def test_failure_message_is_the_reason_not_the_log_noise(name, rc, message):
    from relaxrepro.std.proc import ProcResult

    got = ray._failure(ProcResult(argv=["ray", "list"], rc=rc, stderr=fixture(name)))
    assert message in got
    assert "8.8.8.8" not in got  # the loopback-namespace warning Ray prints first


def test_collector_outputs_fit_the_schema(tmp_path):
    """Every shape the collector produces validates as a manifest's runtime."""
    from tests.helpers.common import validate_manifest

    base = {"schema_version": "1.0", "run_id": "r", "generated_at": "2026-12-02T00:00:00Z", "command": {},
            "code": {}, "config": {}, "environment": {}, "hardware": {}, "training": {}, "collection": {}}
    shapes = [
        ray_parse.parse_list_nodes(fixture("ray_list_nodes_2node_worker_dead.json")),
        ray_parse.parse_status_text(fixture("ray_status_v_2node_2.9.3.txt")),
        ray_parse.runtime_from_ray_nodes(json.loads(fixture("ray_nodes_api_2node.json")), {"CPU": 3.0}, "2.60.0"),
    ]
    (tmp_path / "bin").mkdir()
    root = fake_root(tmp_path, pids=[HEAD_PID, WORKER_PID], ray_version="2.60.0")
    shapes.append(ray.collect(_ctx(root, tmp_path / "bin")).data["runtime"])
    for runtime in shapes:
        validate_manifest(dict(base, runtime=runtime))


# -- the dashboard's REST API (what `ray list nodes` asks, without starting a Python) -------------------

dashboard_routes: list = []

@pytest.mark.parametrize("name,version", [
    ("rest_dash_api_v0_nodes_2node.json", "2.60.0"), ("rest_dash_api_v0_nodes_2node_2.9.3.json", "2.9.3"),
], ids=["ray-2.60-two-nodes", "ray-2.9.3-two-nodes"])
def test_dashboard_nodes_match_list_nodes(name, version):
    got = ray_parse.parse_dashboard_nodes(fixture(name))
    assert got["node_count"] == 2 and [n["role"] for n in got["nodes"]] == ["head", "worker"]
    assert got["nodes"][1]["resources"]["accelerator_type:H100"] == 1
    assert 13 < got["nodes"][0]["resources"]["memory_gb"] < 17  # raw bytes here, "16.1 GiB" in the CLI
    suffix = "_2.9.3" if version == "2.9.3" else ""
    assert ray_parse.parse_dashboard_version(fixture("rest_dash_api_version_2node%s.json" % suffix)) == version


def test_dashboard_dead_worker_and_bad_answers():
    got = ray_parse.parse_dashboard_nodes(fixture("rest_dash_api_v0_nodes_2node_worker_dead.json"))
    assert got["node_count"] == 1 and len(got["dead_nodes"]) == 1
    for bad in ('{"result": false, "msg": "boom", "data": {}}', "[]", '{"data": {"result": {"result": 3}}}'):
        with pytest.raises(ValueError):
            ray_parse.parse_dashboard_nodes(bad)
    assert ray_parse.parse_dashboard_version("<html>") is None


@pytest.mark.parametrize("address,url", [
    ("127.0.0.1:6379", "http://127.0.0.1:8265"),
    ("http://127.0.0.1:8265/", "http://127.0.0.1:8265"),
    ("head-0.cluster:6379", "http://head-0.cluster:8265"),
    ("auto", None), ("ray://head:10001", None), (None, None),
])
def test_dashboard_url(address, url):
    assert ray.dashboard_url(address) == url


@pytest.fixture
def dashboard(tmp_path):
    """A loopback HTTP server answering like Ray's dashboard from the captures."""
    import http.server
    import threading

    routes = {"/api/v0/nodes": fixture("rest_dash_api_v0_nodes_2node.json"),
              "/api/version": fixture("rest_dash_api_version_2node.json")}
    dashboard_routes.clear()
    dashboard_routes.append(routes)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = dashboard_routes[0].get(self.path.split("?")[0])
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write((body or "not found").encode())

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_dashboard_answers_so_list_nodes_is_not_run(tmp_path, dashboard):
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, list_rc=1, version="2.60.0")
    out = ray.collect(_ctx(fake_root(tmp_path), tmp_path / "bin", dashboard=True, RAY_ADDRESS=dashboard))
    assert out.status == "ok", out.warnings
    rt = out.data["runtime"]
    assert rt["mode"] == "multi_node_ray" and [n["role"] for n in rt["nodes"]] == ["head", "worker"]
    assert rt["ray"]["source"] == "dashboard_api"
    assert (rt["ray"]["version"], rt["ray"]["cli_version"], rt["ray"]["mismatch"]) == ("2.60.0", "2.60.0", False)
    assert log.read_text().split() == ["--version"]


def test_dashboard_answers_without_a_ray_command(tmp_path, dashboard):
    (tmp_path / "bin").mkdir()
    out = ray.collect(_ctx(fake_root(tmp_path), tmp_path / "bin", dashboard=True, RAY_ADDRESS=dashboard))
    assert out.status == "ok" and out.data["runtime"]["node_count"] == 2
    assert "cli_version" not in out.data["runtime"]["ray"]


def test_dashboard_refused_falls_back_to_the_cli(tmp_path):
    import socket

    with socket.socket() as s:  # a loopback port that was free a moment ago: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, list_out=fixture("ray_list_nodes_2node.json"))
    out = ray.collect(_ctx(fake_root(tmp_path), tmp_path / "bin", dashboard=True,
                           RAY_ADDRESS="http://127.0.0.1:%d" % port))
    assert out.data["runtime"]["ray"]["source"] == "list_nodes" and out.status == "ok"


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_dashboard_of_another_cluster_is_not_believed(tmp_path, dashboard):
    """A local raylet of the hinted GCS, but the dashboard on that host lists other nodes (the capture
    of another run): it is not this cluster's, so the CLI is asked instead."""
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, list_rc=2, list_err=fixture("ray_list_nodes_2node_nodash.json.stderr"),
                status_out=fixture("ray_status_v_2node.txt"))
    out = ray.collect(_ctx(fake_root(tmp_path, pids=[HEAD_PID]), tmp_path / "bin", dashboard=True,
                           port=_port(dashboard)))
    assert out.data["runtime"]["ray"]["source"] == "status_text"


def test_dashboard_listing_the_local_raylet_is_believed(tmp_path, dashboard):
    head_id = ray_parse.parse_raylet_cmdline(raylet_cmdlines()[HEAD_PID])["node_id"]
    # Same capture, with the head's id set to the local raylet's (as if captured in the same run).
    dashboard_routes[0]["/api/v0/nodes"] = fixture("rest_dash_api_v0_nodes_2node.json").replace(
        "ddd9b9707a61ec373b6c7ed5266d9c22e2ed2e62664a5c91de6038f0", head_id)
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log)
    out = ray.collect(_ctx(fake_root(tmp_path, pids=[HEAD_PID]), tmp_path / "bin", dashboard=True,
                           port=_port(dashboard)))
    rt = out.data["runtime"]
    assert rt["ray"]["source"] == "dashboard_api" and rt["nodes"][0]["node_id"] == head_id
    assert "list" not in log.read_text()


def test_stale_address_file_never_asks_a_dashboard(tmp_path, dashboard):
    """ray_current_cluster names a GCS no local raylet belongs to: port 8265 there may serve another
    cluster, so only the CLI (which addresses that exact GCS) is asked."""
    log = tmp_path / "calls.log"
    _replay_ray(tmp_path / "bin", log, list_rc=1, status_rc=1,
                list_err=fixture("ray_list_nodes_stale_address_file.json.stderr"))
    root = fake_root(tmp_path, pids=[HEAD_PID], address_file="127.0.0.1:6399")
    out = ray.collect(_ctx(root, tmp_path / "bin", dashboard=True, port=_port(dashboard)))
    assert out.data["runtime"]["ray"].get("source") == "proc"
    assert out.data["runtime"]["mode"] == "ray_initialized_unknown"


def test_raylets_of_another_user_are_not_this_runs_cluster(tmp_path):
    # On a shared machine another user's cluster is visible in /proc but is not ours to record.
    import os

    root = fake_root(tmp_path, pids=[HEAD_PID])
    ctx = Context(env={"PATH": str(tmp_path / "bin")}, root=str(root))
    assert len(ray.scan_raylets(ctx)) == 1
    os.chown(root / "proc" / HEAD_PID, 12345, 12345)
    assert ray.scan_raylets(ctx) == []
def _netns_links(root: Path, **by_pid: str) -> None:
    for pid, ns in by_pid.items():
        (root / "proc" / pid / "ns").mkdir(parents=True, exist_ok=True)
        (root / "proc" / pid / "ns" / "net").symlink_to(ns)


def test_loopback_raylets_of_another_network_namespace_are_not_ours(tmp_path):
    # Another container's or test sandbox's cluster on 127.0.0.1 is unreachable from here: no CLI call.
    root = fake_root(tmp_path, pids=[HEAD_PID, WORKER_PID])
    _netns_links(root, self="net:[4026531833]", **{HEAD_PID: "net:[4026532999]", WORKER_PID: "net:[4026532999]"})
    ctx = Context(env={"PATH": str(tmp_path / "nobin")}, root=str(root))
    assert ray.detect(ctx) == {}
    out = ray.collect(ctx)
    assert out.status == "absent" and out.data == {"runtime": {"mode": "local", "node_count": 1}}


def test_raylets_of_our_namespace_or_a_routable_address_are_kept(tmp_path):
    root = fake_root(tmp_path, pids=[HEAD_PID, WORKER_PID])
    _netns_links(root, self="net:[4026531833]", **{HEAD_PID: "net:[4026531833]", WORKER_PID: "net:[4026532999]"})
    cmdline = root / "proc" / WORKER_PID / "cmdline"
    cmdline.write_bytes(cmdline.read_bytes().replace(b"127.0.0.1:6379", b"10.1.2.3:6379"))
    got = ray.scan_raylets(Context(env={}, root=str(root)))
    assert [(r["role"], r["gcs_address"]) for r in got] == [("head", "127.0.0.1:6379"), ("worker", "10.1.2.3:6379")]


def _console_script_venv(tmp_path: Path, shebang: str, versions=("2.60.0",)) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "ray"
    script.write_text(shebang.format(venv=venv) + "\nimport sys\nfrom ray.scripts.scripts import main\n")
    script.chmod(0o755)
    for v in versions:
        (venv / "lib" / "python3.11" / "site-packages" / ("ray-%s.dist-info" % v)).mkdir(parents=True)
    return venv


def test_cli_version_is_read_from_the_console_scripts_own_install(tmp_path):
    # `ray --version` imports Ray (~1-3 s); pip's console script tells which install it runs.
    venv = _console_script_venv(tmp_path, "#!{venv}/bin/python3.11")
    assert ray._cli_dist_version(Context(env={"PATH": str(venv / "bin")})) == "2.60.0"


@pytest.mark.parametrize("shebang,versions", [
    ("#!/usr/bin/python3", ("2.60.0",)),  # another prefix's interpreter: its site-packages are elsewhere
    ("#!/bin/sh", ("2.60.0",)),  # a wrapper
    ("#!{venv}/bin/python3.11", ("2.60.0", "2.9.3")),  # two installs: which one is not known
    ("#!{venv}/bin/python3.11", ()),
], ids=["foreign-python", "wrapper", "two-installs", "no-dist-info"])
def test_cli_version_unknown_from_the_install_means_asking_the_cli(tmp_path, shebang, versions):
    venv = _console_script_venv(tmp_path, shebang, versions)
    assert ray._cli_dist_version(Context(env={"PATH": str(venv / "bin")})) is None
