"""Every real nvidia-smi capture in tests/fixtures/nvidia/ through the pure parsers.

A capture with a ``<case>.json`` next to it must parse to exactly that; every other capture must
satisfy its category's invariants. The ids are the capture's file name (where it came from).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from relaxrepro.collect.probes import gpu_fields, nvidia_parse
from tests.helpers import nvidia_q
from tests.helpers.gpu import NVIDIA, capture_sections, captures, case_id, expected_for, parse_device_query, read

# The 2018 telegraf captures are --format=noheader,nounits,csv answers to this field list
# (plugins/inputs/nvidia_smi/nvidia_smi.go at 117ce304).
TELEGRAF_2018_FIELDS = ("fan.speed", "memory.total", "memory.used", "memory.free", "pstate", "temperature.gpu",
                        "name", "uuid", "compute_mode", "utilization.gpu", "utilization.memory", "index")


def _csv(path: Path) -> dict:
    fields = None  # the header names them
    if path.name.startswith("telegraf-2018"):
        fields = TELEGRAF_2018_FIELDS
    elif path.name.endswith("__basic.noheader.csv"):  # tools/capture_fixtures.py
        fields = nvidia_parse.BASIC_QUERY_FIELDS
    elif path.name.endswith(".noheader.csv"):
        fields = nvidia_parse.QUERY_FIELDS
    return nvidia_parse.parse_query_csv(read(path), fields)


PARSERS = {
    "xml": lambda p: nvidia_parse.parse_smi_xml(read(p)),
    "csv": _csv,
    "list": lambda p: nvidia_parse.parse_list(read(p)),
    "table": lambda p: nvidia_parse.parse_table(read(p)),
    "query_q": lambda p: nvidia_q.parse_q(read(p)),
    "topo": lambda p: nvidia_parse.parse_topo(read(p)),
    "version": lambda p: nvidia_parse.parse_smi_version(read(p)),
    "errors": lambda p: dict(nvidia_parse.parse_errors(read(p)), table=nvidia_parse.parse_table(read(p))),
    "proc_version": lambda p: nvidia_parse.parse_proc_version(read(p)),
}

ALL = [(cat, p) for cat in sorted(PARSERS) for p in captures(cat)]
WITH_EXPECTED = [(cat, p) for cat, p in ALL if expected_for(p)]
_VERSION = re.compile(r"^\d+(\.\d+)+$")
_HASH = re.compile(r"^[0-9a-f]{16}$")


def test_fixtures_are_there() -> None:
    # The glob must find the captures (a renamed folder would otherwise pass vacuously).
    assert len(ALL) >= 200
    assert {cat for cat, _ in WITH_EXPECTED} == set(PARSERS)


@pytest.mark.parametrize("category,path", WITH_EXPECTED, ids=["%s/%s" % (c, case_id(p)) for c, p in WITH_EXPECTED])
def test_capture_parses_to_expected_json(category: str, path: Path) -> None:
    expected = json.loads(expected_for(path).read_text())
    assert PARSERS[category](path) == expected


def _check_gpus(result: dict, *, memory: bool = True) -> None:
    gpus = result["gpus"]
    assert gpus, "no GPU parsed"
    assert result["gpu_count"] >= len(gpus)
    assert len({g["index"] for g in gpus}) == len(gpus)
    for g in gpus:
        assert g.get("model"), g
        if "uuid_hash" in g:
            assert _HASH.match(g["uuid_hash"])
        if memory and "memory_total_mib" in g:
            assert 256 <= g["memory_total_mib"] <= 300_000
    for key in ("driver_version", "cuda_driver_version", "kmd_version"):
        if key in result:
            assert _VERSION.match(result[key]), result[key]
    # A raw UUID must never come out of a parser.
    assert "GPU-" not in json.dumps(result) and "MIG-" not in json.dumps(result)


def _driver_in_name(path: Path) -> str:
    m = re.search(r"__(\d{3}\.\d+(?:\.\d+)?)(?:__|\.txt)", path.name)
    return m.group(1) if m else ""


@pytest.mark.parametrize("category,path", ALL, ids=["%s/%s" % (c, case_id(p)) for c, p in ALL])
def test_capture_invariants(category: str, path: Path) -> None:
    result = PARSERS[category](path)
    driver = _driver_in_name(path)
    if category in ("xml", "csv", "list", "query_q"):
        _check_gpus(result, memory=category != "csv" or "memory.total" in read(path) or "telegraf" in path.name)
        if driver:
            assert result.get("driver_version", driver) == driver
    elif category == "table":
        if "wsl_header_only" in path.name:
            assert "gpus" not in result and result["driver_version"] == "555.97"
            return
        _check_gpus(result)
        assert result["driver_version"]
        if driver:
            assert result["driver_version"] == driver
        for g in result["gpus"]:
            assert not g["model"].endswith("...")
            if g.get("model_truncated"):
                assert re.search(re.escape(g["model"]) + r"\s*\.\.\.", read(path))
    elif category == "topo":
        if "windows" in path.name and "591" in path.name:
            assert result == {}  # this driver answers topo -m with a usage error
            return
        devices = result["devices"]
        assert len(result["links"]) == len(devices)
        for i, row in enumerate(result["links"]):
            assert len(row) == len(devices)
            assert row[i] == "X"
    elif category == "version":
        assert result["driver_version"] == driver
        assert _VERSION.match(result["cuda_driver_version"])
        if driver.startswith("610"):
            assert result["kmd_version"] == driver
    elif category == "errors":
        assert result["errors"]
    elif category == "proc_version":
        assert _VERSION.match(result["driver_version"])
        assert result["kernel_module"] in ("open", "proprietary")


# ------------------------------------------------------------------ other command outputs
@pytest.mark.parametrize("path", captures("csv_compute_apps"), ids=case_id)
def test_compute_apps_csv_rows(path: Path) -> None:
    rows = nvidia_parse.read_csv(read(path))
    if "__load" in path.name:
        assert rows, "a loaded GPU lists processes"
    for row in rows:
        assert row["gpu_name"] and row["pid"].isdigit()
        assert set(row) == {"timestamp", "gpu_name", "gpu_bus_id", "gpu_serial", "gpu_uuid", "pid", "process_name",
                            "used_gpu_memory"}


@pytest.mark.parametrize("path", captures("nvlink") + captures("c2c"), ids=case_id)
def test_nvlink_and_c2c_gpu_headers_read_like_list(path: Path) -> None:
    # `nvlink -s` and `c2c -s` start each GPU with an `-L` line; parse_list skips the link lines.
    result = nvidia_parse.parse_list(read(path))
    _check_gpus(result)
    assert result["gpu_count"] == len(re.findall(r"^GPU \d+:", read(path), re.M))
    assert "mig_devices" not in json.dumps(result)


def test_requested_query_fields_are_documented() -> None:
    # Every field we ask --query-gpu for exists (netdata's capture of --help-query-gpu).
    documented = set(re.findall(r'^"([\w.]+)"', read(captures("help_query_gpu")[0]), re.M))
    assert set(nvidia_parse.QUERY_FIELDS) <= documented
    assert set(nvidia_parse.BASIC_QUERY_FIELDS) <= documented


# --------------------------------------------------- cross-checks between sources of one machine
DEVICE_QUERIES = captures("devicequery")


@pytest.mark.parametrize("path", DEVICE_QUERIES, ids=case_id)
def test_table_and_q_agree_with_device_query(path: Path) -> None:
    # thamada/gls and thamada/nvidia-smi recorded deviceQuery, nvidia-smi and nvidia-smi -a on the
    # same machines: the CUDA runtime's view is the ground truth for count, names and CUDA.
    truth = parse_device_query(read(path))
    stem = path.name.replace("_deviceQuery__out.txt", "")
    table = nvidia_parse.parse_table(read(NVIDIA / "table" / (stem + "_smi__out.txt")))
    q = nvidia_q.parse_q(read(NVIDIA / "query_q" / (stem + "_smi__out_a.txt")))
    assert truth["count"] == table["gpu_count"] == q["gpu_count"]
    assert [g["model"] for g in q["gpus"]] == truth["names"]
    for g, name in zip(table["gpus"], truth["names"]):
        assert name.startswith(g["model"]) and (g["model"] == name or g["model_truncated"])
    assert truth["cuda_driver"] == table["cuda_driver_version"] == q["cuda_driver_version"]
    assert len(set(truth["caps"])) >= 1


FULL = captures("captures_full")


@pytest.mark.parametrize("path", FULL, ids=case_id)
def test_full_capture_sources_agree(path: Path) -> None:
    # One machine, every command: the fallbacks must tell the same story as each other.
    sections = {(phase, label): body for phase, label, body in capture_sections(read(path))}
    driver = _driver_in_name(path)
    version = nvidia_parse.parse_smi_version(sections[("capabilities", "version")])
    listed = nvidia_parse.parse_list(sections[("capabilities", "list (-L)")])
    table = nvidia_parse.parse_table(sections[("idle", "nvidia-smi (default table)")])
    q = nvidia_q.parse_q(sections[("idle", "query (-q)")])
    csv_data = nvidia_parse.parse_query_csv(sections[("idle", "query-gpu (csv, what the exporter parses)")], None)
    assert version["driver_version"] == table["driver_version"] == q["driver_version"] == driver
    assert csv_data["driver_version"] == driver
    assert version["cuda_driver_version"] == table["cuda_driver_version"] == q["cuda_driver_version"]
    assert listed["gpu_count"] == table["gpu_count"] == q["gpu_count"] == csv_data["gpu_count"]
    models = [g["model"] for g in q["gpus"]]
    assert [g["model"] for g in listed["gpus"]] == models == [g["model"] for g in csv_data["gpus"]]
    assert [g["memory_total_mib"] for g in table["gpus"]] == [g["memory_total_mib"] for g in q["gpus"]]
    assert [g.get("mig_mode") for g in csv_data["gpus"]] == [g.get("mig_mode") for g in q["gpus"]]
    assert [len(g.get("mig_devices", [])) for g in listed["gpus"]] == [len(g.get("mig_devices", [])) for g in q["gpus"]]
    assert [g["uuid_hash"] for g in listed["gpus"]] == [g["uuid_hash"] for g in q["gpus"]]
    assert all(g.get("compute_capability") for g in csv_data["gpus"])
    topo = nvidia_parse.parse_topo(sections[("capabilities", "topo -m")])
    if "windows" not in path.name:
        assert len(topo["devices"]) == q["gpu_count"]


# ---------------------------------------------------------------------------- small facts
def test_uuid_hash_is_stable_and_short() -> None:
    h = gpu_fields.uuid_hash("GPU-27b94a00-ed54-5c24-b1fd-1054085de32a")
    assert h == gpu_fields.uuid_hash(" GPU-27b94a00-ed54-5c24-b1fd-1054085de32a ") and _HASH.match(h)
    assert gpu_fields.uuid_hash("[N/A]") is None and gpu_fields.uuid_hash(None) is None


@pytest.mark.parametrize("value,expected", [
    ("610.57.04 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]", "610.57.04"),
    ('Deprecated, see "KMD version" instead', None),
    ("Not Found", None),
    ("[N/A]", None),
    ("12.9", "12.9"),
])
def test_version_field_quirks(value: str, expected: object) -> None:
    assert nvidia_parse._version(value) == expected


def test_garbage_parses_to_nothing() -> None:
    garbage = "\x00\xff<nvidia_smi_log><gpu>unterminated\n%%%% , , ,\n|  | \n"
    assert nvidia_parse.parse_smi_xml(garbage) == {}
    assert nvidia_parse.parse_query_csv(garbage) == {}
    assert nvidia_parse.parse_list(garbage) == {}
    assert nvidia_parse.parse_table(garbage) == {}
    assert nvidia_parse.parse_topo(garbage) == {}
    assert nvidia_parse.parse_proc_version(garbage) == {}
    assert nvidia_q.parse_q("") == {} and nvidia_parse.parse_smi_version("") == {}


def test_xml_with_entities_is_refused() -> None:
    bomb = '<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log><driver_version>&a;</driver_version></nvidia_smi_log>'
    assert nvidia_parse.parse_smi_xml(bomb) == {}


def test_banner_before_xml_is_skipped() -> None:
    text = "Failed to initialize NVML: Unknown Error\n" + read(NVIDIA / "xml" / "telegraf__tesla-t4.xml")
    assert nvidia_parse.parse_smi_xml(text)["gpus"][0]["model"] == "Tesla T4"


@pytest.mark.parametrize("value,count,expected", [
    ("1,0", 2, {"visible_devices": ["1", "0"], "visible_gpu_count": 2}),
    ("0,7,1", 2, {"visible_devices": ["0", "7", "1"], "visible_gpu_count": 1}),  # CUDA stops at 7
    ("", 8, {"visible_devices": [], "visible_gpu_count": 0}),
    ("-1", 8, {"visible_devices": ["-1"], "visible_gpu_count": 0}),
])
def test_cuda_visible_devices(value: str, count: int, expected: dict) -> None:
    assert nvidia_parse.parse_visible_devices(value, count) == expected


def test_cuda_visible_devices_uuids_are_hashed() -> None:
    uuid = "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"
    got = nvidia_parse.parse_visible_devices(uuid[:12] + ",GPU-ffffffff", 2, [uuid])
    assert got["visible_gpu_count"] == 1
    assert got["visible_devices"] == ["uuid:" + gpu_fields.uuid_hash(uuid[:12]),
                                      "uuid:" + gpu_fields.uuid_hash("GPU-ffffffff")]
    assert nvidia_parse.parse_visible_devices(None, 2) is None


def test_summary_fields() -> None:
    hw = {"gpus": [{"model": "NVIDIA T1000", "memory_total_mib": 4096},
                   {"model": "Tesla V100-PCIE-16GB", "memory_total_mib": 16384}]}
    gpu_fields.summarize(hw)
    assert hw["gpu_model"] == "mixed: NVIDIA T1000, Tesla V100-PCIE-16GB"
    assert hw["gpu_memory_gb"] == 4.0


@pytest.mark.parametrize("folder", ["nvidia", "rocm"])
def test_every_fixture_has_a_source_line(folder: str) -> None:
    base = NVIDIA.parent / folder
    sources = (base / "SOURCES.md").read_text()
    files = [p for p in base.rglob("*") if p.is_file() and p.suffix != ".json" and p.name != "SOURCES.md"]
    assert files
    assert [p.name for p in files if p.name not in sources] == []


def test_csv_with_nul_bytes_is_read_on_every_python():
    # csv on Python 3.8-3.10 raises "line contains NUL"; a lying tool must not fail the probe for it.
    got = nvidia_parse.read_csv("name, memory.total [MiB]\nH100\0, 81559\n")
    assert got == [{"name": "H100", "memory.total": "81559"}]
