#!/usr/bin/env python3
"""Capture the raw output of every GPU/CUDA command relaxrepro runs, as redacted test fixtures.

Run it on a real machine (a GPU node, a lent GPU box), from the repository root:

    python3 tools/capture_fixtures.py                 # label from the GPU model and driver
    python3 tools/capture_fixtures.py --label h200-sxm-570.86.15 --out tests/fixtures

Each command's output goes to ``<out>/<dir>/<label><suffix>`` (stderr appended to it: nvidia-smi
prints its error banners on either stream), and a line per file is added to that folder's
SOURCES.md. Before anything is written, the machine's hostname, home paths and user name are
redacted (relaxrepro.redact), GPU/MIG UUIDs are replaced by numbered placeholders (the same UUID
gets the same placeholder in every file, so cross-file tests still match) and serial numbers,
PDIs and GUIDs are zeroed. Missing tools are skipped. Existing files are never overwritten.

To capture another command, add one line to COMMANDS: (folder under tests/fixtures, file name
suffix, argv). The parser tests pick every new file up by folder.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import sys
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from relaxrepro.collect.context import default_policy  # noqa: E402
from relaxrepro.collect.probes import gpu_fields, nvidia, nvidia_parse  # noqa: E402
from relaxrepro.manifest.redact import Redactor  # noqa: E402
from relaxrepro.std import proc  # noqa: E402

SMI = "nvidia-smi"

COMMANDS: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = (
    # (folder under tests/fixtures, file name suffix, argv)
    ("nvidia/xml", ".xml", (SMI, "-q", "-x")),
    ("nvidia/csv", ".noheader.csv", (SMI, "--query-gpu=" + ",".join(nvidia_parse.QUERY_FIELDS),
                                     "--format=csv,noheader,nounits")),
    ("nvidia/csv", "__basic.noheader.csv", (SMI, "--query-gpu=" + ",".join(nvidia_parse.BASIC_QUERY_FIELDS),
                                            "--format=csv,noheader,nounits")),
    ("nvidia/list", ".txt", (SMI, "-L")),
    ("nvidia/table", ".txt", (SMI,)),
    ("nvidia/query_q", ".txt", (SMI, "-q")),
    ("nvidia/topo", ".txt", (SMI, "topo", "-m")),
    ("nvidia/version", ".txt", (SMI, "--version")),
    ("nvidia/proc_version", ".txt", ("cat", nvidia.PROC_VERSION)),
    ("rocm", "__amd-smi-static.txt", ("amd-smi", "static", "--json")),
    ("rocm", "__rocm-smi.txt", ("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json")),
    ("cuda/nvcc", ".txt", ("nvcc", "--version")),
    ("cuda/ldconfig", "__ldconfig_p.txt", ("ldconfig", "-p")),
)

_UUID_RE = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ID_WORDS = r"(?:serial|pdi|guid|unique[ _]id)"
_XML_ID_RE = re.compile(r"<(\w*%s\w*)>([^<]*)</\1>" % _ID_WORDS, re.I)
_TEXT_ID_RE = re.compile(r"^([ \t]*[\w .()-]*?%s[\w .()-]*?[ \t]+:[ \t]*)(\S[^\n]*)$" % _ID_WORDS, re.I | re.M)
_JSON_ID_RE = re.compile(r'("[\w ]*%s[\w ]*"\s*:\s*")([^"]*)"' % _ID_WORDS, re.I)


class Masker:
    """Numbered UUID placeholders shared by every file of one capture, and zeroed serials."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.uuids: Dict[str, str] = {}

    def _uuid(self, m: "re.Match[str]") -> str:
        key = m.group(0).lower()
        if key not in self.uuids:
            n = len(self.uuids) + 1
            self.uuids[key] = "%s-%08x-0000-0000-0000-%012x" % (m.group(1), n, n)
        return self.uuids[key]

    @staticmethod
    def _zero(value: str) -> str:
        if gpu_fields.clean(value) is None:  # N/A and friends stay as the tool printed them
            return value
        return re.sub(r"[0-9A-Za-z]", "0", value)

    def text(self, text: str) -> str:
        text = _UUID_RE.sub(self._uuid, text)
        text = _XML_ID_RE.sub(lambda m: "<%s>%s</%s>" % (m.group(1), self._zero(m.group(2)), m.group(1)), text)
        text = _TEXT_ID_RE.sub(lambda m: m.group(1) + self._zero(m.group(2)), text)
        text = _JSON_ID_RE.sub(lambda m: '%s%s"' % (m.group(1), self._zero(m.group(2))), text)
        return self.redactor.text(text)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def default_label(outputs: Dict[Tuple[str, str], str]) -> str:
    """``<model>__<driver>`` from the captured XML (or table), else ``capture__<date>``."""
    info: Dict[str, object] = {}
    for (folder, _), text in outputs.items():
        if folder == "nvidia/xml":
            info = nvidia_parse.parse_smi_xml(text)
        elif folder == "nvidia/table" and not info.get("gpus"):
            info = nvidia_parse.parse_table(text)
    gpus = info.get("gpus") or []
    if gpus and info.get("driver_version"):
        model = str(gpus[0].get("model", "gpu")) + ("-x%d" % len(gpus) if len(gpus) > 1 else "")
        return "capture__%s__%s" % (_slug(model), info["driver_version"])
    return "capture__" + datetime.date.today().strftime("%Y%m%d")


def capture(out_dir: str, label: Optional[str], timeout: float,
            commands: Sequence[Tuple[str, str, Tuple[str, ...]]] = COMMANDS) -> List[str]:
    """Run ``commands``, redact, write; return the paths written. Reports skips on stderr."""
    masker = Masker(default_policy(os.environ))
    outputs: Dict[Tuple[str, str], str] = {}
    notes: Dict[Tuple[str, str], str] = {}
    for folder, suffix, argv in commands:
        if shutil.which(argv[0]) is None or (argv[0] == "cat" and not os.path.exists(argv[1])):
            sys.stderr.write("skipped %s: not found\n" % " ".join(argv))
            continue
        res = proc.run(list(argv), timeout=timeout)
        body = res.stdout if isinstance(res.stdout, str) else ""
        if res.stderr.strip():
            body = body + ("" if body.endswith("\n") or not body else "\n") + res.stderr
        if not body.strip():
            sys.stderr.write("skipped %s: no output (%s)\n" % (" ".join(argv), res.describe()))
            continue
        if argv[0] == SMI and not res.ok and nvidia_parse.parse_errors(body):
            # A failing driver is a fixture too, but for the error tests, not the parser's folder.
            folder, suffix = "nvidia/errors", "__" + _slug(" ".join(argv[1:3]) or "table") + ".txt"
        outputs[(folder, suffix)] = masker.text(body)
        how = "exit %s" % res.rc
        if res.timed_out:
            how = "timed out after %.0f s" % timeout
        if res.stderr.strip():
            how += ", stderr appended"
        notes[(folder, suffix)] = "`%s` | %s" % (masker.text(" ".join(argv)), how)
    label = label or default_label(outputs)
    today = datetime.date.today().isoformat()
    written: List[str] = []
    for (folder, suffix), text in outputs.items():
        directory = os.path.join(out_dir, folder)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, label + suffix)
        try:
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(text)
        except FileExistsError:
            sys.stderr.write("kept existing %s (choose another --label)\n" % path)
            continue
        with open(os.path.join(directory, "SOURCES.md"), "a", encoding="utf-8") as fh:
            fh.write("| %s | captured by tools/capture_fixtures.py on %s | %s |\n"
                     % (os.path.basename(path), today, notes[(folder, suffix)]))
        written.append(path)
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("tests", "fixtures"), help="fixtures root (default: %(default)s)")
    parser.add_argument("--label", help="case name for the files (default: from the GPU model and driver)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per command (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.label is not None and not re.match(r"^[\w.-]+$", args.label):
        parser.error("--label may use letters, digits, '.', '-' and '_' only")
    written = capture(args.out, args.label, args.timeout)
    for path in written:
        print(path)
    if not written:
        sys.stderr.write("nothing captured: none of the tools is on PATH\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
