"""The trainer's arguments as a record: parsed from a command line, rendered from an args object."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import enum
import json
import pathlib
import types

import pytest

from relaxrepro.collect.arguments import MAX_DEPTH, MAX_ITEMS, MAX_STRING, parse_argv_args, parse_launcher_args, render

ARGV_CASES = [
    pytest.param(
        ["python", "train.py", "--tensor-model-parallel-size", "2", "--lr=3e-4", "--bf16"],
        {"tensor_model_parallel_size": 2, "lr": 3e-4, "bf16": True},
        id="megatron-style",
    ),
    pytest.param(
        ["torchrun", "--nproc-per-node", "8", "--nnodes=2", "train.py", "--seed", "1234"],
        {"seed": 1234},
        id="torchrun-launcher-args-left-out",
    ),
    pytest.param(
        ["python", "-m", "torch.distributed.run", "--nproc-per-node", "8", "train.py", "--seed", "7"],
        {"seed": 7},
        id="torch-distributed-run-module",
    ),
    pytest.param(
        ["python3", "-m", "slime.train", "--actor-num-gpus-per-node", "4", "--colocate"],
        {"actor_num_gpus_per_node": 4, "colocate": True},
        id="python-m-module",
    ),
    pytest.param(
        ["python", "train.py", "trainer.max_epochs=3", "+model.dropout=0.1", "++data.name=c4", "~callbacks"],
        {"trainer.max_epochs": 3, "model.dropout": 0.1, "data.name": "c4", "callbacks": None},
        id="hydra-overrides",
    ),
    pytest.param(
        ["python", "pretrain_gpt.py", "--data-path", "0.7", "/d/a_text_document", "0.3", "/d/b_text_document"],
        {"data_path": [0.7, "/d/a_text_document", 0.3, "/d/b_text_document"]},
        id="megatron-weighted-data-path",
    ),
    pytest.param(
        ["python", "train.py", "--use-flash-attn", "True", "--resume", "false", "--ckpt", "None"],
        {"use_flash_attn": True, "resume": False, "ckpt": None},
        id="bools-and-none",
    ),
    pytest.param(
        ["python", "train.py", "--warmup-offset", "-1", "--eps=-1e-8", "-v"],
        {"warmup_offset": -1, "eps": -1e-8, "v": True},
        id="negative-numbers-are-values",
    ),
    pytest.param(
        ["python", "train.py", "--lr", "1", "--lr", "2"],
        {"lr": 2},
        id="repeated-key-keeps-last",
    ),
    pytest.param(
        ["megatron-train", "--micro-batch-size", "4", "--", "--ignored-after-separator-is-kept", "x"],
        {"micro_batch_size": 4, "ignored_after_separator_is_kept": "x"},
        id="console-entry-point",
    ),
    pytest.param(
        ["python", "train.py", "--name", "run 1", "--version", "1.10", "--tag", "007"],
        {"name": "run 1", "version": 1.1, "tag": 7},
        id="values-typed-like-argparse-type-int-float",
    ),
    pytest.param([], {}, id="empty"),
    pytest.param(["python"], {}, id="interpreter-only"),
]


@pytest.mark.parametrize("argv, expected", ARGV_CASES)
def test_parse_argv_args(argv, expected):
    assert parse_argv_args(argv) == expected


def test_parse_argv_args_never_raises_on_odd_tokens():
    odd = ["python", "train.py", "-", "--", "=", "--=x", "---", "--a=b=c", "\udcff", "--k", "\x00"]
    out = parse_argv_args(odd)
    assert out["a"] == "b=c"
    json.dumps(out)


# -- rendering args objects -------------------------------------------------------------------------

class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Optim:
    name: str = "adam"
    betas: tuple = (0.9, 0.95)
    path: pathlib.Path = pathlib.PurePosixPath("/ckpt/opt")


class FakeTensor:
    """Stands in for a torch.Tensor: same module name, shape and dtype attributes, no torch needed."""

    __module__ = "torch"

    def __init__(self, shape, dtype):
        self.shape = shape
        self.dtype = dtype


def test_render_namespace_with_non_json_values():
    ns = argparse.Namespace(
        save=pathlib.PurePosixPath("/ckpt/run1"), color=Color.RED, level=Level.HIGH, sizes=(1, 2),
        optim=Optim(), weights=FakeTensor((2, 3), "torch.float32"), tags={"b", "a"}, raw=b"\x00\x01",
        lr=float("inf"), fn=len, obj=object(),
    )
    value, notes = render(ns)
    assert notes == []
    assert value == {
        "save": "/ckpt/run1", "color": "Color.RED", "level": "Level.HIGH", "sizes": [1, 2],
        "optim": {"name": "adam", "betas": [0.9, 0.95], "path": "/ckpt/opt"},
        "weights": "FakeTensor(shape=[2, 3], dtype=torch.float32)", "tags": ["a", "b"],
        "raw": "<bytes 2: b'\\x00\\x01'>", "lr": "inf", "fn": "<built-in function len>",
        "obj": "<object object>",  # no "at 0x...": the same args render the same on every run
    }
    json.dumps(value)


@pytest.mark.parametrize("make", [
    pytest.param(lambda: {"lr": 1, "nested": {"x": [1, 2]}}, id="dict"),
    pytest.param(lambda: collections.OrderedDict(lr=1, nested={"x": (1, 2)}), id="ordered-dict"),
    pytest.param(lambda: types.MappingProxyType({"lr": 1, "nested": {"x": [1, 2]}}), id="mapping-proxy"),
    pytest.param(lambda: types.SimpleNamespace(lr=1, nested=types.SimpleNamespace(x=[1, 2])), id="object-dict"),
])
def test_render_mappings_and_objects(make):
    value, notes = render(make())
    assert value == {"lr": 1, "nested": {"x": [1, 2]}}
    assert notes == []


class Hostile:
    """Every attribute access raises, like a lazy config whose backing store has gone away."""

    def __getattribute__(self, name):
        raise RuntimeError("config store closed")


class HostileProperty:
    def __init__(self):
        self.ok = 1

    @property
    def __dict__(self):
        raise KeyError("nope")


class BadStr:
    def __str__(self):
        raise ValueError("no str for you")


class BadItems(dict):
    def items(self):
        raise RuntimeError("interpolation failed: ${missing}")


@pytest.mark.parametrize("obj, expected, note", [
    pytest.param(Hostile(), "<error: RuntimeError: config store closed>", "args: unreadable", id="getattribute"),
    pytest.param(HostileProperty(), "<error: KeyError: 'nope'>", "args: unreadable", id="dict-property"),
    pytest.param({"a": BadStr()}, {"a": "<unprintable BadStr: ValueError: no str for you>"}, None, id="str"),
    pytest.param(BadItems(a=1), "<error: RuntimeError: interpolation failed: ${missing}>", "args: unreadable",
                 id="mapping-items"),
])
def test_render_objects_that_raise(obj, expected, note):
    value, notes = render(obj)
    assert value == expected
    if note:
        assert notes and notes[0].startswith(note)


def test_render_attribute_that_raises_keeps_the_rest():
    @dataclasses.dataclass
    class Args:
        lr: float = 0.1

        def __getattribute__(self, name):
            if name == "lr":
                raise AttributeError("lr is computed lazily and failed")
            return object.__getattribute__(self, name)

    value, _ = render(Args())
    assert value == {"lr": "<error: AttributeError: lr is computed lazily and failed>"}


def test_render_recursive_structures():
    d = {"a": 1}
    d["self"] = d
    lst = [1]
    lst.append(lst)
    ns = argparse.Namespace(d=d, lst=lst)
    ns.me = ns
    value, _ = render(ns)
    assert value == {"d": {"a": 1, "self": "<recursive>"}, "lst": [1, "<recursive>"], "me": "<recursive>"}


def test_render_shared_but_not_recursive_values_are_kept_twice():
    shared = {"x": 1}
    value, _ = render({"a": shared, "b": shared})
    assert value == {"a": {"x": 1}, "b": {"x": 1}}


def test_render_huge_values_are_cut_with_a_note():
    value, notes = render({"prompt": "x" * (MAX_STRING * 3), "ids": list(range(MAX_ITEMS + 10))})
    assert value["prompt"].startswith("x" * MAX_STRING + "<truncated: %d chars, sha256:" % (MAX_STRING * 3))
    assert value["ids"][-1] == "<truncated: 10 more items>"
    assert len(value["ids"]) == MAX_ITEMS + 1
    assert sorted(notes) == ["ids: kept %d of %d items" % (MAX_ITEMS, MAX_ITEMS + 10),
                             "prompt: cut from %d characters" % (MAX_STRING * 3)]


def test_render_deep_nesting_is_cut():
    deep: dict = {}
    node = deep
    for _ in range(MAX_DEPTH + 5):
        node["n"] = {}
        node = node["n"]
    value, notes = render(deep)
    depth = 0
    while isinstance(value, dict):
        value = value["n"]
        depth += 1
    assert value == "<too deep>"
    assert depth == MAX_DEPTH
    assert any("nested deeper" in n for n in notes)


def test_render_non_string_keys_and_scalars():
    value, _ = render({1: "a", (2, 3): "b", None: "c"})
    assert value == {"1": "a", "(2, 3)": "b", "None": "c"}
    assert render(5) == (5, [])


@pytest.mark.parametrize("argv,expected", [
    (["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "train.py", "--tp", "2"],
     ("torchrun", {"nnodes": 2, "nproc_per_node": 8})),
    (["python", "-m", "torch.distributed.launch", "--nproc_per_node=8", "-m", "pkg.train", "--lr", "1"],
     ("torchrun", {"nproc_per_node": 8})),
    (["srun", "--nodes", "2", "/opt/bin/torchrun", "--nnodes=2", "train.py"], ("torchrun", {"nnodes": 2})),
    (["accelerate", "launch", "--num_processes", "8", "train.py"], ("accelerate", {"num_processes": 8})),
    (["python", "train.py", "--world-size", "8"], (None, {})),
    (["megatron-train", "--tp", "2"], (None, {})),
    ([], (None, {})),
], ids=["torchrun", "python-m-launch", "srun-wrapped", "accelerate", "no-launcher", "entry-point", "empty"])
def test_launcher_options_before_the_script(argv, expected):
    assert parse_launcher_args(argv) == expected
