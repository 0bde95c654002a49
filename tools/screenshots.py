"""Regenerate docs/img/report-*.png: each kind of ``relaxrepro report`` page, in headless Chromium.

    python3 tools/screenshots.py          # needs chromium (apt-get install -y chromium)

The runs are made up here (an H100 base run and a four-run learning-rate sweep derived from it), so the
pictures are the same on every machine and show no one's paths.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from relaxrepro import cli  # noqa: E402
from tests.helpers.browser import chromium, screenshot  # noqa: E402
from tests.helpers.recording import make_doc, put  # noqa: E402

PATCH = ("diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -10,3 +10,3 @@\n"
         " def schedule(step):\n-    return min(1.0, step / 500)\n+    return min(1.0, step / 2000)\n")
HW = {"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15", "cuda_version": "12.4",
      "nccl_version": "2.21.5", "cudnn_version": "9.1.0"}
ENV = {"python": {"version": "3.11.7"}, "packages_count": 188,
       "key_packages": {"torch": "2.5.1", "ray": "2.40.0", "transformers": "4.46.3", "vllm": "0.6.4"}}
PROBES = {name: {"status": "ok", "seconds": s, "warnings": []} for name, s in
          (("git", 0.04), ("packages", 0.03), ("cuda", 0.02), ("ray", 0.08), ("seeds", 0.0))}
PROBES["gpu"] = {"status": "partial", "seconds": 0.41, "warnings": ["nvidia-smi topo -m timed out after 4 s"]}


def build(base: Path) -> None:
    common = dict(hardware=HW, environment=ENV, collection={"probes": PROBES},
                  training={"algorithm": "grpo", "parallel_topology": {"tp": 2, "pp": 1, "dp": 4}, "world_size": 8},
                  seeds={"values": {"seed": 1234}, "bit_reproducible": False})
    put(base / "base", make_doc("20261201_090000_a1b2c3d", generated_at="2026-12-01T09:00:00Z",
                                command={"argv": ["python", "train.py", "--lr", "3e-4"], "cwd": "/work/proj"},
                                code={"proj": {"commit": "a1b2c3d4" * 5, "branch": "main", "dirty": False}},
                                lineage={"note": "baseline"}, config={"resolved_args": {"lr": 3e-4, "warmup": 500}},
                                results={"metrics": {"reward": 0.61, "loss": 0.92}},
                                outcome={"status": "ok", "exit_code": 0, "duration_s": 5400.0}, **common))
    for i, (lr, reward) in enumerate(((1e-4, 0.66), (3e-4, 0.71), (1e-3, 0.69), (3e-3, None))):
        rid = "20261202_%02d0000_%07x" % (10 + i, 0xb0c0d0 + i)
        put(base / "lr-sweep", make_doc(
            rid, generated_at="2026-12-02T%02d:00:00Z" % (10 + i),
            command={"argv": ["python", "train.py", "--lr", str(lr), "--warmup", "2000"], "cwd": "/work/proj"},
            code={"proj": {"commit": "e5f6a7b8" * 5, "branch": "warmup-2k", "dirty": True,
                           "patch": {"text": PATCH, "sha256": "9" * 64}}},
            config={"resolved_args": {"lr": lr, "warmup": 2000}},
            lineage={"group": "lr-sweep", "parent": {"run_id": "20261201_090000_a1b2c3d", "reason": "explicit",
                                                     "found": True}},
            results={"metrics": {"reward": reward, "loss": round(0.8 - i / 20, 3)}} if reward else {},
            outcome={"status": "ok", "exit_code": 0, "duration_s": 5100.0 + i * 60} if reward else
            {"status": "exit", "exit_code": 1, "duration_s": 640.0}, **common))


def _trace(part: "int | None") -> dict:
    """A loss traced over 100 steps, another from step ``part`` on."""
    loss = [2.0 * 0.97 ** i * (1 + 0.004 * max(0, i - part + 1) if part else 1) for i in range(100)]
    return {"steps": list(range(100)), "names": ["loss"], "values": [[x.hex() for x in loss]], "last_step": 99,
            "calls": 100}


def main() -> int:
    if chromium() is None:
        sys.stderr.write("tools/screenshots.py: chromium not found (apt-get install -y chromium)\n")
        return 1
    out = ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        build(runs)
        os.chdir(tmp)
        base = "runs/base/manifest_20261201_090000_a1b2c3d.json"
        child = "runs/lr-sweep/manifest_20261202_110000_0b0c0d1.json"
        pages = {"run": ([child, "runs", "--against", base], 1200), "sweep": (["runs", "--group", "lr-sweep"], 900),
                 "runs": (["runs"], 900), "diff": ([base, child], 900)}
        for name, (argv, height) in pages.items():
            page = Path(tmp) / ("%s.html" % name)
            assert cli.main(["report", *argv, "-o", str(page)]) == 0
            screenshot(page, out / ("report-%s.png" % name), width=1000, height=height)
        screenshot(Path(tmp) / "runs.html", out / "report-runs-dark.png", width=1000, height=700, dark=True)
        pair = [put(Path("pair"), make_doc(rid, schema_version="1.3", results={
            "metrics": {"reward": 0.71}, "trace": _trace(part)})) for rid, part in (("original", None), ("replay", 40))]
        assert cli.main(["verify", str(pair[0]), str(pair[1]), "--html", "verify.html"]) == 1
        screenshot(Path(tmp) / "verify.html", out / "report-verify.png", width=1000, height=800)
    return 0


if __name__ == "__main__":
    sys.exit(main())
