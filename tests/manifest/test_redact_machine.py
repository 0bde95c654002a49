"""The redaction never looks at the machine: the hostname, login and home it hides are the ones it is given."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from relaxrepro.manifest.redact import Redactor, redact_document

MANIFEST_DIR = Path(__file__).resolve().parents[2] / "relaxrepro" / "manifest"


def test_a_redactor_hides_the_given_machine_facts_and_reads_none_of_its_own(monkeypatch):
    def no_lookup(*_a, **_k):
        raise AssertionError("the machine was looked at")

    monkeypatch.setattr(os, "uname", no_lookup)
    monkeypatch.setattr(os.path, "expanduser", no_lookup)
    for name in ("USER", "LOGNAME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    red = Redactor(home="/data/users/alice", hostname="gpu-node-17", user="alice")
    doc = {"run_id": "r1", "command": {"argv": ["python", "/data/users/alice/train.py"], "cwd": "/data/users/alice"},
           "environment": {"where": "gpu-node-17", "who": "alice", "other": "gpu-node-18 bob /data/users/bob"}}
    out = redact_document(doc, red)
    assert out["command"] == {"argv": ["python", "<HOME>/train.py"], "cwd": "<HOME>"}
    assert out["environment"] == {"where": "<internal-host>", "who": "<user>",
                                  "other": "gpu-node-18 bob /data/users/bob"}
    assert out["collection"]["redactions"] == {"home-path": 2, "hostname": 1, "user-name": 1}


def test_no_module_of_manifest_imports_pwd_socket_or_subprocess_or_calls_uname():
    found = []
    for path in sorted(MANIFEST_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += ["%s imports %s" % (path.name, n) for n in names
                      if n.split(".")[0] in ("pwd", "socket", "subprocess")]
            if isinstance(node, ast.Attribute) and node.attr == "uname":
                found.append("%s:%d calls uname" % (path.name, node.lineno))
    assert found == []
