"""The judgement of ``relaxrepro check`` on the shapes Relax's manifests take (seeds under ``values``, config
files keyed by path, the SLURM job under either layout), on hand-built documents."""

from __future__ import annotations

import pytest

from relaxrepro.analyze import check as rules
from tests.helpers.read import base_manifest, modified


def _one(rec, here, item):
    return next(i for i in rules.compare_documents(rec, here) if i.item == item)


def test_no_gpu_recorded_and_none_found_here_passes():
    rec = modified(base_manifest(), "hardware", {"gpu_count": 0, "gpus": []})
    item = _one(rec, modified(rec, "hardware", {}), "gpu count")
    assert (item.verdict, item.recorded, item.here) == ("PASS", "0", "none found")
    assert _one(rec, modified(rec, "hardware", {"gpu_count": 2}), "gpu count").verdict == "WARN"


@pytest.mark.parametrize("here_seeds,verdict", [
    ({"values": {"seed": 42}}, "PASS"),
    ({"values": {"seed": "42"}}, "PASS"),  # parsed from the command here: text
    ({"values": {"seed": 7}}, "WARN"),
    ({"values": {}}, "INFO"),  # the seed comes with the command, not with the machine
])
def test_seeds_under_values_are_compared(here_seeds, verdict):
    rec = modified(base_manifest(), "seeds", {"values": {"seed": 42}})
    assert _one(rec, modified(rec, "seeds", here_seeds), "seed seed").verdict == verdict


def test_determinism_switches_not_recorded_are_no_difference():
    rec = modified(base_manifest(), "seeds", {"values": {"seed": 42}})
    here = modified(rec, "seeds", {"values": {"seed": 42}, "env": {"PYTHONHASHSEED": "0"}})
    assert not [i for i in rules.compare_documents(rec, here) if i.item.startswith("switch ")]
    rec = modified(rec, "seeds", {"values": {"seed": 42}, "env": {}})
    assert _one(rec, here, "switch PYTHONHASHSEED").verdict == "WARN"


def test_config_files_keyed_by_path_compare_with_the_list_form():
    rec = modified(base_manifest(), "config.files", {"conf/a.yaml": "sha256:" + "c" * 64})
    here = base_manifest()  # the list form, same digest
    assert _one(rec, here, "config conf/a.yaml").verdict == "PASS"
    assert _one(modified(rec, "config.files", {"conf/a.yaml": "d" * 64}), here, "config conf/a.yaml").verdict == "WARN"


def test_the_slurm_job_under_either_layout():
    rec = modified(base_manifest(), "scheduler", {"type": "slurm", "job_id": "4242001"})
    item = _one(rec, modified(rec, "scheduler", {"type": "slurm", "job_id": "5"}), "slurm job")
    assert (item.verdict, item.recorded, item.here) == ("INFO", "4242001", "5")
