"""``rerun RUN --sbatch [--submit]``: a SLURM batch script from the record, and a real one-node SLURM running it.

The script tests read hand-made manifests; the cluster tests (fixture ``slurm_cluster``: munged, slurmctld
and slurmd on loopback) record runs in real sbatch jobs, in a real Prolog and under srun, then submit the
replay and wait for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipapp
from pathlib import Path

import pytest

from tests.helpers.common import ROOT, fake_tool, make_repo, run_cli
from tests.helpers.read import write_json

RUN_ID = "20260101_000000_abcdef0"


def _manifest(tmp_path: Path, *, scheduler=None, env=None, argv=None, **extra) -> Path:
    doc = {
        "schema_version": "1.0", "run_id": RUN_ID, "generated_at": "2026-01-01T00:00:00Z",
        "command": {"argv": argv or ["python", "train.py", "--lr", "3e-4"], "cwd": str(tmp_path), "source": "cli"},
        "code": {}, "config": {"selected_env": env or {}},
        "environment": {"python": {"version": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable}},
        "hardware": {}, "runtime": {}, "training": {}, "collection": {},
    }
    if scheduler is not None:
        doc["scheduler"] = scheduler
    doc.update(extra)
    (tmp_path / "runs" / "a").mkdir(parents=True, exist_ok=True)
    return write_json(tmp_path / "runs" / "a" / ("manifest_%s.json" % RUN_ID), doc)


SLURM = {"type": "slurm", "job_id": "5120334", "job_name": "train", "partition": "a100", "account": "ml",
         "node_count": 2, "nodelist": "<slurm-nodes>", "ntasks": 16, "ntasks_per_node": 8, "gpus_per_node": 8}


def _sbatch_lines(text: str):
    return [line for line in text.splitlines() if line.startswith(("#SBATCH", "##SBATCH"))]


def test_the_script_asks_for_the_recorded_job_and_marks_what_was_not_recorded(tmp_path):
    m = _manifest(tmp_path, scheduler=SLURM)
    res = run_cli("rerun", str(m), "--sbatch")
    assert res.returncode == 0, res.stderr
    assert _sbatch_lines(res.stdout) == [
        "#SBATCH --job-name=replay-%s" % RUN_ID,
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --partition=a100",
        "#SBATCH --account=ml",
        "##SBATCH --time=   # no time limit is recorded (the partition's default applies): fill in",
        "#SBATCH --output=%s.replay-job%%j.out" % (tmp_path / "runs" / "a"),
    ]
    text = res.stdout
    assert "srun --nodes=\"${SLURM_JOB_NUM_NODES}\" --ntasks=\"${SLURM_JOB_NUM_NODES}\" --ntasks-per-node=1" in text
    assert "generate --node-report --output-dir \"${replay}.nodes\"" in text
    assert "rerun \"${manifest}\" \\\n  --confirm \\\n  --output-dir \"${replay}\"" in text
    assert " merge \"${replay}/manifest_${RELAXREPRO_RUN_ID}.json\" \"${replay}.nodes\"" in text
    assert subprocess.run(["sh", "-n"], input=text, text=True).returncode == 0


def test_values_the_record_lacks_are_marked_lines_never_guesses(tmp_path):
    m = _manifest(tmp_path, scheduler={"type": "slurm", "job_id": "7"})
    res = run_cli("rerun", str(m), "--sbatch")
    assert res.returncode == 0, res.stderr
    assert _sbatch_lines(res.stdout)[1:6] == [
        "##SBATCH --nodes=   # not recorded: fill in",
        "##SBATCH --ntasks-per-node=   # not recorded: fill in",
        "##SBATCH --gpus-per-node=   # no GPUs in the job's SLURM variables: fill in",
        "##SBATCH --partition=   # not recorded (the cluster's default): fill in",
        "##SBATCH --time=   # no time limit is recorded (the partition's default applies): fill in",
    ]


def test_a_recorded_task_count_that_is_not_per_node_is_asked_for_as_it_was(tmp_path):
    m = _manifest(tmp_path, scheduler={"type": "slurm", "job_id": "7", "node_count": 3, "ntasks": 7})
    assert "#SBATCH --ntasks=7" in run_cli("rerun", str(m), "--sbatch").stdout


def test_redacted_values_never_reach_the_script_and_submit_refuses_until_they_are_exported(tmp_path):
    m = _manifest(tmp_path, scheduler=SLURM, env={"HF_TOKEN": "<redacted>", "NCCL_ALGO": "Ring"},
                  argv=["python", "train.py", "--wandb-key=wand***"],
                  collection={"recording": {"redact_patterns": 1}})
    res = run_cli("rerun", str(m), "--sbatch")
    assert res.returncode == 0, res.stderr
    assert "wand***" not in res.stdout and "<redacted>" not in res.stdout
    assert "--set HF_TOKEN=\"${HF_TOKEN:?redacted in the manifest: export HF_TOKEN before sbatch}\"" in res.stdout
    assert "--set 'argv[2]'=\"${RELAXREPRO_ARGV_2:?" in res.stdout
    assert "--redact-pattern \"${RELAXREPRO_REDACT_PATTERN_1:?" in res.stdout
    assert "#   HF_TOKEN\n#   RELAXREPRO_ARGV_2\n#   RELAXREPRO_REDACT_PATTERN_1\n" in res.stdout
    # the job stops at once, saying which value it lacks, rather than running with a hole in it
    job = subprocess.run(["sh", "-c", res.stdout.replace("srun ", "true ")], capture_output=True, text=True,
                         env={"PATH": os.environ["PATH"], "SLURM_JOB_ID": "9", "SLURM_JOB_NUM_NODES": "1"})
    assert job.returncode != 0 and "HF_TOKEN: redacted in the manifest: export HF_TOKEN before sbatch" in job.stderr

    bindir = tmp_path / "bin"
    fake_tool(bindir, "sbatch", "cat > %s/submitted.sh\necho 42\n" % tmp_path)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), PYTHONPATH=str(ROOT))
    env.pop("HF_TOKEN", None)
    res = run_cli("rerun", str(m), "--sbatch", "--submit", env=env)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("relaxrepro rerun: refused: the job reads values the manifest redacted from its "
                          "environment, and HF_TOKEN, RELAXREPRO_ARGV_2, RELAXREPRO_REDACT_PATTERN_1 are not set "
                          "here: export them, or write the script without --submit and fill it in\n")
    assert not (tmp_path / "submitted.sh").exists()
    env.update(HF_TOKEN="hf_x", RELAXREPRO_ARGV_2="--wandb-key=k", RELAXREPRO_REDACT_PATTERN_1="sec.*")
    res = run_cli("rerun", str(m), "--sbatch", "--submit", env=env)
    assert (res.returncode, res.stdout) == (0, "42\n"), res.stderr
    submitted = (tmp_path / "submitted.sh").read_text()
    assert "hf_x" not in submitted and "--wandb-key=k" not in submitted and "sec.*" not in submitted


@pytest.mark.parametrize("args,err", [
    (["--sbatch"], "relaxrepro rerun: refused: {m} was not recorded in a SLURM job (no scheduler.type slurm): "
                   "give --nodes N\n"),
    (["--sbatch", "--nodes", "1", "--submit"], "relaxrepro rerun: refused: --submit: sbatch is not on PATH (submit "
     "from a SLURM login node, or write the script without --submit)\n"),
    (["--dry-run", "--submit"], "relaxrepro rerun: error: --submit and --nodes go with --sbatch\n"),
    (["--sbatch", "--set", "HF_TOKEN=x"], "relaxrepro rerun: error: --sbatch takes no --set or --redact-pattern (the "
     "job reads redacted values from its environment), --output-dir, --in-place, --workspace or --repo\n"),
], ids=["not-slurm-no-nodes", "no-sbatch", "submit-without-sbatch", "set-with-sbatch"])
def test_refusals_are_one_line_and_exit_2(tmp_path, args, err):
    m = _manifest(tmp_path)
    env = dict(os.environ, PATH=str(tmp_path / "empty"), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "relaxrepro", "rerun", str(m), *args], capture_output=True,
                         text=True, env=env, timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", err.format(m=m))


def test_a_run_outside_slurm_gets_the_given_node_count(tmp_path):
    m = _manifest(tmp_path)
    res = run_cli("rerun", str(m), "--sbatch", "--nodes", "4", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["job_id"] is None and "#SBATCH --nodes=4\n" in out["script"]


# -- a real one-node SLURM ------------------------------------------------------------------------

JOB = """#!/bin/sh
#SBATCH --job-name=train --nodes=1 --ntasks-per-node=2 --partition=debug
set -eu
cd {project}
{rr} generate --output-dir {out}
srun --ntasks-per-node=1 --ntasks=1 {rr} generate --node-report --output-dir {out}
"""


def _submit(cluster, script: str, cwd: Path) -> str:
    res = cluster.run("sbatch", "--parsable", cwd=str(cwd), input=script, env={"PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().split(";")[0]


def _done(cluster, job_id: str, log: Path) -> None:
    state = cluster.wait_job(job_id)
    assert state == "COMPLETED", "job %s %s:\n%s\n%s" % (job_id, state, log.read_text() if log.exists() else "",
                                                        cluster.logs())


def test_generate_in_a_real_sbatch_job_a_prolog_and_under_srun_then_merge(slurm_cluster, tmp_path):
    project = make_repo(tmp_path / "proj", {"train.py": "print(1)\n"})
    out, pro = tmp_path / "runs", tmp_path / "prolog"
    rr = "%s -m relaxrepro" % sys.executable
    # the Prolog runs as root on the node before the job, with SLURM's prolog environment (no PYTHONPATH)
    hook = slurm_cluster.prolog_hook("relaxrepro", "cd %s && PYTHONPATH=%s %s generate --output-dir %s\n" % (
        project, ROOT, rr, pro))
    try:
        job = _submit(slurm_cluster, JOB.format(project=project, rr=rr, out=out), tmp_path)
        _done(slurm_cluster, job, tmp_path / ("slurm-%s.out" % job))
    finally:
        hook.unlink()
    (manifest,) = out.glob("manifest_*.json")
    doc = json.loads(manifest.read_text())
    s = doc["scheduler"]
    assert (s["type"], s["job_id"], s["job_name"], s["partition"]) == ("slurm", job, "train", "debug")
    assert (s["node_count"], s["ntasks"], s["ntasks_per_node"], s["nodelist_count"]) == (1, 2, 2, 1)
    (prolog,) = pro.glob("manifest_*.json")
    p = json.loads(prolog.read_text())["scheduler"]
    assert (p["job_id"], p["partition"]) == (job, "debug")
    (node,) = out.glob("node_*.json")
    res = run_cli("merge", str(manifest), str(out), "--json")
    assert res.returncode == 0, res.stderr
    merged = json.loads(Path(json.loads(res.stdout)["path"]).read_text())
    assert merged["run_id"] == doc["run_id"] and len(merged["runtime"]["nodes"]) == 1


TRAIN = """import json, os, random, sys
seed, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(seed)
w = [rng.random() for _ in range(100)]
open(os.path.join(out, "model.txt"), "w").write(repr(w))
json.dump({"loss": sum(w) / len(w)}, open(os.path.join(out, "metrics.json"), "w"))
"""


# the recorded command as the job script ran it: plainly, or as a job step of its own (srun in the replay must
# reach the new job: the old job's SLURM_JOB_ID, recorded in config.selected_env, is not replayed)
@pytest.mark.parametrize("launch", ["", "srun --ntasks=1 "], ids=["plain", "srun-step"])
def test_rerun_sbatch_submit_replays_a_real_slurm_run_as_a_new_job_and_verifies(slurm_cluster, tmp_path, launch):
    project = make_repo(tmp_path / "proj", {"train.py": TRAIN})
    rr = "%s -m relaxrepro" % sys.executable
    job = _submit(slurm_cluster, "#!/bin/sh\n#SBATCH --nodes=1 --ntasks-per-node=1\ncd %s\nexec %s run "
                  "--output-dir runs/a --outputs runs/a/model.txt --metrics runs/a/metrics.json -- %s%s train.py 7 "
                  "runs/a\n" % (project, rr, launch, sys.executable), tmp_path)
    _done(slurm_cluster, job, tmp_path / ("slurm-%s.out" % job))
    (original,) = (project / "runs" / "a").glob("manifest_*.json")
    old = json.loads(original.read_text())
    assert old["scheduler"]["job_id"] == job

    t0 = time.monotonic()
    res = run_cli("rerun", str(original), "--sbatch", "--submit", "--json", cwd=tmp_path,
                  env=dict(slurm_cluster.env, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr
    new_job = json.loads(res.stdout)["job_id"]
    assert new_job and new_job != job
    log = project / "runs" / ("a.replay-job%s.out" % new_job)
    _done(slurm_cluster, new_job, log)
    replay_dir = project / "runs" / ("a.replay-job%s" % new_job)
    (replayed,) = replay_dir.glob("manifest_*.replay-job%s.json" % new_job)
    new = json.loads(replayed.read_text())
    assert new["scheduler"]["job_id"] == new_job
    assert new["lineage"]["replay_of"] == old["run_id"]
    assert "reproduced" in log.read_text().lower(), log.read_text()
    # every node's report, merged into a copy of the replay's manifest
    merged = json.loads((replay_dir / ("manifest_%s.merged.json" % new["run_id"])).read_text())
    assert len(merged["runtime"]["nodes"]) == 1
    res = run_cli("verify", str(original), str(replayed), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["verdict"] == "reproduced", res.stdout
    print("replay job %s: %.1f s from submit to verified" % (new_job, time.monotonic() - t0))


def test_a_replay_that_would_write_over_the_originals_outputs_is_refused_before_it_queues(tmp_path):
    m = _manifest(tmp_path, scheduler=SLURM, collection={"recording": {"outputs": ["model.txt"]}})
    (tmp_path / "model.txt").write_text("the original's model")
    bindir = tmp_path / "bin"
    fake_tool(bindir, "sbatch", "touch %s/submitted\necho 42\n" % tmp_path)
    res = run_cli("rerun", str(m), "--sbatch", "--submit",
                  env=dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), PYTHONPATH=str(ROOT)))
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("relaxrepro rerun: refused: the original's output %s lies outside its directory and the "
                          "command does not name it, so the replay would write over it; move it aside first (or "
                          "--in-place)\n" % (tmp_path / "model.txt"))
    assert not (tmp_path / "submitted").exists()


def test_a_stopped_cluster_leaves_no_process_behind_even_with_a_job_running(slurm_cluster):
    # a cluster of its own (the session's serves the other tests), stopped while a job sleeps in it
    from tests.helpers import slurm
    from tests.helpers.common import marked_processes

    cluster = slurm.start()
    try:
        res = cluster.run("sbatch", "--parsable", "--wrap", "sleep 300", cwd="/tmp")
        assert res.returncode == 0, res.stderr
        deadline = time.monotonic() + 30
        while "RUNNING" not in cluster.run("scontrol", "show", "job", res.stdout.strip()).stdout:
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.1)
        assert len(marked_processes(cluster.marker)) >= 4  # munged, slurmctld, slurmd, slurmstepd, sleep
    finally:
        cluster.stop()
    assert marked_processes(cluster.marker) == []
    assert not cluster.dir.exists()


def test_the_script_of_the_pyz_runs_the_pyz(tmp_path):
    # the design card's users drop relaxrepro.pyz on the cluster: the job must call that file, not the package.
    # A zipapp whose __main__ starts this tree's CLI, as the real one's does (zipapp.sh takes 17 s to build)
    src = tmp_path / "src"
    src.mkdir()
    (src / "__main__.py").write_text("import sys\nsys.path.insert(0, %r)\nfrom relaxrepro.cli import run_main\n"
                                     "run_main()\n" % str(ROOT))
    pyz = tmp_path / "relaxrepro.pyz"
    zipapp.create_archive(str(src), str(pyz))
    m = _manifest(tmp_path, scheduler=SLURM)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, str(pyz), "rerun", str(m), "--sbatch"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    me = "%s %s" % (sys.executable, pyz)
    assert "\n  %s generate --node-report " % me in res.stdout and "\n%s rerun " % me in res.stdout


def test_the_cluster_says_why_it_cannot_start(monkeypatch):
    from tests.helpers import slurm

    monkeypatch.setattr(slurm.os, "geteuid", lambda: 1000)
    assert slurm.why_not() == ("a real SLURM needs root (slurmd starts jobs as their user); run tests/run.sh as "
                               "root")
    monkeypatch.setattr(slurm.os, "geteuid", lambda: 0)
    monkeypatch.setattr(slurm, "_which", lambda name: None if name in ("munged", "sbatch") else "/usr/bin/" + name)
    assert slurm.why_not() == ("SLURM not installed (munged, sbatch missing): tests/run.sh installs slurm-wlm and "
                               "munge with apt as root")


def test_gpus_asked_for_with_gres_are_asked_for_per_node(tmp_path):
    # sbatch --gres=gpu:a100:4 sets no SLURM_GPUS_PER_NODE, only SLURM_GPUS_ON_NODE (scheduler.gpus_on_node)
    m = _manifest(tmp_path, scheduler={"type": "slurm", "job_id": "7", "node_count": 1, "gpus_on_node": 4})
    text = run_cli("rerun", str(m), "--sbatch").stdout
    assert "# the GPUs the job had on its node (SLURM_GPUS_ON_NODE; it asked with --gres or --gpus)\n" \
           "#SBATCH --gpus-per-node=4\n" in text
