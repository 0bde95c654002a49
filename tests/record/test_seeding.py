"""Seeds as set, not as passed: ``relaxrepro.seed_everything``, the generators observed by a recorded block, and the
determinism lint, in real trainer processes (a small CPU torch and numpy where the test says so)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import clean_env, run_cli, validate_manifest
from tests.helpers.recording import load, manifests

TRAINER = r'''
import argparse, hashlib, os, sys
import torch
from torch.utils.data import DataLoader, TensorDataset
import relaxrepro

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--helper", choices=("deterministic", "none"), default="none")
p.add_argument("--out", required=True)
args = p.parse_args()

class Noisy(TensorDataset):
    def __getitem__(self, i):  # augmentation drawn in the worker: differs per run unless the workers are seeded
        x, y = super().__getitem__(i)
        return x + 0.1 * torch.randn(x.shape), y

loader_options = {}
if args.helper == "deterministic":
    seeded = relaxrepro.seed_everything(7, deterministic=True)
    loader_options = seeded.loader
with relaxrepro.recorded(args, output_dir=args.out) as manifest:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 8, generator=g), torch.randn(256, generator=g)
    loader = DataLoader(Noisy(x, y), batch_size=32, shuffle=True, num_workers=2, **loader_options)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    step = 0
    for xb, yb in loader:
        step += 1
        loss = torch.nn.functional.mse_loss(model(xb).squeeze(1), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        relaxrepro.trace(step, loss=loss.item())
        print("step", step, flush=True)
    path = os.path.join(args.out, "weights.pt")
    torch.save(model.state_dict(), path)
    relaxrepro.result(metrics={"loss": loss.item()}, outputs=[path])
print("trainer done", flush=True)
'''

NO_SEED = r'''
import argparse, random, sys
import relaxrepro
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--out", required=True)
p.add_argument("also", nargs="*")
args = p.parse_args()
if "numpy" in sys.argv:
    import numpy
if "torch" in sys.argv:
    import torch
if "recorded-seed" in sys.argv:
    block = relaxrepro.recorded(args, output_dir=args.out, seed=5)
else:
    block = relaxrepro.recorded(args, output_dir=args.out)
with block:
    random.random()
print("modules:", "numpy" in sys.modules, "torch" in sys.modules)
'''


def _trainer(tmp_path: Path, source: str, *args: str, env=None, timeout: float = 120) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(source)
    return subprocess.run([sys.executable, str(script), *args], env=env or clean_env(), cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def _seeds(out: Path) -> dict:
    (path,) = manifests(out)
    doc = load(path)
    validate_manifest(doc)
    return doc["seeds"]


# -- without torch or numpy ------------------------------------------------------------------------------------


def test_a_trainer_that_never_seeds_records_that_no_generator_was_seeded_despite_its_seed_argument(tmp_path):
    res = _trainer(tmp_path, NO_SEED, "--out", "out", timeout=60)
    assert res.returncode == 0, res.stdout
    seeds = _seeds(tmp_path / "out")
    assert seeds["values"] == {"seed": 0}  # what argparse passed
    assert seeds["generators"] == {"random": None, "numpy": "not imported", "torch": "not imported"}
    assert seeds["seeded"] == [] and seeds["unused_values"] == ["seed"]
    assert seeds["warnings"][0] == ("no generator seeded (random at a state no recorded seed gives them); the "
                                    "argument seed=0 never reached one")
    assert "modules: False False" in res.stdout  # and nothing was imported for it


def test_recorded_with_a_seed_seeds_what_is_imported_and_imports_nothing_else(tmp_path):
    res = _trainer(tmp_path, NO_SEED, "--out", "out", "recorded-seed", timeout=60)
    assert res.returncode == 0, res.stdout
    assert "modules: False False" in res.stdout
    seeds = _seeds(tmp_path / "out")
    assert seeds["set"] == {"by": "seed_everything", "seed": 5, "deterministic": False, "workers": True,
                            "random": 5, "numpy": "not imported", "torch": "not imported"}
    assert seeds["generators"]["random"] == 5 and seeds["seeded"] == ["random"]
    assert seeds["unused_values"] == ["seed"]  # --seed 0 was passed; 5 was set
    assert "argument seed=0 reached no generator" in seeds["warnings"]


@pytest.mark.parametrize("bad", ["'abc'", "None", "1.5", "True"])
def test_seed_everything_never_raises_on_a_bad_seed(bad):
    code = ("import relaxrepro, sys; s = relaxrepro.seed_everything(%s); print(s.set, s.loader, 'numpy' in "
            "sys.modules, 'torch' in sys.modules)" % bad)
    res = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "{} {} False False"
    assert res.stderr.strip() == "relaxrepro: seed_everything: seed %s is not an integer: no generator seeded" % bad


# -- with numpy and torch ----------------------------------------------------------------------------------------

torch_only = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import torch, numpy"], capture_output=True).returncode != 0,
    reason="needs torch and numpy (pip install -r tests/requirements-ml.txt)")


@torch_only
def test_a_trainer_that_imports_numpy_and_torch_and_never_seeds_shows_it_for_each(tmp_path):
    res = _trainer(tmp_path, NO_SEED, "--out", "out", "numpy", "torch", timeout=60)
    assert res.returncode == 0, res.stdout
    seeds = _seeds(tmp_path / "out")
    assert seeds["generators"] == {"random": None, "numpy": None, "torch": None}
    assert seeds["observed"]["entry"]["torch"]["initial_seed"] >= 2 ** 32  # torch's own 64 random bits
    assert seeds["warnings"][0].startswith("no generator seeded (random, numpy, torch at a state")
    assert "relaxrepro: determinism: no generator seeded" in res.stdout  # logged at entry: torch is imported


@torch_only
def test_seed_everything_seeds_numpy_and_torch_as_their_own_seed_calls_would():
    code = r'''
import numpy as np, torch, relaxrepro
s = relaxrepro.seed_everything(2 ** 40 + 3)
a = (np.random.random(), torch.rand(1).item(), s.rng.random())
np.random.seed((2 ** 40 + 3) % 2 ** 32); torch.manual_seed(2 ** 40 + 3)
b = (np.random.random(), torch.rand(1).item(), np.random.default_rng(2 ** 40 + 3).random())
print(a == b, s.set["numpy"] == (2 ** 40 + 3) % 2 ** 32, sorted(s.loader), s.generator.initial_seed() == 2 ** 40 + 3)
'''
    res = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "['generator',", "'worker_init_fn']", "True"]


@torch_only
def test_seed_everything_deterministic_gives_five_bit_identical_runs_with_seeded_workers(tmp_path):
    traces, weights = set(), set()
    for i in range(5):
        run = tmp_path / ("run%d" % i)
        run.mkdir()
        res = _trainer(run, TRAINER, "--helper", "deterministic", "--out", "out", env=clean_env(PYTHONHASHSEED="0"))
        assert res.returncode == 0, res.stdout
        (path,) = manifests(run / "out")
        doc = load(path)
        traces.add(json.dumps(doc["results"]["trace"], sort_keys=True))
        (entry,) = doc["results"]["outputs"].values()
        weights.add(entry["sha256"])
        seeds = doc["seeds"]
        assert seeds["set"]["deterministic_algorithms"] is True and seeds["set"]["torch"] == 7
        assert seeds["generators"] == {"random": 7, "numpy": 7, "torch": 7}
        assert seeds["dataloaders"] == [{"workers": 2, "generator": True, "worker_init_fn": "seed_worker"}]
        assert seeds["warnings"] == ["argument seed=0 reached no generator"]
    assert len(traces) == 1 and len(weights) == 1


@torch_only
def test_the_same_trainer_without_the_helper_is_flagged_before_it_ends(tmp_path):
    res = _trainer(tmp_path, TRAINER, "--out", "out")
    assert res.returncode == 0, res.stdout
    lines = res.stdout.splitlines()
    lint = [i for i, line in enumerate(lines) if "a DataLoader with 2 workers has neither" in line]
    # at the first traced step (the loader exists by then), long before the end
    assert lint and lint[0] < lines.index("step 1") < lines.index("trainer done"), res.stdout
    entry = [line for line in lines if line.startswith("relaxrepro: determinism: no generator seeded")]
    assert entry and "non-deterministic algorithms allowed" in entry[0]
    seeds = _seeds(tmp_path / "out")
    assert seeds["dataloaders"] == [{"workers": 2, "generator": False, "worker_init_fn": None}]
    assert any("DataLoader with 2 workers" in w for w in seeds["warnings"])
    assert "non-deterministic algorithms allowed (torch.use_deterministic_algorithms is off)" in seeds["warnings"]

    check = run_cli("check", str(manifests(tmp_path / "out")[0]), cwd=tmp_path)
    row = [line for line in check.stdout.splitlines() if line.startswith("determinism lint")]
    assert row and "4 warnings" in row[0] and "INFO" in row[0], check.stdout
