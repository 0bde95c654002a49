"""``relaxrepro diff`` between Relax's manifests and ours: only what really differs, one rule per test.

The hand-built pairs hold each rule on its own; the fixtures (tests/fixtures/relax, real output of Relax's
implementation and of relaxrepro on the same repository state) hold them together.
"""

from __future__ import annotations

import io
import json
import re

import pytest

from relaxrepro.commands import diff
from relaxrepro.manifest import fields
from tests.helpers.common import FIXTURES, run_cli
from tests.helpers.read import SHA_A, SHA_B, base_manifest, modified, write_json

RELAX = FIXTURES / "relax"


def _run(tmp_path, old, new, *args):
    a = write_json(tmp_path / "old.json", old)
    b = write_json(tmp_path / "new.json", new)
    out, err = io.StringIO(), io.StringIO()
    rc = diff.run_cli(str(a), str(b), as_json="--json" in args, include_volatile="--all" in args, env={},
                      stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def _lines(out):
    return [line.strip() for line in out.splitlines() if line.startswith("  ")]


# -- repositories: relax is Relax when nothing else could be ---------------------------------------

def test_repo_names_differing_only_in_case_are_one_repo(tmp_path):
    old = modified(base_manifest(), "code", {"relax": {"commit": SHA_A, "branch": "main", "dirty": False}})
    new = modified(base_manifest(), "code", {"Relax": {"commit": SHA_A, "branch": "main", "dirty": False}})
    assert _run(tmp_path, old, new) == (0, "identical\n", "")
    new = modified(new, "code.Relax.commit", SHA_B)
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1
    assert _lines(out) == ["~ relax.commit  aaaaaaaaaaaa -> bbbbbbbbbbbb"]


def test_repo_names_are_not_paired_when_the_case_is_ambiguous(tmp_path):
    repo = {"commit": SHA_A, "dirty": False}
    old = modified(base_manifest(), "code", {"relax": dict(repo)})
    new = modified(base_manifest(), "code", {"Relax": dict(repo), "RELAX": dict(repo)})
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1
    assert _lines(out) == ["+ RELAX  (added, commit aaaaaaaaaaaa)", "+ Relax  (added, commit aaaaaaaaaaaa)",
                           "- relax  (removed, commit aaaaaaaaaaaa)"]


# -- a working directory of "." is "wherever it ran" ------------------------------------------------

def test_cwd_dot_is_not_a_difference_unless_all(tmp_path):
    old = modified(base_manifest(), "command.cwd", ".")
    new = base_manifest()
    rc, out, _ = _run(tmp_path, old, new)
    assert (rc, out) == (0, "identical (1 field not recorded on one side; --all shows them)\n")
    rc, out, _ = _run(tmp_path, old, new, "--all")
    assert rc == 1
    assert out == ("not recorded on one side (shown with --all)\n"
                   "  ~ command.cwd  . -> /work/proj\n"
                   "1 difference: not recorded 1\n")
    change = json.loads(_run(tmp_path, old, new, "--json", "--all")[1])["changes"][0]
    assert change == {"category": "unrecorded", "kind": "changed", "path": "command.cwd", "old": ".",
                      "new": "/work/proj", "unrecorded": True}


def test_two_absolute_cwds_still_differ(tmp_path):
    rc, out, _ = _run(tmp_path, base_manifest(), modified(base_manifest(), "command.cwd", "/work/other"))
    assert rc == 1
    assert "~ command.cwd  /work/proj -> /work/other" in _lines(out)


# -- null and empty against absent: not recorded ----------------------------------------------------

@pytest.mark.parametrize("empty", [None, "", [], {}], ids=["null", "empty-string", "empty-list", "empty-object"])
def test_null_or_empty_against_absent_is_not_a_difference_unless_all(tmp_path, empty):
    old = modified(base_manifest(), "inputs", {"tokenizer": empty})
    old = modified(old, "hardware.cpu_model", empty)
    rc, out, _ = _run(tmp_path, old, base_manifest())
    assert rc == 0
    if empty == {}:  # an empty object holds no field to compare
        assert out == "identical\n"
        return
    assert out == "identical (2 fields not recorded on one side; --all shows them)\n"
    doc = json.loads(_run(tmp_path, old, base_manifest(), "--json")[1])
    assert (doc["identical"], doc["hidden_unrecorded"], doc["changes"]) == (True, 2, [])
    rc, out, _ = _run(tmp_path, old, base_manifest(), "--all")
    assert rc == 1
    assert _lines(out) == ["- hardware.cpu_model  %s" % json.dumps(empty), "- inputs.tokenizer  %s" % json.dumps(empty)]


def test_null_against_a_value_is_a_difference(tmp_path):
    rc, out, _ = _run(tmp_path, modified(base_manifest(), "hardware.cuda_version", None), base_manifest())
    assert rc == 1
    assert _lines(out) == ["~ hardware.cuda_version  null -> 12.4"]


# -- the placeholders of both tools -----------------------------------------------------------------

@pytest.mark.parametrize("relax,ours", [
    ("<redacted>", "wand***"),
    ("--api-key=<redacted>", "--api-key=sk-a***"),
    ("<home>/models/qwen", "<HOME>/models/qwen"),
    ("<host>", "<internal-host>"),
    ("<slurm-nodes>", "<internal-host>"),
], ids=["secret", "secret-in-an-option", "home", "host", "slurm-nodes"])
def test_placeholders_of_both_tools_are_the_same_value(tmp_path, relax, ours):
    old = modified(base_manifest(), "command.argv", ["python", "train.py", relax])
    old = modified(old, "config.resolved_args.token", relax)
    new = modified(base_manifest(), "command.argv", ["python", "train.py", ours])
    new = modified(new, "config.resolved_args.token", ours)
    assert _run(tmp_path, old, new) == (0, "identical\n", "")


def test_a_placeholder_against_a_real_value_is_a_difference(tmp_path):
    old = modified(base_manifest(), "config.resolved_args.data", "<home>/d")
    new = modified(base_manifest(), "config.resolved_args.data", "/srv/d")
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1 and _lines(out) == ["~ config.resolved_args.data  <home>/d -> /srv/d"]


# -- Relax's original fields beside the reader's copies --------------------------------------------

def _relax_pair():
    """A Relax document as the reader leaves it (originals beside relaxrepro's names) and ours."""
    ours = base_manifest()
    relax = modified(ours, "config.arguments", dict(ours["config"]["resolved_args"]))
    relax = modified(relax, "config.environment", dict(ours["config"]["selected_env"]))
    relax = modified(relax, "command.working_directory", ".")
    relax = modified(relax, "hardware.memory_gb", 503.7)
    relax = modified(relax, "hardware.memory_total_gb", 503.7)
    relax = modified(relax, "environment.machine", "x86_64")
    relax = modified(relax, "code.proj.untracked_files", ["notes.txt"])
    relax = modified(relax, "code.proj.untracked", {"count": 1, "files": ["notes.txt"]})
    ours = modified(ours, "hardware.memory_total_gb", 503.7)
    ours = modified(ours, "code.proj.untracked", {"count": 1, "files": ["notes.txt"]})
    return relax, ours


def test_relax_fields_beside_their_relaxrepro_twins_are_not_counted_twice(tmp_path):
    relax, ours = _relax_pair()
    assert _run(tmp_path, relax, ours) == (0, "identical\n", "")
    ours = modified(ours, "config.resolved_args.lr", "1e-4")
    ours = modified(ours, "config.selected_env.NCCL_ALGO", "Tree")
    ours = modified(ours, "hardware.memory_total_gb", 251.8)
    rc, out, _ = _run(tmp_path, relax, ours)
    assert rc == 1
    assert _lines(out) == ["~ config.resolved_args.lr  3e-4 -> 1e-4", "~ NCCL_ALGO  Ring -> Tree",
                           "~ hardware.memory_total_gb  503.7 -> 251.8"]


def test_a_relax_field_without_its_twin_is_compared_as_it_is():
    # The reader gives every Relax field its twin; where one is missing all the same, nothing is hidden for it
    relax, _ours = _relax_pair()
    assert fields.relax_twin(relax, "hardware.memory_gb") == "hardware.memory_total_gb"
    del relax["hardware"]["memory_total_gb"]
    assert fields.relax_twin(relax, "hardware.memory_gb") is None


def test_relax_alias_table_names_relaxrepro_fields_and_no_field_twice():
    schema = json.loads((FIXTURES.parent.parent / "schema" / "experiment-manifest-v1.schema.json").read_text())
    top = set(schema["properties"])
    for source, target in fields.RELAX_ALIASES.items():
        assert target.split(".")[0] in top, target
        assert source not in fields.RELAX_ALIASES.values(), source  # a relaxrepro name is never an alias
    for mark in fields.RELAX_MARKS:
        assert any(mark == s or s.startswith(mark + ".") for s in fields.RELAX_ALIASES), mark


def test_a_package_relax_never_looked_for_is_not_recorded(tmp_path):
    relax, ours = _relax_pair()
    relax = modified(relax, "environment.packages", {"torch": "2.3.0+cu121", "ray": "2.9.3"})
    ours = modified(ours, "environment.packages", {"torch": "2.3.0+cu121", "ray": "2.9.3", "numpy": "1.26.4",
                                                   "pip": "24.0"})
    rc, out, _ = _run(tmp_path, relax, ours)
    assert rc == 1  # numpy is one of the seven Relax looks up: it was not installed there
    assert _lines(out) == ["+ numpy  1.26.4"]
    assert out.splitlines()[-1] == "1 difference: packages 1 (1 field not recorded on one side; --all shows them)"
    assert "+ environment.packages.pip  24.0" in _lines(_run(tmp_path, relax, ours, "--all")[1])


# -- long values: the part that differs ---------------------------------------------------------------

def test_two_long_argv_differing_in_their_tail_show_the_tail(tmp_path):
    argv = ["python", "/srv/rlx/drivers/relax_train.py"] + ["--opt-%d=%d" % (i, i) for i in range(30)]
    old = modified(base_manifest(), "command.argv", argv + ["--tensorboard-dir", "/runs/a"])
    new = modified(base_manifest(), "command.argv", argv + ["--tensorboard-dir", "/runs/b"])
    rc, out, _ = _run(tmp_path, old, new)
    assert rc == 1
    assert _lines(out) == ['~ command.argv  [...31 same, "--opt-29=29", "--tensorboard-dir", "/runs/a"] -> '
                           '[...31 same, "--opt-29=29", "--tensorboard-dir", "/runs/b"]']


def test_two_long_argv_differing_in_the_middle_show_the_middle(tmp_path):
    argv = ["--opt-%d=%d" % (i, i) for i in range(30)]
    new_argv = list(argv)
    new_argv[15] = "--opt-15=X"
    rc, out, _ = _run(tmp_path, modified(base_manifest(), "command.argv", argv),
                      modified(base_manifest(), "command.argv", new_argv))
    assert _lines(out) == ['~ command.argv  [...13 same, "--opt-13=13", "--opt-14=14", "--opt-15=15", "--opt-16=16", '
                           '"--opt-17=17", 12 same...] -> [...13 same, "--opt-13=13", "--opt-14=14", "--opt-15=X", '
                           '"--opt-16=16", "--opt-17=17", 12 same...]']


def test_a_long_string_differing_near_its_end_shows_that_end(tmp_path):
    text = "x" * 200
    old = modified(base_manifest(), "config.resolved_args.prompt", text + "-old")
    new = modified(base_manifest(), "config.resolved_args.prompt", text + "-new")
    rc, out, _ = _run(tmp_path, old, new)
    # forty characters of what both share, then where they part
    assert _lines(out) == ["~ config.resolved_args.prompt  ...%s-old -> ...%s-new" % ("x" * 39, "x" * 39)]


def test_short_values_are_shown_whole(tmp_path):
    old = modified(base_manifest(), "command.argv", ["python", "train.py", "--lr", "3e-4"])
    new = modified(base_manifest(), "command.argv", ["python", "train.py", "--lr", "1e-4"])
    assert _lines(_run(tmp_path, old, new)[1]) == [
        '~ command.argv  ["python", "train.py", "--lr", "3e-4"] -> ["python", "train.py", "--lr", "1e-4"]']


# -- the real manifests --------------------------------------------------------------------------------

def test_relax_manifest_against_ours_of_the_same_state_pairs_repos_and_hides_what_says_nothing():
    res = run_cli("diff", str(RELAX / "relax-A-clean.json"), str(RELAX / "relaxrepro-A-clean.json"))
    assert res.returncode == 0, res.stdout + res.stderr  # the same repo state, the same machine: nothing differs
    assert re.fullmatch(r"identical \(\d+ volatile fields hidden, \d+ fields not recorded on one side; --all "
                        r"shows them\)\n", res.stdout)
    lines = _lines(run_cli("diff", "--all", str(RELAX / "relax-A-clean.json"),
                           str(RELAX / "relaxrepro-A-clean.json")).stdout)
    assert not [x for x in lines if x.startswith(("+ Relax ", "- relax "))]  # one repo, not one gone and one new
    assert "+ code.relax.path  /srv/rlx/Relax" in lines  # what only relaxrepro records: shown with --all
    assert "- user  <user>" in lines  # and what only Relax records


def test_a_field_only_one_tool_records_is_not_recorded_but_a_value_both_record_still_differs(tmp_path):
    relax, ours = _relax_pair()
    ours = modified(ours, "hardware.cpu.cores", 64)  # relaxrepro records cores; Relax never does
    rc, out, _ = _run(tmp_path, relax, ours)
    assert (rc, _lines(out)) == (0, [])
    ours = modified(ours, "hardware.memory_total_gb", 1.0)  # both record memory: that one differs
    rc, out, _ = _run(tmp_path, relax, ours)
    assert rc == 1 and _lines(out) == ["~ hardware.memory_total_gb  503.7 -> 1.0"]


_LAYOUT_ONLY = ("command.cwd", "environment.system.arch", "environment.system.os", "environment.system.kernel",
                "hardware.cpu.logical_cpus", "hardware.cpu.numa_nodes", "hardware.memory_total_gb")
"""Fields both manifests record with the same value, under another name in Relax's."""


def test_relax_manifest_against_ours_of_the_same_state_lists_no_layout_only_difference():
    res = run_cli("diff", "--json", "--all", str(RELAX / "relax-A-clean.json"), str(RELAX / "relaxrepro-A-clean.json"))
    assert res.returncode == 1, res.stderr  # --all: the fields one tool alone records, and the volatile ones
    changes = json.loads(res.stdout)["changes"]
    # A Relax name shows only where Relax wrote null (nothing to copy): "not recorded", never a difference
    relax_named = [c for c in changes if any(c["path"] == s or c["path"].startswith(s + ".")
                                             for s in fields.RELAX_ALIASES)]
    assert relax_named and all(c.get("unrecorded") and c["old"] is None for c in relax_named), relax_named
    assert [c["path"] for c in changes if c["path"] in _LAYOUT_ONLY and not c.get("unrecorded")] == []
    assert [c for c in changes if c["path"].startswith("code.") and c["kind"] in ("added", "removed")
            and c["path"].count(".") == 1] == []
    # What is left really differs: fields only one tool records, values the two found differently (Relax's
    # config.environment falls back to configs/env.yaml's values for variables the process did not have).
    assert all(c["kind"] in ("added", "removed") or c["old"] != c["new"] for c in changes)
