"""What attaching the manifest to a tracker costs the trainer: relaxrepro's own time (budget: <= 50 ms).

Usage: python bench/trackers.py [ROUNDS]   (an interpreter with wandb installed; W&B runs offline in a temp dir)

In one process with an offline W&B run active, each round writes two fresh manifests with ``write_manifest``,
one with ``integrations=False`` and one attached, in alternating order. The W&B calls themselves
(``run.save``, ``run.config.update``: the tracker's share) are timed around ``trackers.send``; relaxrepro's
own time is timed around the API's two tracker steps less the tracker's share: finding the run, noting it in
``lineage.trackers``, the summary, the bounded thread; and, as a cross-check, as the attached write less the
plain write less the tracker's share (fsync noise included). Medians of the per-round values.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    tmp = tempfile.mkdtemp(prefix="relaxrepro-bench-trackers-")
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=tmp, WANDB_SILENT="true")
    try:
        import wandb
    except ImportError:
        shutil.rmtree(tmp, ignore_errors=True)
        print("wandb is not installed for %s: nothing measured" % sys.executable)
        return 0
    import relaxrepro
    from relaxrepro.record import trackers

    shares = []
    send = trackers.send

    def timed_send(*a, **k):
        t0 = time.perf_counter()
        try:
            return send(*a, **k)
        finally:
            shares.append(time.perf_counter() - t0)

    trackers.send = timed_send
    from relaxrepro import api

    ours = []  # time spent in the API's two tracker steps (finding + noting, summary + bounded send)

    def timed(fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                ours.append(time.perf_counter() - t0)
        return wrapper

    api._find_trackers, api._send_trackers = timed(api._find_trackers), timed(api._send_trackers)
    run = wandb.init(project="bench", settings=wandb.Settings(disable_code=True, disable_git=True,
                                                             x_disable_meta=True, console="off"))
    base = relaxrepro.collect_manifest()
    own, plain, attached, share, direct = [], [], [], [], []
    try:
        for r in range(rounds + 1):  # the first round warms up
            got = {}
            for on in ((True, False) if r % 2 else (False, True)):
                m = type(base)(json.loads(json.dumps(base)))  # a fresh copy: each write is a new run
                m["run_id"] = "%s_%d_%d" % (base.run_id, r, on)
                del shares[:], ours[:]
                t0 = time.perf_counter()
                path = relaxrepro.write_manifest(m, os.path.join(tmp, "out"), integrations=on)
                got[on] = (time.perf_counter() - t0, sum(shares), sum(ours) - sum(shares))
                assert path is not None
            if r:
                plain.append(got[False][0])
                attached.append(got[True][0])
                share.append(got[True][1])
                direct.append(got[True][2])
                own.append(got[True][0] - got[False][0] - got[True][1])
    finally:
        run.finish()
        wandb.teardown()
        shutil.rmtree(tmp, ignore_errors=True)
    ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    print("rounds: %d (W&B %s, offline)" % (rounds, wandb.__version__))
    print("write_manifest, integrations off: %.2f ms" % ms(plain))
    print("write_manifest, attached to W&B:  %.2f ms (W&B's own calls %.2f ms)" % (ms(attached), ms(share)))
    print("relaxrepro's own time, timed around its calls: %.2f ms (budget 50 ms: %s)" % (
        ms(direct), "PASS" if ms(direct) <= 50 else "FAIL"))
    print("the same as attached - off - W&B's calls:      %.2f ms (fsync noise included)" % ms(own))
    return 0


if __name__ == "__main__":
    sys.exit(main())
