"""analyze/sbatch.py: the batch script as a pure function of the manifest (the container line, the job id)."""

from __future__ import annotations

import subprocess

from relaxrepro.analyze import sbatch

REC = {"run_id": "r1", "command": {"argv": ["python", "train.py"]},
       "scheduler": {"type": "slurm", "job_id": "7", "node_count": 1, "ntasks_per_node": 1},
       "container": {"image": {"name": "nvcr.io/nvidia/pytorch:24.05-py3"}, "runtime": "enroot"}}


def test_a_recorded_container_without_a_wrapper_is_said_and_marked():
    text = sbatch.script(REC, "/srv/runs/a/manifest_r1.json", relaxrepro=["python3", "-m", "relaxrepro"])
    assert ("# The run was recorded in container nvcr.io/nvidia/pytorch:24.05-py3; this script replays on the host "
            "(rerun --sbatch\n# --container writes one that replays inside it).\n") in text
    assert "\npython3 -m relaxrepro rerun \"${manifest}\" \\\n  --confirm \\\n  --output-dir" in text


def test_with_the_container_the_node_replays_the_command_inside_it_and_relaxrepro_outside():
    wrap = ["srun", "--container-image=nvcr.io#nvidia/pytorch@sha256:" + "a" * 64, "--container-mounts=/srv:/srv"]
    text = sbatch.script(REC, "/srv/runs/a/manifest_r1.json", relaxrepro=["python3", "-m", "relaxrepro"],
                         container=wrap)
    assert "recorded in container" not in text
    assert ("# The recorded command runs inside the recorded image, pinned by its digest (rerun --container):\n"
            "#   srun '--container-image=nvcr.io#nvidia/pytorch@sha256:%s' --container-mounts=/srv:/srv ...\n"
            % ("a" * 64)) in text
    # relaxrepro runs on the node (the image need not have it); its rerun puts the wrapper before the command
    assert "\npython3 -m relaxrepro rerun \"${manifest}\" \\\n  --confirm \\\n  --container \\\n" in text
    assert subprocess.run(["sh", "-n"], input=text, text=True).returncode == 0


def test_sbatch_parsable_output():
    assert [sbatch.parse_job_id(t) for t in ("42\n", "42;cluster\n", "", "Submitted batch job 42")] == [
        "42", "42", None, None]
