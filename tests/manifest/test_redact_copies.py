"""Every parsed copy of a secret is redacted as its source is: ``config.resolved_args`` parsed from the command
line, read from ``--args-json`` or rendered from the API's args object holds no value that ``command.argv``
masks, numbers included, and a secret flag's ``k=v`` value never becomes a key of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from relaxrepro.collect.arguments import parse_argv_args
from relaxrepro.manifest.redact import Redactor, redact_document
from tests.helpers.common import clean_env, generate, make_repo
from tests.helpers.recording import load

# Numbers and a cookie's ``k=v``: the values people pass to a throw-away database or a staging API.
SECRETS = ["--password", "48151623", "--api-key", "1234567890", "--hf-token", "3.14159",
           "--cookie", "session=abcdef", "--db.password=27182818"]
KEPT = ["--max-new-tokens", "512", "--lr", "3e-4", "--key-column", "text", "--key", "42", "trainer.max_epochs=3"]
PLANTED = ("48151623", "1234567890", "3.14159", "abcdef", "27182818")


def _no_planted(text: str) -> None:
    for value in PLANTED:
        assert value not in text, value


def _red() -> Redactor:
    return Redactor(home="/home/alice", hostname="gpu-node-17", user="alice")


def test_the_command_lines_parsed_copy_is_redacted_as_the_command_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    doc = generate(tmp_path, cwd=repo, env=clean_env(), command=["python", "train.py", *SECRETS, *KEPT])
    _no_planted(next(tmp_path.glob("m_*.json")).read_text())
    args = doc["config"]["resolved_args"]
    assert {k: args[k] for k in ("password", "api_key", "hf_token", "cookie", "db.password")} == {
        "password": "***", "api_key": "***", "hf_token": "***", "cookie": "***", "db.password": "***"}
    assert "session" not in args
    assert {k: args[k] for k in ("max_new_tokens", "lr", "key_column", "key", "trainer.max_epochs")} == {
        "max_new_tokens": 512, "lr": 3e-4, "key_column": "text", "key": 42, "trainer.max_epochs": 3}
    argv = doc["command"]["argv"]
    assert argv[2:] == ["--password", "<redacted>", "--api-key", "<redacted>", "--hf-token", "<redacted>",
                        "--cookie", "<redacted>", "--db.password=<redacted>", *KEPT]


def test_args_json_is_redacted_as_the_command_line(tmp_path: Path) -> None:
    f = tmp_path / "args.json"
    f.write_text(json.dumps({"password": 48151623, "api_key": 1234567890, "hf_token": 3.14159,
                             "cookie": "session=abcdef", "db": {"password": 27182818, "port": 5432},
                             "credentials": {"pin": 1234567890}, "max_new_tokens": 512, "key": 42, "bf16": True}))
    doc = generate(tmp_path, "--args-json", str(f), env=clean_env(), command=["python", "train.py"])
    _no_planted(next(tmp_path.glob("m_*.json")).read_text())
    assert doc["config"]["resolved_args"] == {
        "password": "***", "api_key": "***", "hf_token": "***", "cookie": "***",
        "db": {"password": "***", "port": 5432}, "credentials": {"pin": "***"}, "max_new_tokens": 512, "key": 42,
        "bf16": True}


_TRAINER = """
import argparse, sys
import relaxrepro
args = argparse.Namespace(password=48151623, api_key=1234567890, hf_token=3.14159, cookie="session=abcdef",
                          max_new_tokens=512, key=42)
with relaxrepro.recorded(args, output_dir=sys.argv[1]) as m:
    pass
print(m.path)
"""


def test_the_apis_args_are_redacted_as_the_command_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"train.py": _TRAINER})
    res = subprocess.run([sys.executable, "train.py", str(tmp_path / "logs")], env=clean_env(), cwd=str(repo),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    path = Path(res.stdout.strip().splitlines()[-1])
    _no_planted(path.read_text())
    assert load(path)["config"]["resolved_args"] == {
        "password": "***", "api_key": "***", "hf_token": "***", "cookie": "***", "max_new_tokens": 512, "key": 42}


def test_a_secret_flags_k_v_value_stays_the_flags() -> None:
    assert parse_argv_args(["python", "t.py", "--cookie", "session=abcdef", "trainer.max_epochs=3"]) == {
        "cookie": "session=abcdef", "trainer.max_epochs": 3}
    # A flag whose name says nothing still leaves a Hydra override after it as an override.
    assert parse_argv_args(["python", "t.py", "--debug", "trainer.max_epochs=3"]) == {
        "debug": True, "trainer.max_epochs": 3}


def test_a_number_is_judged_by_its_name_as_its_text_would_be() -> None:
    doc = {"command": {"argv": ["t.py", "--password", "48151623", "--key", "42"]},
           "config": {"resolved_args": {"password": 48151623, "key": 42, "secret_seed": 7.5, "hf_token": True,
                                        "api_key": [1234567890, 27182818], "max_new_tokens": 512}}}
    out = redact_document(doc, _red())
    assert out["config"]["resolved_args"] == {"password": "***", "key": 42, "secret_seed": "***", "hf_token": True,
                                              "api_key": ["***", "***"], "max_new_tokens": 512}
    assert out["command"]["argv"] == ["t.py", "--password", "<redacted>", "--key", "42"]
    assert redact_document(out, _red()) == out


def test_a_number_masked_in_argv_by_a_tool_option_is_masked_in_its_parsed_copy(tmp_path: Path) -> None:
    # No name points at these copies: 'sshpass -p 48151623' parses to {"p": 48151623}, 'mysql -p27182818' to a
    # flag named p27182818.
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    doc = generate(tmp_path, cwd=repo, env=clean_env(), command=[
        "sshpass", "-p", "48151623", "ssh", "h", "mysql", "-uroot", "-p27182818", "--port", "5432"])
    _no_planted(next(tmp_path.glob("m_*.json")).read_text())
    args = doc["config"]["resolved_args"]
    assert args["p"] == ["***", "ssh", "h", "mysql"] and args["p***"] is True and args["port"] == 5432
