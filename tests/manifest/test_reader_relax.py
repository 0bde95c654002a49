"""The Relax trainer's own manifests read as v1: its 1.0 layout and its earlier flat one, each Relax field
also under relaxrepro's name, the originals kept (tests/fixtures/relax, captured from Relax's writer)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from relaxrepro.manifest import fields
from relaxrepro.manifest.fields import RELAX_ALIASES
from relaxrepro.manifest.reader import normalize_legacy, parse_manifest, read_manifest_file
from tests.helpers.common import FIXTURES

RELAX = FIXTURES / "relax"
CAPTURES = sorted(RELAX.glob("*.json"))


def _raw(name: str) -> dict:
    return json.loads((RELAX / name).read_text())


def _read(name: str) -> dict:
    return read_manifest_file(RELAX / name)[0]


def _leaves(node: dict, where: tuple = ()):
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, where + (key,))
        else:
            yield where + (key,), value


def _at(doc: dict, where: tuple):
    for key in where:
        doc = doc[key]
    return doc


def test_the_captures_are_here():
    assert len(CAPTURES) >= 6, CAPTURES


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_every_capture_reads_and_keeps_what_it_recorded(path: Path):
    raw = json.loads(path.read_text())
    doc, warnings = read_manifest_file(path)
    assert doc["schema_version"] == raw["schema_version"]
    assert isinstance(doc["command"]["cwd"], str)
    assert doc["code"] and all(isinstance(r.get("commit"), str) for r in doc["code"].values())
    # Nothing Relax wrote is taken away or changed (except a flat code, which moves under its repo's name).
    if isinstance(raw["code"].get("commit"), str):
        assert list(doc["code"].values()) == [raw.pop("code")]
    if isinstance(raw["config"].get("files"), list):  # relaxrepro 1.1's list: read as 1.2's map keyed by path
        assert raw["config"].pop("files") == [] and doc["config"].pop("files") == {}
    for where, value in _leaves(raw):
        assert _at(doc, where) == value, where
    if path.stem.startswith("relaxrepro"):
        assert (doc, warnings) == (raw, [])  # ours reads exactly as written
    elif path.stem == "relax-A-old-argv":
        assert warnings == ["Relax's earlier flat code (commit, branch, dirty, repository) read as code.%s"
                            % next(iter(doc["code"]))]
    else:  # a reader copying names needs no word on every command: the originals stay where they were
        assert warnings == []


def test_relax_names_read_as_ours():
    doc = _read("relax-A-argv-env.json")
    raw = _raw("relax-A-argv-env.json")
    assert doc["command"]["cwd"] == "."
    assert doc["config"]["resolved_args"] == raw["config"]["arguments"]
    assert doc["config"]["selected_env"] == raw["config"]["environment"]
    assert doc["environment"]["system"] == {"arch": "x86_64", "os": "Linux", "kernel": "6.18.44-fc-v1098",
                                            "hostname": "<host>"}
    assert doc["hardware"]["cpu"] == {"logical_cpus": 2, "numa_nodes": 1}
    assert doc["hardware"]["memory_total_gb"] == 23.54
    assert doc["scheduler"] == {"type": "slurm", "job_id": "4242001", "node_count": 2, "nodelist": "<slurm-nodes>",
                                "partition": "gpu"}
    assert doc["seeds"] == {"values": {"seed": 42}}
    assert doc["code"]["relax"]["untracked"] == {"count": 0, "files": [], "truncated": False}
    assert "cuda_version" not in doc["hardware"]  # Relax's null is "not recorded", not a value to copy


def test_untracked_files_read_as_ours():
    repo = _read("relax-A-dirty.json")["code"]["relax"]
    assert repo["untracked"] == {"count": 1, "files": ["notes.txt"], "truncated": False}
    assert repo["untracked_files"] == ["notes.txt"] and repo["tracked_dirty"] is True


def test_the_earlier_flat_layout_reads():
    """Refused before with "Unexpected type string (expected object) in 'code.branch'"; Relax's reader takes it."""
    doc, warnings = read_manifest_file(RELAX / "relax-A-old-argv.json")
    assert doc["code"] == {"Relax": {"branch": "main", "commit": "347a67574d993cad7eb8b5b6e1a9153cd56a5ece",
                                     "dirty": False, "repository": "Relax"}}
    assert warnings[0] == "Relax's earlier flat code (commit, branch, dirty, repository) read as code.Relax"
    assert doc["generated_at"] == doc["created_at"] == "2026-12-03T08:03:30.577977+00:00"
    assert doc["environment"]["python_version"] == "3.11.7"
    assert fields.python_version(doc) == "3.11.7"
    assert doc["environment"]["system"] == {"arch": "x86_64", "os": "Linux", "kernel": "6.18.44-fc-v1098"}
    assert doc["hardware"]["memory_total_gb"] == 23.54  # memory_bytes 25275973632
    assert doc["collection"] == {"seconds": 0.0131}
    assert doc["seeds"] == {"values": {"seed": 42}}


def test_a_flat_code_without_a_repository_name_is_main():
    doc, warnings = normalize_legacy({"schema_version": "1.0", "code": {"commit": "a" * 40, "dirty": True}})
    assert doc["code"] == {"main": {"commit": "a" * 40, "dirty": True}}


def test_the_document_passed_in_is_not_changed():
    raw = _raw("relax-A-argv-env.json")
    before = copy.deepcopy(raw)
    normalize_legacy(raw)
    assert raw == before


def test_a_name_already_used_is_never_overwritten():
    doc, _ = normalize_legacy({"schema_version": "1.0", "command": {"working_directory": ".", "cwd": "/w"},
                               "environment": {"machine": "aarch64", "system": "odd"}})
    assert doc["command"]["cwd"] == "/w"
    assert doc["environment"]["system"] == "odd"


def test_relax_and_relaxrepro_of_the_same_state_agree_on_every_shared_field():
    """relax-A-clean and relaxrepro-A-clean were written a second apart from the same repo and machine:
    every field both record, under relaxrepro's names, holds the same value (the layout-only differences)."""
    relax, ours = _read("relax-A-clean.json"), _read("relaxrepro-A-clean.json")
    compared = []
    for target in dict.fromkeys(RELAX_ALIASES.values()):
        if "*" in target:
            continue
        a, b = fields.get(relax, target), fields.get(ours, target)
        if a is fields.MISSING or b is fields.MISSING or target in ("generated_at", "environment.system.hostname"):
            continue  # written a second apart; both hostnames are redacted
        compared.append(target)
        if target == "command.cwd":
            assert (a, b) == (".", "/srv/rlx/Relax")  # Relax records "." (where it ran), we the absolute path
        elif target == "config.resolved_args":  # each tool's own reading of the command
            assert (a, b) == ({"config": None, "tensorboard_dir": None},
                              {"output": "/srv/rlx/relax-manifests/A-clean.json"})
        elif target == "config.selected_env":  # each tool's own allow-list
            assert set(a) == {"CLEARML_SUPPRESS_UPDATE_MESSAGE", "CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_DEBUG",
                              "PYTHONBUFFERED", "PYTHONPATH", "TOKENIZERS_PARALLELISM"} and b == {}
        else:
            assert a == b, target
    assert sorted(compared) == ["command.cwd", "config.resolved_args", "config.selected_env",
                                "environment.system.arch", "environment.system.kernel", "environment.system.os",
                                "hardware.cpu.logical_cpus", "hardware.cpu.numa_nodes", "hardware.memory_total_gb"]
    [(rname, rrepo)], [(oname, orepo)] = relax["code"].items(), ours["code"].items()
    assert rname.lower() == oname.lower()
    for key in ("commit", "branch", "dirty", "untracked"):
        assert rrepo[key] == orepo[key], key
    assert fields.python_version(relax) == fields.python_version(ours)
    assert fields.redacted_parts(relax["hostname"]) == ["<host>"]
    assert fields.redacted_parts(ours["environment"]["system"]["hostname"]) == ["<internal-host>"]


def test_a_relaxrepro_document_with_no_relax_field_is_untouched():
    raw = (RELAX / "relaxrepro-A-clean.json").read_bytes()
    doc, warnings = parse_manifest(raw)
    want = json.loads(raw)
    want["config"]["files"] = {}  # 1.1's list of config files, read as 1.2's map keyed by path (none here)
    assert (doc, warnings) == (want, [])
