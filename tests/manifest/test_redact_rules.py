"""Rules by name, URLs, headers, infrastructure, survivors and the known ways to get redaction wrong."""

from __future__ import annotations

import json

import pytest

from relaxrepro.manifest.redact import RULES, Redactor, compile_patterns, redact_document
from tests.helpers.redact import fakes, secret_password, wandb_legacy

FAKES = fakes()
PW = secret_password()


def _red(**kw) -> Redactor:
    kw.setdefault("home", "/home/alice")
    kw.setdefault("hostname", "gpu-node-17.cluster.example.org")
    kw.setdefault("user", "alice")
    return Redactor(**kw)


# -- by name ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    "WANDB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "RAY_REDIS_PASSWORD",
    "DB_PASS", "GOOGLE_APPLICATION_CREDENTIALS_JSON", "NCCL_AUTH_TOKEN", "api_key", "apiKey", "AccountKey",
    "client_secret", "passphrase", "cookie", "secrets", "x-api-key", "openai_key", "MLFLOW_TRACKING_PASSWORD",
])
def test_secret_names_mask_their_values(key: str) -> None:
    r = _red()
    assert r.text(PW, key=key) == "***"
    assert r.counts == {"secret-name": 1}


@pytest.mark.parametrize("key,value", [
    ("auth_type", "basic"), ("secret_name", "prod-wandb"), ("password_file", "/run/secrets/db"),
    ("tokenizer_path", "/opt/models/tok"), ("max_new_tokens", "512"), ("key_column", "text"),
    ("eos_token", "</s>"), ("pad_token", "<|endoftext|>"), ("text_key", "text"), ("PWD", "/srv/run"),
    ("token_type_ids", "yes"), ("WANDB_API_KEY", "${WANDB_API_KEY}"), ("HF_TOKEN", ""), ("HF_TOKEN", "$HF_TOKEN"),
    ("password", "{{ secrets.DB_PASSWORD }}"),
    ("credentials", "/etc/gcp/creds.json"), ("use_auth_token", "true"), ("pass@1", "0.42"), ("pass_at_k", "0.5"),
])
def test_names_about_secrets_are_not_secrets(key: str, value: str) -> None:
    assert _red().text(value, key=key) == value


@pytest.mark.parametrize("flag", ["--openai-key", "--wandb-key", "--ssh-key", "--credentials", "--secrets",
                                  "--passphrase", "--cookie", "--api-key", "--hf-token", "--password"])
def test_secret_flags_mask_the_next_word_and_the_equals_form(flag: str) -> None:
    # Seen in an earlier implementation: --openai-key, --wandb-key, --ssh-key, --credentials, --secrets,
    # --passphrase and --cookie were kept.
    out = _red().argv(["train.py", flag, PW, flag + "=" + PW, "--lr", "3e-4"])
    assert out == ["train.py", flag, "***", flag + "=***", "--lr", "3e-4"]


@pytest.mark.parametrize("argv", [
    ["--max-new-tokens", "512"], ["--tokenizer-path", "/opt/tok"], ["--key-column", "text"],
    ["--auth-type", "basic"], ["--secret-name", "wandb"], ["--password-file", "/run/secrets/pw"],
    ["--api-key", "--lr", "3e-4"],
])
def test_flags_that_merely_contain_the_word_survive(argv: list) -> None:
    assert _red().argv(["train.py"] + argv) == ["train.py"] + argv


@pytest.mark.parametrize("text,expected", [
    ("WANDB_API_KEY=" + PW + " python train.py", "WANDB_API_KEY=*** python train.py"),
    ('{"password": "two words"}', '{"password": "***"}'),  # pragma: allowlist secret
    ("db:\n  password: two words  # rotated\n  port: 5432", "db:\n  password: ***  # rotated\n  port: 5432"),
    ("+cfg.wandb.api_key=" + PW, "+cfg.wandb.api_key=***"),
    ("ray start --redis-password " + PW, "ray start --redis-password ***"),
    ("the token budget is 512", "the token budget is 512"),
    ("token api_key=" + PW, "token api_key=***"),
])
def test_assignments_inside_text(text: str, expected: str) -> None:
    assert _red().text(text) == expected


def test_a_password_that_starts_with_a_dollar_is_still_masked() -> None:
    assert _red().text("$ecret-" + PW, key="DB_PASSWORD") == "***"


def test_legacy_wandb_key_is_a_secret_by_name_and_a_commit_by_name() -> None:
    sha = wandb_legacy()
    r = _red()
    assert r.value({"commit": sha, "WANDB_API_KEY": sha}) == {"commit": sha, "WANDB_API_KEY": "***"}


# -- URLs and headers -------------------------------------------------------------------------------

@pytest.mark.parametrize("url,expected", [
    ("redis://:" + PW + "@cache.example.com:6379/0", "redis://***@cache.example.com:6379/0"),
    ("postgresql://bob:" + PW + "@db.example.com/x", "postgresql://***@db.example.com/x"),
    ("https://h.example.com/f?token=" + PW + "&x=1", "https://h.example.com/f?token=***&x=1"),
    ("https://acct.blob.core.windows.net/c/f?sv=2022&sig=" + PW, "https://acct.blob.core.windows.net/c/f?sv=2022&sig=***"),
    ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
    ("https://github.com/org/repo.git", "https://github.com/org/repo.git"),
])
def test_urls(url: str, expected: str) -> None:
    assert _red().text(url) == expected


def test_redis_url_with_empty_user_is_redacted() -> None:
    # Seen in an earlier implementation: redis://:pw@host (no user) kept.
    r = _red()
    assert r.text("redis://:hunter2@redis.example.com") == "redis://***@redis.example.com"
    assert r.counts == {"url-credentials": 1}


@pytest.mark.parametrize("text,expected", [
    ("Authorization: Bearer " + PW, "Authorization: Bearer ***"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "curl -H 'Authorization: Basic ***'"),
    ('{"authorization": "' + PW + '"}', '{"authorization": "***"}'),
    ("requests.get(u, headers={'Bearer " + PW + "'})", "requests.get(u, headers={'Bearer ***'})"),
])
def test_authorization_headers(text: str, expected: str) -> None:
    assert _red().text(text) == expected


# -- infrastructure ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("10.1.2.3", "<internal-address>"), ("10.1.2.3:29500", "<internal-address>"),
    ("172.16.0.4", "<internal-address>"), ("172.31.255.1:80", "<internal-address>"),
    ("192.168.1.20", "<internal-address>"), ("100.64.0.1", "<internal-address>"),
    ("http://10.0.0.5:8265/api", "http://<internal-address>/api"), ("fd12:3456:789a::1", "<internal-address>"),
    ("[fd00::1]:8080", "<internal-address>"), ("tcp://[fc00::2]:6379", "tcp://<internal-address>"),
    ("ray-head.internal:6379", "<internal-host>"), ("db.corp", "<internal-host>"), ("nas.local", "<internal-host>"),
    ("router.lan", "<internal-host>"), ("wiki.intranet/page", "<internal-host>/page"),
    ("gpu-node-17", "<internal-host>"), ("gpu-node-17.cluster.example.org", "<internal-host>"),
])
def test_internal_addresses_and_hosts(text: str, expected: str) -> None:
    assert _red().text(text) == expected


@pytest.mark.parametrize("text", [
    "127.0.0.1", "127.0.0.1:8265", "localhost:6379", "::1", "8.8.8.8", "172.32.0.1", "100.128.0.1",
    "https://api.wandb.ai", "0.0.0.0:8080", "172.15.0.1",
])
def test_loopback_and_public_addresses_survive(text: str) -> None:
    # Seen in an earlier implementation: loopback 127.0.0.1 treated as internal.
    assert _red().text(text) == text


@pytest.mark.parametrize("key,value,expected", [
    ("MASTER_ADDR", "gpu-node-3", "<internal-host>"), ("master_addr", "10.0.0.1", "<internal-address>"),
    ("ray_address", "ray-head:6379", "<internal-host>"), ("RAY_ADDRESS", "auto", "auto"),
    ("ray_address", "ray://ray-head:10001", "ray://<internal-host>"), ("head_ip", "8.8.4.4", "8.8.4.4"),
    ("gcs_address", "127.0.0.1:6379", "127.0.0.1:6379"), ("SLURM_NODELIST", "gpu-[01-04]", "<internal-host>"),
    ("NodeManagerAddress", "ray-worker-3", "<internal-host>"), ("node_ip", "localhost", "localhost"),
    ("hostname", "login.hpc.example.edu", "login.hpc.example.edu"), ("HOSTNAME", "c0123", "<internal-host>"),
    ("dashboard_url", "http://ray-head:8265", "http://<internal-host>"),
    ("WANDB_BASE_URL", "https://api.wandb.ai", "https://api.wandb.ai"),
    ("mac_address", "00:1a:2b:3c:4d:5e", "00:1a:2b:3c:4d:5e"),
    ("ray_address", "ray-head.default.svc:6379", "<internal-host>"),
])
def test_address_bearing_keys(key: str, value: str, expected: str) -> None:
    assert _red().text(value, key=key) == expected


@pytest.mark.parametrize("text", ["MASTER_ADDR=gpu-node-3 torchrun x.py", "--master_addr=gpu-node-3",
                                  "ray_address: ray-head:6379"])
def test_address_assignments_in_text(text: str) -> None:
    assert "gpu-node-3" not in _red().text(text) and "ray-head" not in _red().text(text)


@pytest.mark.parametrize("text,expected", [
    ("/home/alice/proj/train.py", "<HOME>/proj/train.py"), ("/home/bob/x", "<HOME>/x"),
    ("/lustre/home/carol/data", "<HOME>/data"), ("/Users/dave/src", "<HOME>/src"), ("/root/.cache", "<HOME>/.cache"),
    ("/home/alice", "<HOME>"), ("cd /home/bob && ls", "cd <HOME> && ls"), ("PATH=/home/bob/bin:/usr/bin",
                                                                         "PATH=<HOME>/bin:/usr/bin"),
])
def test_home_paths(text: str, expected: str) -> None:
    # Seen in an earlier implementation: /home/alice kept when no / followed.
    assert _red().text(text) == expected


def test_current_home_outside_home_is_redacted() -> None:
    assert _red(home="/scratch/u123").text("/scratch/u123/run/x") == "<HOME>/run/x"


def test_keep_paths_keeps_home_but_not_secrets() -> None:
    r = _red(keep_paths=True)
    assert r.text("/home/alice/proj") == "/home/alice/proj"
    assert r.text(FAKES["github-classic"]) == "ghp_***"


def test_user_name_alone_and_under_user_keys() -> None:
    # Seen in an earlier implementation: SLURM_JOB_USER kept while the user name was hidden elsewhere.
    r = _red()
    assert r.value({"SLURM_JOB_USER": "alice", "USER": "alice", "LOGNAME": "bob", "note": "alice ran it",
                    "host": "alice-laptop.example.com"}) == {
        "SLURM_JOB_USER": "<user>", "USER": "<user>", "LOGNAME": "<user>", "note": "<user> ran it",
        "host": "alice-laptop.example.com"}


# -- what must survive ----------------------------------------------------------------------------------

SURVIVORS = [
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # pragma: allowlist secret
    "nvcr.io/nvidia/pytorch:24.05-py3", "docker.io/library/python:3.11-slim@sha256:" + "ab" * 32,
    "GPU-5e1a1b2c-3d4e-5f60-7182-93a4b5c6d7e8", "2.23.4", "12.9", "9.1.0.70", "550.54.15", "1.0.0rc1",
    "meta-llama/Llama-3-8B", "Qwen/Qwen2.5-7B-Instruct", "/usr/lib/x86_64-linux-gnu", "/opt/conda/bin/python",
    "/usr/local/cuda-12.4/lib64", "--max-new-tokens", "NVIDIA H100 80GB HBM3", "torch==2.3.1+cu121",
    "20260101_000000_abcdef0", "x86_64", "6.8.0-45-generic", "python train.py --lr 3e-4 --batch-size 32",
    "nccl:2.21.5", "localhost:8265", "~/.local/bin", "fc: 1024", "layers.0.attention.wq.weight",
    "hooks.slack.com", "Bearer", "sk-learn", "hf_hub_download",
]


@pytest.mark.parametrize("text", SURVIVORS)
def test_benign_look_alikes_survive(text: str) -> None:
    # Seen in an earlier implementation: a host:port rule that turned sha256:<hex> into <internal-host>...
    # and pytorch:24.05-py3 into <internal-host>.05-py3.
    r = _red()
    assert r.text(text) == text
    assert r.counts == {}


def test_commit_sha_in_commit_field_survives() -> None:
    sha = "3f2a9c1b7d4e5f60718293a4b5c6d7e8f9012345"  # pragma: allowlist secret
    assert _red().value({"code": {"repo": {"commit": sha, "base_commit": sha}}}) == {
        "code": {"repo": {"commit": sha, "base_commit": sha}}}


# -- structure, counts, idempotence, robustness --------------------------------------------------------------

def test_dict_keys_are_redacted_and_collisions_kept() -> None:
    # Seen in an earlier implementation: dict keys never redacted.
    out = _red().value({"10.0.0.1": {"GPU": 8}, "10.0.0.2": {"GPU": 4}, "/home/alice/x": 1})
    assert out == {"<internal-address>": {"GPU": 8}, "<internal-address>#2": {"GPU": 4}, "<HOME>/x": 1}


def test_redact_document_counts_per_rule_and_is_idempotent() -> None:
    doc = {"command": {"argv": ["x", "--hf-token", PW, "--master-addr", "10.0.0.1"], "cwd": "/home/alice/p"},
           "collection": {"redactions": {"user-pattern": 2}}}
    red = _red()
    once = redact_document(doc, red)
    assert once["collection"]["redactions"] == {"user-pattern": 2, "secret-name": 1, "internal-address": 1,
                                                "home-path": 1}
    assert set(once["collection"]["redactions"]) <= set(RULES)
    twice = redact_document(once, red)
    assert twice == once
    assert redact_document(once, _red()) == once
    assert doc["command"]["argv"][2] == PW  # a pure pass: the input is not modified


def test_every_rule_output_is_stable_under_a_second_pass() -> None:
    r = _red(extra_patterns=["proj-[0-9]+", "redacted"])
    texts = [FAKES[k] for k in sorted(FAKES)] + [
        "password=" + PW, "redis://:" + PW + "@10.0.0.1:6379", "Authorization: Bearer " + PW, "gpu-node-17",
        "/home/alice/x", "alice", "proj-123 <redacted>", "ray-head.internal", "fd00::1", "x" * 5000]
    for t in texts:
        once = r.text(t)
        assert r.text(once) == once, t


@pytest.mark.parametrize("obj", [
    {1: "10.0.0.1", None: "x", (1, 2): "y"}, ["a", 1, None, 2.5, float("nan"), b"/home/alice/x", {"a"}],
    {"k": object()}, "\x00\ud800\uffff", {"password": None, "token": 5, "api_key": ["a", {"b": "c"}]},
])
def test_odd_inputs_never_raise(obj) -> None:
    r = _red()
    r.value(obj)
    redact_document({"x": obj}, r)


def test_recursive_structures_do_not_loop() -> None:
    d: dict = {"a": "/home/alice"}
    d["self"] = d
    out = _red().value(d)
    assert out["a"] == "<HOME>" and out["self"] == "<recursive>"


def test_unknown_objects_are_redacted_as_their_text() -> None:
    class Args:
        def __str__(self) -> str:
            return "Namespace(hf_token='" + FAKES["huggingface"] + "')"

    out = _red().value({"args": Args()})
    assert FAKES["huggingface"] not in json.dumps(out)


def test_lines_reports_changed_line_numbers_and_keeps_the_line_count() -> None:
    key_lines = ["+" + line for line in (
        "-----BEGIN " + "OPENSSH PRIVATE" + " KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA", "-----END " + "OPENSSH PRIVATE"
        + " KEY-----")]
    text = "\n".join(["@@ -1,2 +1,6 @@", " unchanged", "-token = '" + FAKES["huggingface"] + "'"] + key_lines
                     + ["+lr = 3e-4", ""])
    out, changed = _red().lines(text)
    assert changed == [3, 4, 5, 6]
    assert out.count("\n") == text.count("\n")
    assert out.splitlines()[3:6] == ["+<private-key>"] * 3
    assert out.splitlines()[6] == "+lr = 3e-4"
    assert _red().lines(out) == (out, [])


def test_lines_of_clean_text_changes_nothing() -> None:
    assert _red().lines("a\r\nb\n") == ("a\r\nb\n", [])


# -- user patterns ----------------------------------------------------------------------------------------

def test_user_patterns_add_rules() -> None:
    r = _red(extra_patterns=[r"proj-[0-9]+", "^ab$"])
    assert r.text("bucket proj-4711/x") == "bucket <redacted>/x"
    assert r.text("ab") == "<redacted>"
    assert r.counts == {"user-pattern": 2}


@pytest.mark.parametrize("pattern,message", [
    ("x(", "--redact-pattern 'x(': not a valid regular expression: missing ), unterminated subpattern at position 1"),
    ("a*", "--redact-pattern 'a*': matches the empty string, so it would match everywhere"),
])
def test_bad_user_patterns_are_refused(pattern: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        compile_patterns([pattern])
    assert str(err.value) == message


def test_schema_describes_every_rule() -> None:
    from tests.helpers.common import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text())
    description = json.dumps(schema)
    for rule in RULES:
        assert rule + " (" in description, rule


def test_azure_storage_connection_string() -> None:
    key = "".join(chr(65 + (i * 7) % 26) + str(i % 10) for i in range(43)) + "=="
    conn = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + key + ";EndpointSuffix=core.windows.net"
    out = _red().text(conn)
    assert out == "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=***;EndpointSuffix=core.windows.net"


@pytest.mark.parametrize("key", ["COMET_API_KEY", "KAGGLE_KEY", "NEPTUNE_API_TOKEN", "aws_secret_access_key"])
def test_shapeless_keys_are_found_by_name(key: str) -> None:
    # Comet (25 alphanumerics), Kaggle (32 hex), the AWS secret key: no shape, only the name gives them away.
    value = "".join("0123456789abcdef"[(i * 5 + 3) % 16] for i in range(32))
    r = _red()
    assert r.value({key: value}) == {key: "***"}
    assert r.text(key + "=" + value) == key + "=***"
