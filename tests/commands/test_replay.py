"""``rerun --confirm --quick N | --full``: the recorded command replayed into a new directory, recorded as a
run of its own (parent and replay_of the original), verified against the original; exit = the verdict.

A tiny plain-Python trainer using the API stands in for training here (no torch: fast); the PyTorch example
is replayed in tests/examples/test_determinism.py."""

from __future__ import annotations

import hashlib
import json
import os
import sys

import pytest

from tests.helpers.common import clean_env, git, make_repo, run_cli
from tests.helpers.read import base_manifest, write_json
from tests.helpers.recording import load, manifests

# 20 steps of a "loss"; --seeded fixes its RNG; --stamp puts the pid into the saved model (an output that
# differs while the trace agrees); --out DIR writes the model there, else beside the run's manifest.
TRAINER = """\
import os, random, sys
import relaxrepro

argv = sys.argv[1:]
out = argv[argv.index("--out") + 1] if "--out" in argv else None
with relaxrepro.recorded(output_dir=out) as manifest:
    rng = random.Random(0 if "--seeded" in argv else None)
    loss, step = 1.0, 0
    for step in range(1, 21):
        loss *= 0.9 + 0.01 * rng.random()
        relaxrepro.trace(step, loss=loss)
        if relaxrepro.should_stop(step):
            break
    where = out or os.path.dirname(manifest.path)
    os.makedirs(where, exist_ok=True)
    model = os.path.join(where, "model.bin")
    with open(model, "w") as fh:
        fh.write(repr(loss) + (" %d" % os.getpid() if "--stamp" in argv else ""))
    relaxrepro.result(metrics={"loss": loss}, outputs=[model])
    print("trained %d steps" % step)
"""


def _record(tmp_path, *args, run_dir="runs/a"):
    """A real run of the trainer under ``relaxrepro run``: (its manifest path, the project)."""
    project = tmp_path / "proj"
    if not project.exists():
        make_repo(project, {"train.py": TRAINER})
    res = run_cli("run", "--output-dir", run_dir, "--", sys.executable, "train.py", *args, cwd=project)
    assert res.returncode == 0, res.stderr
    found = manifests(project / run_dir)
    assert len(found) == 1, found
    return found[0], project


def _rerun(manifest, project, *args):
    return run_cli("rerun", str(manifest), "--confirm", *args, cwd=project, timeout=120)


def _replay_manifest(directory):
    found = manifests(directory)
    assert len(found) == 1, found
    return load(found[0])


def test_a_seeded_run_reproduces_in_full_into_a_sibling_directory(tmp_path):
    original, project = _record(tmp_path, "--seeded")
    before = (project / "runs/a/model.bin").read_bytes()
    res = _rerun(original, project, "--full")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reproduced" in res.stdout
    doc = _replay_manifest(project / "runs/a.replay-1")
    first = load(original)
    assert doc["lineage"]["replay_of"] == first["run_id"]
    assert doc["lineage"]["parent"]["run_id"] == first["run_id"]
    assert (project / "runs/a.replay-1/model.bin").read_bytes() == before
    assert (project / "runs/a/model.bin").read_bytes() == before  # the original's stays as it was
    assert sorted(os.listdir(project / "runs/a")) == sorted([os.path.basename(original), "model.bin"])
    # a second replay takes the next free directory
    assert _rerun(original, project, "--full").returncode == 0
    assert manifests(project / "runs/a.replay-2")


def test_an_unseeded_run_diverges_and_the_first_step_is_named(tmp_path):
    original, project = _record(tmp_path)
    res = _rerun(original, project, "--full")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "diverged" in res.stdout
    assert "step 1" in res.stdout and "loss" in res.stdout
    assert "model.bin" in res.stdout


def test_an_output_that_differs_is_named_though_the_trace_agrees(tmp_path):
    original, project = _record(tmp_path, "--seeded", "--stamp")
    res = _rerun(original, project, "--full")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "model.bin" in res.stdout and "differs" in res.stdout


def test_quick_stops_the_command_after_step_n_and_verifies_those_steps(tmp_path):
    original, project = _record(tmp_path, "--seeded")
    res = _rerun(original, project, "--quick", "5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reproduced (bit-exact, first 5 trace steps)" in res.stdout
    doc = _replay_manifest(project / "runs/a.replay-1")
    assert doc["lineage"]["replay_of"] == load(original)["run_id"]
    assert doc["results"]["trace"]["steps"] == [1, 2, 3, 4, 5]  # stopped after step 5 of 20
    assert doc["outcome"]["status"] == "ok"


def test_quick_on_an_unseeded_run_diverges(tmp_path):
    original, project = _record(tmp_path)
    res = _rerun(original, project, "--quick", "3")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "step 1" in res.stdout


def test_a_replay_that_fails_where_the_original_did_not_diverges(tmp_path):
    original, project = _record(tmp_path, "--seeded")
    (project / "train.py").write_text('import sys; sys.exit("out of memory")\n')  # recorded as a patch: check WARNs
    res = _rerun(original, project, "--full")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "relaxrepro rerun: the replay exited with status 1, the original with status 0" in res.stderr


def test_an_argument_naming_the_run_directory_is_pointed_at_the_replay(tmp_path):
    original, project = _record(tmp_path, "--seeded", "--out", "runs/a")
    res = _rerun(original, project, "--full", "--output-dir", str(tmp_path / "again"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "argv[4]: runs/a -> %s" % os.path.relpath(tmp_path / "again", project) in res.stderr
    assert (tmp_path / "again/model.bin").exists()
    assert manifests(tmp_path / "again")


def test_an_output_the_trainer_places_itself_outside_its_run_directory_refuses(tmp_path):
    project = tmp_path / "proj"
    make_repo(project, {"train.py": TRAINER.replace('out or os.path.dirname(manifest.path)', '"models"')})
    res = run_cli("run", "--output-dir", "runs/a", "--", sys.executable, "train.py", "--seeded", cwd=project)
    assert res.returncode == 0, res.stderr
    original = manifests(project / "runs/a")[0]
    before = (project / "models/model.bin").read_bytes()
    res = _rerun(original, project, "--full")
    assert res.returncode == 2
    assert "relaxrepro rerun: refused: the original's output %s lies outside its directory" % (
        project / "models/model.bin") in res.stderr
    assert (project / "models/model.bin").read_bytes() == before
    assert not (project / "runs/a.replay-1").exists()


# -- bad inputs: one clear line, exit 2, nothing run, nothing created -------------------------------

def _no_results(tmp_path):
    doc = base_manifest()
    doc["command"] = {"argv": [sys.executable, "-c", "open('ran', 'w')"], "cwd": str(tmp_path), "source": "cli"}
    (tmp_path / "runs").mkdir()
    return write_json(tmp_path / "runs" / "manifest_x.json", doc)


@pytest.mark.parametrize("args, message", [
    (["--quick", "0"], "argument --quick: expected at least 1 step, got 0"),
    (["--quick", "-1"], "argument --quick: expected at least 1 step, got -1"),
    (["--quick", "abc"], "argument --quick: expected a whole number of steps, got 'abc'"),
    (["--quick", "5", "--full"], "argument --full: not allowed with argument --quick"),
    (["--full", "--rtol", "-1"], "argument --rtol: expected a finite number >= 0, got '-1'"),
    (["--full", "--atol", "nan"], "argument --atol: expected a finite number >= 0, got 'nan'"),
], ids=["zero", "negative", "not-a-number", "quick-and-full", "negative-rtol", "nan-atol"])
def test_bad_options(tmp_path, args, message):
    path = _no_results(tmp_path)
    res = run_cli("rerun", str(path), "--confirm", *args, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1] == "relaxrepro rerun: error: " + message
    assert sorted(os.listdir(tmp_path)) == ["runs"] and os.listdir(tmp_path / "runs") == ["manifest_x.json"]


@pytest.mark.parametrize("args, message", [
    (["--dry-run", "--quick", "5"], "relaxrepro rerun: error: --quick and --full replay with --confirm, not --dry-run"),
    (["--dry-run", "--output-dir", "x"], "relaxrepro rerun: error: --output-dir, --in-place, --workspace, --rtol "
                                         "and --atol go with --confirm"),
    (["--dry-run", "--in-place"], "relaxrepro rerun: error: --output-dir, --in-place, --workspace, --rtol and "
                                  "--atol go with --confirm"),
    (["--confirm", "--in-place", "--output-dir", "x"], "relaxrepro rerun: error: --in-place writes into the "
                                                       "original's directory: not with --output-dir"),
    (["--confirm", "--keep"], "relaxrepro rerun: error: --keep and --from go with --workspace"),
    (["--confirm", "--from", "a=b"], "relaxrepro rerun: error: --keep and --from go with --workspace"),
], ids=["quick-dry-run", "output-dir-dry-run", "in-place-dry-run", "in-place-and-output-dir", "keep-alone",
        "from-alone"])
def test_options_that_do_not_go_together(tmp_path, args, message):
    path = _no_results(tmp_path)
    res = run_cli("rerun", str(path), *args, cwd=tmp_path)
    assert (res.returncode, res.stderr, res.stdout) == (2, message + "\n", "")


def test_quick_without_a_trace_says_so_before_running(tmp_path):
    path = _no_results(tmp_path)
    res = run_cli("rerun", str(path), "--confirm", "--quick", "5", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro rerun: --quick 5: %s records no trace (results.trace), so its first steps "
                          "cannot be compared; record one with relaxrepro.trace(step, loss=...), or replay with "
                          "--full\n" % path)
    assert sorted(os.listdir(tmp_path)) == ["runs"] and os.listdir(tmp_path / "runs") == ["manifest_x.json"]


def test_full_without_results_says_nothing_to_verify_before_running(tmp_path):
    path = _no_results(tmp_path)
    res = run_cli("rerun", str(path), "--confirm", "--full", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro rerun: --full: %s records no results (metrics, outputs or trace): nothing "
                          "to verify; record them with relaxrepro.result(...) or run --outputs/--metrics\n" % path)
    assert not (tmp_path / "ran").exists()


def test_an_output_directory_that_is_not_empty_is_refused(tmp_path):
    path = _no_results(tmp_path)
    doc = json.loads(path.read_text())
    doc["results"] = {"metrics": {"auc": 0.9}}
    write_json(path, doc)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    res = run_cli("rerun", str(path), "--confirm", "--full", "--output-dir", str(busy), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro rerun: --output-dir %s is not empty: a replay starts in a new or empty "
                          "directory\n" % busy)
    assert os.listdir(busy) == ["keep.txt"] and not (tmp_path / "ran").exists()


# -- a replay never touches the original ----------------------------------------------------------

# Writes into the directory it is given, as a trainer's --log-dir; the pid makes each run's weights its own.
OWN_DIR_TRAINER = """\
import json, os, sys
d = sys.argv[sys.argv.index("--log-dir") + 1]
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "weights.txt"), "w") as fh:
    fh.write("w %d\\n" % os.getpid())
with open(os.path.join(d, "log.txt"), "w") as fh:
    fh.write("trained\\n")
"""


def _digests(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_confirm_leaves_the_original_byte_identical_and_in_place_is_needed_to_write_there(tmp_path):
    project = tmp_path / "proj"
    make_repo(project, {"train.py": OWN_DIR_TRAINER})
    res = run_cli("run", "--output-dir", "runs/c", "--outputs", "runs/c/weights.txt", "--", sys.executable,
                  "train.py", "--log-dir", "runs/c", cwd=project)
    assert res.returncode == 0, res.stderr
    original = manifests(project / "runs/c")[0]
    before = _digests(project / "runs/c")
    res = _rerun(load(original)["run_id"], project)  # named by its run id, found under the cwd
    assert res.returncode == 1, res.stdout + res.stderr  # diverged: the weights hold each run's pid
    assert _digests(project / "runs/c") == before  # the manifest, weights.txt and log.txt alike
    assert "relaxrepro rerun: argv[3]: runs/c -> runs/c.replay-1 (the original's files stay as they are)" in res.stderr
    assert "relaxrepro rerun: the replay is in %s" % (project / "runs/c.replay-1") in res.stderr
    assert sorted(os.listdir(project / "runs/c.replay-1")) == sorted(
        [os.path.basename(manifests(project / "runs/c.replay-1")[0]), "log.txt", "weights.txt"])
    # verify runs since the original recorded outputs, and names the weights that differ
    assert "differs    weights.txt" in res.stdout
    # --in-place writes into the original's own directory, as recorded, and says what it changed
    res = _rerun(original, project, "--in-place")
    assert "note (--in-place): the replay changed the original run's %s" % (project / "runs/c/weights.txt") \
        in res.stderr, res.stderr
    assert _digests(project / "runs/c")["weights.txt"] != before["weights.txt"]


def test_a_replay_that_writes_over_the_original_says_so_and_fails(tmp_path):
    # the trainer writes into runs/c whatever it is told: a path the command does not spell out
    project = tmp_path / "proj"
    make_repo(project, {"train.py": OWN_DIR_TRAINER.replace('sys.argv[sys.argv.index("--log-dir") + 1]',
                                                            'os.environ.get("LOGS", "runs/c")')})
    res = run_cli("run", "--output-dir", "runs/c", "--", sys.executable, "train.py", cwd=project)
    assert res.returncode == 0, res.stderr
    original = manifests(project / "runs/c")[0]
    res = _rerun(original, project)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "relaxrepro rerun: ERROR: the replay changed the original run's %s" % (project / "runs/c/weights.txt") \
        in res.stderr
    assert "no longer matches its manifest" in res.stderr


def test_an_output_directory_inside_the_originals_is_the_replays_own(tmp_path):
    original, project = _record(tmp_path, "--seeded")
    res = _rerun(original, project, "--full", "--output-dir", "runs/a/again")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ERROR" not in res.stderr and (project / "runs/a/again/model.bin").exists()


# -- a replay records itself the way the run was recorded ------------------------------------------

def test_full_replay_of_a_run_recorded_with_outputs_metrics_and_group_compares_them_all(tmp_path):
    project = tmp_path / "proj"
    make_repo(project, {"train.py": TRAINER.replace(
        '    print("trained %d steps" % step)\n',
        '    import json\n    json.dump({"loss": loss}, open(os.path.join(where, "metrics.json"), "w"))\n'
        '    print("trained %d steps" % step)\n')})
    res = run_cli("run", "--output-dir", "runs/a", "--outputs", "runs/a/model.bin", "--metrics",
                  "runs/a/metrics.json", "--group", "g", "--note", "baseline", "--", sys.executable, "train.py",
                  "--seeded", "--out", "runs/a", cwd=project)
    assert res.returncode == 0, res.stderr
    original = manifests(project / "runs/a")[0]
    res = _rerun(load(original)["run_id"], project, "--full")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reproduced (bit-exact)" in res.stdout
    assert "outputs:" in res.stdout and "metrics:" in res.stdout and "trace:" in res.stdout
    doc = _replay_manifest(project / "runs/a.replay-1")
    assert doc["lineage"]["group"] == "g" and doc["lineage"]["note"] == "baseline"
    assert doc["lineage"]["replay_of"] == load(original)["run_id"]
    assert doc["collection"]["recording"] == {"outputs": ["runs/a.replay-1/model.bin"],
                                              "metrics": "runs/a.replay-1/metrics.json"}
    assert "runs/a.replay-1/model.bin" in doc["results"]["outputs"]


def test_a_run_recorded_with_redact_patterns_needs_them_again(tmp_path):
    original, project = _record(tmp_path, "--seeded")
    doc = load(original)
    doc["collection"]["recording"] = {"redact_patterns": 2}
    write_json(original, doc)
    res = _rerun(original, project, "--full")
    assert res.returncode == 2
    assert res.stderr == ("relaxrepro rerun: %s: the run was recorded with 2 --redact-pattern values, which its "
                          "manifest does not keep (a pattern may spell the secret itself); give them again with "
                          "--redact-pattern\n" % original)
    assert not (project / "runs/a.replay-1").exists()


# -- placeholders resolved for execution -----------------------------------------------------------

@pytest.mark.parametrize("how", [["--full"], ["--quick", "3"], []], ids=["full", "quick", "confirm"])
def test_no_replay_warning_names_the_home_placeholder(tmp_path, how):
    home = tmp_path / "home"
    interp = home / ".pyenv/versions/3/bin/python3"
    interp.parent.mkdir(parents=True)
    os.symlink(os.path.realpath(sys.executable), str(interp))
    project = home / "proj"
    make_repo(project, {"train.py": TRAINER})
    env = clean_env(HOME=str(home))
    res = run_cli("run", "--output-dir", "runs/a", "--", str(interp), "train.py", "--seeded", cwd=project, env=env)
    assert res.returncode == 0, res.stderr
    original = manifests(project / "runs/a")[0]
    assert load(original)["environment"]["python"]["executable"] == "<HOME>/.pyenv/versions/3/bin/python3"
    res = run_cli("rerun", str(original), "--confirm", *how, cwd=project, env=env, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "<HOME>" not in res.stderr, res.stderr


# -- a workspace of its own --------------------------------------------------------------------------

def test_a_workspace_replays_the_recorded_tree_wherever_the_checkout_is_and_leaves_it_alone(tmp_path):
    original, project = _record(tmp_path, "--seeded")
    # the checkout moves on: another commit that trains differently, and an untracked change
    (project / "train.py").write_text(TRAINER.replace("loss *= 0.9", "loss *= 0.8"))
    git(project, "commit", "-qam", "faster decay")
    (project / "scratch.py").write_text("print('mine')\n")
    head_before, status_before = git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")
    res = _rerun(load(original)["run_id"], project, "--quick", "5", "--workspace")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reproduced (bit-exact, first 5 trace steps)" in res.stdout
    workspace = project / "runs/a.replay-1.workspace"
    assert "relaxrepro rerun: workspace %s: proj" % workspace in res.stderr
    assert "relaxrepro rerun: cwd: %s -> %s" % (project, workspace / "proj") in res.stderr
    assert "relaxrepro rerun: workspace %s removed (reproduced; --keep keeps it)" % workspace in res.stderr
    assert not workspace.exists()
    assert (git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")) == (head_before,
                                                                                           status_before)
    assert (project / "scratch.py").read_text() == "print('mine')\n"
    # from the checkout as it is now, the same replay diverges: the workspace is what reproduced
    res = _rerun(original, project, "--quick", "5", "--set", "cwd=%s" % project)
    assert res.returncode == 2 and "check found differences" in res.stderr, res.stderr


def test_a_kept_or_diverged_workspace_stays_and_is_named(tmp_path):
    original, project = _record(tmp_path)  # unseeded: every replay diverges
    into = tmp_path / "ws"
    res = _rerun(original, project, "--quick", "3", "--workspace", str(into))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "relaxrepro rerun: workspace kept: %s" % into in res.stderr
    assert (into / "proj/train.py").read_text() == TRAINER
    res = _rerun(original, project, "--quick", "3", "--workspace", str(into))
    assert res.returncode == 2
    assert "relaxrepro rerun: refused: --workspace %s exists: a workspace is a new directory" % into in res.stderr
    assert (into / "proj/train.py").read_text() == TRAINER  # refused, and the kept one left as it was


def test_a_workspace_that_cannot_be_restored_is_refused_before_anything_runs(tmp_path):
    original, project = _record(tmp_path, "--seeded")
    res = _rerun(original, project, "--quick", "3", "--workspace", "--from", "proj=%s" % (tmp_path / "nowhere"))
    assert res.returncode == 2
    assert ("relaxrepro rerun: refused: --workspace: repo proj: no local repository at %s; give --from proj=PATH"
            % (tmp_path / "nowhere")) in res.stderr
    assert not (project / "runs/a.replay-1.workspace").exists() and not (project / "runs/a.replay-1").exists()


# -- replays apart in compare --group and the report ------------------------------------------------

def test_replays_are_listed_apart_and_kept_out_of_the_groups_own_rate(tmp_path):
    project = tmp_path / "proj"
    make_repo(project, {"train.py": TRAINER})
    for run_dir, seeded in (("runs/a", ["--seeded"]), ("runs/b", ["--seeded"]), ("runs/c", [])):
        res = run_cli("run", "--output-dir", run_dir, "--group", "det", "--", sys.executable, "train.py", *seeded,
                      cwd=project)
        assert res.returncode == 0, res.stderr
    original = manifests(project / "runs/a")[0]
    for how in (["--quick", "5"], ["--full"], ["--quick", "3"]):
        assert _rerun(original, project, *how).returncode == 0
    res = run_cli("compare", "--group", "det", "runs", cwd=project)
    assert res.returncode == 0, res.stderr
    tail = res.stdout.split("\n\n")[-1].splitlines()
    assert tail[-4:] == [
        "reproducibility (replays apart):",
        "  outputs match the most common (weight-hash match rate): 2 of 3 runs (67%)",
        "  traces bit-identical to the most common: 2 of 3 runs (67%)",
        "replays: 3, reproduced 3",
    ], res.stdout
    assert res.stdout.count("[replay of %s: reproduced]" % load(original)["run_id"]) == 3
    res = run_cli("report", "runs", "-o", str(tmp_path / "r.html"), cwd=project)
    assert res.returncode == 0, res.stderr
    assert "<p>replays: 3, reproduced 3</p>" in (tmp_path / "r.html").read_text()
