"""The training deriver: topology and batch sizes from resolved args or the recorded command, world
size from launcher / args / scheduler / Ray, and inconsistencies flagged, never fixed."""

from __future__ import annotations

import pytest

from relaxrepro.collect.probes import training
from relaxrepro.collect.probes.training import derive_training


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
        "data_parallel_source": "derived", "args_source": "argv",
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
