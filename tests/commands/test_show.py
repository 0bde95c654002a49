"""``relaxrepro show RUN``: one manifest for a person, one section, or its JSON; every value one escaped line."""

from __future__ import annotations

import json

from tests.helpers.common import git, make_repo, run_cli
from tests.helpers.recording import make_doc, put


def _recorded_run(tmp_path):
    """A real run: generate in a dirty git repo, with seeds in the command, written under runs/."""
    repo = make_repo(tmp_path / "proj", {"train.py": "print(1)\n"})
    (repo / "train.py").write_text("print(2)\n")
    res = run_cli("generate", "-q", "--output-dir", str(tmp_path / "runs"), "--group", "lr-sweep", "--note", "first",
                  "--", "python", "train.py", "--lr", "3e-4", "--seed", "7", cwd=repo)
    assert res.returncode == 0, res.stderr
    path = res.stdout.strip().splitlines()[-1]
    return repo, json.loads(open(path).read()), path


def test_show_by_run_id_prints_every_part_of_the_run(tmp_path):
    repo, doc, _ = _recorded_run(tmp_path)
    commit = git(repo, "rev-parse", "HEAD").strip()
    res = run_cli("show", doc["run_id"][:-3], "--runs", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "run %s" % doc["run_id"]
    for title in ("identity", "command", "code", "environment", "hardware", "topology", "seeds", "results"):
        assert title in lines, res.stdout
    text = res.stdout
    assert "  group            lr-sweep" in lines
    assert "  note             first" in lines
    assert "argv       python train.py --lr 3e-4 --seed 7" in text
    assert "  proj  %s, " % commit[:7] in text and ", dirty, patch 1 file(s) +1 -1" in text
    assert "values            seed=7" in text
    assert "manifest         runs/manifest_%s.json" % doc["run_id"] in text
    assert res.stderr == ""


def test_show_section_prints_paths_and_values_and_json_prints_the_recorded_json(tmp_path):
    _, doc, path = _recorded_run(tmp_path)
    res = run_cli("show", path, "--section", "seeds")
    assert res.returncode == 0, res.stderr
    assert "seeds.values.seed" in res.stdout and res.stdout.splitlines()[-1].split() == ["seeds.values.seed", "7"]
    assert all(line.startswith("seeds.") for line in res.stdout.splitlines())
    whole = run_cli("show", path, "--json")
    assert whole.returncode == 0 and json.loads(whole.stdout) == doc
    part = run_cli("show", path, "--section", "config.resolved_args", "--json")
    assert json.loads(part.stdout) == doc["config"]["resolved_args"]


def test_show_an_unknown_section_or_run_is_one_line_and_exit_2(tmp_path):
    _, doc, path = _recorded_run(tmp_path)
    res = run_cli("show", path, "--section", "hardwre")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "no section hardwre" in res.stderr and "hardware" in res.stderr
    res = run_cli("show", "20990101_000000_fffffff", "--runs", "runs", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1, res.stderr


def test_show_escapes_control_characters_from_the_manifest(tmp_path):
    evil = "x\x1b]2;owned\x07\nFAKE LINE\u202e"
    doc = make_doc("20260101_000000_aaaaaaa", lineage={"group": evil, "note": evil},
                   command={"argv": ["python", evil], "cwd": "/w", "source": "cli"},
                   results={"metrics": {evil: 1.5}})
    path = put(tmp_path, doc)
    for extra in ([], ["--section", "lineage"], ["--json"]):
        res = run_cli("show", str(path), *extra)
        assert res.returncode == 0, res.stderr
        assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\u202e" not in res.stdout
        assert "FAKE LINE" not in [line.strip() for line in res.stdout.splitlines()]
        assert not any(line.startswith("FAKE") for line in res.stdout.splitlines())
    res = run_cli("show", str(path))
    assert "group            x\\x1b]2;owned\\x07\\nFAKE LINE\\u202e" in res.stdout
