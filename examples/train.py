"""A minimal trainer recorded by relaxrepro. The lines a real trainer adds are marked ``# relaxrepro``.

    python examples/train.py --log-dir runs/demo --lr 3e-4
    python examples/train.py --log-dir runs/demo --load runs/demo/ckpt   # lineage: parent via load

Works with relaxrepro installed, or from the single file: ``PYTHONPATH=relaxrepro.pyz python train.py``.
"""

import argparse
import logging
import os

import relaxrepro  # relaxrepro


def train(args: argparse.Namespace) -> float:
    loss = 1.0
    for _step in range(args.steps):
        loss *= 1.0 - args.lr
    if args.fail:
        raise RuntimeError("loss diverged")
    os.makedirs(os.path.join(args.log_dir, "ckpt"), exist_ok=True)
    with open(os.path.join(args.log_dir, "ckpt", "model.txt"), "w") as fh:
        fh.write("%f\n" % loss)
    return loss


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-dir", default="runs/demo")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--load", default=None, help="checkpoint to start from")
    parser.add_argument("--group", default=None)
    parser.add_argument("--fail", action="store_true", help="raise, to show the outcome of a failed run")
    args = parser.parse_args(argv)

    with relaxrepro.recorded(args, output_dir=args.log_dir, group=args.group) as manifest:  # relaxrepro
        # ray.init(...); relaxrepro.update_manifest(manifest)   # relaxrepro, for the live Ray topology
        loss = train(args)
        print("final loss %.4f (manifest %s)" % (loss, manifest.path if manifest else None))


if __name__ == "__main__":
    logging.basicConfig(format="%(name)s: %(levelname)s: %(message)s")
    main()
