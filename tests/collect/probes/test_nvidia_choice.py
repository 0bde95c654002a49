"""Which nvidia-smi source wins, decided on captured answers alone: ``nvidia.follow_up`` (which call
comes after the first round) and ``nvidia.choose`` (what they add up to), no process started.

Each case hands over what the collector would have captured (tests/fixtures/nvidia/) and asserts
what the manifest would hold. test_gpu.py drives the same decisions through a fake nvidia-smi.
"""

from __future__ import annotations

import pytest

from relaxrepro.collect.probes import gpu_fields, nvidia, nvidia_parse
from relaxrepro.collect.runner import Outcome
from tests.helpers.gpu import NVIDIA, SMI_PATH, answer, captured, read

XML_DUAL_A5000 = NVIDIA / "xml" / "telegraf__dual_a5000-v13.xml"
XML_A100_MIG = NVIDIA / "xml" / "netdata__a100-sxm4-mig.xml"
LIST_8XH100_MIG = NVIDIA / "list" / "nvidia_gpu_exporter__testdata_list_gpus_8xH100_MIG.txt"
TOPO_2GPU = NVIDIA / "topo" / "club-3090-issue1229__2xRTX5090_PHB_tabs.txt"
ERRORS = NVIDIA / "errors"
PROC_OPEN_580 = NVIDIA / "proc_version" / "search-43554159245__open-580.95.05.txt"
PROC_PROPRIETARY_440 = NVIDIA / "proc_version" / "search-14869243640__proprietary-440.82.txt"

# One H100 in MIG mode under driver 590.48.01, every source but the XML captured on it.
H100_MIG = "nvidia_gpu_exporter__linux-x86_64__nvidia-h100-mig__590.48.01"
H100_CSV = NVIDIA / "csv" / (H100_MIG + "__idle.txt")
H100_LIST = NVIDIA / "list" / (H100_MIG + ".txt")
H100_VERSION = NVIDIA / "version" / (H100_MIG + ".txt")
H100_TABLE = NVIDIA / "table" / (H100_MIG + "__idle.txt")
H100_TOPO = NVIDIA / "topo" / (H100_MIG + ".txt")

# No fixture pairs an XML with the same machine's CSV: these are the CSV rows nvidia-smi prints for
# the two A5000s of XML_DUAL_A5000, written from the XML's own UUIDs and bus ids (A5000: sm_86).
CSV_DUAL_A5000 = (
    "0, NVIDIA RTX A5000, GPU-12345678-aaaa-bbbb-cccc-0123456789ab, 24564, 00000000:81:00.0, 590.44.01, 8.6, [N/A]\n"
    "1, NVIDIA RTX A5000, GPU-12345678-aaaa-bbbb-cccc-0123456789cd, 24564, 00000000:C1:00.0, 590.44.01, 8.6, [N/A]\n"
)
INVALID_FIELD = 'Field "compute_cap" is not a valid field to query.\n'
GARBAGE_XML = "<nvidia_smi_log><gpu>\n"


def _hw(out: Outcome) -> dict:
    return out.data["hardware"]


# ------------------------------------------------------------------------------ the XML leads
def test_xml_wins_and_the_csv_adds_compute_capability() -> None:
    cap = captured(xml=answer("xml", XML_DUAL_A5000), csv=answer("csv", CSV_DUAL_A5000),
                   topo=answer("topo", TOPO_2GPU))
    assert nvidia.follow_up(cap) is None
    out = nvidia.choose(cap)
    hw = _hw(out)
    assert out.status == "ok" and out.warnings == []
    assert hw["gpu_source"] == "nvidia-smi -q -x" and hw["gpu_vendor"] == "nvidia"
    assert hw["gpu_count"] == hw["visible_gpu_count"] == 2
    assert hw["driver_version"] == "590.44.01" and hw["cuda_driver_version"] == "13.1"
    assert [g["compute_capability"] for g in hw["gpus"]] == ["8.6", "8.6"]
    assert hw["gpu_model"] == "NVIDIA RTX A5000" and hw["gpu_memory_gb"] == 23.99  # the XML's, not the CSV's
    assert hw["topology"]["links"] == [["X", "PHB"], ["PHB", "X"]]


def test_csv_of_other_gpus_adds_nothing_to_the_xml() -> None:
    # GPUs are matched by UUID; by index only where one side has none. This CSV names other UUIDs.
    cap = captured(xml=answer("xml", XML_DUAL_A5000),
                   csv=answer("csv", NVIDIA / "csv" / "nvidia_gpu_exporter__testdata_query_PARTLY_SYNTHETIC.txt"))
    hw = _hw(nvidia.choose(cap))
    assert hw["gpu_source"] == "nvidia-smi -q -x"
    assert all("compute_capability" not in g for g in hw["gpus"])


def test_xml_mig_devices_get_their_profiles_from_the_list() -> None:
    # Only -L names MIG profiles; merged into the XML's MIG devices by index (two MIG machines).
    hw = _hw(nvidia.choose(captured(xml=answer("xml", XML_A100_MIG), list=answer("list", LIST_8XH100_MIG))))
    migs = hw["gpus"][0]["mig_devices"]
    assert [(d["index"], d["profile"], d["memory_total_mib"]) for d in migs] == [(0, "1g.10gb", 19968),
                                                                                 (1, "1g.10gb", 19968)]
    assert migs[0]["uuid_hash"] == gpu_fields.uuid_hash("MIG-4d0efb7d-0970-51d9-b761-0686be6b8af3")
    assert hw["gpu_count"] == 1 and hw["driver_version"] == "510.47.03"


def test_xml_kernel_module_flavour_comes_from_proc() -> None:
    out = nvidia.choose(captured(xml=answer("xml", XML_DUAL_A5000), proc=PROC_OPEN_580, proc_gpus=["0000:81:00.0"]))
    hw = _hw(out)
    assert hw["driver_version"] == "590.44.01"  # nvidia-smi's, not the /proc file's
    assert hw["nvidia_kernel_module"] == "open" and hw["gpu_count"] == 2


# ------------------------------------------------------------------------------ the CSV leads
def test_no_xml_csv_wins_with_list_mig_devices_and_version_cuda() -> None:
    cap = captured(xml=answer("xml", GARBAGE_XML), csv=answer("csv", H100_CSV), list=answer("list", H100_LIST),
                   topo=answer("topo", H100_TOPO))
    assert nvidia.follow_up(cap) == "version"
    cap.answers["version"] = answer("version", H100_VERSION)
    assert nvidia.follow_up(cap) is None
    out = nvidia.choose(cap)
    hw = _hw(out)
    assert hw["gpu_source"] == "nvidia-smi --query-gpu" and hw["gpu_count"] == 1
    assert hw["driver_version"] == "590.48.01" and hw["cuda_driver_version"] == "13.1"  # CUDA from --version
    gpu = hw["gpus"][0]
    assert gpu["compute_capability"] == "9.0" and gpu["mig_mode"] == "enabled"
    assert [d["profile"] for d in gpu["mig_devices"]] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert "smi_version" not in hw
    assert out.status == "partial"
    assert out.warnings == ["nvidia-smi -q -x gave no data; used nvidia-smi --query-gpu "
                            "(nvidia-smi -q -x: exit 0: <nvidia_smi_log><gpu>)"]


def test_csv_without_version_has_no_cuda_version() -> None:
    # The budget ran out before --version: the CSV alone has no field for the driver's CUDA.
    hw = _hw(nvidia.choose(captured(csv=answer("csv", H100_CSV))))
    assert hw["gpu_source"] == "nvidia-smi --query-gpu" and hw["driver_version"] == "590.48.01"
    assert "cuda_driver_version" not in hw


def test_refused_field_asks_the_basic_csv_then_version() -> None:
    cap = captured(csv=answer("csv", INVALID_FIELD, rc=2))
    assert nvidia.needs_basic_csv(cap) and nvidia.follow_up(cap) == "csv_basic"
    cap.answers["csv_basic"] = answer("csv_basic", H100_CSV)  # the header names the columns
    assert nvidia.follow_up(cap) == "version"
    out = nvidia.choose(cap)
    assert _hw(out)["gpu_source"] == "nvidia-smi --query-gpu" and _hw(out)["gpu_count"] == 1
    assert not any("not a valid field" in w for w in out.warnings)  # a refused field is no news


def test_refused_field_with_no_basic_answer_falls_to_the_table() -> None:
    cap = captured(csv=answer("csv", INVALID_FIELD, rc=2))
    cap.answers["csv_basic"] = answer("csv_basic", rc=1)
    assert nvidia.follow_up(cap) == "table"


def test_refused_field_is_not_retried_when_the_xml_answered() -> None:
    cap = captured(xml=answer("xml", XML_DUAL_A5000), csv=answer("csv", INVALID_FIELD, rc=2))
    assert not nvidia.needs_basic_csv(cap) and nvidia.follow_up(cap) is None


# ----------------------------------------------------------------------- -L and the table lead
def test_no_xml_or_csv_list_wins_with_the_table_merged() -> None:
    cap = captured(list=answer("list", H100_LIST))
    assert nvidia.follow_up(cap) == "table"
    cap.answers["table"] = answer("table", H100_TABLE)
    assert nvidia.follow_up(cap) is None
    out = nvidia.choose(cap)
    hw = _hw(out)
    assert hw["gpu_source"] == "nvidia-smi -L" and hw["gpu_count"] == 1
    assert hw["driver_version"] == "590.48.01" and hw["cuda_driver_version"] == "13.1"  # from the table
    gpu = hw["gpus"][0]
    assert gpu["memory_total_mib"] == 81559 and gpu["pci_bus_id"] == "00000000:00:09.0"  # from the table
    assert gpu["mig_devices"][0]["profile"] == "3g.40gb"  # from -L
    assert out.status == "partial"
    assert out.warnings == ["nvidia-smi -q -x gave no data; used nvidia-smi -L (nvidia-smi -q -x: exit 1)"]


def test_only_the_table() -> None:
    table = NVIDIA / "table" / "thamada-nvidia-smi__RTX6000Ada_x8_smi__out.txt"
    out = nvidia.choose(captured(table=answer("table", table)))
    hw = _hw(out)
    assert hw["gpu_source"] == "nvidia-smi" and hw["gpu_count"] == hw["visible_gpu_count"] == 8
    assert hw["driver_version"] == nvidia_parse.parse_table(read(table))["driver_version"]
    assert out.status == "partial" and out.warnings[0].startswith("nvidia-smi -q -x gave no data; used nvidia-smi ")


def test_table_with_a_lost_gpu_counts_it_and_warns() -> None:
    # Driver 610 printed the error for GPU1 before a table listing GPUs 0, 2 and 3.
    table = ERRORS / "UNKNOWN-REPO__partial_failure_610_gpu1_missing_table_stderr_merged.txt"
    out = nvidia.choose(captured(table=answer("table", table)))
    hw = _hw(out)
    assert hw["gpu_source"] == "nvidia-smi" and hw["gpu_count"] == 4 and len(hw["gpus"]) == 3
    assert hw["kmd_version"] == "610.57.04"
    assert out.warnings == ["nvidia-smi: Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error"]


def test_header_only_table_gives_the_driver() -> None:
    # WSL: the table's header and no GPU rows; the driver alone is still an answer.
    table = NVIDIA / "table" / "feuyeux-hello-ai__wsl_header_only_555.txt"
    hw = _hw(nvidia.choose(captured(table=answer("table", table))))
    assert hw["gpu_source"] == "nvidia-smi" and hw["gpus"] == [] and hw["gpu_count"] == 0
    assert hw["driver_version"] == nvidia_parse.parse_table(read(table))["driver_version"]


# ------------------------------------------------------------------------------------ no GPU data
def test_nothing_but_proc_gives_the_driver_from_proc() -> None:
    out = nvidia.choose(captured(smi=None, proc=PROC_PROPRIETARY_440, proc_gpus=["0000:01:00.0", "power"]))
    assert _hw(out) == {"driver_version": "440.82", "gpu_vendor": "nvidia", "gpu_count": 1,
                        "nvidia_kernel_module": "proprietary", "gpu_source": "/proc/driver/nvidia/version"}
    assert out.status == "partial"
    assert out.warnings == ["nvidia-smi not found on PATH; driver version from /proc/driver/nvidia/version only"]


def test_proc_gpus_that_could_not_be_listed_leave_the_count_out() -> None:
    hw = _hw(nvidia.choose(captured(smi=None, proc=PROC_OPEN_580, proc_gpus=None)))
    assert hw["driver_version"] == "580.95.05" and "gpu_count" not in hw


@pytest.mark.parametrize("proc", [None, "not the NVRM version line\n"], ids=["no-proc", "unreadable-proc"])
def test_neither_nvidia_smi_nor_proc_is_none(proc: object) -> None:
    cap = captured(smi=None, proc=proc)
    assert nvidia.follow_up(cap) is None and nvidia.choose(cap) is None


def test_driver_error_falls_back_to_proc() -> None:
    banner = ERRORS / "nvml_driver_library_version_mismatch.txt"
    cap = captured(proc=PROC_OPEN_580, proc_gpus=["0000:01:00.0", "0000:02:00.0"],
                   **{name: answer(name, banner, rc=18) for name in nvidia.FIRST_ROUND})
    out = nvidia.choose(cap)
    assert _hw(out)["driver_version"] == "580.95.05" and _hw(out)["gpu_count"] == 2
    assert out.status == "partial"
    assert out.warnings == ["nvidia-smi: Failed to initialize NVML: Driver/library version mismatch",
                            "nvidia-smi gave no GPU data; driver version from /proc/driver/nvidia/version only"]


@pytest.mark.parametrize("proc,expected", [
    (None, {"gpu_count": 0, "gpus": [], "gpu_vendor": "nvidia", "gpu_source": "nvidia-smi"}),
    (PROC_OPEN_580, {"gpu_count": 0, "gpus": [], "gpu_vendor": "nvidia", "gpu_source": "nvidia-smi",
                     "driver_version": "580.95.05", "kernel_module": "open"}),
], ids=["without-proc", "with-proc"])
def test_no_devices_found_is_absent_with_zero_gpus(proc: object, expected: dict) -> None:
    text = ERRORS / "no_devices_found.txt"
    cap = captured(proc=proc, **{name: answer(name, text, rc=6) for name in nvidia.FIRST_ROUND})
    assert nvidia.follow_up(cap) == "table"
    cap.answers["table"] = answer("table", text, rc=6)
    out = nvidia.choose(cap)
    assert out.status == "absent" and _hw(out) == expected
    assert out.warnings == ["nvidia-smi: No devices were found"]


@pytest.mark.parametrize("banner,warning", [
    ("driver_not_loaded__couldnt_communicate.txt",
     "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
    ("nvml_driver_library_version_mismatch.txt",
     "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"),
    ("nvml_unknown_error__container_after_daemon_reload.txt", "nvidia-smi: Failed to initialize NVML: Unknown Error"),
])
def test_driver_errors_fail_with_the_banner_as_warning(banner: str, warning: str) -> None:
    cap = captured(**{name: answer(name, ERRORS / banner, rc=9) for name in nvidia.FIRST_ROUND})
    cap.answers["table"] = answer("table", ERRORS / banner, rc=9)
    out = nvidia.choose(cap)
    assert out.status == "failed" and out.data == {}
    assert out.warnings[0].startswith(warning), out.warnings


def test_silent_tool_fails_saying_how_the_xml_call_ended() -> None:
    out = nvidia.choose(captured(xml=answer("xml", rc=3)))
    assert out.status == "failed" and out.data == {}
    assert out.warnings == ["nvidia-smi gave no GPU data: nvidia-smi -q -x: exit 3"]


# --------------------------------------------------------------------------------------- timeouts
def test_every_call_timing_out_is_timeout() -> None:
    cap = captured(first_round_s=2.25, **{name: answer(name, timed_out=True) for name in nvidia.FIRST_ROUND})
    out = nvidia.choose(cap)
    assert out.status == "timeout" and out.data == {}
    assert out.warnings == ["nvidia-smi did not answer within 2.2 s"]


def test_timeout_with_proc_gives_the_driver_from_proc() -> None:
    cap = captured(proc=PROC_OPEN_580, **{name: answer(name, timed_out=True) for name in nvidia.FIRST_ROUND})
    out = nvidia.choose(cap)
    assert _hw(out)["driver_version"] == "580.95.05" and out.status == "partial"
    assert out.warnings == ["nvidia-smi timed out; driver version from /proc/driver/nvidia/version only"]


def test_a_follow_up_timing_out_is_not_a_timeout() -> None:
    # Only the first round's calls count: a hung table after silent ones is a failure, not a hang.
    cap = captured()
    cap.answers["table"] = answer("table", timed_out=True)
    assert nvidia.choose(cap).status == "failed"


def test_topology_that_timed_out_is_left_out_with_a_warning() -> None:
    out = nvidia.choose(captured(xml=answer("xml", XML_DUAL_A5000), topo=answer("topo", timed_out=True)))
    assert _hw(out)["gpu_count"] == 2 and "topology" not in _hw(out)
    assert out.status == "partial"
    assert out.warnings == ["nvidia-smi topo -m did not answer within the budget; topology left out"]


def test_topology_that_failed_is_left_out_silently() -> None:
    topo = answer("topo", ERRORS / "topo_m_windows_591__missing_value_exit255.txt", rc=255)
    out = nvidia.choose(captured(xml=answer("xml", XML_DUAL_A5000), topo=topo))
    assert "topology" not in _hw(out) and out.status == "ok" and out.warnings == []  # a usage error is no news


# ----------------------------------------------------------------------------------- the rest
def test_visible_devices_limit_the_visible_count() -> None:
    hw = _hw(nvidia.choose(captured(xml=answer("xml", XML_DUAL_A5000), visible="1")))
    assert hw["gpu_count"] == 2 and hw["visible_devices"] == ["1"] and hw["visible_gpu_count"] == 1


def test_visible_device_uuids_are_checked_against_every_answer() -> None:
    # A UUID prefix that no answer names stops CUDA's list there.
    cap = captured(xml=answer("xml", XML_DUAL_A5000))
    assert _hw(nvidia.choose(cap))["visible_gpu_count"] == 2
    hw = _hw(nvidia.choose(captured(xml=answer("xml", XML_DUAL_A5000), visible="GPU-12345678-aaaa,GPU-ffff")))
    assert hw["visible_gpu_count"] == 1 and "GPU-" not in str(hw)


def test_choose_leaves_the_captured_answers_as_they_were() -> None:
    # The parses are shared with follow_up: merging into them would change a second choice.
    cap = captured(xml=answer("xml", XML_A100_MIG), csv=answer("csv", CSV_DUAL_A5000),
                   list=answer("list", LIST_8XH100_MIG))
    first = nvidia.choose(cap)
    assert "profile" not in cap.parsed("xml")["gpus"][0]["mig_devices"][0]
    assert nvidia.choose(cap) == first


def test_banners_are_reported_in_the_order_the_answers_came() -> None:
    # The first round runs concurrently: its answers are held in the order they came back.
    lost = answer("xml", ERRORS / "device_handle_gpu_is_lost__OWOD81.txt", rc=15)
    unknown = answer("csv", ERRORS / "device_handle_unknown_error__old_format_space.txt", rc=15)
    xml_first = nvidia.choose(nvidia.Captured(smi=SMI_PATH, answers={"xml": lost, "csv": unknown}))
    csv_first = nvidia.choose(nvidia.Captured(smi=SMI_PATH, answers={"csv": unknown, "xml": lost}))
    assert len(xml_first.warnings) == 2 and "GPU is lost" in xml_first.warnings[0]
    assert csv_first.warnings == xml_first.warnings[::-1]
