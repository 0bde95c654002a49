"""Relax's field names and placeholders, as the reading commands see them (``fields.RELAX_ALIASES``)."""

from __future__ import annotations

import json

import pytest

from relaxrepro.manifest import fields
from tests.helpers.common import FIXTURES

RELAX = FIXTURES / "relax"


def _load(name):
    return json.loads((RELAX / name).read_text())


@pytest.mark.parametrize("name,relax", [
    ("relax-A-clean.json", True), ("relax-A-argv-env.json", True), ("relaxrepro-A-clean.json", False),
], ids=["relax-clean", "relax-argv-env", "relaxrepro-clean"])
def test_is_relax_tells_the_writers_apart(name, relax):
    assert fields.is_relax(_load(name)) is relax


@pytest.mark.parametrize("path,twin", [
    ("config.arguments.lr", "config.resolved_args"),
    ("config.arguments", "config.resolved_args"),
    ("command.working_directory", "command.cwd"),
    ("code.relax.untracked_files", "code.relax.untracked"),
    ("code.relax.untracked_files[0]", "code.relax.untracked"),
    ("runtime.slurm.job_id", "scheduler"),
], ids=["below", "itself", "cwd", "repo-wildcard", "list-item", "slurm"])
def test_a_relax_field_has_a_twin_when_the_reader_copied_it(path, twin):
    doc = {"config": {"arguments": {"lr": 1}, "resolved_args": {"lr": 1}},
           "command": {"working_directory": ".", "cwd": "."}, "scheduler": {"job_id": "1"},
           "runtime": {"slurm": {"job_id": "1"}},
           "code": {"relax": {"untracked_files": ["a"], "untracked": {"count": 1, "files": ["a"]}}}}
    assert fields.relax_twin(doc, path) == twin


@pytest.mark.parametrize("path", [
    "config.arguments_extra", "config.resolved_args.lr", "code.relax.untracked_files_x",
    "code.megatron.untracked_files",
], ids=["longer-name", "relaxrepro-name", "longer-repo-field", "other-repo-without-twin"])
def test_no_twin_for_other_fields_or_without_the_copy(path):
    doc = {"config": {"arguments": {"lr": 1}, "resolved_args": {"lr": 1}},
           "code": {"relax": {"untracked": {}}, "megatron": {"untracked_files": []}}}
    assert fields.relax_twin(doc, path) is None


def test_recorded_reads_relaxrepro_name_else_relax_name():
    relax = _load("relax-A-argv-env.json")
    assert fields.recorded(relax, "command.cwd") == "."
    assert fields.recorded(relax, "config.selected_env")["NCCL_DEBUG"] == "INFO"
    assert fields.recorded(relax, "hardware.memory_total_gb") == 23.54
    ours = _load("relaxrepro-A-clean.json")
    assert fields.recorded(ours, "command.cwd") == "/srv/rlx/Relax"
    assert fields.recorded(ours, "config.nothing", None) is None


@pytest.mark.parametrize("a,b,same", [
    ("<redacted>", "wand***", True),
    ("--api-key=<redacted>", "--api-key=sk-a***", True),
    ("<home>/models/qwen", "<HOME>/models/qwen", True),
    ("<host>", "<internal-host>", True),
    ("<slurm-nodes>", "<internal-address>", True),
    ("<private-key>", "<redacted>", True),
    ("<home>/models/qwen", "<HOME>/models/llama", False),
    ("<redacted>", "<home>", False),
    ("<user>", "<redacted>", False),
    ("plain", "plain", True),
], ids=["mask", "mask-in-option", "home", "host", "slurm-nodes", "private-key", "home-other-path",
        "secret-vs-home", "user-vs-secret", "no-placeholder"])
def test_placeholder_form_spells_both_tools_alike(a, b, same):
    assert (fields.placeholder_form(a) == fields.placeholder_form(b)) is same


def test_relax_placeholders_are_redaction_placeholders():
    assert fields.redacted_parts("--data=<home>/d <slurm-nodes> <user> <host>") == [
        "<home>", "<user>", "<host>", "<slurm-nodes>"]
    assert fields.canonical_home("<home>/a:<home>/b") == "<HOME>/a:<HOME>/b"
