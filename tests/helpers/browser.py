"""A real browser for the report tests: headless Chromium (Debian's ``chromium``), one process group per
call, killed as a group afterwards. ``tests/run.sh`` installs it where it can; elsewhere the tests skip
and say how to get it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--virtual-time-budget=3000"]
"""Without the background-networking switches Chromium reaches for the network at start."""

HOW = ("chromium not found: install it (Debian/Ubuntu: apt-get install -y chromium; tests/run.sh does so as "
       "root) or set RELAXREPRO_CHROMIUM to its path")


def chromium() -> Optional[str]:
    return os.environ.get("RELAXREPRO_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def need_chromium() -> str:
    import pytest

    path = chromium()
    if path is None:
        pytest.skip(HOW)
    return path


def _run(extra: List[str], page: Path, timeout: float = 60) -> str:
    exe = chromium()
    assert exe, HOW
    with tempfile.TemporaryDirectory(prefix="relaxrepro-chromium-") as profile:
        proc = subprocess.Popen([exe, *FLAGS, "--user-data-dir=" + profile, *extra, page.resolve().as_uri()],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its renderer and zygote children too
            except ProcessLookupError:
                pass
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    return out


def dump_dom(page: Path, scripts: bool = True) -> str:
    """The DOM after load (and the page's script), serialised by the browser."""
    return _run(["--dump-dom"] + ([] if scripts else ["--blink-settings=scriptEnabled=false"]), page)


def screenshot(page: Path, png: Path, width: int = 1000, height: int = 1200, dark: bool = False) -> None:
    extra = ["--screenshot=%s" % png.resolve(), "--window-size=%d,%d" % (width, height), "--hide-scrollbars"]
    if dark:
        extra.append("--blink-settings=preferredColorScheme=0")
    _run(extra, page)
    assert png.exists() and png.stat().st_size > 1000
