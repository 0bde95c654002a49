"""In-process Ray: ``ray_parse.runtime_from_ray_nodes`` on real ``ray.nodes()`` captures, and ``update_manifest``
(never imports Ray, never raises). The real driver is exercised in test_ray_cluster.py."""

from __future__ import annotations

import json
import sys
import types

import pytest

from relaxrepro import api
from relaxrepro.collect.assemble import build
from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import ray_parse
from relaxrepro.manifest.model import Manifest
from tests.helpers.common import validate_manifest
from tests.helpers.ray import RAY_FIXTURES


def nodes(name: str):
    return json.loads((RAY_FIXTURES / name).read_text())


@pytest.mark.parametrize("name", ["ray_nodes_api_2node.json", "ray_nodes_api_2node_2.9.3.json"],
                         ids=["ray-2.60-two-nodes", "ray-2.9.3-two-nodes"])
def test_head_is_found_by_the_internal_head_resource(name):
    data = nodes(name)
    assert not any("IsHeadNode" in n for n in data)  # the key code often relies on does not exist
    got = ray_parse.runtime_from_ray_nodes(data, None, "2.60.0")
    assert got["mode"] == "multi_node_ray" and got["node_count"] == 2
    head, worker = got["nodes"]
    assert (head["role"], head["address"]) == ("head", "127.0.0.1")
    assert (worker["role"], worker["address"]) == ("worker", "127.0.0.2")
    assert worker["resources"]["accelerator_type:H100"] == 1 and worker["resources"]["GPU"] == 1
    assert got["ray"] == {"version": "2.60.0", "source": "api"}


def test_cluster_resources_become_totals():
    res = json.loads((RAY_FIXTURES / "ray_cluster_resources_2node.json").read_text())["cluster_resources"]
    got = ray_parse.runtime_from_ray_nodes(nodes("ray_nodes_api_2node.json"), res, "2.60.0")
    assert got["totals"] == {"CPU": 3, "GPU": 1, "accelerator_type:H100": 1, "memory_gb": 32.41,
                             "object_store_memory_gb": 13.89}


def test_dead_worker_from_ray_nodes():
    got = ray_parse.runtime_from_ray_nodes(nodes("ray_nodes_api_2node_worker_dead.json"), None, "2.60.0")
    assert got["mode"] == "single_node_ray" and got["node_count"] == 1
    [dead] = got["dead_nodes"]
    assert dead["alive"] is False and dead["state_message"] == "received SIGTERM"


def test_single_node():
    got = ray_parse.runtime_from_ray_nodes(nodes("ray_nodes_api.json"), {}, "2.60.0")
    assert got["mode"] == "single_node_ray" and got["nodes"][0]["role"] == "head"


@pytest.fixture
def base_manifest(tmp_path):
    ctx = Context(env={"PATH": "/usr/bin", "HOME": str(tmp_path)}, cwd=str(tmp_path),
                  argv=["train.py", "--tensor-model-parallel-size", "1"], argv_source="api", root=str(tmp_path))
    return build(ctx)


class FakeRay(types.ModuleType):
    """Stands in for an imported, initialised ``ray`` module, answering with captured data."""

    def __init__(self, initialized=True, fail=False):
        super().__init__("ray")
        self.__version__ = "2.60.0"
        self._init, self._fail = initialized, fail

    def is_initialized(self):
        return self._init

    def nodes(self):
        if self._fail:
            raise RuntimeError("GCS went away")
        return nodes("ray_nodes_api_2node.json")

    def cluster_resources(self):
        return json.loads((RAY_FIXTURES / "ray_cluster_resources_2node.json").read_text())["cluster_resources"]


@pytest.fixture
def fake_ray(monkeypatch):
    def install(**kw):
        mod = FakeRay(**kw)
        monkeypatch.setitem(sys.modules, "ray", mod)
        return mod
    return install


def test_update_manifest_merges_live_topology_and_rederives_training(base_manifest, fake_ray):
    assert base_manifest["runtime"]["mode"] == "local"
    assert "world_size" not in base_manifest["training"]
    fake_ray()
    m = api.update_manifest(base_manifest)
    assert isinstance(m, Manifest)
    validate_manifest(m)
    assert m["runtime"]["mode"] == "multi_node_ray" and m["runtime"]["ray"]["source"] == "api"
    assert [n["role"] for n in m["runtime"]["nodes"]] == ["head", "worker"]
    assert m["training"]["world_size"] == 1 and m["training"]["world_size_source"] == "ray"
    assert m["training"]["parallel_topology"] == {"tensor": 1, "data": 1}


def test_update_manifest_without_ray_returns_it_unchanged_and_imports_nothing(base_manifest, monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    assert api.update_manifest(base_manifest) is base_manifest
    assert "ray" not in sys.modules
    assert api.update_manifest(None) is None


def test_update_manifest_before_ray_init_is_a_no_op(base_manifest, fake_ray):
    fake_ray(initialized=False)
    assert api.update_manifest(base_manifest) is base_manifest


def test_update_manifest_never_raises(base_manifest, fake_ray, caplog):
    fake_ray(fail=True)
    assert api.update_manifest(base_manifest) is base_manifest
    assert "GCS went away" in caplog.text
