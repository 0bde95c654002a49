"""``relaxrepro ls`` (the run index) and ``relaxrepro compare --group`` (a sweep side by side)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from relaxrepro.manifest import scan, writer
from relaxrepro.manifest.reader import ManifestError
from relaxrepro.manifest.summary import LS_FIELDS
from tests.helpers.common import clean_env, generate, run_cli, validate_manifest
from tests.helpers.recording import make_doc, put


def _tree(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    a = make_doc("20260101_000000_aaaaaaa", generated_at="2026-01-01T10:00:00Z",
                 code={"relax": {"commit": "a" * 40, "dirty": True}, "megatron": {"commit": "b" * 40, "dirty": False}},
                 hardware={"gpus": [{"model": "NVIDIA H100 80GB HBM3"}] * 8},
                 training={"algorithm": "grpo"},
                 lineage={"group": "lr-sweep"},
                 outcome={"status": "ok", "exit_code": 0, "ended_at": "2026-01-01T11:00:00Z", "duration_s": 3600})
    b = make_doc("20260102_000000_bbbbbbb", generated_at="2026-01-02T10:00:00Z",
                 hardware={"gpu_count": 4, "gpu_model": "NVIDIA A100-SXM4-40GB"},
                 lineage={"group": "lr-sweep", "parent": {"run_id": "20260101_000000_aaaaaaa", "reason": "load",
                                                          "found": True}},
                 outcome={"status": "signal", "exit_code": 137, "signal": 9, "signal_name": "SIGKILL",
                          "ended_at": "2026-01-02T10:05:00Z", "duration_s": 300})
    c = make_doc("20251231_000000_ccccccc", generated_at="2025-12-31T10:00:00Z")
    for d in (a, b, c):
        validate_manifest(d)
    put(runs / "a", a)
    put(runs / "b" / "deep" / "er", b)
    put(runs, c)
    return runs


def test_ls_lists_every_manifest_oldest_first(tmp_path):
    _tree(tmp_path)
    res = run_cli("ls", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "RUN                      TIME (UTC)        CODE                             ALGO  GPUS              "
        "GROUP     PARENT                   OUTCOME        PATH",
        "20251231_000000_ccccccc  2025-12-31 10:00  -                                -     -                 "
        "-         -                        -              runs/manifest_20251231_000000_ccccccc.json",
        "20260101_000000_aaaaaaa  2026-01-01 10:00  megatron@bbbbbbb,relax@aaaaaaa*  grpo  8xH100-80GB-HBM3  "
        "lr-sweep  -                        ok             runs/a/manifest_20260101_000000_aaaaaaa.json",
        "20260102_000000_bbbbbbb  2026-01-02 10:00  -                                -     4xA100-SXM4-40GB  "
        "lr-sweep  20260101_000000_aaaaaaa  SIGKILL (137)  runs/b/deep/er/manifest_20260102_000000_bbbbbbb.json",
    ]
    assert res.stderr == ""


def test_ls_json(tmp_path):
    _tree(tmp_path)
    rows = json.loads(run_cli("ls", "runs", "--json", cwd=tmp_path).stdout)
    assert [r["run_id"] for r in rows] == ["20251231_000000_ccccccc", "20260101_000000_aaaaaaa",
                                           "20260102_000000_bbbbbbb"]
    assert rows[1]["code"] == [{"name": "megatron", "commit": "b" * 40, "dirty": False},
                               {"name": "relax", "commit": "a" * 40, "dirty": True}]
    assert rows[1]["gpus"] == {"count": 8, "model": "NVIDIA H100 80GB HBM3"}
    assert rows[2]["parent"] == "20260101_000000_aaaaaaa"
    assert rows[2]["outcome"]["signal_name"] == "SIGKILL"


def test_ls_shows_the_tracker_runs_a_manifest_was_attached_to(tmp_path):
    runs = _tree(tmp_path)
    tracked = make_doc("20260103_000000_ddddddd", generated_at="2026-01-03T10:00:00Z",
                       lineage={"trackers": [{"tool": "wandb", "run": "team/proj/abc123"},
                                             {"tool": "mlflow", "run_id": "f" * 32, "tracking_uri": "sqlite:///m.db"}]})
    validate_manifest(tracked)
    put(runs, tracked)
    lines = run_cli("ls", "runs", cwd=tmp_path).stdout.splitlines()
    assert lines[0].split()[-2:] == ["TRACKERS", "PATH"]
    assert lines[-1].split()[-2:] == ["mlflow,wandb", "runs/manifest_20260103_000000_ddddddd.json"]
    assert lines[1].split()[-2:] == ["-", "runs/manifest_20251231_000000_ccccccc.json"]
    rows = json.loads(run_cli("ls", "runs", "--json", cwd=tmp_path).stdout)
    assert rows[-1]["trackers"] == tracked["lineage"]["trackers"]
    assert rows[0]["trackers"] == []


def test_unreadable_manifests_are_listed_and_the_rest_still_shown(tmp_path):
    runs = _tree(tmp_path)
    bad = runs / "bad"
    bad.mkdir()
    (bad / "manifest_notjson.json").write_text("{not json")
    (bad / "manifest_empty.json").write_text("")
    (bad / "manifest_future.json").write_text(json.dumps(dict(make_doc("F"), schema_version="2.0"), indent=1) + "\n")
    whole = (runs / "a" / "manifest_20260101_000000_aaaaaaa.json").read_bytes()
    (bad / "manifest_cut.json").write_bytes(whole[: len(whole) // 2])  # a copy cut short
    os.symlink(str(bad / "gone.json"), str(bad / "manifest_dangling.json"))
    res = run_cli("ls", "runs", cwd=tmp_path)
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert len(lines) == 1 + 3 + 5
    assert lines[4:] == [
        "unreadable  runs/bad/manifest_cut.json: not JSON: Expecting ':' delimiter at line 35 column 12",
        "unreadable  runs/bad/manifest_dangling.json: cannot read: No such file or directory",
        "unreadable  runs/bad/manifest_empty.json: file is empty",
        "unreadable  runs/bad/manifest_future.json: unsupported schema_version 2.0: this relaxrepro reads 1.x",
        "unreadable  runs/bad/manifest_notjson.json: not JSON: Expecting property name enclosed in double quotes "
        "at line 1 column 2",
    ]
    assert res.stderr == "relaxrepro ls: 5 of 8 manifests unreadable\n"
    rows = json.loads(run_cli("ls", "runs", "--json", cwd=tmp_path).stdout)
    assert [r["path"] for r in rows if "error" in r] == [
        "runs/bad/manifest_cut.json", "runs/bad/manifest_dangling.json", "runs/bad/manifest_empty.json",
        "runs/bad/manifest_future.json", "runs/bad/manifest_notjson.json"]


def _hostile(runs: Path) -> None:
    """Beside good manifests: a FIFO and a link to /dev/zero (ls used to wait or read until memory ran out), a
    5,000-digit integer (ValueError: the whole listing aborted) and a NaN in a shown field (ls took it)."""
    bad = runs / "bad"
    bad.mkdir()
    os.mkfifo(str(bad / "manifest_x.json"))
    os.symlink("/dev/zero", str(bad / "manifest_z.json"))
    huge = writer.serialize(make_doc("H", training={"seed": 1}, lineage={"group": "lr-sweep"}))
    (bad / "manifest_huge.json").write_bytes(huge.replace(b'"seed": 1', b'"seed": ' + b"7" * 5000))
    nan = writer.serialize(make_doc("N", outcome={"metrics": {"loss": 0.5}}, lineage={"group": "lr-sweep"}))
    (bad / "manifest_nan.json").write_bytes(nan.replace(b'"loss": 0.5', b'"loss": NaN'))
    hidden = writer.serialize(make_doc("M", config={"resolved_args": {"lr": 0.5}}, lineage={"group": "lr-sweep"}))
    (bad / "manifest_nan_args.json").write_bytes(hidden.replace(b'"lr": 0.5', b'"lr": -Infinity'))  # not shown


_HOSTILE_LINES = [
    "runs/bad/manifest_huge.json: integer of 5000 digits is longer than the 4300 allowed in 'training.seed'",
    "runs/bad/manifest_nan.json: not valid JSON: NaN literal is not allowed (JSON has no NaN) in "
    "'outcome.metrics.loss'",
    "runs/bad/manifest_nan_args.json: not valid JSON: -Infinity literal is not allowed (JSON has no -Infinity) in "
    "'config.resolved_args.lr'",
    "runs/bad/manifest_x.json: not a regular file",
    "runs/bad/manifest_z.json: not a regular file",
]


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs, /dev/zero")
def test_a_fifo_a_device_a_huge_integer_and_a_nan_are_unreadable_and_the_rest_still_listed(tmp_path):
    _hostile(_tree(tmp_path))
    res = run_cli("ls", "runs", cwd=tmp_path)  # run_cli's timeout is the hang guard
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["20251231_000000_ccccccc", "20260101_000000_aaaaaaa",
                                                          "20260102_000000_bbbbbbb"]
    assert lines[4:] == ["unreadable  " + line for line in _HOSTILE_LINES]
    assert res.stderr == "relaxrepro ls: 5 of 8 manifests unreadable\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs, /dev/zero")
def test_compare_names_the_files_it_could_not_read_and_compares_the_rest(tmp_path):
    _sweep(tmp_path)
    _hostile(tmp_path / "runs")
    res = run_cli("compare", "--group", "lr-sweep", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("group lr-sweep: 3 runs, 3 of 7 recorded values vary\n")
    assert res.stderr.splitlines() == ["relaxrepro compare: warning: unreadable: " + line for line in _HOSTILE_LINES]


def test_a_missing_directory_is_an_error_but_the_others_are_listed(tmp_path):
    _tree(tmp_path)
    res = run_cli("ls", "runs/a", "nowhere", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr == "relaxrepro ls: error: nowhere: no such file or directory\n"
    assert len(res.stdout.splitlines()) == 2


def test_ls_of_an_empty_tree(tmp_path):
    res = run_cli("ls", cwd=tmp_path)
    assert (res.returncode, res.stdout) == (0, "")
    assert res.stderr == "relaxrepro ls: no manifest_*.json under .\n"


def test_hidden_directories_are_skipped_and_symlink_loops_do_not_hang(tmp_path):
    runs = _tree(tmp_path)
    put(runs / ".trash", make_doc("hidden"))
    os.symlink(str(runs), str(runs / "a" / "loop"))
    ids = [e.run_id for e in scan.scan([str(runs)])]
    assert sorted(ids) == ["20251231_000000_ccccccc", "20260101_000000_aaaaaaa", "20260102_000000_bbbbbbb"]


def test_the_quick_reader_agrees_with_the_strict_reader_on_a_real_manifest(tmp_path, repo):
    doc = generate(tmp_path, "--group", "g", cwd=repo)
    path = next(tmp_path.glob("m_*.json"))
    quick = scan.read_fields(str(path))
    assert quick == {k: doc[k] for k in LS_FIELDS if k in doc}
    assert scan._quick(path.read_bytes(), LS_FIELDS) is not None  # the fast path was the one taken


@pytest.mark.parametrize("layout", ["compact", "indent-4"])
def test_other_layouts_are_read_whole(tmp_path, layout):
    doc = make_doc("X", lineage={"group": "g"})
    text = json.dumps(doc) if layout == "compact" else json.dumps(doc, indent=4)
    (tmp_path / "manifest_X.json").write_text(text)
    assert scan._quick((tmp_path / "manifest_X.json").read_bytes(), LS_FIELDS) is None
    assert scan.read_fields(str(tmp_path / "manifest_X.json"))["lineage"] == {"group": "g"}


def test_a_legacy_flat_record_is_listed(tmp_path):
    (tmp_path / "manifest_old.json").write_text(json.dumps({"experiment_name": "x", "git_commit": "c" * 40,
                                                            "has_uncommitted_changes": True}))
    fields = scan.read_fields(str(tmp_path / "manifest_old.json"))
    assert fields["code"] == {"main": {"commit": "c" * 40, "dirty": True}}


def test_read_fields_refuses_a_non_string_run_id(tmp_path):
    put(tmp_path, dict(make_doc("X"), run_id=7), name="manifest_X.json")
    with pytest.raises(ManifestError, match="run_id"):
        scan.read_fields(str(tmp_path / "manifest_X.json"))


# -- compare --group ------------------------------------------------------------------------------

def _sweep(tmp_path: Path) -> None:
    base = {"lr": 0.1, "steps": 100, "seed": 1}
    for i, (lr, torch, dirty) in enumerate([(0.1, "2.4.0", False), (0.2, "2.4.0", False), (0.3, "2.5.1", True)]):
        doc = make_doc("run%d" % i, generated_at="2026-01-0%dT00:00:00Z" % (i + 1),
                       code={"relax": {"commit": "a" * 40, "dirty": dirty,
                                       **({"patch": {"sha256": "f" * 64}} if dirty else {})}},
                       config={"resolved_args": dict(base, lr=lr), "selected_env": {"NCCL_DEBUG": "INFO"}},
                       environment={"packages": {"torch": torch, "numpy": "1.26.4"}},
                       lineage={"group": "lr-sweep", "note": "lr %s" % lr})
        put(tmp_path / "runs" / ("lr%s" % lr), doc)
    put(tmp_path / "runs" / "other", make_doc("other", lineage={"group": "other"},
                                              config={"resolved_args": {"lr": 9}}))


def test_compare_shows_only_what_varies(tmp_path):
    _sweep(tmp_path)
    res = run_cli("compare", "--group", "lr-sweep", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "group lr-sweep: 3 runs, 3 of 7 recorded values vary",
        "  [1] run0  runs/lr0.1/manifest_run0.json  (lr 0.1)",
        "  [2] run1  runs/lr0.2/manifest_run1.json  (lr 0.2)",
        "  [3] run2  runs/lr0.3/manifest_run2.json  (lr 0.3)",
        "",
        "KEY         [1]      [2]      [3]",
        "arg.lr      0.1      0.2      0.3",
        "code.relax  aaaaaaa  aaaaaaa  aaaaaaa* patch:fffffff",
        "pkg.torch   2.4.0    2.4.0    2.5.1",
    ]
    js = json.loads(run_cli("compare", "--group", "lr-sweep", "runs", "--json", cwd=tmp_path).stdout)
    assert js["varying"]["arg.lr"] == [0.1, 0.2, 0.3]
    assert "arg.steps" not in js["varying"] and "env.NCCL_DEBUG" not in js["varying"]


def test_compare_shows_patches_not_taken_in_full_even_when_their_cells_match(tmp_path):
    cut = {"stored_sha256": "a" * 64, "incomplete": "git diff did not finish in 4 s", "incomplete_reason": "timeout"}
    for run_id in ("cut1", "cut2"):
        put(tmp_path / "runs" / run_id, make_doc(run_id, lineage={"group": "g"},
                                                 code={"relax": {"commit": "a" * 40, "dirty": True,
                                                                 "patch": dict(cut)}}))
    res = run_cli("compare", "--group", "g", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == (
        "code.relax  aaaaaaa* patch:not fully recorded  aaaaaaa* patch:not fully recorded")


def test_compare_of_an_unknown_group(tmp_path):
    _sweep(tmp_path)
    res = run_cli("compare", "--group", "nope", "runs", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr == "relaxrepro compare: error: no runs in group 'nope' under runs\n"


@pytest.mark.parametrize("fields", [("data",), ("config", "outcome"), ("environment",), ("run_id", "data", "code"),
                                    ("absent",), ("schema_version",)],
                         ids=lambda f: "+".join(f))
def test_the_quick_reader_finds_any_field_wherever_it_sits(fields):
    doc = make_doc("X", config={"file_contents": {"c.yaml": "a\nb" * 50}}, data={"inputs": [{"path": "/d"}]},
                   environment={"packages": {"torch": "2.5.1"}}, outcome={"status": "ok"})
    raw = writer.serialize(doc)
    assert scan._quick(raw, fields) == {k: doc[k] for k in fields if k in doc}


@pytest.mark.parametrize("patch_kb", [0, 40], ids=["ends-only", "big-code-read-whole"])
def test_large_manifests_are_read_from_their_ends(tmp_path, patch_kb):
    code = {"relax": {"commit": "a" * 40, "dirty": True, "patch": {"text": "x" * patch_kb * 1024}}}
    doc = make_doc("BIG", code=code, environment={"packages": {"p%05d" % i: "1.0" for i in range(3000)}},
                   outcome={"status": "ok"}, lineage={"group": "g"})
    path = put(tmp_path, doc)
    assert path.stat().st_size > scan._HEAD + scan._TAIL
    assert scan.read_fields(str(path)) == {k: doc[k] for k in LS_FIELDS if k in doc}
    assert scan.read_fields(str(path), ("environment", "run_id", "schema_version"))["environment"] == \
        doc["environment"]


def test_links_out_of_the_listed_trees_are_not_followed_and_said_once(tmp_path):
    # A link to /, to .., to an ancestor and to a sibling tree lead out of what was listed: the walk stays
    # in its roots (a link to / once made ls read every manifest on the machine). A link inside the tree
    # is not walked a second time. The sibling is listed when it is named.
    runs = _tree(tmp_path)
    sibling = tmp_path / "other"
    put(sibling / "x", make_doc("sibling-run"))
    os.symlink("/", str(runs / "root"))
    os.symlink("..", str(runs / "up"))
    os.symlink("..", str(runs / "a" / "up"))  # runs itself: inside the tree
    os.symlink(str(tmp_path), str(runs / "b" / "deep" / "ancestor"))
    os.symlink(str(sibling), str(runs / "shared"))
    os.symlink(str(runs / "b"), str(runs / "a" / "b-again"))  # inside the tree: listed once, no warning
    env = {"RELAXREPRO_CACHE_DIR": str(tmp_path / "cache")}
    ids = sorted(["20251231_000000_ccccccc", "20260101_000000_aaaaaaa", "20260102_000000_bbbbbbb"])
    for args in ((), ("--no-index",), (), ("--json",)):
        res = run_cli("ls", "runs", *args, cwd=tmp_path, env=dict(clean_env(), **env), timeout=30)
        assert res.returncode == 0, res.stderr
        shown = ([r["run_id"] for r in json.loads(res.stdout)] if "--json" in args
                 else [line.split()[0] for line in res.stdout.splitlines()[1:]])
        assert sorted(shown) == ids
        assert res.stderr == ("relaxrepro ls: warning: 4 symbolic links lead out of the directories listed and "
                              "were not followed: runs/b/deep/ancestor -> %s, runs/root -> /, runs/shared -> %s, ...\n"
                              % (tmp_path, sibling))
    res = run_cli("ls", "runs", "other", cwd=tmp_path, env=dict(clean_env(), **env), timeout=30)
    assert sorted(line.split()[0] for line in res.stdout.splitlines()[1:]) == sorted(ids + ["sibling-run"])
    assert "3 symbolic links lead out" in res.stderr and "runs/shared" not in res.stderr


def test_report_of_a_tree_with_a_link_to_the_root_stays_in_the_tree(tmp_path):
    runs = _tree(tmp_path)
    os.symlink("/", str(runs / "root"))
    res = run_cli("report", "runs", "-o", "r.html", cwd=tmp_path, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[0] == ("relaxrepro report: warning: 1 symbolic link leads out of the directories "
                                          "listed and was not followed: runs/root -> /")
    page = (tmp_path / "r.html").read_text()
    assert all(run in page for run in ("20251231_000000_ccccccc", "20260101_000000_aaaaaaa", "20260102_000000_bbbbbbb"))


def _scored(tmp_path: Path) -> Path:
    """Four runs deep below runs/, three with a final auc (one NaN), for --sort, --limit, --columns."""
    runs = tmp_path / "runs"
    for i, (auc, group) in enumerate([(0.8, "a"), (0.95, "b"), (None, "a"), ("NaN", None)]):
        doc = make_doc("2026010%d_000000_%s" % (i + 1, "abcd"[i] * 7), generated_at="2026-01-0%dT10:00:00Z" % (i + 1),
                       code={"relax": {"commit": "e" * 40, "dirty": True}},
                       lineage={"group": group} if group else {},
                       results={"metrics": {"auc": auc, "steps": 10 * i}} if auc is not None else {})
        validate_manifest(doc)
        put(runs / "a-rather-long-directory-name" / "of-the-sweep" / str(i) / "checkpoints-and-logs", doc)
    return runs


def test_ls_fits_the_terminal_width_and_wide_shows_everything(tmp_path):
    _scored(tmp_path)
    wide = run_cli("ls", "runs", cwd=tmp_path).stdout.splitlines()  # not a terminal, no $COLUMNS: all of it
    assert max(map(len, wide)) > 120
    assert run_cli("ls", "runs", "--wide", cwd=tmp_path, env=clean_env(COLUMNS="80")).stdout.splitlines() == wide
    res = run_cli("ls", "runs", cwd=tmp_path, env=clean_env(COLUMNS="80"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 5 and max(map(len, lines)) <= 80, res.stdout
    assert lines[0].split() == ["RUN", "TIME", "(UTC)", "GROUP", "PATH"]  # empty columns first, then the least needed
    path = lines[1].split()[-1]
    assert path.startswith("runs/") and "..." in path and path.endswith("000_aaaaaaa.json")
    lines = run_cli("ls", "runs", cwd=tmp_path, env=clean_env(COLUMNS="120")).stdout.splitlines()
    assert max(map(len, lines)) <= 120 and lines[0].split()[:5] == ["RUN", "TIME", "(UTC)", "CODE", "GROUP"]


def test_ls_sorts_limits_and_chooses_columns(tmp_path):
    _scored(tmp_path)
    res = run_cli("ls", "runs", "--sort=-metric.auc", "--columns", "run,group,metric.auc", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "RUN                      GROUP  metric.auc",
        "20260102_000000_bbbbbbb  b      0.95",
        "20260101_000000_aaaaaaa  a      0.8",
        "20260103_000000_ccccccc  a      -",  # no auc, and a NaN: last, either way
        "20260104_000000_ddddddd  -      nan",
    ]
    res = run_cli("ls", "runs", "--sort", "group", "--limit", "2", "--columns", "run,group", cwd=tmp_path)
    assert res.stdout.splitlines()[1:] == ["20260101_000000_aaaaaaa  a", "20260103_000000_ccccccc  a"]
    res = run_cli("ls", "runs", "--limit", "1", "--columns", "run", "--no-index", cwd=tmp_path)
    assert res.stdout.splitlines() == ["RUN", "20260101_000000_aaaaaaa"]


def test_ls_json_has_the_metrics_and_follows_sort_and_limit(tmp_path):
    _scored(tmp_path)
    rows = json.loads(run_cli("ls", "runs", "--json", cwd=tmp_path).stdout)
    assert [r["metrics"] for r in rows] == [{"auc": 0.8, "steps": 0.0}, {"auc": 0.95, "steps": 10.0}, {},
                                            {"auc": "NaN", "steps": 30.0}]
    rows = json.loads(run_cli("ls", "runs", "--json", "--sort=-metric.steps", "--limit", "2", cwd=tmp_path).stdout)
    assert [r["run_id"] for r in rows] == ["20260104_000000_ddddddd", "20260102_000000_bbbbbbb"]


@pytest.mark.parametrize("args, said", [
    (["--sort", "auc"], "--sort auc: not a column"),
    (["--columns", "run,bogus"], "--columns run,bogus: no such column: bogus"),
    (["--columns", ","], "--columns ,: no column"),
    (["--limit", "0"], "argument --limit: expected at least 1, got 0"),
], ids=["sort", "column", "no-column", "limit"])
def test_ls_refuses_a_bad_shape_in_one_line(tmp_path, args, said):
    _scored(tmp_path)
    res = run_cli("ls", "runs", *args, cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert said in res.stderr.splitlines()[-1] and "Traceback" not in res.stderr


def test_compare_where_every_manifest_is_unreadable_says_so_not_just_no_runs(tmp_path):
    (tmp_path / "runs").mkdir()
    for name in ("a", "b"):
        (tmp_path / "runs" / ("manifest_%s.json" % name)).write_text("{")
    res = run_cli("compare", "--group", "g", "runs", cwd=tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.count("warning: unreadable: runs/manifest_") == 2
    assert res.stderr.splitlines()[-1] == ("relaxrepro compare: error: no runs in group 'g' under runs: "
                                           "2 manifest_*.json unreadable (named above)")


def test_a_runs_copies_are_listed_once_the_merged_manifest_shown_and_marked(tmp_path):
    runs = tmp_path / "runs"
    env = clean_env(RELAXREPRO_RUN_ID="exp-7", RELAXREPRO_CACHE_DIR=str(tmp_path / "cache"))
    assert run_cli("generate", "--output-dir", str(runs), env=env, cwd=tmp_path).returncode == 0
    assert run_cli("generate", "--node-report", "--output-dir", str(runs), env=env, cwd=tmp_path).returncode == 0
    assert run_cli("merge", str(runs / "manifest_exp-7.json"), str(runs), env=env, cwd=tmp_path).returncode == 0
    tb = runs / "tb"  # the copy attach --tensorboard leaves beside the event files
    tb.mkdir()
    (tb / "manifest_exp-7.json").write_bytes((runs / "manifest_exp-7.json").read_bytes())
    (tb / "events.out.tfevents.1796303519.vm.1.0").write_bytes(b"")
    other = dict(make_doc("20260101_000000_aaaaaaa"), generated_at="2020-01-01T00:00:00Z")
    put(runs / "o", other)
    for extra in ([], ["--no-index"], ["--sort=-run"]):
        res = run_cli("ls", "runs", "--wide", *extra, cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
        rows = [line for line in res.stdout.splitlines() if "exp-7" in line]
        assert len(rows) == 1, res.stdout
        assert rows[0].split()[:3] == ["exp-7", "+merged", "+tensorboard"]
        assert rows[0].endswith("runs/manifest_exp-7.merged.json")
        assert len(res.stdout.splitlines()) == 3  # the header, exp-7, the other run
    listed = json.loads(run_cli("ls", "runs", "--json", cwd=tmp_path, env=env).stdout)
    assert [r["run_id"] for r in listed] == ["20260101_000000_aaaaaaa", "exp-7"]
    assert listed[0]["copies"] == []
    assert listed[1]["path"] == "runs/manifest_exp-7.merged.json"
    assert sorted((c["kind"], c["path"]) for c in listed[1]["copies"]) == [
        ("manifest", "runs/manifest_exp-7.json"), ("tensorboard", "runs/tb/manifest_exp-7.json")]
