"""The seeds section: seeds, determinism switches, and a plain bit-reproducibility verdict."""

from __future__ import annotations

import os
import sys
import types

import pytest

from relaxrepro.api import collect_manifest
from relaxrepro.collect.probes.seeds import assess, torch_state
from tests.helpers.common import clean_env, generate, validate_manifest

DETERMINISTIC_ENV = {"PYTHONHASHSEED": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


def test_fully_pinned_run_is_bit_reproducible():
    section = assess({"seed": 1, "deterministic": True}, DETERMINISTIC_ENV)
    assert section == {
        "values": {"seed": 1},
        "env": {"PYTHONHASHSEED": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        "flags": {"deterministic": True},
        "bit_reproducible": True,
        "missing": [],
    }


def test_nothing_pinned_says_what_is_missing():
    section = assess({"lr": 1}, {})
    assert section["bit_reproducible"] is False
    assert section["missing"] == [
        "no seed in the resolved arguments (seed, random_seed, data_seed, *_seed)",
        "PYTHONHASHSEED is not set: str hashes (set order, hash-based sharding) differ per process",
        "CUBLAS_WORKSPACE_CONFIG is not :4096:8 or :16:8: cuBLAS may reduce in a varying order",
        "deterministic algorithms not enabled (torch.use_deterministic_algorithms(True) or a --deterministic flag)",
    ]


def test_seeds_found_by_name_nested_and_dotted():
    args = {"seed": 1, "data_seed": 2, "trainer": {"sampler_seed": 3}, "model.init_seed": 4, "seeds": [1, 2],
            "seedless": 5}
    assert assess(args, {})["values"] == {"seed": 1, "data_seed": 2, "trainer.sampler_seed": 3,
                                          "model.init_seed": 4}


def test_seed_argument_left_unset_is_missing():
    section = assess({"seed": None, "deterministic": True}, DETERMINISTIC_ENV)
    assert section["missing"] == ["seed argument left unset: seed"]


@pytest.mark.parametrize("env", [
    pytest.param({"TORCH_DETERMINISTIC": "1"}, id="torch-deterministic-env"),
    pytest.param({"TORCH_USE_DETERMINISTIC_ALGORITHMS": "true"}, id="use-deterministic-env"),
])
def test_deterministic_env_switches_count(env):
    section = assess({"seed": 1}, dict(DETERMINISTIC_ENV, **env))
    assert section["bit_reproducible"] is True
    assert set(env) <= set(section["env"])


def test_cudnn_benchmark_flag_breaks_it():
    section = assess({"seed": 1, "deterministic": True, "cudnn_benchmark": True}, DETERMINISTIC_ENV)
    assert section["missing"] == ["cuDNN benchmark mode is on: autotuning may pick different kernels each run"]


def test_multi_rank_run_needs_nccl_pinned():
    section = assess({"seed": 1, "deterministic": True}, DETERMINISTIC_ENV, world_size=16)
    assert section["missing"] == ["NCCL_ALGO and NCCL_PROTO are not both pinned: with 16 ranks NCCL may pick "
                                  "another reduction order on another topology"]
    pinned = dict(DETERMINISTIC_ENV, NCCL_ALGO="Ring", NCCL_PROTO="Simple")
    assert assess({"seed": 1, "deterministic": True}, pinned, world_size=16)["bit_reproducible"] is True


def _fake_torch(deterministic: bool, benchmark: bool, cudnn_det: bool = False) -> types.ModuleType:
    """What the trainer's already-imported torch answers (torch itself is not a test dependency)."""
    torch = types.ModuleType("torch")
    torch.are_deterministic_algorithms_enabled = lambda: deterministic
    torch.is_deterministic_algorithms_warn_only_enabled = lambda: False
    torch.backends = types.SimpleNamespace(
        cudnn=types.SimpleNamespace(deterministic=cudnn_det, benchmark=benchmark, allow_tf32=True),
        cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)),
    )
    return torch


def test_torch_state_reads_only_an_imported_torch():
    assert torch_state({}) is None
    assert torch_state({"torch": _fake_torch(True, False)}) == {
        "deterministic_algorithms": True, "deterministic_algorithms_warn_only": False,
        "cudnn_deterministic": False, "cudnn_benchmark": False, "tf32_matmul": False, "tf32_cudnn": True}


def test_torch_state_survives_a_broken_torch():
    broken = types.ModuleType("torch")  # half-imported: no attributes at all
    assert torch_state({"torch": broken}) == {}


def test_api_inside_the_trainer_reads_torch_and_its_verdict(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(deterministic=True, benchmark=True))
    monkeypatch.chdir(tmp_path)
    env = dict(DETERMINISTIC_ENV, PATH=os.environ.get("PATH", ""), HOME=str(tmp_path))
    m = collect_manifest({"seed": 42}, argv=["python", "train.py"], env=env)
    validate_manifest(m)
    seeds = m["seeds"]
    assert seeds["torch"]["deterministic_algorithms"] is True
    assert seeds["missing"] == ["cuDNN benchmark mode is on: autotuning may pick different kernels each run"]
    assert seeds["bit_reproducible"] is False


def test_api_never_imports_torch(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.chdir(tmp_path)
    m = collect_manifest({"seed": 42}, argv=["python", "train.py"], env={"HOME": str(tmp_path)})
    assert "torch" not in sys.modules
    assert "torch" not in m["seeds"]


def test_cli_seeds_from_the_command(tmp_path):
    env = clean_env(PYTHONHASHSEED="0", CUBLAS_WORKSPACE_CONFIG=":16:8", NVIDIA_TF32_OVERRIDE="0")
    doc = generate(tmp_path, env=env, command=["python", "train.py", "--seed", "7", "--deterministic"])
    assert doc["seeds"]["values"] == {"seed": 7}
    assert doc["seeds"]["env"] == {"PYTHONHASHSEED": "0", "CUBLAS_WORKSPACE_CONFIG": ":16:8",
                                   "NVIDIA_TF32_OVERRIDE": "0"}
    assert doc["seeds"]["bit_reproducible"] is True
    assert "torch" not in doc["seeds"]


def test_no_command_no_switches_no_seeds_section(tmp_path):
    doc = generate(tmp_path, env=clean_env())
    assert "seeds" not in doc
