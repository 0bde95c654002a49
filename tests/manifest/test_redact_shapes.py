"""Every credential shape of SECRETS.md, in every place a manifest hides one."""

from __future__ import annotations

import json

import pytest

from relaxrepro.manifest.redact import Redactor, redact_document
from tests.helpers.redact import fakes, leaked, pem_key, secret_password, wandb_legacy

FAKES = fakes()


def _red() -> Redactor:
    return Redactor(home="/home/alice", hostname="gpu-node-17.cluster.example.org", user="alice")


@pytest.mark.parametrize("kind", sorted(FAKES))
def test_shape_is_masked_alone(kind: str) -> None:
    secret = FAKES[kind]
    r = _red()
    out = r.text(secret)
    assert not leaked(secret, out), out
    assert out.endswith("***") and len(out) <= len("***") + 4 or "***" in out
    assert sum(r.counts.values()) >= 1


@pytest.mark.parametrize("kind", sorted(FAKES))
def test_shape_is_masked_in_free_text_flag(kind: str) -> None:
    # Seen in an earlier implementation: --description / --wandb-notes checked by name only, never by shape.
    secret = FAKES[kind]
    out = _red().argv(["train.py", "--wandb-notes", "rerun with %s for the sweep" % secret, "--description", secret])
    assert not leaked(secret, json.dumps(out)), out
    assert out[0] == "train.py" and out[1] == "--wandb-notes" and out[2].startswith("rerun with ")


def test_mask_keeps_at_most_four_characters_of_a_long_value() -> None:
    r = _red()
    assert r.text(FAKES["github-classic"]) == "ghp_***"
    assert r.text(FAKES["wandb-v1"]) == "wand***"


def test_mask_never_keeps_any_of_a_short_value() -> None:
    assert _red().text("x", key="password") == "***"
    assert _red().text("hunter2", key="DB_PASSWORD") == "***"


def test_pem_private_key_multiline_and_escaped() -> None:
    key = pem_key()
    r = _red()
    out = r.text("config:\n" + key + "\nafter: 1")
    assert "<private-key>" in out and "after: 1" in out and not leaked(key.split("\n")[2], out)
    escaped = json.dumps({"private_key": key, "type": "service_account"})  # a service-account JSON as text
    out = r.text(escaped)
    assert not leaked(key.split("\n")[3], out)
    assert r.counts["private-key"] == 2


def test_pem_private_key_without_end_is_masked_to_the_end() -> None:
    key = pem_key()
    cut = key[: len(key) // 2]
    out = _red().text(cut)
    assert out == "<private-key>"


def test_slack_webhook_path_is_masked() -> None:
    hook = "https://hooks.slack.com/services/T" + "01234567/B" + "01234567/" + "abcdefghijklmnopqrstuvwx"
    out = _red().text(hook)
    assert out == "https://hooks.slack.com/services/***"


# -- the hiding places ----------------------------------------------------------------------------

SECRET = FAKES["github-classic"]


def _doc(**sections) -> dict:
    doc = {"schema_version": "1.0", "run_id": "r", "generated_at": "2026-01-01T00:00:00Z", "collection": {}}
    doc.update(sections)
    return doc


def _redacted_json(doc: dict) -> str:
    return json.dumps(redact_document(doc, _red()))


@pytest.mark.parametrize("argv", [
    ["--api-key=" + SECRET],
    ["--api-key", SECRET],
    ["--url", "https://u:" + SECRET + "@h.example.com/x"],
    ["--config", json.dumps({"wandb": {"key": SECRET}})],
    ["--config", "api_key: " + SECRET],
    ["--wandb-notes", "token " + SECRET],
    ["-e", "HF_TOKEN=" + SECRET],
], ids=["flag-equals", "flag-space", "url", "json-arg", "yaml-arg", "free-text", "env-assignment-arg"])
def test_argv(argv: list) -> None:
    assert SECRET not in _redacted_json(_doc(command={"argv": ["python", "train.py"] + argv}))


def test_env_values_by_name_and_by_shape() -> None:
    legacy = wandb_legacy()
    pw = secret_password()
    env = {"WANDB_API_KEY": legacy, "RAY_REDIS_PASSWORD": pw, "NOTES": "see " + SECRET, "PATH": "/usr/bin"}
    out = json.loads(_redacted_json(_doc(environment={"env": env})))["environment"]["env"]
    assert out["WANDB_API_KEY"] == "***"
    assert out["RAY_REDIS_PASSWORD"] == "***"
    assert out["NOTES"] == "see ghp_***"
    assert out["PATH"] == "/usr/bin"


@pytest.mark.parametrize("remote", [
    "https://x-access-token:" + SECRET + "@github.com/org/repo.git",
    "https://" + SECRET + "@github.com/org/repo.git",
    "https://oauth2:" + secret_password() + "@gitlab.example.com/org/repo.git",
], ids=["ci-x-access-token", "token-as-user", "oauth2-password"])
def test_git_remote_credentials(remote: str) -> None:
    out = json.loads(_redacted_json(_doc(code={"repo": {"remote": remote, "commit": "a" * 40}})))
    url = out["code"]["repo"]["remote"]
    assert url.startswith("https://***@") and url.endswith("/org/repo.git")
    assert out["code"]["repo"]["commit"] == "a" * 40


def test_patch_added_and_removed_lines() -> None:
    pw = secret_password()
    patch = ("--- a/train.sh\n+++ b/train.sh\n@@ -1,3 +1,3 @@\n-export HF_TOKEN=" + FAKES["huggingface"] + "\n"
             "+export WANDB_API_KEY=" + wandb_legacy() + "\n context line\n+DB_PASSWORD='" + pw + "'\n")
    out = _redacted_json(_doc(code={"repo": {"patch": {"text": patch}}}))
    for secret in (FAKES["huggingface"], wandb_legacy(), pw):
        assert not leaked(secret, out)
    assert "context line" in out


def test_config_file_contents() -> None:
    content = ("wandb:\n  api_key: " + wandb_legacy() + "\n  project: demo\nhf:\n  token: \"" + FAKES["huggingface"]
               + "\"\nopenai_key = '" + FAKES["openai-project"] + "'\nmodel: meta-llama/Llama-3-8B\n")
    out = json.loads(_redacted_json(_doc(config={"file_contents": {"conf.yaml": content}})))
    text = out["config"]["file_contents"]["conf.yaml"]
    for secret in (wandb_legacy(), FAKES["huggingface"], FAKES["openai-project"]):
        assert not leaked(secret, text), text
    assert "project: demo" in text and "model: meta-llama/Llama-3-8B" in text


def test_config_files_named_like_secrets_keep_their_digests() -> None:
    # config.files is keyed by path (Relax's layout): a path is never read as a name, so token.json's
    # digest is not masked as if it were a token, and its content is scanned like any config text.
    digest = "sha256:" + "1" * 64
    config = {"files": {"token.json": digest, "/home/alice/secret.yaml": digest},
              "file_details": {"credentials.yaml": {"error": "no such file or directory"}},
              "file_contents": {"token.json": "lr: 1\napi_key: plainpw1234abcd\n"},
              "resolved_args": {"files": {"token": SECRET}}}  # a trainer's own "files" argument stays a name
    out = json.loads(_redacted_json(_doc(config=config)))["config"]
    assert out["files"] == {"token.json": digest, "<HOME>/secret.yaml": digest}
    assert out["file_details"] == {"credentials.yaml": {"error": "no such file or directory"}}
    assert out["file_contents"] == {"token.json": "lr: 1\napi_key: ***\n"}
    assert out["resolved_args"] == {"files": {"token": "***"}}


def test_resolved_args_dict() -> None:
    args = {"hf_token": FAKES["huggingface"], "wandb_key": wandb_legacy(), "lr": 3e-4, "tokenizer_path": "/opt/tok"}
    out = json.loads(_redacted_json(_doc(training={"args": args})))["training"]["args"]
    assert out == {"hf_token": "***", "wandb_key": "***",
                   "lr": 3e-4, "tokenizer_path": "/opt/tok"}


def test_secret_as_dict_key() -> None:
    out = _redacted_json(_doc(runtime={"tokens": {SECRET: 1}}))
    assert SECRET not in out and "ghp_***" in out


def test_everything_under_a_credentials_object_is_masked() -> None:
    creds = {"type": "service_account", "client_email": "svc@p.iam.gserviceaccount.com", "key_data": "abc"}
    out = json.loads(_redacted_json(_doc(config={"credentials": creds})))["config"]["credentials"]
    assert out == {"type": "***", "client_email": "***", "key_data": "***"}
