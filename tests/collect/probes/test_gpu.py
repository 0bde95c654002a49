"""The ``gpu`` probe end to end: real captures served by a fake nvidia-smi on a one-entry PATH,
and every way the tool can misbehave (missing, failing, silent, garbage, hanging)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import gpu, gpu_fields, nvidia, rocm
from tests.helpers.common import clean_env, fake_tool, generate, run_cli
from tests.helpers.gpu import NVIDIA, ROCM, captures, case_id, driverless_linux, fake_smi, read

XML_DUAL_A5000 = NVIDIA / "xml" / "telegraf__dual_a5000-v13.xml"
XML_A100_MIG = NVIDIA / "xml" / "netdata__a100-sxm4-mig.xml"
TOPO_2GPU = NVIDIA / "topo" / "club-3090-issue1229__2xRTX5090_PHB_tabs.txt"
H100_MIG = "nvidia_gpu_exporter__linux-x86_64__nvidia-h100-mig__590.48.01"
ERRORS = NVIDIA / "errors"

# Through `generate` the probe reads the real /proc: on a machine with an NVIDIA driver loaded the
# answer legitimately differs (the driver version from /proc), so those tests need a driverless box.
NO_REAL_DRIVER = pytest.mark.skipif(Path(nvidia.PROC_VERSION).exists(), reason="this machine has an NVIDIA driver")
NO_REAL_GPU_DRIVER = pytest.mark.skipif(not driverless_linux(), reason="this machine has a GPU driver, or is not Linux")


def _ctx(bindir: Path, root: Optional[Path] = None, **env: str) -> Context:
    return Context(env=dict(env, PATH=str(bindir)), root=str(root) if root else "/", cwd=str(bindir))


def _proc_root(tmp_path: Path, version_file: Path, gpus: int = 0) -> Path:
    root = tmp_path / "root"
    d = root / "proc/driver/nvidia"
    d.mkdir(parents=True)
    (d / "version").write_text(read(version_file))
    for i in range(gpus):
        (d / "gpus" / ("0000:%02x:00.0" % (i + 1))).mkdir(parents=True)
    return root


# ------------------------------------------------------------------------ real outputs, collected
def test_xml_with_csv_compute_capability_and_topology(tmp_path: Path) -> None:
    # XML of a two-A5000 box; the CSV answer is a header-ful capture of another machine, so its
    # compute capability only lands on GPUs it matches (by index here: no shared UUID).
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"-q -x": XML_DUAL_A5000, "--query-gpu=*": ("echo 'Field \"compute_cap\" is not a valid "
                                                                   "field to query.'", 2),
                      "topo -m": TOPO_2GPU})
    out = gpu.collect(_ctx(bindir))
    hw = out.data["hardware"]
    assert out.status == "ok", out.warnings
    assert hw["gpu_source"] == "nvidia-smi -q -x"
    assert hw["driver_version"] == "590.44.01" and hw["cuda_driver_version"] == "13.1"
    assert hw["gpu_count"] == hw["visible_gpu_count"] == 2
    assert hw["gpu_model"] == "NVIDIA RTX A5000" and hw["gpu_memory_gb"] == 23.99
    assert hw["gpu_vendor"] == "nvidia"
    assert hw["topology"]["links"] == [["X", "PHB"], ["PHB", "X"]]
    assert "GPU-" not in json.dumps(out.data)


def test_generate_records_mig_gpu_schema_valid(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"-q -x": XML_A100_MIG, "topo -m": NVIDIA / "topo" / (H100_MIG + ".txt")})
    doc = generate(tmp_path, env=clean_env(PATH=str(bindir), CUDA_VISIBLE_DEVICES="0"))
    hw = doc["hardware"]
    assert doc["collection"]["probes"]["gpu"]["status"] == "ok"
    assert hw["gpus"][0]["mig_mode"] == "enabled" and len(hw["gpus"][0]["mig_devices"]) == 2
    assert hw["gpus"][0]["uuid_hash"] == gpu_fields.uuid_hash("GPU-27b94a00-ed54-5c24-b1fd-1054085de32a")
    assert "27b94a00" not in json.dumps(doc)
    assert hw["visible_devices"] == ["0"] and hw["visible_gpu_count"] == 1


def test_mig_profiles_come_from_list(tmp_path: Path) -> None:
    # Only -L names MIG profiles; they are merged into the XML's MIG devices by index. (The two
    # captures come from different MIG machines; the merge only needs matching indices.)
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"-q -x": XML_A100_MIG,
                      "-L": NVIDIA / "list" / "nvidia_gpu_exporter__testdata_list_gpus_8xH100_MIG.txt"})
    migs = gpu.collect(_ctx(bindir)).data["hardware"]["gpus"][0]["mig_devices"]
    assert [(d["index"], d["profile"], d["memory_total_mib"]) for d in migs] == [(0, "1g.10gb", 19968),
                                                                                 (1, "1g.10gb", 19968)]
    assert migs[0]["uuid_hash"] == gpu_fields.uuid_hash("MIG-4d0efb7d-0970-51d9-b761-0686be6b8af3")


def test_nvidia_smi_off_path_in_the_wsl_location(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fake_smi(root / "usr/lib/wsl/lib", {"-q -x": NVIDIA / "xml" / "netdata__rtx-2080-win.xml"})
    (tmp_path / "empty").mkdir()
    hw = gpu.collect(_ctx(tmp_path / "empty", root=root)).data["hardware"]
    assert hw["gpu_model"] == "NVIDIA GeForce RTX 2080" and hw["driver_version"] == "516.59"


def test_csv_fallback_when_xml_is_garbage(tmp_path: Path) -> None:
    csv_file = NVIDIA / "csv" / (H100_MIG + "__idle.txt")
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"-q -x": "echo '<nvidia_smi_log><gpu>'", "--query-gpu=*": csv_file,
                      "--version": NVIDIA / "version" / (H100_MIG + ".txt"), "topo -m": ("true", 1)})
    out = gpu.collect(_ctx(bindir))
    hw = out.data["hardware"]
    assert hw["gpu_source"] == "nvidia-smi --query-gpu"
    assert hw["gpus"][0]["compute_capability"] == "9.0" and hw["gpus"][0]["mig_mode"] == "enabled"
    assert hw["driver_version"] == "590.48.01" and hw["cuda_driver_version"] == "13.1"
    assert out.status == "partial"
    assert any("-q -x gave no data" in w for w in out.warnings)


def test_list_and_table_fallback(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"-q -x": ("true", 1), "--query-gpu=*": ("true", 1),
                      "-L": NVIDIA / "list" / "nvidia_gpu_exporter__testdata_list_gpus_8xH100_MIG.txt",
                      "": NVIDIA / "table" / "gpud__nvidia-smi.550.90.07.out.0.valid.txt"})
    hw = gpu.collect(_ctx(bindir)).data["hardware"]
    assert hw["gpu_source"] == "nvidia-smi -L"
    assert hw["gpu_count"] == 8 and hw["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert hw["driver_version"] == "550.90.07" and hw["cuda_driver_version"] == "12.4"
    assert hw["gpus"][0]["memory_total_mib"] == 81559  # merged from the table by index
    assert hw["gpus"][0]["mig_devices"][0]["profile"] == "1g.10gb"


def test_table_with_a_lost_gpu_counts_it_and_warns(tmp_path: Path) -> None:
    # Driver 610 printed the error for GPU1 before a table listing GPUs 0, 2 and 3.
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"": ERRORS / "UNKNOWN-REPO__partial_failure_610_gpu1_missing_table_stderr_merged.txt"},
             default_rc=0)
    out = gpu.collect(_ctx(bindir))
    hw = out.data["hardware"]
    assert hw["gpu_source"] == "nvidia-smi" and hw["gpu_count"] == 4 and len(hw["gpus"]) == 3
    assert hw["kmd_version"] == "610.57.04" and hw["cuda_driver_version"] == "13.3"
    assert out.status == "partial"
    assert "nvidia-smi: Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error" in out.warnings


@pytest.mark.parametrize("path", captures("xml"), ids=case_id)
def test_every_xml_capture_through_the_collector(tmp_path: Path, path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"-q -x": path})
    out = gpu.collect(_ctx(bindir))
    hw = out.data["hardware"]
    assert hw["gpu_source"] == "nvidia-smi -q -x"
    assert hw["gpus"] and hw["gpu_model"] and hw["gpu_count"] >= len(hw["gpus"])


# ------------------------------------------------------------------------------------ bad input
LOOKED_FOR = ["nvidia-smi", "amd-smi", "rocm-smi", "/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg",
              "/dev/nvidia<N>"]


def _dev_root(tmp_path: Path, *paths: str) -> Path:
    """A filesystem root holding only the given driver paths (plain files: only their presence counts)."""
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    for p in paths:
        (root / p.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / p.lstrip("/")).write_text("")
    return root


def test_no_tool_and_no_driver_is_zero_gpus_with_its_evidence(tmp_path: Path) -> None:
    out = gpu.collect(_ctx(tmp_path / "empty", root=_dev_root(tmp_path, "/dev/null", "/dev/nvme0")))
    assert out.status == "absent" and out.warnings == []
    assert out.data == {"hardware": {"gpu_count": 0, "gpus": [], "gpu_evidence": {"looked_for": LOOKED_FOR,
                                                                                   "found": []}}}


@pytest.mark.parametrize("paths", [
    ["/dev/nvidiactl", "/dev/nvidia3"],  # a container given GPU 3, without nvidia-smi
    ["/dev/nvidia0"],
    ["/dev/kfd"],
    ["/dev/dxg"],
    ["/proc/driver/nvidia/params"],  # the module is loaded, its version file unreadable
], ids=["container-gpu3", "nvidia0", "amd-kfd", "wsl-dxg", "proc-driver"])
def test_a_driver_without_a_tool_leaves_the_count_unknown(tmp_path: Path, paths: list) -> None:
    out = gpu.collect(_ctx(tmp_path / "empty", root=_dev_root(tmp_path, *paths)))
    found = sorted(p if not p.startswith("/proc") else "/proc/driver/nvidia" for p in paths)
    assert out.status == "absent" and "gpu_count" not in out.data["hardware"]
    assert sorted(out.data["hardware"]["gpu_evidence"]["found"]) == found
    assert out.warnings == ["no GPU tool found (nvidia-smi, amd-smi, rocm-smi), but a GPU driver is here (%s)"
                            % ", ".join(out.data["hardware"]["gpu_evidence"]["found"])]


def test_numbered_nvidia_nodes_in_numeric_order(tmp_path: Path) -> None:
    root = _dev_root(tmp_path, "/dev/nvidia10", "/dev/nvidia2", "/dev/nvidia-uvm", "/dev/nvidiactl")
    assert gpu.driver_files(_ctx(tmp_path, root=root)) == ["/dev/nvidiactl", "/dev/nvidia2", "/dev/nvidia10"]


def test_outside_linux_no_driver_file_proves_nothing() -> None:
    out = gpu.without_tools([], linux=False)
    assert out.status == "absent" and out.data == {}
    assert out.warnings == ["no GPU tool found (nvidia-smi, amd-smi, rocm-smi)"]


@NO_REAL_GPU_DRIVER
def test_generate_without_nvidia_smi_records_no_gpu(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    doc = generate(tmp_path, env=clean_env(PATH=str(tmp_path / "bin")))
    assert doc["collection"]["probes"]["gpu"]["status"] == "absent"
    assert doc["collection"]["probes"]["gpu"]["warnings"] == []
    assert doc["hardware"]["gpu_count"] == 0 and doc["hardware"]["gpus"] == []
    assert doc["hardware"]["gpu_evidence"] == {"looked_for": LOOKED_FOR, "found": []}


@pytest.mark.parametrize("banner,status,warning", [
    ("driver_not_loaded__couldnt_communicate.txt", "failed", "couldn't communicate with the NVIDIA driver"),
    ("nvml_driver_library_version_mismatch.txt", "failed", "Failed to initialize NVML: Driver/library version"),
    ("nvml_unknown_error__container_after_daemon_reload.txt", "failed", "Failed to initialize NVML: Unknown Error"),
])
def test_driver_errors_fail_with_the_banner(tmp_path: Path, banner: str, status: str, warning: str) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"*": ERRORS / banner}, default_rc=9)
    out = gpu.collect(_ctx(bindir, root=tmp_path / "noroot"))
    assert out.status == status
    assert any(warning in w for w in out.warnings), out.warnings
    assert out.data == {}


def test_driver_error_falls_back_to_proc(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"*": ERRORS / "nvml_driver_library_version_mismatch.txt"}, default_rc=18)
    root = _proc_root(tmp_path, NVIDIA / "proc_version" / "search-43554159245__open-580.95.05.txt", gpus=2)
    out = gpu.collect(_ctx(bindir, root=root))
    assert out.data["hardware"] == {"driver_version": "580.95.05", "gpu_vendor": "nvidia", "gpu_count": 2,
                                    "nvidia_kernel_module": "open", "gpu_source": "/proc/driver/nvidia/version"}
    assert out.status == "partial"


def test_no_devices_is_absent_with_zero_gpus(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"*": ERRORS / "no_devices_found.txt"}, default_rc=6)
    out = gpu.collect(_ctx(bindir, root=tmp_path / "noroot"))
    assert out.status == "absent"
    assert out.data["hardware"]["gpu_count"] == 0 and out.data["hardware"]["gpus"] == []
    assert out.warnings == ["nvidia-smi: No devices were found"]


@pytest.mark.parametrize("script", ["exit 0", "exit 3", "head -c 3000 /dev/urandom", "echo ',,,<<>>|||'; exit 1"],
                         ids=["silent", "exit-3", "binary-garbage", "text-garbage"])
def test_silent_or_garbage_tool_fails_cleanly(tmp_path: Path, script: str) -> None:
    bindir = tmp_path / "bin"
    fake_tool(bindir, "nvidia-smi", script.replace("head", "/usr/bin/head") + "\n")
    out = gpu.collect(_ctx(bindir, root=tmp_path / "noroot"))
    assert out.status == "failed" and out.data == {}
    assert out.warnings and out.warnings[0].startswith("nvidia-smi")


def test_nvidia_smi_missing_but_driver_loaded(tmp_path: Path) -> None:
    root = _proc_root(tmp_path, NVIDIA / "proc_version" / "search-14869243640__proprietary-440.82.txt", gpus=1)
    out = gpu.collect(_ctx(tmp_path / "empty", root=root))
    assert out.data["hardware"]["driver_version"] == "440.82"
    assert out.data["hardware"]["nvidia_kernel_module"] == "proprietary"
    assert out.warnings == ["nvidia-smi not found on PATH; driver version from /proc/driver/nvidia/version only"]


def test_unreadable_proc_entry_is_ignored(tmp_path: Path) -> None:
    # /proc/driver/nvidia/version as a directory: reading it fails like an unreadable entry.
    root = tmp_path / "root"
    (root / "proc/driver/nvidia/version").mkdir(parents=True)
    out = gpu.collect(_ctx(tmp_path / "empty", root=root))
    assert out.status == "absent" and "gpu_count" not in out.data["hardware"]  # a driver is loaded: not "no GPU"


@NO_REAL_DRIVER
def test_hanging_tool_ignoring_sigterm_does_not_hold_generate(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_tool(bindir, "nvidia-smi", "trap '' TERM INT\n/bin/sleep 60\n")
    start = time.monotonic()
    doc = generate(tmp_path, env=clean_env(PATH=str(bindir)))
    assert time.monotonic() - start < 10
    gpu = doc["collection"]["probes"]["gpu"]
    assert gpu["status"] == "timeout"
    assert gpu["warnings"] == ["nvidia-smi did not answer within 3.0 s"]
    assert "gpus" not in doc["hardware"]


def test_topology_that_hangs_is_left_out(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"-q -x": XML_DUAL_A5000, "topo -m": "trap '' TERM; /bin/sleep 60"})
    ctx = Context(env={"PATH": str(bindir)}, root=str(tmp_path), probe_budget_s=1.0)
    out = gpu.collect(ctx)
    assert out.data["hardware"]["gpu_count"] == 2 and "topology" not in out.data["hardware"]
    assert out.warnings == ["nvidia-smi topo -m did not answer within the budget; topology left out"]


@NO_REAL_DRIVER
def test_strict_generate_reports_a_failed_gpu_probe(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"*": ERRORS / "driver_not_loaded__couldnt_communicate.txt"}, default_rc=9)
    res = run_cli("generate", "--strict", "--output", str(tmp_path / "m.json"),
                  env=clean_env(PATH=str(bindir)), cwd=tmp_path)
    assert res.returncode == 1
    assert "gpu failed: nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate" in res.stderr
    doc = json.loads((tmp_path / "m.json").read_text())  # the manifest is still written, whole
    assert doc["collection"]["probes"]["gpu"]["status"] == "failed"


# ------------------------------------------------------------------------------------------ AMD
def test_amd_smi_static(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_smi(bindir, {"static --json": ROCM / "amd-smi-static__handwritten-rocm6.1-mi300x-x2.txt"}, name="amd-smi")
    out = gpu.collect(_ctx(bindir, root=tmp_path / "noroot"))
    hw = out.data["hardware"]
    assert out.status == "ok"
    assert hw["gpu_vendor"] == "amd" and hw["gpu_source"] == "amd-smi static"
    assert hw["gpu_count"] == 2 and hw["gpu_model"] == "AMD Instinct MI300X"
    assert hw["gpus"][0]["memory_total_mib"] == 196592 and hw["gpus"][0]["architecture"] == "gfx942"
    assert hw["driver_version"] == "6.7.0"


def test_amd_smi_broken_falls_back_to_rocm_smi(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_tool(bindir, "amd-smi", "echo 'amd-smi: error' >&2; exit 1\n")
    fake_smi(bindir, {"--showproductname*": ROCM / "rocm-smi__handwritten-productname-meminfo.txt"}, name="rocm-smi")
    out = gpu.collect(_ctx(bindir, root=tmp_path / "noroot"))
    hw = out.data["hardware"]
    assert hw["gpu_source"] == "rocm-smi --showproductname"
    assert hw["gpu_model"] == "AMD Instinct MI210" and hw["gpu_memory_gb"] == 63.98
    assert out.warnings[0].startswith("amd-smi gave no GPU data: amd-smi static --json: exit 1")


def test_amd_tools_failing_is_failed(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    fake_tool(bindir, "rocm-smi", "echo 'not json'\n")
    out = gpu.collect(_ctx(bindir, root=tmp_path / "noroot"))
    assert out.status == "failed" and out.data == {}


EXPECTED_ROCM: Dict[str, dict] = {
    "amd-smi-static__handwritten-rocm6.4-gpu_data-value-unit": {
        "driver_version": "6.10.5", "gpu_count": 1,
        "gpus": [{"index": 0, "model": "AMD Radeon RX 7900 XTX", "architecture": "gfx1100", "memory_total_mib": 24560,
                  "pci_bus_id": "0000:03:00.0", "uuid_hash": gpu_fields.uuid_hash("0x0000000000000003")}]},
}


@pytest.mark.parametrize("path", captures("", ROCM), ids=case_id)
def test_rocm_samples(path: Path) -> None:
    parse = rocm.parse_amd_smi_static if path.name.startswith("amd-smi") else rocm.parse_rocm_smi_json
    got = parse(read(path))
    assert got["gpus"] and all(g["model"] and g["memory_total_mib"] > 1024 for g in got["gpus"])
    if path.stem in EXPECTED_ROCM:
        assert got == EXPECTED_ROCM[path.stem]


def test_rocm_garbage() -> None:
    for text in ("", "not json", "[1, 2]", '{"gpu_data": "x"}', '{"card0": "x"}'):
        assert rocm.parse_amd_smi_static(text).get("gpus") in (None, [])
        assert rocm.parse_rocm_smi_json(text).get("gpus") in (None, [{"index": 0}])
