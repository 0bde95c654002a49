"""The training deriver: topology and batch sizes from resolved args or the recorded command, world
size from launcher / args / scheduler / Ray, and inconsistencies flagged, never fixed."""

from __future__ import annotations

import pytest

from relaxrepro.collect.probes import training
from relaxrepro.collect.probes.training import derive_training
from tests.helpers.common import generate


def doc(argv=(), resolved=None, launcher=None, scheduler=None, ray_gpus=None):
    d = {"command": {"argv": list(argv)}, "config": {}, "runtime": {}}
    if resolved is not None:
        d["config"]["resolved_args"] = resolved
    if launcher is not None:
        d["runtime"]["launcher"] = launcher
    if ray_gpus is not None:
        d["runtime"]["totals"] = {"GPU": ray_gpus}
    if scheduler is not None:
        d["scheduler"] = scheduler
    return d


MEGATRON = ["torchrun", "pretrain_gpt.py", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size",
            "4", "--context-parallel-size=2", "--expert-model-parallel-size", "8", "--global-batch-size", "1024",
            "--micro-batch-size", "1", "--use-distributed-optimizer", "--lr", "3e-4"]


def test_megatron_command_with_world_size_from_torchrun():
    got, _ = derive_training(doc(MEGATRON, launcher={"WORLD_SIZE": 128, "name": "torchrun"}))
    assert got == {
        "parallel_topology": {"tensor": 2, "pipeline": 4, "context": 2, "expert": 8, "data": 8},
        "global_batch_size": 1024, "micro_batch_size": 1, "world_size": 128, "world_size_source": "launcher",
        "world_size_from": "WORLD_SIZE", "data_parallel_source": "derived", "args_source": "argv",
        "topology_from": {"tensor": "tensor_model_parallel_size", "pipeline": "pipeline_model_parallel_size",
                          "context": "context_parallel_size", "expert": "expert_model_parallel_size",
                          "data": "world_size / (tensor x pipeline x context)"},
    }


@pytest.mark.parametrize("argv,topology", [
    (["--tp", "2", "--pp", "2", "--cp", "1", "--ep", "4", "--dp", "4"],
     {"tensor": 2, "pipeline": 2, "context": 1, "expert": 4, "data": 4}),
    (["--tp-size", "8", "--dp-size", "2"], {"tensor": 8, "data": 2}),
    (["--tensor-parallel-size", "4"], {"tensor": 4}),
], ids=["short-flags", "sglang-style", "vllm-style"])
def test_cli_spellings(argv, topology):
    got, _ = derive_training(doc(["train.py"] + argv))
    assert got["parallel_topology"] == topology
    assert "inconsistencies" not in got


def test_resolved_args_win_over_argv():
    got, _ = derive_training(doc(["--tp", "8"], resolved={"tensor_model_parallel_size": 2, "micro_batch_size": 4}))
    assert got["parallel_topology"] == {"tensor": 2} and got["args_source"] == "resolved_args"


def test_relax_algorithm_and_actor_world_size():
    argv = ["python", "train.py", "--advantage-estimator", "grpo", "--actor-num-nodes", "2",
            "--actor-num-gpus-per-node", "8", "--tensor-model-parallel-size", "4"]
    got, _ = derive_training(doc(argv, ray_gpus=24))
    assert got["algorithm"] == "grpo"
    assert (got["world_size"], got["world_size_source"]) == (16, "args")
    assert got["parallel_topology"]["data"] == 4


def test_world_size_from_scheduler_then_ray():
    sched = {"node_count": 2, "gpus_per_node": 8}
    got, _ = derive_training(doc(["--tp", "8"], scheduler=sched, ray_gpus=4))
    assert (got["world_size"], got["world_size_source"], got["parallel_topology"]["data"]) == (16, "scheduler", 2)
    got, _ = derive_training(doc(["--tp", "2"], ray_gpus=4))
    assert (got["world_size"], got["world_size_source"], got["parallel_topology"]["data"]) == (4, "ray", 2)


@pytest.mark.parametrize("argv,world,source,how,data", [
    (["python", "train.py", "--world-size", "8", "--tp", "2", "--pp", "2"], 8, "args", "world_size", 2),
    (["python", "train.py", "--world_size=8", "--tp", "2", "--pp", "2"], 8, "args", "world_size", 2),
    (["python", "train.py", "--tp", "2", "trainer.nnodes=2", "trainer.n_gpus_per_node=8"], 16, "args",
     "trainer.nnodes x trainer.n_gpus_per_node", 8),
    (["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "pretrain_gpt.py", "--tensor-model-parallel-size", "4"],
     16, "launcher", "torchrun --nnodes x --nproc-per-node", 4),
    (["torchrun", "--standalone", "--nproc_per_node=4", "train.py", "--tp", "2"], 4, "launcher",
     "torchrun --standalone x --nproc-per-node", 2),
    (["torchrun", "--nproc-per-node", "8", "train.py", "--tp", "2"], 8, "launcher",
     "torchrun --nnodes default 1 x --nproc-per-node", 4),
    (["python", "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=8", "-m", "pkg.train", "--tp", "4"],
     16, "launcher", "torchrun --nnodes x --nproc-per-node", 4),
    (["srun", "-N", "2", "torchrun", "--nnodes", "2", "--nproc-per-node", "8", "train.py", "--tp", "8"], 16,
     "launcher", "torchrun --nnodes x --nproc-per-node", 2),
    (["deepspeed", "--num_nodes", "2", "--num_gpus", "8", "train.py", "--tp", "2"], 16, "launcher",
     "deepspeed --num_nodes x --num_gpus", 8),
    (["accelerate", "launch", "--num_processes", "16", "--num_machines", "2", "train.py", "--tp", "2"], 16,
     "launcher", "accelerate --num_processes", 8),
    (["mpirun", "-np", "16", "-x", "NCCL_DEBUG", "python", "train.py", "--tp", "2"], 16, "launcher", "mpirun -np", 8),
], ids=["world-size", "world_size", "verl-hydra", "torchrun", "torchrun-standalone", "torchrun-one-node",
        "python-m-torch.distributed.run", "srun-torchrun", "deepspeed", "accelerate", "mpirun"])
def test_world_size_spellings(argv, world, source, how, data):
    got, _ = derive_training(doc(argv))
    assert (got["world_size"], got["world_size_source"], got["world_size_from"]) == (world, source, how)
    assert got["parallel_topology"]["data"] == data and got["data_parallel_source"] == "derived"
    assert "inconsistencies" not in got


@pytest.mark.parametrize("argv", [
    ["torchrun", "--nnodes", "1:4", "--nproc-per-node", "8", "train.py", "--tp", "2"],  # elastic: known at run time
    ["torchrun", "--nproc-per-node", "gpu", "train.py", "--tp", "2"],
    ["deepspeed", "--num_gpus", "8", "train.py", "--tp", "2"],  # nodes: all of a hostfile we do not read
    ["python", "train.py", "--tp", "2", "trainer.num_nodes=1", "trainer.devices=-1"],  # Lightning's "all"
    ["python", "train.py", "--tp", "2", "--world-size", "0"],
], ids=["torchrun-elastic", "nproc-gpu", "deepspeed-no-nodes", "lightning-all-devices", "zero"])
def test_world_size_not_stated_is_not_guessed(argv):
    got, _ = derive_training(doc(argv))
    assert "world_size" not in got and "data" not in got["parallel_topology"]


def test_torchrun_options_given_as_pet_variables():
    pet = {"PET_NNODES": 2, "PET_NPROC_PER_NODE": 8}
    got, _ = derive_training(doc(["torchrun", "train.py", "--tp", "2"], launcher=pet))
    assert (got["world_size"], got["world_size_from"]) == (16, "torchrun PET_NNODES x PET_NPROC_PER_NODE")
    got, _ = derive_training(doc(["torchrun", "--nproc-per-node", "4", "train.py", "--tp", "2"], launcher=pet))
    assert (got["world_size"], got["world_size_from"]) == (8, "torchrun PET_NNODES x --nproc-per-node")
    got, _ = derive_training(doc(["bash", "run.sh", "--tp", "2"], launcher=pet))
    assert (got["world_size"], got["world_size_from"]) == (16, "PET_NNODES x PET_NPROC_PER_NODE")


def test_world_size_sources_in_order():
    argv = ["torchrun", "--nnodes", "4", "--nproc-per-node", "8", "train.py", "--world-size", "16", "--tp", "2"]
    sched = {"node_count": 8, "gpus_per_node": 8}
    got, _ = derive_training(doc(argv, launcher={"WORLD_SIZE": 64}, scheduler=sched, ray_gpus=128))
    assert (got["world_size"], got["world_size_source"]) == (64, "launcher")  # this process's own WORLD_SIZE
    got, _ = derive_training(doc(argv, scheduler=sched, ray_gpus=128))
    assert (got["world_size"], got["world_size_source"]) == (16, "args")
    got, _ = derive_training(doc(argv[:5] + ["train.py", "--tp", "2"], scheduler=sched, ray_gpus=128))
    assert (got["world_size"], got["world_size_source"]) == (32, "launcher")
    got, _ = derive_training(doc(["python", "train.py", "--tp", "2"], scheduler=sched, ray_gpus=128))
    assert (got["world_size"], got["world_size_from"]) == (64, "node_count x gpus_per_node")


def test_expert_parallel_does_not_divide_the_world():
    got, _ = derive_training(doc(["train.py", "--world-size", "16", "--tp", "2", "--pp", "2", "--ep", "8"]))
    assert got["parallel_topology"] == {"tensor": 2, "pipeline": 2, "expert": 8, "data": 4}
    assert "inconsistencies" not in got


def test_generate_records_world_size_and_data_parallel_from_the_args(tmp_path):
    doc_ = generate(tmp_path, command=["python", "train.py", "--world-size", "8", "--tp", "2", "--pp", "2"])
    assert doc_["training"]["parallel_topology"] == {"tensor": 2, "pipeline": 2, "data": 2}
    assert (doc_["training"]["world_size"], doc_["training"]["world_size_from"]) == (8, "world_size")
    assert doc_["training"]["topology_from"] == {"tensor": "tp", "pipeline": "pp",
                                                 "data": "world_size / (tensor x pipeline x context)"}


def test_world_size_not_divisible_is_flagged_and_data_not_derived():
    got, _ = derive_training(doc(["--tp", "3"], launcher={"WORLD_SIZE": 8}))
    assert got["inconsistencies"] == ["world size 8 is not divisible by TP*PP*CP = 3*1*1 = 3"]
    assert "data" not in got["parallel_topology"]


def test_given_data_parallel_that_contradicts_world_size_is_kept_and_flagged():
    got, _ = derive_training(doc(["--tp", "2", "--dp", "2"], launcher={"WORLD_SIZE": 8}))
    assert got["parallel_topology"]["data"] == 2 and got["data_parallel_source"] == "args"
    assert got["inconsistencies"] == ["data parallel 2 x TP*PP*CP 2 = 4, but the world size is 8 (launcher)"]


def test_global_batch_not_divisible_by_micro_times_dp():
    got, _ = derive_training(doc(["--tp", "1", "--global-batch-size", "30", "--micro-batch-size", "4"],
                                 launcher={"WORLD_SIZE": 2}))
    assert got["inconsistencies"] == [
        "global batch size 30 is not divisible by micro batch size x data parallel = 4 x 2"]


def test_zero_parallel_size_is_flagged():
    got, _ = derive_training(doc(["--tp", "0"]))
    assert got["inconsistencies"] == ["tensor parallel size is 0; it must be at least 1"]


@pytest.mark.parametrize("argv", [[], ["python", "train.py", "--lr", "3e-4"], ["--tp", "two"]],
                         ids=["no-command", "no-topology-args", "non-numeric"])
def test_nothing_recognised_gives_an_empty_section(argv):
    got, _ = derive_training(doc(argv, launcher={"WORLD_SIZE": 8}))
    assert got == {}
    assert training.derive(doc(argv), None).status == "absent"


def test_malformed_document_does_not_crash():
    got, _ = derive_training({"command": "x", "config": [], "runtime": None, "scheduler": 3})
    assert got == {}
