"""SLURM job and launcher variables, from recorded environments of SLURM, torchrun, accelerate,
deepspeed and Open MPI jobs (``tests/fixtures/scheduler/*.json``: env + expected)."""

from __future__ import annotations

import json

import pytest

from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import scheduler
from tests.helpers.common import FIXTURES, clean_env, generate

CASES = sorted((FIXTURES / "scheduler").glob("*.json"))


def test_found_the_recorded_jobs():
    assert len(CASES) >= 7


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_recorded_job_environment(path):
    case = json.loads(path.read_text())
    assert scheduler.parse_slurm(case["env"]) == case["expected"]["scheduler"]
    assert scheduler.parse_launcher(case["env"]) == case["expected"]["launcher"]
    out = scheduler.collect(Context(env=case["env"]))
    assert out.data.get("scheduler", {}) == case["expected"]["scheduler"]


@pytest.mark.parametrize("nodelist,count", [
    ("node042", 1),
    ("gpu-[017-018]", 2),
    ("dgx[01-03,07]", 4),
    ("gpu-[001-004,007],cpu01", 6),
    ("rack[1-2]-n[01-04]", 8),
    ("a,b,c", 3),
    ("gpu-[004-001]", None),
    ("gpu-[01-x]", None),
    ("gpu-[01-02", None),
    ("", None),
])
def test_nodelist_count(nodelist, count):
    assert scheduler.count_nodelist(nodelist) == count


@pytest.mark.parametrize("spec,count", [("8", 8), ("h100:8", 8), ("gpu:a100:4", 4), ("4(x2)", 4), ("h100", None)])
def test_gpus_per_node(spec, count):
    assert scheduler.parse_gpus_per_node(spec) == count


def test_no_scheduler_no_launcher_is_absent():
    out = scheduler.collect(Context(env={"PATH": "/usr/bin", "HOME": "/root"}))
    assert out.status == "absent" and out.data == {}


def test_unreadable_numbers_are_left_out_not_guessed():
    env = {"SLURM_JOB_ID": "12", "SLURM_NTASKS": "many", "SLURM_JOB_NUM_NODES": "", "WORLD_SIZE": "x", "RANK": "0"}
    assert scheduler.parse_slurm(env) == {"type": "slurm", "job_id": "12"}
    assert scheduler.parse_launcher(env) == {"RANK": 0}


@pytest.mark.parametrize("per_node,tasks,gpus", [("many", "8(x2),4", "x"), ("", "(x2)", "-1"), ("8", "", "4.5")])
def test_unreadable_tasks_and_gpus_per_node_are_left_out_not_guessed(per_node, tasks, gpus):
    env = {"SLURM_JOB_ID": "12", "SLURM_NTASKS_PER_NODE": per_node, "SLURM_TASKS_PER_NODE": tasks,
           "SLURM_GPUS_ON_NODE": gpus}
    out = scheduler.parse_slurm(env)
    assert "gpus_on_node" not in out
    assert out.get("ntasks_per_node") == (8 if per_node == "8" else None)


def test_torchrun_options_as_pet_variables():
    env = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "8", "PATH": "/usr/bin"}
    assert scheduler.parse_launcher(env) == {"PET_NNODES": 2, "PET_NPROC_PER_NODE": 8}
    assert scheduler.parse_launcher({"PET_NNODES": "1:4", "PET_NPROC_PER_NODE": "gpu"}) == {}


def test_generate_records_slurm_and_torchrun(tmp_path):
    case = json.loads((FIXTURES / "scheduler" / "slurm_torchrun_4node.json").read_text())
    env = clean_env(**case["env"])
    env["RANK"] = "0"  # only rank 0 writes
    doc = generate(tmp_path, env=env, command=["python", "pretrain_gpt.py", "--tensor-model-parallel-size", "4",
                                               "--pipeline-model-parallel-size", "2"])
    assert doc["scheduler"]["job_id"] == "777001" and doc["scheduler"]["nodelist_count"] == 4
    assert doc["runtime"]["launcher"]["name"] == "torchrun" and doc["runtime"]["launcher"]["WORLD_SIZE"] == 32
    assert doc["training"]["parallel_topology"] == {"tensor": 4, "pipeline": 2, "data": 4}
    assert doc["training"]["world_size_source"] == "launcher"
