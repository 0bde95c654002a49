"""Helpers for the GPU tests: fixture discovery, capture-file sections, fake nvidia-smi, captured answers."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import gpu, nvidia
from relaxrepro.std.proc import ProcResult
from tests.helpers.common import FIXTURES, fake_tool

NVIDIA = FIXTURES / "nvidia"
ROCM = FIXTURES / "rocm"


def driverless_linux() -> bool:
    """Whether this machine is Linux without any GPU driver file: the CLI here records "no GPU"."""
    return sys.platform.startswith("linux") and not gpu.driver_files(Context(root="/"))


def captures(category: str, base: Path = NVIDIA) -> List[Path]:
    """Every capture of a category (not the expected ``.json`` files), sorted."""
    d = base / category
    return sorted(p for p in d.iterdir() if p.is_file() and p.suffix != ".json" and p.name != "SOURCES.md")


def case_id(path: Path) -> str:
    return path.stem


def expected_for(path: Path) -> Optional[Path]:
    exp = path.with_suffix(".json")
    return exp if exp.exists() else None


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


_BANNER = re.compile(r"^#{20,}\n# (?P<phase>[\w-]+) :: (?P<label>.+)\n(?:# \$ (?P<cmd>.*)\n)?#{20,}\n", re.M)


def capture_sections(text: str) -> List[Tuple[str, str, str]]:
    """Split an nvidia_gpu_exporter capture file into (phase, label, body) sections."""
    found = list(_BANNER.finditer(text))
    out = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        out.append((m.group("phase"), m.group("label").strip(), text[m.end():end].rstrip("\n") + "\n"))
    return out


def parse_device_query(text: str) -> Dict[str, object]:
    """The CUDA sample ``deviceQuery``: device count, names, compute capability, driver CUDA."""
    names = re.findall(r'^Device \d+: "(.+)"', text, re.M)
    caps = re.findall(r"CUDA Capability Major/Minor version number:\s+(\d+\.\d+)", text)
    drv = re.search(r"CUDA Driver Version(?: / Runtime Version)?:?\s+(\d+\.\d+)", text)
    count = re.search(r"Detected (\d+) CUDA Capable device", text)
    return {"count": int(count.group(1)) if count else None, "names": names, "caps": caps,
            "cuda_driver": drv.group(1) if drv else None}


Answer = Union[Path, str, Tuple[Union[Path, str], int]]


def fake_smi(bindir: Path, answers: Dict[str, Answer], name: str = "nvidia-smi", default_rc: int = 0) -> Path:
    """A fake ``nvidia-smi`` answering by its arguments (shell ``case`` patterns on ``$*``).

    Each answer is a fixture path (printed), a literal shell snippet, or (either, exit code).
    Unknown arguments print nothing and exit 2, like nvidia-smi's usage error.
    """
    lines = ['case "$*" in']
    for pattern, answer in answers.items():
        rc = default_rc
        if isinstance(answer, tuple):
            answer, rc = answer
        if isinstance(answer, Path):
            body = "/bin/cat %s" % shlex.quote(str(answer))
        else:
            body = answer
        quoted = "*".join('"%s"' % part for part in pattern.split("*"))  # '*' stays a glob
        lines.append("  %s)\n    %s\n    exit %d ;;" % (quoted, body, rc))
    lines.append("  *) exit 2 ;;")
    lines.append("esac")
    return fake_tool(bindir, name, "\n".join(lines) + "\n")


Text = Union[Path, str]
SMI_PATH = "/usr/bin/nvidia-smi"


def _text(source: Text) -> str:
    return read(source) if isinstance(source, Path) else source


def answer(name: str, stdout: Text = "", *, rc: Optional[int] = 0, stderr: Text = "",
           timed_out: bool = False) -> ProcResult:
    """One nvidia-smi answer as the collector captures it: the call ``name`` (``nvidia.smi_calls``)
    printed ``stdout`` (a fixture or text) and exited ``rc``; a timed-out call has no exit code."""
    if timed_out:
        rc = None
    return ProcResult(argv=nvidia.smi_calls(SMI_PATH)[name], rc=rc, stdout=_text(stdout), stderr=_text(stderr),
                      timed_out=timed_out)


def silent(name: str) -> ProcResult:
    """A call that printed nothing and exited 1 (what a call no case names answers)."""
    return answer(name, rc=1)


def captured(*, smi: Optional[str] = SMI_PATH, proc: Optional[Text] = None, proc_gpus: Optional[List[str]] = None,
             visible: Optional[str] = None, first_round_s: float = 3.0, **answers: ProcResult) -> nvidia.Captured:
    """What the collector hands ``nvidia.choose``: ``answers`` by call name, the first-round calls not
    named answering :func:`silent`ly (the collector always makes those four), then the follow-ups."""
    got: Dict[str, ProcResult] = {}
    if smi is not None:
        got = {name: answers.pop(name, None) or silent(name) for name in nvidia.FIRST_ROUND}
        got.update(answers)
    return nvidia.Captured(smi=smi, answers=got, proc_version=None if proc is None else _text(proc),
                           proc_gpus=proc_gpus, visible_devices=visible, first_round_s=first_round_s)
