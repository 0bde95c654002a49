"""Redaction through the real CLI: user flags reach every channel (argv and patches alike) in one pass, and
detect-secrets as an independent second opinion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relaxrepro.manifest import writer
from relaxrepro.manifest.redact import Redactor
from tests.helpers.common import clean_env, generate, make_repo, run_cli, validate_manifest
from tests.helpers.redact import detect_secrets, fakes, leaked, pem_key, secret_password, sha1, strings, wandb_legacy

FAKES = fakes()
PW = secret_password()


def _polluted_argv() -> list:
    return [
        "python", "train.py", "--hf-token", FAKES["huggingface"], "--api-key=" + FAKES["openai-project"],
        "--wandb-key", wandb_legacy(), "--password", PW, "--github-token", FAKES["github-classic"],
        "--aws-key-id", FAKES["aws-key-id"], "--slack", FAKES["slack-bot"], "--jwt", FAKES["jwt"],
        "--url", "https://x-access-token:" + FAKES["github-fine-grained"] + "@github.com/o/r.git",
        "--redis", "redis://:" + PW + "@10.0.0.12:6379", "--master-addr", "gpu-node-3",
        "--wandb-notes", "rerun with " + FAKES["anthropic"], "--config", json.dumps({"db_password": PW}),
        "--header", "Authorization: Bearer " + FAKES["pypi"], "--npm", FAKES["npm"],
        "--max-new-tokens", "512", "--tokenizer-path", "/opt/tok", "--key-column", "text",
    ]


_PLANTED = [FAKES[k] for k in ("huggingface", "openai-project", "github-classic", "aws-key-id", "slack-bot", "jwt",
                               "github-fine-grained", "anthropic", "pypi", "npm")] + [wandb_legacy(), PW]


def _allowed_hashes(doc: dict) -> set:
    """detect-secrets flags git commit SHAs as hex entropy; those are meant to survive."""
    code = doc.get("code") or {}
    return {sha1(r["commit"]) for r in code.values() if isinstance(r, dict) and r.get("commit")}


def test_polluted_argv_leaves_nothing_for_detect_secrets(tmp_path: Path) -> None:
    pytest.importorskip("detect_secrets")
    repo = make_repo(tmp_path / "node-10.0.0.5" / "repo")
    doc = generate(tmp_path, cwd=repo, command=_polluted_argv())
    text = json.dumps(doc)
    for secret in _PLANTED:
        assert not leaked(secret, text), secret[:4]
    argv = doc["command"]["argv"]
    assert argv[argv.index("--max-new-tokens"):] == ["--max-new-tokens", "512", "--tokenizer-path", "/opt/tok",
                                                     "--key-column", "text"]
    assert "10.0.0.5" not in text and "gpu-node-3" not in text
    assert doc["collection"]["redactions"]["secret-name"] >= 4
    written = sorted(tmp_path.glob("m_*.json"))[-1]
    findings = [f for f in detect_secrets(written) if f["hashed_secret"] not in _allowed_hashes(doc)]
    assert findings == []


def test_detect_secrets_does_see_the_raw_pollution(tmp_path: Path) -> None:
    # Proves the check above can fail: the same argv, unredacted, is full of findings.
    pytest.importorskip("detect_secrets")
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"command": {"argv": _polluted_argv()}}, indent=1))
    types = {f["type"] for f in detect_secrets(raw)}
    assert {"GitHub Token", "AWS Access Key", "Slack Token", "JSON Web Token"} <= types


def _polluted_document(root: Path) -> dict:
    patch = ("diff --git a/train.sh b/train.sh\n--- a/train.sh\n+++ b/train.sh\n@@ -1,2 +1,2 @@\n"
             "-export WANDB_API_KEY=" + wandb_legacy() + "\n+export HF_TOKEN=" + FAKES["huggingface"] + "\n"
             "+AWS_SECRET_ACCESS_KEY=" + FAKES["google-api"] + "\n")
    config = ("wandb:\n  api_key: " + wandb_legacy() + "\ndb:\n  password: \"" + PW + "\"\n"
              "ssh_key: |\n" + "\n".join("  " + line for line in pem_key().splitlines()) + "\n")
    return {
        "schema_version": "1.0", "run_id": "20260101_000000_abcdef0", "generated_at": "2026-01-01T00:00:00Z",
        "command": {"argv": ["python", "train.py"], "cwd": str(root)},
        "code": {"repo": {"commit": "3f2a9c1b7d4e5f60718293a4b5c6d7e8f9012345",  # pragma: allowlist secret
                          "remote": "https://x-access-token:" + FAKES["github-app"] + "@github.com/o/r.git",
                          "patch": {"text": patch}}},
        "config": {"file_contents": {"/home/alice/conf.yaml": config}},
        "environment": {"env": {"HF_TOKEN": FAKES["huggingface"], "WANDB_API_KEY": wandb_legacy(),
                                "RAY_REDIS_PASSWORD": PW, "GITLAB_TOKEN": FAKES["gitlab-pat"],
                                "MASTER_ADDR": "10.1.2.3", "SLURM_JOB_USER": "alice"}},
        "hardware": {}, "runtime": {"ray": {"nodes": {"10.1.2.3": {"NodeManagerAddress": "10.1.2.3"}}}},
        "training": {}, "collection": {"probes": {}},
    }


def test_written_document_from_every_hiding_place_is_clean(tmp_path: Path) -> None:
    pytest.importorskip("detect_secrets")
    doc = _polluted_document(tmp_path)
    red = Redactor(home="/home/alice", hostname="gpu-node-17", user="alice")
    result = writer.write(doc, path=str(tmp_path / "m.json"), redactor=red)
    assert result.path is not None, result.warnings
    written = json.loads(Path(result.path).read_text())
    validate_manifest(written)
    text = " ".join(strings(written))
    for secret in _PLANTED[:1] + [wandb_legacy(), PW, FAKES["github-app"], FAKES["gitlab-pat"], FAKES["google-api"]]:
        assert not leaked(secret, text)
    assert "PRIVATE KEY-----" not in text and "10.1.2.3" not in text and "alice" not in text
    assert written["code"]["repo"]["commit"] == doc["code"]["repo"]["commit"]
    findings = [f for f in detect_secrets(Path(result.path)) if f["hashed_secret"] not in _allowed_hashes(written)]
    assert findings == []


# -- the flags ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern,message", [
    ("x(", "relaxrepro generate: error: --redact-pattern 'x(': not a valid regular expression: "
           "missing ), unterminated subpattern at position 1\n"),
    ("", "relaxrepro generate: error: --redact-pattern '': matches the empty string, so it would match "
         "everywhere\n"),
])
def test_bad_redact_pattern_is_a_usage_error_and_writes_nothing(tmp_path: Path, pattern: str, message: str) -> None:
    res = run_cli("generate", "--output", str(tmp_path / "m.json"), "--redact-pattern", pattern, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == message
    assert res.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_redact_pattern_adds_rules(tmp_path: Path) -> None:
    doc = generate(tmp_path, "--redact-pattern", r"proj-[0-9]+", "--redact-pattern", "acme",
                   command=["python", "train.py", "--bucket", "s3://acme/proj-4711/x"])
    assert doc["command"]["argv"][-1] == "s3://<redacted>/<redacted>/x"
    assert doc["config"]["resolved_args"]["bucket"] == "s3://<redacted>/<redacted>/x"
    assert doc["collection"]["redactions"]["user-pattern"] == 4  # argv and resolved_args, twice each


def test_masks_in_the_command_line_are_spelled_redacted_for_relaxs_rerun():
    # Relax's rerun refuses an argument holding "<redacted>" and would replay "***" literally; ours refuses both
    from relaxrepro.manifest.redact import Redactor, redact_document

    doc = redact_document({"command": {"argv": ["train.py", "--api-key", "sk-live-abcdefghijklmnopqrstuv",
                                                "--lr", "0.1"]}}, Redactor())
    assert doc["command"]["argv"] == ["train.py", "--api-key", "<redacted>", "--lr", "0.1"]
    assert redact_document(doc, Redactor())["command"]["argv"] == doc["command"]["argv"]  # stable


def test_home_paths_are_hidden_unless_keep_paths(tmp_path: Path) -> None:
    home = tmp_path / "home" / "alice"
    work = home / "proj"
    work.mkdir(parents=True)
    env = clean_env(HOME=str(home))
    doc = generate(tmp_path, env=env, cwd=work, command=["python", str(work / "train.py")])
    assert doc["command"]["cwd"] == "<HOME>/proj"
    assert doc["command"]["argv"] == ["python", "<HOME>/proj/train.py"]
    kept = generate(tmp_path, "--keep-paths", env=env, cwd=work,
                    command=["python", str(work / "train.py"), "--hf-token", FAKES["huggingface"]])
    assert kept["command"]["cwd"] == str(work)
    assert kept["command"]["argv"][:2] == ["python", str(work / "train.py")]
    # found by its flag's name: masked whole (spelled <redacted> in argv, which Relax's rerun refuses)
    assert kept["command"]["argv"][3] == "<redacted>"


def test_printed_manifest_is_redacted_too(tmp_path: Path) -> None:
    res = run_cli("generate", "--output", str(tmp_path / "m.json"), "--print", "--", "train.py", "--api-key", PW,
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert PW not in res.stdout and '"***"' in res.stdout


# -- one policy per run: every channel, one pass ------------------------------------------------------

HOME = "/home/alice"  # need not exist: $HOME is what makes it the home of this run
DATA = HOME + "/proj/data"


def _repo_with_change(tmp_path: Path, line: str) -> Path:
    """A repo whose uncommitted change adds ``line`` to train.py (so the patch carries it)."""
    repo = make_repo(tmp_path / "repo", {"train.py": "x = 1\n"})
    with open(repo / "train.py", "a") as fh:
        fh.write(line + "\n")
    return repo


def _patch_text(doc: dict) -> str:
    return doc["code"]["repo"]["patch"]["text"]


def test_keep_paths_reaches_the_patch_as_it_reaches_argv(tmp_path: Path) -> None:
    # The bug: argv kept /home/alice/proj/data while the patch adding that very path showed <HOME>/proj/data.
    repo = _repo_with_change(tmp_path, 'DATA = "%s"' % DATA)
    env = clean_env(HOME=HOME, RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))
    command = ["python", "train.py", "--data", DATA]
    kept = generate(tmp_path, "--keep-paths", env=env, cwd=repo, command=command)
    assert kept["command"]["argv"] == command
    assert '\n+DATA = "%s"\n' % DATA in _patch_text(kept)
    assert not kept["code"]["repo"]["patch"].get("redacted_lines")
    hidden = generate(tmp_path, env=env, cwd=repo, command=command)
    assert hidden["command"]["argv"] == ["python", "train.py", "--data", "<HOME>/proj/data"]
    assert '\n+DATA = "<HOME>/proj/data"\n' in _patch_text(hidden)
    assert DATA not in json.dumps(hidden)


def test_redact_pattern_reaches_the_patch_as_it_reaches_argv(tmp_path: Path) -> None:
    repo = _repo_with_change(tmp_path, 'BUCKET = "s3://data/proj-1234/x"')
    doc = generate(tmp_path, "--redact-pattern", "proj-[0-9]+", cwd=repo,
                   command=["python", "train.py", "--tag", "proj-1234"])
    assert doc["command"]["argv"] == ["python", "train.py", "--tag", "<redacted>"]
    assert '\n+BUCKET = "s3://data/<redacted>/x"\n' in _patch_text(doc)
    assert doc["code"]["repo"]["patch"]["redacted_lines"]
    assert "proj-1234" not in json.dumps(doc)
    assert doc["collection"]["redactions"]["user-pattern"] >= 3  # argv, resolved_args and the patch line


def _whole_document_passes(monkeypatch: pytest.MonkeyPatch) -> list:
    """Count every redaction pass over a whole document (a manifest or a node fragment), whoever runs it:
    each goes through ``Redactor.value`` with the top-level dict, however ``redact_document`` was imported."""
    passes = []
    original = Redactor.value

    def counting(self: Redactor, obj: object, key: object = None) -> object:
        if isinstance(obj, dict) and "run_id" in obj and "collection" in obj:
            passes.append(self)
        return original(self, obj, key)

    monkeypatch.setattr(Redactor, "value", counting)
    return passes


def _in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cwd: Path) -> None:
    monkeypatch.chdir(cwd)
    for var in ("RANK", "SLURM_PROCID", "RELAXREPRO_RUN_ID", "RELAXREPRO_OUTPUT_DIR", "RELAXREPRO_MANIFEST"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", HOME)
    monkeypatch.setenv("RELAXREPRO_CACHE_DIR", str(tmp_path / "cache"))


def test_generate_redacts_the_document_exactly_once_with_the_runs_policy(tmp_path: Path, monkeypatch, capsys) -> None:
    from relaxrepro import cli

    repo = _repo_with_change(tmp_path, 'DATA = "%s"' % DATA)
    _in_process(monkeypatch, tmp_path, repo)
    passes = _whole_document_passes(monkeypatch)
    out = tmp_path / "m.json"
    assert cli.main(["generate", "--keep-paths", "--output", str(out), "--", "python", "train.py", "--data", DATA]) == 0
    assert len(passes) == 1  # collection redacts; the writer trusts it, as the policy is the same object
    assert passes[0].keep_paths
    doc = json.loads(out.read_text())
    assert doc["command"]["argv"][-1] == DATA and '+DATA = "%s"' % DATA in _patch_text(doc)


def test_generate_node_report_redacts_the_fragment_exactly_once(tmp_path: Path, monkeypatch, capsys) -> None:
    from relaxrepro import cli

    _in_process(monkeypatch, tmp_path, tmp_path)
    passes = _whole_document_passes(monkeypatch)
    out = tmp_path / "node_x.json"
    assert cli.main(["generate", "--node-report", "--run-id", "run-1", "--keep-paths", "--redact-pattern", "acme",
                     "--output", str(out)]) == 0
    assert len(passes) == 1
    assert passes[0].keep_paths and [p.pattern for p in passes[0].extra] == ["acme"]
    assert json.loads(out.read_text())["run_id"] == "run-1"
