"""Shared test helpers: run the CLI as a user would, build fake tools on a one-entry PATH, validate.

Area-specific helpers live beside this one in ``tests/helpers/<area>.py``; fixtures live in ``tests/conftest.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SCHEMA_PATH = ROOT / "schema" / "experiment-manifest-v1.schema.json"


def clean_env(**extra: str) -> Dict[str, str]:
    """A minimal, predictable environment for a child relaxrepro (no RANK, no RAY_ADDRESS...)."""
    keep = ("PATH", "HOME", "LANG", "TMPDIR", "USER", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PYTHONPATH"] = str(ROOT)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.update(extra)
    return env


def run_cli(
    *args: str,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[os.PathLike] = None,
    python: str = sys.executable,
    timeout: float = 60,
    stdin: Optional[str] = None,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``python -m relaxrepro ARGS`` in a child process, like a user's shell would.

    ``text=False``: stdout and stderr as the bytes written (no newline translation: a ``\\r`` stays).
    """
    return subprocess.run(
        [python, "-m", "relaxrepro", *args],
        env=env if env is not None else clean_env(),
        cwd=str(cwd) if cwd else None,
        capture_output=True,
        text=text,
        timeout=timeout,
        input=stdin if text or stdin is None else stdin.encode(),
    )


def pyenv_python(minor: str) -> str:
    """The newest pyenv CPython ``minor`` ("3.8"); the test is skipped where it is not installed (fails on CI)."""
    import glob

    import pytest

    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(os.path.join(root, "versions", minor + ".*", "bin", "python" + minor)))
    if not found:
        if os.environ.get("CI"):
            raise AssertionError("CPython %s is missing from pyenv (%s)" % (minor, root))
        pytest.skip("CPython %s not installed under pyenv" % minor)
    return found[-1]


def fake_tool(bindir: Path, name: str, script: str) -> Path:
    """Write an executable ``bindir/name`` running the given shell script body."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(script).lstrip("\n"))
    path.chmod(0o755)
    return path


MARKER_VAR = "RELAXREPRO_TEST_MARKER"
"""An environment variable a test hands its child: every descendant inherits it (see :func:`marked_processes`)."""


def marked_processes(marker: str) -> List[int]:
    """Pids of the live processes whose environment carries ``RELAXREPRO_TEST_MARKER=<marker>`` (Linux /proc).

    A zombie's environment reads empty, so only processes still running count."""
    needle = ("%s=%s" % (MARKER_VAR, marker)).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def survivors(marker: str) -> List[int]:
    """The marked processes still running once SIGKILLed ones have had a moment to go (up to 5 s; a
    killed process is gone in milliseconds). Any found are killed here, so a failing test leaks nothing."""
    import signal
    import time

    for _ in range(100):
        left = marked_processes(marker)
        if not left:
            return []
        time.sleep(0.05)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


_validator = None


def validate_manifest(doc: dict) -> None:
    """Validate against schema/experiment-manifest-v1.schema.json (jsonschema is dev-only)."""
    global _validator
    if _validator is None:
        import jsonschema

        schema = json.loads(SCHEMA_PATH.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        _validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(_validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        raise AssertionError("\n".join("%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors[:10]))


def git(cwd: Path, *args: str, env: Optional[Dict[str, str]] = None) -> str:
    """Run git for a test repo with a fixed identity and dates; returns stdout."""
    base = {
        "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd), "PATH": os.environ["PATH"],
    }
    base.update(env or {})
    out = subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=str(cwd), env=base,
                         capture_output=True, text=True, check=True)
    return out.stdout


def make_repo(path: Path, files: Optional[Dict[str, str]] = None) -> Path:
    """A real git repo with one commit of ``files`` (default: a README)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    for name, content in (files or {"README.md": "hello\n"}).items():
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(content)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path


def generate(tmp_path: Path, *args: str, env: Optional[Dict[str, str]] = None,
             cwd: Optional[Path] = None, command: Sequence[str] = ()) -> dict:
    """Run ``generate --output`` and return the written, schema-valid document."""
    out = tmp_path / ("m_%d.json" % len(list(tmp_path.glob("m_*.json"))))
    argv = ["generate", "--output", str(out), *args]
    if command:
        argv += ["--", *command]
    res = run_cli(*argv, env=env, cwd=cwd or tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    validate_manifest(doc)
    return doc
