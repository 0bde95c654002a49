"""What ``check`` and ``rerun`` find on this machine for a recorded run: the closest interpreter to a gone one,
a recorded repo matched by its path."""

from __future__ import annotations

from relaxrepro.collect import here
from tests.helpers.read import SHA_B


def test_closest_interpreter_prefers_the_same_minor(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("python3", "python3.11"):
        (bindir / name).write_text("#!/bin/sh\n")
        (bindir / name).chmod(0o755)
    found = here.closest_interpreter("/gone/venv/bin/python", "3.11.7", {"PATH": str(bindir)})
    assert found == str(bindir / "python3.11")
    assert here.closest_interpreter("/gone/python", "3.11.7", {"PATH": str(tmp_path / "none")}) is None
    mine = tmp_path / "home" / "venv" / "bin" / "python"
    mine.parent.mkdir(parents=True)
    mine.write_text("#!/bin/sh\n")
    mine.chmod(0o755)
    found = here.closest_interpreter("<HOME>/venv/bin/python", "3.11.7", {"PATH": str(bindir), "HOME": str(
        tmp_path / "home")})
    assert found == str(mine)  # a recorded home is this home


def test_repo_matched_by_path_even_when_redaction_hid_another_users_home(tmp_path):
    found = {"proj": {"path": "<HOME>/work/proj", "commit": SHA_B}, "other": {"path": str(tmp_path)}}
    assert here.match_repo("proj", "/home/alice/work/proj", found, "/root") == found["proj"]
    assert here.match_repo("proj", "/home/alice/elsewhere", found, "/root") is None
    assert here.match_repo("x", str(tmp_path), found, "/root") == found["other"]
