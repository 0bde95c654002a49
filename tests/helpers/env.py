"""Helpers for the environment/CUDA/system/container tests: fake site-packages, compiled stand-in
libraries, the real-wheel "training interpreter" .venv-cuda, and contexts built around them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

import pytest

from relaxrepro.collect.context import Context
from relaxrepro.collect.interpreter import Interpreter

ROOT = Path(__file__).resolve().parent.parent.parent
CUDA_VENV = ROOT / ".venv-cuda"


def cuda_python() -> str:
    """.venv-cuda's interpreter (tests/run.sh always builds it); skip when a file is run by hand without it."""
    exe = CUDA_VENV / "bin" / "python"
    if not exe.exists():
        pytest.skip(".venv-cuda missing: run `bash tests/run.sh` once (it installs the NCCL/CUDA runtime wheels)")
    return str(exe)


def cuda_site() -> Path:
    cuda_python()
    return next((CUDA_VENV / "lib").glob("python3*/site-packages"))


def add_dist(site: Path, name: str, version: Optional[str], *, direct_url: Optional[dict] = None,
             dirname: Optional[str] = None, metadata: Optional[str] = None) -> Path:
    """A ``name-version.dist-info`` with METADATA (and PEP 610 direct_url.json when given)."""
    d = site / (dirname or "%s-%s.dist-info" % (name.replace("-", "_"), version or "0"))
    d.mkdir(parents=True, exist_ok=True)
    if metadata is None:
        metadata = "Metadata-Version: 2.1\nName: %s\n" % name
        if version is not None:
            metadata += "Version: %s\n" % version
        metadata += "Summary: test\n\nA long description: Version: 9.9.9 must not be read.\n"
    (d / "METADATA").write_text(metadata)
    if direct_url is not None:
        (d / "direct_url.json").write_text(json.dumps(direct_url))
    return d


def fake_site(site: Path, count: int) -> Path:
    """A site-packages with ``count`` fake distributions (pkg0000 1.0 ...)."""
    site.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        add_dist(site, "pkg%04d" % i, "1.%d" % i)
    return site


def interp(sys_path: Sequence[str], prefix: Optional[str] = None) -> Interpreter:
    return Interpreter(executable=sys.executable, version="3.11.0", implementation="cpython",
                       prefix=prefix, base_prefix=prefix, sys_path=list(sys_path), source="option")


def make_ctx(tmp: Path, *, interpreter: Optional[Interpreter] = None, env: Optional[Dict[str, str]] = None,
             root: str = "/", argv: Sequence[str] = (), options: Optional[dict] = None,
             probe_budget_s: float = 4.0) -> Context:
    """A context on a controlled PATH (``tmp/bin`` unless env says otherwise), optionally with a fixed interpreter."""
    base = {"PATH": str(tmp / "bin"), "HOME": str(tmp)}
    base.update(env or {})
    ctx = Context(env=base, cwd=str(tmp), argv=argv, root=root, options=options, probe_budget_s=probe_budget_s)
    if interpreter is not None:
        ctx.memo("interpreter", lambda: interpreter)
    return ctx


_SOURCES = {
    # cudnnGetVersion as cuDNN 9 (90100 -> 9.1.0) and cuDNN 8 (8902 -> 8.9.2) export it: size_t, no args.
    "cudnn9": "#include <stddef.h>\nsize_t cudnnGetVersion(void) { return 90100; }\n",
    "cudnn8": "#include <stddef.h>\nsize_t cudnnGetVersion(void) { return 8902; }\n",
    # NCCL before 2.9 encoded 2.7.8 as 2708.
    "nccl_old": "int ncclGetVersion(int *v) { *v = 2708; return 0; }\n",
    "nccl_err": "int ncclGetVersion(int *v) { *v = 0; return 5; }\n",
    # A library whose load-time constructor aborts (a broken driver shim does this in the wild).
    "crash": "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n"
             "int cudaRuntimeGetVersion(int *v) { *v = 1; return 0; }\n",
    "hang": "#include <unistd.h>\n__attribute__((constructor)) static void stall(void) { for (;;) sleep(1); }\n",
}


def build_so(kind: str, dest: Path) -> Path:
    """Compile the stand-in ``kind`` into ``dest`` (a .so path) with gcc; skip when gcc is missing."""
    src = dest.with_suffix(".c")
    dest.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(_SOURCES[kind])
    try:
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(dest), str(src)], check=True,
                       capture_output=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("gcc not available to build the stand-in library")
    return dest


def link(src: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(str(src), str(dest))
    return dest
