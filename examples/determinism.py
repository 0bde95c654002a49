"""Does a rerun give the same result? A small PyTorch trainer in three modes, recorded by relaxrepro.

    relaxrepro run --output-dir runs/det -- python examples/determinism.py --mode deterministic
    relaxrepro rerun runs/det/manifest_<run-id>.json --confirm --quick 5    # the first 5 steps again
    relaxrepro rerun runs/det/manifest_<run-id>.json --confirm --full       # all of it: weights, AUC

An MLP on synthetic tabular data, a DataLoader with 2 workers, dropout, validation AUC. Modes:
``unconstrained`` sets nothing; ``seed`` seeds random, numpy and torch (``relaxrepro.seed_everything``);
``deterministic`` also seeds the DataLoader (the helper's worker_init_fn + generator), turns on
torch.use_deterministic_algorithms and sets CUBLAS_WORKSPACE_CONFIG (``deterministic=True``), and PYTHONHASHSEED.
The lines that use relaxrepro are marked ``# relaxrepro``; torch and numpy are this example's own needs, never
relaxrepro's.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import relaxrepro  # relaxrepro

COLUMNS = ["age", "income", "tenure", "visits", "spend", "returns", "clicks", "support", "region", "device",
           "plan", "discount"]


class Table(Dataset):
    """Rows of a table; each read adds a little noise (augmentation) with numpy's RNG, inside the worker."""

    def __init__(self, x: np.ndarray, y: np.ndarray, noise: float) -> None:
        self.x, self.y, self.noise = x, y, noise

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        row = self.x[i] + self.noise * np.random.standard_normal(self.x.shape[1])
        return torch.tensor(row, dtype=torch.float32), torch.tensor(self.y[i], dtype=torch.float32)


def make_data(rows: int):
    """The same table every run (its own fixed RNG): only training may vary between runs."""
    rng = np.random.default_rng(2024)
    table = {name: rng.standard_normal(rows) for name in COLUMNS}
    logit = table["income"] - table["returns"] + np.sin(2 * table["visits"]) + table["plan"] * table["device"]
    label = (logit + 0.5 * rng.standard_normal(rows) > 0).astype(np.float32)
    # A classic source of drift: a set of column names iterates in an order that follows PYTHONHASHSEED,
    # so without it the model sees the columns in another order in every process.
    features = list(set(COLUMNS) - {"region"})
    x = np.stack([table[name] for name in features], axis=1).astype(np.float32)
    cut = rows * 4 // 5
    return (x[:cut], label[:cut]), (x[cut:], label[cut:])


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve: the chance that a positive scores above a negative (ties count half)."""
    order = torch.argsort(scores, stable=True)
    s, y = scores[order].double(), labels[order].double()
    ranks = torch.empty_like(s)
    i = 0
    while i < len(s):  # tied scores share their mean rank
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    positives = float(y.sum())
    negatives = len(y) - positives
    return (float(ranks[y == 1].sum()) - positives * (positives + 1) / 2) / (positives * negatives)


def batches(loader: DataLoader):
    """Batches epoch after epoch, for as many steps as the caller takes."""
    while True:
        yield from loader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("unconstrained", "seed", "deterministic"), default="deterministic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--out", default=None, help="where the weights go (default: beside the run's manifest)")
    args = parser.parse_args()

    if args.mode == "deterministic" and os.environ.get("PYTHONHASHSEED") != str(args.seed):
        # The hash seed is read once, when Python starts: start again with it set.
        os.environ["PYTHONHASHSEED"] = str(args.seed)
        os.execv(sys.executable, [sys.executable] + sys.argv)
    loader_options = {}
    if args.mode == "seed":  # relaxrepro: random, numpy and torch seeded, recorded in seeds.set
        relaxrepro.seed_everything(args.seed, workers=False)
    if args.mode == "deterministic":  # relaxrepro: also the switches and the DataLoader's generator and workers
        loader_options = relaxrepro.seed_everything(args.seed, deterministic=True).loader

    with relaxrepro.recorded(args, output_dir=args.out) as manifest:  # relaxrepro
        (x, y), (vx, vy) = make_data(args.rows)
        loader = DataLoader(Table(x, y, noise=0.05), batch_size=64, shuffle=True, num_workers=2,
                            persistent_workers=True, **loader_options)
        model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                    torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                    torch.nn.Linear(64, 1))
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        started = time.perf_counter()
        for step, (xb, yb) in enumerate(batches(loader), start=1):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(xb).squeeze(1), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            # relaxrepro: the exact value, every step. Under rerun --quick N this ends the run cleanly after
            # step N (a trainer that must tidy up first asks relaxrepro.should_stop(step) before it).
            relaxrepro.trace(step, loss=loss.item())
            if step == args.steps:
                break

        seconds = time.perf_counter() - started
        model.eval()
        with torch.no_grad():
            val_auc = auc(model(torch.from_numpy(vx)).squeeze(1), torch.from_numpy(vy))
        out = args.out or (os.path.dirname(manifest.path) if manifest is not None and manifest.path else ".")
        weights = os.path.join(out, "weights.pt")
        os.makedirs(out, exist_ok=True)
        torch.save(model.state_dict(), weights)
        relaxrepro.result(metrics={"auc": val_auc, "loss": loss.item()}, outputs=[weights])  # relaxrepro
        print("mode %s: %d steps, loss %.4f, validation AUC %.4f, %.1f steps/s, weights %s"
              % (args.mode, step, loss.item(), val_auc, step / seconds, weights))


if __name__ == "__main__":
    main()
