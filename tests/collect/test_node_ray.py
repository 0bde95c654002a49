"""Per-node collection through real Ray tasks: a head and a second raylet (127.0.0.2) in a
loopback-only network namespace, each raylet started with its own environment. The worker's PATH
serves another driver's nvidia-smi capture, so the heterogeneity is found by real per-node tasks.

Teardown kills exactly the processes living in this test's network namespace (never ``ray stop``,
which kills every Ray process on the machine by name, other sessions' clusters included).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.helpers.common import validate_manifest
from tests.helpers.gpu import fake_smi
from tests.helpers.nodes import RTX3090_525, RTX3090_590
from tests.helpers.ray import NetnsCluster, ray_cluster_unavailable

pytestmark = pytest.mark.ray

try:
    import ray  # noqa: F401

    RAY_MISSING: Optional[str] = None
except ImportError:
    RAY_MISSING = "ray is not installed for %s (tests/requirements-ray.txt via tests/run.sh)" % sys.executable


def _unavailable() -> Optional[str]:
    return RAY_MISSING or ray_cluster_unavailable()


class Cluster(NetnsCluster):
    """Head + second raylet with per-raylet environments, inside a private net namespace with only lo."""

    def env(self, gpu_bin: Optional[Path] = None, **extra: str) -> Dict[str, str]:
        env = super().env(**extra)
        if gpu_bin:
            env["PATH"] = "%s:%s" % (gpu_bin, env["PATH"])
        return env

    def start(self) -> None:
        self.netns.touch()
        subprocess.run(["unshare", "--net=%s" % self.netns, "true"], check=True, timeout=30)
        self.ns_inode = os.stat(self.netns).st_ino
        head_gpu = self.tmp / "gpu-head"
        fake_smi(head_gpu, {"-q -x": RTX3090_590})
        worker_gpu = self.tmp / "gpu-worker"
        fake_smi(worker_gpu, {"-q -x": RTX3090_525})
        self.run("ip", "link", "set", "lo", "up", env=self.env())
        self.run("ray", "start", "--head", "--port=6379", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                 "--include-dashboard=false", "--disable-usage-stats", env=self.env(head_gpu))
        # The worker's raylet (and so every worker process it starts) sees another driver's nvidia-smi.
        self.run("ray", "start", "--address=127.0.0.1:6379", "--node-ip-address=127.0.0.2", "--num-cpus=1",
                 "--dashboard-agent-listen-port=52366", "--disable-usage-stats",
                 env=self.env(worker_gpu, RELAXREPRO_TEST_NODE="worker"))


DRIVER = textwrap.dedent("""
    import json, sys, time
    import ray
    import relaxrepro
    from relaxrepro.collect import node
    from relaxrepro.manifest.model import Manifest
    from relaxrepro.manifest.nodes import merge_fragments

    ray.init(address="127.0.0.1:6379", logging_level="ERROR")
    base = json.loads(sys.argv[1])
    m = relaxrepro.update_manifest(Manifest(base), per_node=True, deadline_s=90)

    def sleepy(run_id, node_id, role, deadline_s):
        # The worker node never answers; the head collects as usual.
        if role == "worker":
            time.sleep(600)
        return node._ray_task(run_id, node_id, role, deadline_s)

    t0 = time.monotonic()
    frags = node.collect_over_ray(ray, deadline_s=15, run_id=base["run_id"], task=sleepy)
    waited = time.monotonic() - t0
    print(json.dumps({"per_node": m, "slow": merge_fragments(base, frags), "waited": waited}))
""")


@pytest.fixture(scope="module")
def results():
    why = _unavailable()
    if why:
        pytest.skip(why)
    from tests.helpers.nodes import base_manifest

    cluster = Cluster()
    try:
        cluster.start()
        script = cluster.tmp / "driver.py"
        script.write_text(DRIVER)
        res = cluster.run(sys.executable, str(script), json.dumps(base_manifest("ray-run")),
                          env=cluster.env(), timeout=300)
        yield json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        cluster.stop()


def test_each_node_reports_through_its_own_ray_task(results):
    doc = results["per_node"]
    validate_manifest(doc)
    nodes = doc["runtime"]["nodes"]
    assert len(nodes) == 2 and "unresponsive_nodes" not in doc["runtime"]
    # Each report joined the entry ray.nodes() gave (by node id), not appended beside it.
    assert all(len(n["node_id"]) == 56 and n["alive"] is True for n in nodes)
    assert doc["runtime"]["mode"] == "multi_node_ray"
    by_role = {n["role"]: n for n in nodes}
    assert by_role["head"]["hardware"]["driver_version"] == "590.44.01"
    assert by_role["worker"]["hardware"]["driver_version"] == "525.147.05"
    assert by_role["head"]["name"] != by_role["worker"]["name"]  # same host, two raylets: two names
    fields = {e["field"]: e for e in doc["heterogeneity"]["fields"]}
    assert fields["hardware.driver_version"]["values"] == {
        "590.44.01": [by_role["head"]["name"]], "525.147.05": [by_role["worker"]["name"]]}
    assert fields["hardware.cuda_driver_version"]["counts"] == {"13.1": 1, "12.0": 1}


def test_a_node_that_never_answers_is_listed_within_the_deadline(results):
    doc = results["slow"]
    validate_manifest(doc)
    (missing,) = doc["runtime"]["unresponsive_nodes"]
    assert missing["role"] == "worker" and missing["reason"] == "no answer within 15.0 s"
    (answered,) = doc["runtime"]["nodes"]
    assert answered["hardware"]["driver_version"] == "590.44.01"
    assert 14 < results["waited"] < 45  # waited for the deadline, not for the sleeping task
