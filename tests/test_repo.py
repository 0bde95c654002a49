"""The repository itself: no text file carries a merge's conflict markers (a merge that kept both sides of a
conflict by hand once left them in bench/RESULTS.md)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(rb"^(<{7}|={7}|>{7})( |$)", re.M)


def conflict_markers(paths):
    """``path:line`` of every conflict marker line in ``paths`` (binary files skipped)."""
    found = []
    for path in paths:
        data = Path(path).read_bytes()
        if b"\0" in data[:8192]:
            continue
        found += ["%s:%d" % (path, data.count(b"\n", 0, m.start()) + 1) for m in MARKER.finditer(data)]
    return found


def test_no_tracked_file_holds_conflict_markers():
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / p.decode() for p in tracked.split(b"\0") if p and (ROOT / p.decode()).is_file()]
    assert conflict_markers(paths) == []


def test_the_check_sees_markers(tmp_path):
    f = tmp_path / "notes.md"
    f.write_text("a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\nb\n===\n")
    assert conflict_markers([f]) == ["%s:2" % f, "%s:4" % f, "%s:6" % f]
