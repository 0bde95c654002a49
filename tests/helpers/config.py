"""Helpers for the config, seeds and data tests: run relaxrepro as an unprivileged user.

Permission errors are only real for a non-root process (root reads a chmod-000 file), and these
tests often run as root in containers: then the child drops to ``nobody``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.helpers.common import ROOT, clean_env

NOBODY = 65534


_python: Dict[str, Optional[str]] = {}


def _unprivileged_python(kwargs: dict) -> Optional[str]:
    """An interpreter ``nobody`` may run (pyenv's lives under /root, which it cannot enter)."""
    if "exe" not in _python:
        _python["exe"] = None
        for exe in (sys.executable, "/usr/bin/python3"):
            try:
                ok = subprocess.run([exe, "-c", "pass"], capture_output=True, timeout=30, **kwargs).returncode == 0
            except OSError:
                ok = False
            if ok:
                _python["exe"] = exe
                break
    return _python["exe"]


def run_unprivileged(*args: str, cwd: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m relaxrepro ARGS`` as a user who cannot read chmod-000 files."""
    kwargs: dict = {}
    if os.geteuid() == 0:
        kwargs = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    python = _unprivileged_python(kwargs) if kwargs else sys.executable
    if python is None:
        pytest.skip("no Python interpreter runnable by an unprivileged user")
    full_env = clean_env(**env)
    full_env["PYTHONPATH"] = str(ROOT)
    full_env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([python, "-m", "relaxrepro", *args], cwd=str(cwd), env=full_env,
                          capture_output=True, text=True, timeout=60, **kwargs)
