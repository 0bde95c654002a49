"""tools/capture_fixtures.py: runs the GPU commands, redacts, writes the fixtures layout."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from relaxrepro.collect.probes import gpu_fields
from tests.collect.probes.test_nvidia_parse import PARSERS, _csv
from tests.helpers.common import ROOT, clean_env, fake_tool
from tests.helpers.gpu import NVIDIA, fake_smi, read

SCRIPT = ROOT / "tools" / "capture_fixtures.py"
UUID = "GPU-d37e67a5-91dd-3774-a5cb-99096249601a"


def _run(tmp_path: Path, bindir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "fx"), "--timeout", "5", *args],
                          env=clean_env(PATH=str(bindir)), capture_output=True, text=True, timeout=60)


def _machine(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    serial_xml = tmp_path / "t4.xml"
    serial_xml.write_text(read(NVIDIA / "xml" / "telegraf__tesla-t4.xml").replace(
        "<serial>0000000000000</serial>", "<serial>1324219051234</serial>"))
    host = socket.gethostname()
    fake_smi(bindir, {
        "-q -x": serial_xml,
        "--query-gpu=*": "echo '0, Tesla T4, %s, 15360, 00000000:00:1E.0, 515.105.01, 7.5, [N/A]'" % UUID,
        "-L": "echo 'GPU 0: Tesla T4 (UUID: %s)'" % UUID,
        "": NVIDIA / "table" / "thamada-nvidia-smi__L4_smi__out.txt",
        "-q": "echo 'GPU 00000000:00:1E.0'; echo '    Serial Number     : 1324219051234'",
        "topo -m": ("echo 'ERROR: Option -m is missing its value. Please run nvidia-smi -h for help.'", 255),
        "--version": "echo 'NVIDIA-SMI version  : 515.105.01'; echo 'host %s'" % host,
    })
    return bindir


def test_capture_writes_redacted_fixtures(tmp_path: Path) -> None:
    res = _run(tmp_path, _machine(tmp_path))
    assert res.returncode == 0, res.stderr
    fx = tmp_path / "fx"
    label = "capture__tesla-t4__515.105.01"
    written = sorted(Path(p).relative_to(fx).as_posix() for p in res.stdout.split())
    assert written == sorted([
        "nvidia/xml/%s.xml" % label, "nvidia/csv/%s.noheader.csv" % label,
        "nvidia/csv/%s__basic.noheader.csv" % label, "nvidia/list/%s.txt" % label,
        "nvidia/table/%s.txt" % label, "nvidia/query_q/%s.txt" % label,
        "nvidia/errors/%s__topo-m.txt" % label, "nvidia/version/%s.txt" % label,
    ])
    everything = "".join(read(p) for p in fx.rglob("*") if p.is_file())
    assert "d37e67a5" not in everything and "1324219051234" not in everything
    if len(socket.gethostname()) > 2:  # a 1-2 letter hostname ("vm") is too common a word to replace in free text
        assert socket.gethostname() not in everything
    assert "<serial>0000000000000</serial>" in read(fx / "nvidia/xml" / (label + ".xml"))
    assert "Serial Number     : 0000000000000" in read(fx / "nvidia/query_q" / (label + ".txt"))
    # The same UUID gets the same placeholder in every file: cross-file checks keep working.
    placeholder = "GPU-00000001-0000-0000-0000-000000000001"
    xml = PARSERS["xml"](fx / "nvidia/xml" / (label + ".xml"))
    assert xml["gpus"][0]["uuid_hash"] == gpu_fields.uuid_hash(placeholder)
    gpu = _csv(fx / "nvidia/csv" / (label + ".noheader.csv"))["gpus"][0]
    assert gpu["uuid_hash"] == gpu_fields.uuid_hash(placeholder)
    assert PARSERS["list"](fx / "nvidia/list" / (label + ".txt"))["gpus"][0]["uuid_hash"] == gpu_fields.uuid_hash(
        placeholder)
    sources = read(fx / "nvidia/xml/SOURCES.md")
    assert "| %s.xml | captured by tools/capture_fixtures.py on " % label in sources
    assert "`nvidia-smi -q -x` | exit 0 |" in sources
    assert "skipped amd-smi static --json: not found" in res.stderr


def test_capture_never_overwrites(tmp_path: Path) -> None:
    bindir = _machine(tmp_path)
    assert _run(tmp_path, bindir, "--label", "box1").returncode == 0
    again = _run(tmp_path, bindir, "--label", "box1")
    assert again.returncode == 1 and again.stdout == ""
    assert "kept existing" in again.stderr


def test_capture_with_no_tools(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    res = _run(tmp_path, tmp_path / "bin")
    assert res.returncode == 1
    assert "nothing captured: none of the tools is on PATH" in res.stderr
    assert not (tmp_path / "fx").exists()


def test_capture_rejects_a_path_as_label(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "nvidia-smi", "exit 0\n")
    res = _run(tmp_path, tmp_path / "bin", "--label", "../../etc/x")
    assert res.returncode == 2 and "--label may use" in res.stderr
