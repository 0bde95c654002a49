"""Helpers for the tracker tests: a trainer that reports to W&B (offline), MLflow (SQLite) or TensorBoard and
records itself with relaxrepro, run in a child process (the trackers' threads and W&B's service stay out of
pytest), and readers of what each tracker kept."""

from __future__ import annotations

import glob
import json
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from tests.helpers.common import MARKER_VAR, clean_env, survivors

TRAINER = r'''
import json, os, sys
tool, out, result = sys.argv[1], sys.argv[2], sys.argv[3]
import relaxrepro

options = json.loads(os.environ.get("TEST_OPTIONS", "{}"))
info = {}
if tool == "wandb":
    import wandb
    settings = wandb.Settings(disable_code=True, disable_git=True, x_disable_meta=True, x_save_requirements=False,
                              console="off")
    run = wandb.init(project="proj", entity="team", config={"lr": 0.1}, settings=settings)
    with relaxrepro.recorded({"lr": 0.1, "seed": 1}, output_dir=out, **options) as m:
        run.log({"loss": 0.5})
    info["wandb_dir"] = run.settings.sync_dir
    info["wandb_path"] = run.path
    run.finish()
    wandb.teardown()  # ends W&B's service process
elif tool == "mlflow":
    import mlflow
    mlflow.set_tracking_uri(os.environ["TEST_MLFLOW_URI"])
    exp = mlflow.create_experiment("exp", artifact_location=os.environ["TEST_MLFLOW_ARTIFACTS"])
    with mlflow.start_run(experiment_id=exp) as run:
        with relaxrepro.recorded({"lr": 0.1, "seed": 1}, output_dir=out, **options) as m:
            mlflow.log_metric("loss", 0.5)
    info["mlflow_run_id"] = run.info.run_id
elif tool == "tensorboard":
    from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(log_dir=os.environ["TEST_TB_DIR"])
    with relaxrepro.recorded({"lr": 0.1, "seed": 1}, output_dir=out, **options) as m:
        writer.add_scalar("loss", 0.5, 0)
    writer.close()
else:
    with relaxrepro.recorded({"lr": 0.1}, output_dir=out, **options) as m:
        pass
info["path"] = m.path
info["run_id"] = m.run_id
info["modules"] = sorted(sys.modules)
with open(result, "w") as fh:
    json.dump(info, fh)
'''


def run_trainer(tmp_path: Path, tool: str, *extra_argv: str, env: Optional[Dict[str, str]] = None,
                options: Optional[Dict[str, Any]] = None, python: str = sys.executable) -> Dict[str, Any]:
    """Run :data:`TRAINER` for ``tool`` in a child; what it reports (+ its stderr). No child outlives it."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    result = tmp_path / ("result-%s.json" % uuid.uuid4().hex[:8])
    marker = uuid.uuid4().hex
    child_env = clean_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true",
                          WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"),
                          WANDB_CACHE_DIR=str(tmp_path / "wandb-cache"),
                          WANDB_DATA_DIR=str(tmp_path / "wandb-data"),
                          TEST_MLFLOW_URI="sqlite:///%s" % (tmp_path / "mlflow.db"),
                          TEST_MLFLOW_ARTIFACTS=str(tmp_path / "artifacts"), TEST_TB_DIR=str(tmp_path / "tb"),
                          TEST_OPTIONS=json.dumps(options or {}), MPLCONFIGDIR=str(tmp_path / "mpl"),
                          GIT_PYTHON_REFRESH="quiet", **{MARKER_VAR: marker})
    child_env.update(env or {})
    res = subprocess.run([python, str(script), tool, str(tmp_path / "out"), str(result), *extra_argv],
                         env=child_env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert survivors(marker) == [], "a process of the trainer outlived it"
    assert res.returncode == 0, res.stderr[-3000:]
    info = json.loads(result.read_text())
    info["stderr"] = res.stderr
    return info


def wandb_records(run_dir: str) -> List[Any]:
    """The records of an offline W&B run (``run-<id>.wandb``: a 7-byte header, then LevelDB's log format in
    32 KiB blocks of chunks with a 7-byte header: crc, length, type 1 full / 2 first / 3 middle / 4 last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(glob.glob(str(Path(run_dir) / "run-*.wandb"))[0]).read_bytes()
    assert data[:4] == b":W&B"
    block, pos, records, pending = 32768, 7, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:  # the zero padding at the end of a block
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def wandb_config(run_dir: str) -> Dict[str, Any]:
    """The run's config as the offline run recorded it (its run record, then each config update)."""
    config: Dict[str, Any] = {}
    for record in wandb_records(run_dir):
        kind = record.WhichOneof("record_type")
        items: Sequence[Any] = record.run.config.update if kind == "run" else \
            record.config.update if kind == "config" else ()
        for item in items:
            config[item.key] = json.loads(item.value_json)
    return config


def tensorboard_texts(log_dir: Path) -> Dict[int, str]:
    """The text summaries tagged ``relaxrepro`` in ``log_dir``'s event files, by step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        if tag.startswith("relaxrepro"):
            for event in acc.Tensors(tag):
                out[event.step] = event.tensor_proto.string_val[0].decode("utf-8")
    return out
