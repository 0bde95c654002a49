"""The config section: resolved arguments (API, --args-json, command), selected env, config files, hash."""

from __future__ import annotations

import argparse
import json
import os
import pathlib

import pytest

from relaxrepro.api import collect_manifest
from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import config
from tests.helpers.common import clean_env, generate, run_cli, validate_manifest
from tests.helpers.config import run_unprivileged


def _api(tmp_path, monkeypatch, args, **kw):
    monkeypatch.chdir(tmp_path)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home")}
    env.update(kw.pop("env", {}))
    m = collect_manifest(args, argv=kw.pop("argv", ["python", "train.py"]), env=env, **kw)
    assert m is not None
    validate_manifest(m)
    return m


def _probe(tmp_path, argv=(), env=None, **options):
    ctx = Context(env=env or {}, cwd=str(tmp_path), argv=argv, argv_source="cli", options=options)
    return config.collect(ctx)


# -- resolved arguments ------------------------------------------------------------------------------

def test_api_namespace_is_recorded_as_the_trainer_parsed_it(tmp_path, monkeypatch):
    args = argparse.Namespace(lr=3e-4, seed=1234, save=pathlib.PurePosixPath("/ckpt/run"), sizes=(1, 2))
    m = _api(tmp_path, monkeypatch, args, argv=["python", "train.py", "--lr", "1"])
    assert m["config"]["resolved_args"] == {"lr": 3e-4, "seed": 1234, "save": "/ckpt/run", "sizes": [1, 2]}
    assert m["config"]["resolved_args_source"] == "api"
    assert m["collection"]["probes"]["config"]["status"] == "ok"


def test_api_args_that_raise_on_access_still_give_a_manifest(tmp_path, monkeypatch):
    class Exploding:
        def __getattribute__(self, name):
            raise RuntimeError("boom")

    m = _api(tmp_path, monkeypatch, argparse.Namespace(good=1, bad=Exploding()))
    assert m["config"]["resolved_args"] == {"good": 1, "bad": "<error: RuntimeError: boom>"}
    entry = m["collection"]["probes"]["config"]
    assert entry["status"] == "partial"
    assert entry["warnings"] == ["resolved_args: bad: unreadable (RuntimeError: boom)"]


def test_api_recursive_args(tmp_path, monkeypatch):
    args = {"model": {"layers": 2}}
    args["model"]["parent"] = args
    m = _api(tmp_path, monkeypatch, args)
    assert m["config"]["resolved_args"] == {"model": {"layers": 2, "parent": "<recursive>"}}


def test_api_huge_value_is_truncated_with_a_note(tmp_path, monkeypatch):
    m = _api(tmp_path, monkeypatch, {"system_prompt": "y" * 200_000})
    value = m["config"]["resolved_args"]["system_prompt"]
    assert len(value) < 5000 and "<truncated: 200000 chars, sha256:" in value
    assert "resolved_args: system_prompt: cut from 200000 characters" in \
        m["collection"]["probes"]["config"]["warnings"]


def test_api_non_mapping_args_are_kept_under_value(tmp_path, monkeypatch):
    m = _api(tmp_path, monkeypatch, ["--lr", "1"])
    assert m["config"]["resolved_args"] == {"value": ["--lr", "1"]}


def test_command_is_parsed_when_no_args_are_given(tmp_path):
    doc = generate(tmp_path, env=clean_env(), command=["python", "train.py", "--tensor-model-parallel-size", "2",
                                                        "--bf16", "trainer.max_epochs=3"])
    assert doc["config"]["resolved_args"] == {"tensor_model_parallel_size": 2, "bf16": True,
                                              "trainer.max_epochs": 3}
    assert doc["config"]["resolved_args_source"] == "argv"


def test_no_command_no_args(tmp_path):
    doc = generate(tmp_path, env=clean_env())
    assert doc["config"]["resolved_args"] == {}
    assert doc["config"]["resolved_args_source"] == "none"


def test_args_json_wins_over_the_command(tmp_path):
    f = tmp_path / "args.json"
    f.write_text(json.dumps({"lr": 0.1, "nested": {"seed": 3}}))
    doc = generate(tmp_path, "--args-json", str(f), env=clean_env(), command=["python", "train.py", "--lr", "9"])
    assert doc["config"]["resolved_args"] == {"lr": 0.1, "nested": {"seed": 3}}
    assert doc["config"]["resolved_args_source"] == "args_json"


@pytest.mark.parametrize("content, message", [
    pytest.param(None, "no such file or directory", id="missing"),
    pytest.param(b"{lr: 1", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2",
                 id="invalid-json"),
    pytest.param(b'{"lr": NaN}', "not valid JSON: NaN literal is not allowed (JSON has no NaN) in 'lr'", id="nan"),
    pytest.param(b'{"model": {"seed": ' + b"7" * 5000 + b"}}",
                 "integer of 5000 digits is longer than the 4300 allowed in 'model.seed'", id="huge-int"),
    pytest.param(b'{"x": "' + b"y" * (16 << 20) + b'"}', "over 16 MB: not an argument file", id="over-16-mb"),
    pytest.param(b"[1, 2]", "expected a JSON object of argument names, got list", id="not-an-object"),
    pytest.param(b"\xff\xfe{}", "not UTF-8 text", id="not-utf8"),
])
def test_bad_args_json_is_a_usage_error_and_writes_nothing(tmp_path, content, message):
    f = tmp_path / "args.json"
    if content is not None:
        f.write_bytes(content)
    res = run_cli("generate", "--output-dir", str(tmp_path), "--args-json", str(f), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "relaxrepro generate: error: --args-json %s: %s\n" % (f, message)
    assert not list(tmp_path.glob("manifest_*"))


def test_args_json_that_is_a_directory(tmp_path):
    res = run_cli("generate", "--output-dir", str(tmp_path), "--args-json", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "relaxrepro generate: error: --args-json %s: is a directory\n" % tmp_path
    assert not list(tmp_path.glob("manifest_*"))


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs, /dev/zero")
@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero"])
def test_args_json_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path, kind):
    # A FIFO made generate wait forever in open(); /dev/zero was read for 16 MB of NULs.
    f = tmp_path / "args.json"
    if kind == "fifo":
        os.mkfifo(str(f))
    else:
        f.symlink_to("/dev/zero")
    res = run_cli("generate", "--output-dir", str(tmp_path), "--args-json", str(f), cwd=tmp_path)  # timeout: guard
    assert res.returncode == 2
    assert res.stderr == "relaxrepro generate: error: --args-json %s: not a regular file\n" % f
    assert not list(tmp_path.glob("manifest_*"))


def test_args_json_through_a_symlink_to_a_regular_file_is_read(tmp_path):
    (tmp_path / "real.json").write_text(json.dumps({"lr": 0.5}))
    (tmp_path / "args.json").symlink_to("real.json")
    doc = generate(tmp_path, "--args-json", str(tmp_path / "args.json"), env=clean_env())
    assert doc["config"]["resolved_args"] == {"lr": 0.5}


# -- selected environment ----------------------------------------------------------------------------

def test_selected_env_keeps_only_allow_listed_prefixes():
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO", "PYTHONHASHSEED": "0", "HOME": "/h",
           "AWS_SECRET_ACCESS_KEY": "x", "PYTHONPATH": "/p", "MY_NCCL_THING": "1", "WANDB_PROJECT": "p",
           "OMP_NUM_THREADS": "8", "VLLM_USE_V1": "1", "NVTE_FLASH_ATTN": "1"}
    assert config.select_env(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO", "PYTHONHASHSEED": "0",
                                      "WANDB_PROJECT": "p", "OMP_NUM_THREADS": "8", "VLLM_USE_V1": "1",
                                      "NVTE_FLASH_ATTN": "1"}


def test_env_prefix_extends_the_allow_list(tmp_path):
    env = clean_env(MYLAB_QUEUE="a100", OTHER="no", NCCL_IB_HCA="mlx5")
    doc = generate(tmp_path, "--env-prefix", "MYLAB_", "--env-prefix", "XLA_", env=env)
    assert doc["config"]["selected_env"] == {"MYLAB_QUEUE": "a100", "NCCL_IB_HCA": "mlx5",
                                             "RAY_USAGE_STATS_ENABLED": "0"}  # set by clean_env


def test_selected_env_values_go_through_redaction(tmp_path, monkeypatch):
    home = str(tmp_path / "home")
    m = _api(tmp_path, monkeypatch, {}, env={"HF_HOME": home + "/hf"})
    assert m["config"]["selected_env"] == {"HF_HOME": "<HOME>/hf"}


# -- config files ------------------------------------------------------------------------------------

def test_small_text_config_is_inlined(tmp_path):
    (tmp_path / "c.yaml").write_text("lr: 0.1\n")
    out = _probe(tmp_path, ["python", "train.py", "--config", "c.yaml"])
    assert out.status == "ok"
    cfg = out.data["config"]
    assert cfg["files"] == {"c.yaml": "sha256:d245e06b9b1158bf71d1c6061882569148a7b6a2ff201e885d55f1dd0cfae70a"}
    assert cfg["file_details"] == {"c.yaml": {"size": 8}}
    assert cfg["file_contents"] == {"c.yaml": "lr: 0.1\n"}


def test_config_sha256_is_the_files_sha256(tmp_path):
    import hashlib

    body = b"a: 1\n" * 3000  # 15 KB: over the inline limit
    (tmp_path / "big.yml").write_bytes(body)
    entry = config.describe_file("big.yml", str(tmp_path))
    assert entry == {"path": "big.yml", "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}


@pytest.mark.parametrize("body", [
    pytest.param(b"\x00\x01\x02binary", id="nul-bytes"),
    pytest.param(b"\xff\xfe\xfd not utf-8", id="not-utf8"),
])
def test_binary_config_is_hashed_not_inlined(tmp_path, body):
    (tmp_path / "c.json").write_bytes(body)
    entry = config.describe_file("c.json", str(tmp_path))
    assert entry["binary"] is True and "content" not in entry and len(entry["sha256"]) == 64


def test_explicit_config_that_does_not_exist(tmp_path):
    out = _probe(tmp_path, ["python", "train.py", "--config=missing.yaml"])
    assert out.data["config"]["files"] == {}  # no digest: only its details say why
    assert out.data["config"]["file_details"] == {"missing.yaml": {"error": "no such file or directory"}}
    assert "file_contents" not in out.data["config"]
    assert out.status == "partial"
    assert out.warnings == ["config file missing.yaml: no such file or directory"]


def test_config_that_is_a_directory_or_a_fifo_never_blocks(tmp_path):
    (tmp_path / "conf.yaml").mkdir()
    os.mkfifo(str(tmp_path / "pipe.json"))
    out = _probe(tmp_path, ["python", "train.py", "--config", "conf.yaml", "--model-config", "pipe.json"])
    assert out.data["config"]["file_details"] == {"conf.yaml": {"error": "is a directory"},
                                                  "pipe.json": {"error": "not a regular file"}}


def test_unreadable_config_is_listed_not_fatal(shared_tmp):
    cfg = shared_tmp / "secret.yaml"
    cfg.write_text("lr: 1\n")
    cfg.chmod(0o000)
    out = shared_tmp / "m.json"
    res = run_unprivileged("generate", "--output", str(out), "--", "python", "train.py", "--config", str(cfg),
                           cwd=shared_tmp, env={})
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    validate_manifest(doc)
    assert doc["config"]["files"] == {}
    assert doc["config"]["file_details"] == {str(cfg): {"size": 6, "error": "permission denied"}}
    assert "config file %s: permission denied" % cfg in doc["collection"]["probes"]["config"]["warnings"]


@pytest.mark.parametrize("argv", [["sh", "-c", "echo out; kill -TERM $$"], ["/bin/bash", "-e", "-c", "exit 3"],
                                  ["python3.11", "-c", "print(1)"]],
                         ids=["sh-c", "bash-e-c", "python3.11-c"])
def test_a_shell_or_python_program_after_c_is_not_a_config(tmp_path, argv):
    # `relaxrepro run -- sh -c '...'` once warned "config file echo out; kill -TERM $$: no such file".
    out = _probe(tmp_path, argv)
    assert out.data["config"]["files"] == {} and out.status == "ok" and out.warnings == []


def test_c_after_the_script_is_the_scripts_config(tmp_path):
    out = _probe(tmp_path, ["python", "train.py", "-c", "missing.yaml"])
    assert out.data["config"]["file_details"] == {"missing.yaml": {"error": "no such file or directory"}}


def test_output_like_json_args_that_do_not_exist_are_not_configs(tmp_path):
    out = _probe(tmp_path, ["python", "train.py", "--save-metrics", "metrics.json", "--seed", "1"])
    assert out.data["config"]["files"] == {} and "file_details" not in out.data["config"]
    assert out.status == "ok"


def test_hydra_config_path_and_name(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("epochs: 1\n")
    (tmp_path / "conf" / "data.yaml").write_text("name: c4\n")
    out = _probe(tmp_path, ["python", "train.py", "--config-path", "conf", "--config-name", "train",
                            "data.config=conf/data.yaml"])
    assert list(out.data["config"]["files"]) == ["conf/data.yaml", "conf/train.yaml"]


def test_positional_config_and_config_in_api_args(tmp_path):
    (tmp_path / "a.yaml").write_text("a: 1\n")
    (tmp_path / "b.toml").write_text("b = 1\n")
    ctx = Context(env={}, cwd=str(tmp_path), argv=["python", "train.py", "a.yaml"], argv_source="api",
                  options={"args": {"model": {"config_file": "b.toml"}}})
    out = config.collect(ctx)
    assert list(out.data["config"]["files"]) == ["a.yaml", "b.toml"]


def test_config_content_goes_through_redaction(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (tmp_path / "c.yaml").write_text("data: %s/datasets/c4\n" % home)
    m = _api(tmp_path, monkeypatch, {"config": "c.yaml"})
    assert m["config"]["file_contents"] == {"c.yaml": "data: <HOME>/datasets/c4\n"}


# -- the hash ----------------------------------------------------------------------------------------

def test_hash_is_stable_and_follows_args_env_and_files(tmp_path):
    (tmp_path / "c.yaml").write_text("lr: 1\n")
    argv = ["python", "train.py", "--config", "c.yaml"]
    first = _probe(tmp_path, argv, env={"NCCL_ALGO": "Ring"}).data["config"]["hash"]
    assert first.startswith("sha256:") and len(first) == 71
    assert _probe(tmp_path, argv, env={"NCCL_ALGO": "Ring"}).data["config"]["hash"] == first
    assert _probe(tmp_path, argv, env={"NCCL_ALGO": "Tree"}).data["config"]["hash"] != first
    assert _probe(tmp_path, argv + ["--lr", "2"], env={"NCCL_ALGO": "Ring"}).data["config"]["hash"] != first
    (tmp_path / "c.yaml").write_text("lr: 2\n")
    assert _probe(tmp_path, argv, env={"NCCL_ALGO": "Ring"}).data["config"]["hash"] != first


def test_data_inputs_with_config_suffixes_are_left_to_the_data_probe(tmp_path):
    (tmp_path / "train.json").write_text("[]")
    (tmp_path / "c.json").write_text("{}")
    out = _probe(tmp_path, ["python", "train.py", "--train-data", "train.json", "--model-config", "c.json"])
    assert list(out.data["config"]["files"]) == ["c.json"]
