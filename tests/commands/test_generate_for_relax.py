"""What `generate` writes, Relax's own tools read: relaxrepro's manifests validate against the JSON Schema
of the Relax trainer's built-in manifest (redai-infra/Relax, schema 1.0), in several machine states.

The schema is read from the shared fixtures (``../shared/fixtures/relax``), never copied here. Relax's
reader (``normalize_manifest``) refuses a document whose ``code.relax``, ``config.files`` or
``environment.packages`` is not an object, or whose ``command.argv`` is not a list of strings: the schema
says all of that and more, so a manifest it validates is one Relax's check, diff and rerun load.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.helpers.common import ROOT, clean_env, git, make_repo, run_cli
from tests.helpers.gpu import NVIDIA, fake_smi

RELAX_SCHEMA = ROOT.parent / "shared" / "fixtures" / "relax" / "relax-experiment-manifest-v1.schema.json"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
"""``format: date-time`` in Relax's schema; jsonschema checks formats only with extra packages installed."""


@pytest.fixture(scope="module")
def relax_schema():
    if not RELAX_SCHEMA.is_file():
        pytest.skip("Relax's schema is read from %s, absent in this checkout (it is never copied into the "
                    "project)" % RELAX_SCHEMA)
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(RELAX_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _generate(tmp_path: Path, repo: Path, *command: str, env: Optional[Dict[str, str]] = None) -> dict:
    out = tmp_path / "manifest.json"
    res = run_cli("generate", "--output", str(out), "--", *command, env=env or clean_env(), cwd=repo)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def _assert_relax_reads(validator, doc: dict) -> None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join("%s: %s" % ("/".join(map(str, e.path)), e.message[:200]) for e in errors)
    assert RFC3339.match(doc["generated_at"]), doc["generated_at"]


@pytest.fixture
def relax_repo(tmp_path: Path) -> Path:
    # Named "relax": its entry is code.relax, the repository Relax's schema and rerun look at.
    return make_repo(tmp_path / "relax", {"README.md": "hello\n", "train.py": "print('train')\n"})


def test_a_clean_repo(tmp_path, relax_repo, relax_schema):
    doc = _generate(tmp_path, relax_repo, "python", "train.py", "--lr", "3e-4")
    _assert_relax_reads(relax_schema, doc)
    assert doc["code"]["relax"]["dirty"] is False
    assert doc["command"]["working_directory"] == doc["command"]["cwd"] == str(relax_repo)
    assert doc["config"]["files"] == {}  # an object even when empty: Relax's reader refuses a list


def test_a_dirty_repo_with_an_untracked_file(tmp_path, relax_repo, relax_schema):
    (relax_repo / "train.py").write_text("print('changed')\n")
    (relax_repo / "notes.txt").write_text("scratch\n")
    doc = _generate(tmp_path, relax_repo, "python", "train.py")
    _assert_relax_reads(relax_schema, doc)
    repo = doc["code"]["relax"]
    assert repo["dirty"] is True and repo["patch"]["sha256"]
    assert [f["path"] for f in repo["untracked"]["files"]] == ["notes.txt"]


def test_config_files_named_on_the_command_line(tmp_path, relax_repo, relax_schema):
    (relax_repo / "conf").mkdir()
    (relax_repo / "conf" / "train.yaml").write_text("lr: 0.1\nwandb:\n  api_key: plainpw1234abcd\n")
    (relax_repo / "token.json").write_text('{"vocab": 32000}\n')
    (relax_repo / "weights.json").write_bytes(b"\x00\x01binary")
    git(relax_repo, "add", ".")
    git(relax_repo, "commit", "-qm", "configs")
    doc = _generate(tmp_path, relax_repo, "python", "train.py", "--config", "conf/train.yaml",
                    "--tokenizer-config", "token.json", "--model-config", "weights.json",
                    "--extra-config", "missing.yaml")
    _assert_relax_reads(relax_schema, doc)
    config = doc["config"]
    assert sorted(config["files"]) == ["conf/train.yaml", "token.json", "weights.json"]
    assert all(re.match(r"^sha256:[0-9a-f]{64}$", d) for d in config["files"].values())
    assert config["file_details"] == {"conf/train.yaml": {"size": 42}, "token.json": {"size": 17},
                                      "weights.json": {"size": 8, "binary": True},
                                      "missing.yaml": {"error": "no such file or directory"}}
    assert config["file_contents"] == {"conf/train.yaml": "lr: 0.1\nwandb:\n  api_key: ***\n",
                                       "token.json": '{"vocab": 32000}\n'}


@pytest.mark.parametrize("answers, gpus", [
    ({"-q -x": NVIDIA / "xml" / "telegraf__dual_a5000-v13.xml"}, 2),
    ({"-q -x": NVIDIA / "xml" / "netdata__a100-sxm4-mig.xml"}, 1),
    ({"-q -x": NVIDIA / "xml" / "telegraf__pro-6000-maxq-blackwell-v13.xml"}, 1),
    ({"": NVIDIA / "table" / "thamada-nvidia-smi__L4_smi__out.txt"}, 1),  # only the default table answers
], ids=["dual-a5000-xml", "a100-mig-xml", "pro-6000-blackwell-xml", "l4-table"])
def test_gpus_from_captured_nvidia_smi_answers(tmp_path, relax_repo, relax_schema, answers, gpus):
    bindir = tmp_path / "bin"
    fake_smi(bindir, answers)
    doc = _generate(tmp_path, relax_repo, "python", "train.py",
                    env=clean_env(PATH="%s:/usr/bin:/bin" % bindir, CUDA_VISIBLE_DEVICES="0",
                                  SLURM_JOB_ID="4242001", SLURM_JOB_NUM_NODES="1"))
    _assert_relax_reads(relax_schema, doc)
    hw = doc["hardware"]
    assert hw["gpu_count"] == gpus and len(hw["gpus"]) == gpus and isinstance(hw["gpu_model"], str)
    assert doc["collection"]["probes"]["gpu"]["status"] in ("ok", "partial")


def test_the_check_is_not_vacuous(relax_schema):
    # What relaxrepro 1.1 wrote, and a manifest without Relax's required working directory, are refused.
    fixture = ROOT.parent / "shared" / "fixtures" / "relax" / "relaxrepro-A-clean.json"
    if not fixture.is_file():
        pytest.skip("%s is absent in this checkout" % fixture)
    old = json.loads(fixture.read_text())
    assert old["schema_version"] == "1.1" and old["config"]["files"] == []
    messages = sorted(e.message for e in relax_schema.iter_errors(old))
    assert messages == ["'working_directory' is a required property", "[] is not of type 'object'"]
