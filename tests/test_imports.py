"""Start-up cost: what generate, check and diff import, and the plain stand-ins that keep it low.

Which modules a command imports is checked here (a regression names the module); how long imports take
is measured by ``bench/imports.py``, never asserted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from relaxrepro import cli
from relaxrepro.analyze.check import Item, Report
from relaxrepro.collect.context import which_on_path
from relaxrepro.collect.runner import Outcome, Probe
from relaxrepro.manifest import writer
from relaxrepro.std import sha as _sha
from relaxrepro.std.lazy_re import LazyPattern
from relaxrepro.std.proc import ProcResult
from relaxrepro.std.records import FrozenRecord, Record
from tests.helpers.common import ROOT, clean_env, make_repo

# Each costs milliseconds at import (or drags in a chain that does); none is needed by a clean run.
HEAVY = ("dataclasses", "inspect", "ast", "dis", "tokenize", "secrets", "hmac", "socket",
         "hashlib", "_hashlib", "xml.etree.ElementTree", "csv", "urllib.parse", "ipaddress", "platform",
         "traceback", "shutil", "tempfile", "getpass", "datetime", "copy", "random", "base64")
DIFF_ALSO_FREE_OF = ("typing", "subprocess", "threading", "relaxrepro.manifest.redact", "relaxrepro.manifest.writer",
                     "relaxrepro.collect.assemble", "relaxrepro.manifest.runindex", "sqlite3")
"""Two manifest files need no run index: only a run id is looked up in it."""

_BARE = "import argparse, json, sys; print(json.dumps(sorted(sys.modules)))"
_PROBE = r"""
import json, sys
from relaxrepro import cli
code = cli.main(sys.argv[2:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=open(sys.argv[1], "w"))
"""


def _imports_of(tmp_path: Path, args, cwd: Path) -> set:
    """Modules a fresh ``python -S`` holds after ``cli.main(args)``, less those of a start-up that imports
    argparse (-S: no site-packages .pth file imports; Python 3.8's argparse itself imports shutil)."""
    out = tmp_path / "modules.json"
    env = clean_env()
    bare = subprocess.run([sys.executable, "-S", "-c", _BARE], env=env, capture_output=True, text=True, check=True)
    res = subprocess.run([sys.executable, "-S", "-c", _PROBE, str(out), *args], env=env, cwd=str(cwd),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert got["code"] in (0, 1), res.stderr
    return set(got["modules"]) - set(json.loads(bare.stdout))


@pytest.fixture(scope="module")
def manifests(tmp_path_factory) -> dict:
    """A clean repository and two manifests of it (written outside it, so it stays clean)."""
    base = tmp_path_factory.mktemp("imports")
    repo = make_repo(base / "repo", {"train.py": "print('train')\n"})
    out = base / "out"
    out.mkdir()
    paths = []
    for _ in range(2):
        res = subprocess.run([sys.executable, "-m", "relaxrepro", "generate", "--output-dir", str(out), "--",
                              "python", "train.py"], env=clean_env(), cwd=str(repo), capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0, res.stderr
        paths.append(res.stdout.strip().splitlines()[-1])
    return {"repo": repo, "out": out, "paths": paths}


def test_generate_in_a_clean_repo_imports_none_of_the_heavy_modules(tmp_path, manifests):
    dest = tmp_path / "gen"
    dest.mkdir()
    mods = _imports_of(tmp_path, ["generate", "--output-dir", str(dest), "--", "python", "train.py"],
                       manifests["repo"])
    assert "relaxrepro.collect.probes.git" in mods  # it really ran the probes
    assert sorted(m for m in HEAVY if m in mods) == []


def test_check_imports_none_of_the_heavy_modules(tmp_path, manifests):
    mods = _imports_of(tmp_path, ["check", manifests["paths"][0]], manifests["repo"])
    assert "relaxrepro.commands.check" in mods
    assert sorted(m for m in HEAVY if m in mods) == []


def test_diff_imports_only_what_it_reads_and_prints(tmp_path, manifests):
    mods = _imports_of(tmp_path, ["diff", *manifests["paths"]], manifests["repo"])
    assert "relaxrepro.commands.diff" in mods
    assert sorted(m for m in HEAVY + DIFF_ALSO_FREE_OF if m in mods) == []


# -- the stand-ins behave as what they replace ---------------------------------------------------

def test_a_record_compares_prints_and_converts_like_the_dataclass_it_replaced():
    a = Item("python", "3.11.7", "3.11.9", "WARN", "another patch version")
    assert a == Item("python", "3.11.7", "3.11.9", "WARN", "another patch version")
    assert a != Item("python", "3.11.7", "3.11.9", "PASS", "another patch version")
    assert repr(a) == ("Item(item='python', recorded='3.11.7', here='3.11.9', verdict='WARN', "
                       "note='another patch version')")
    assert a.as_dict() == {"item": "python", "recorded": "3.11.7", "here": "3.11.9", "verdict": "WARN",
                           "note": "another patch version"}
    assert Item("x", "a", "b", "PASS").note == ""
    with pytest.raises(TypeError):
        hash(a)  # mutable records are unhashable, as eq=True dataclasses are


def test_record_defaults_are_fresh_per_instance():
    one, two = Outcome(), Outcome()
    one.warn("git: timed out")
    assert (one.status, one.warnings, two.status, two.warnings) == ("partial", ["git: timed out"], "ok", [])
    r1, r2 = Report(), Report()
    r1.items.append(Item("a", "b", "c", "PASS"))
    assert r2.items == []
    assert ProcResult(["git"]).extra is not ProcResult(["git"]).extra


def test_records_of_different_classes_are_never_equal():
    class Other(Record):
        _fields = ("data", "status", "warnings")

        def __init__(self) -> None:
            self.data, self.status, self.warnings = {}, "ok", []

    assert Outcome() != Other()


def test_a_frozen_record_is_hashable_and_refuses_assignment():
    def collect(ctx):
        return Outcome()

    p = Probe("git", collect)
    assert p == Probe("git", collect) and hash(p) == hash(Probe("git", collect))
    with pytest.raises(AttributeError, match="frozen Probe"):
        p.name = "other"
    with pytest.raises(AttributeError):
        del p.collect
    assert isinstance(p, FrozenRecord)


@pytest.mark.parametrize("data", [b"", b"abc", "ünïcode".encode(), os.urandom(70000)], ids=["empty", "abc",
                                                                                             "utf8", "70k"])
def test_sha256_hex_is_hashlibs_sha256(data):
    assert _sha.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def _exe(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("layout,path_entries", [
    ("first-dir-wins", ["a", "b"]),
    ("not-executable-skipped", ["noexec", "b"]),
    ("directory-skipped", ["isdir", "b"]),
    ("missing-dirs", ["nope", "b"]),
    ("repeated-dir", ["b", "b"]),
    ("nowhere", ["nope"]),
])
def test_which_on_path_finds_what_shutil_which_finds(tmp_path, layout, path_entries):
    _exe(tmp_path / "a" / "tool")
    _exe(tmp_path / "b" / "tool")
    _exe(tmp_path / "noexec" / "tool", 0o644)
    (tmp_path / "isdir" / "tool").mkdir(parents=True)
    path = os.pathsep.join(str(tmp_path / d) for d in path_entries)
    assert which_on_path("tool", path) == shutil.which("tool", path=path)


def test_which_on_path_with_an_empty_path_finds_nothing_and_an_empty_entry_means_the_cwd(tmp_path, monkeypatch):
    _exe(tmp_path / "tool")
    monkeypatch.chdir(tmp_path)
    assert which_on_path("tool", "") is None is shutil.which("tool", path="")
    assert which_on_path("tool", os.pathsep) == shutil.which("tool", path=os.pathsep) == "tool"


@pytest.mark.parametrize("columns", [None, "57", "0", "junk"])
def test_help_width_follows_columns_as_shutil_would(monkeypatch, columns):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert cli._terminal_columns() == shutil.get_terminal_size().columns


def test_the_temp_file_is_new_private_and_named_like_mkstemps(tmp_path):
    fd1, p1 = writer._mkstemp(str(tmp_path))
    fd2, p2 = writer._mkstemp(str(tmp_path))
    os.close(fd1)
    os.close(fd2)
    assert p1 != p2 and os.path.isabs(p1)
    for p in (p1, p2):
        name = os.path.basename(p)
        assert name.startswith(".relaxrepro-") and name.endswith(".tmp")
        assert os.stat(p).st_mode & 0o777 == 0o600


def test_the_temp_file_never_reuses_an_existing_name_or_follows_a_link(tmp_path, monkeypatch):
    target = tmp_path / "target"
    target.write_text("keep")
    names = iter([b"\x00" * 6, b"\x00" * 6, b"\x01" * 6])
    os.symlink(str(target), str(tmp_path / (".relaxrepro-%s.tmp" % ("00" * 6))))
    monkeypatch.setattr(writer.os, "urandom", lambda n: next(names))
    fd, p = writer._mkstemp(str(tmp_path))
    os.close(fd)
    assert os.path.basename(p) == ".relaxrepro-%s.tmp" % ("01" * 6)
    assert target.read_text() == "keep"


def test_a_lazy_pattern_compiles_on_first_use_and_then_acts_as_the_pattern():
    rx = LazyPattern(r"(?i)tok(en)?")
    assert rx.pattern == "(?i)tok(en)?" and rx._rx is None
    assert rx.sub("*", "a TOKEN b") == "a * b"
    assert rx._rx is not None and rx.search("xtok").group(0) == "tok"


def test_bench_imports_runs_and_reports_json():
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "imports.py"), "--runs", "1", "--json",
                          "--python", sys.executable], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert set(report["commands"]) == {"generate", "diff", "check"}
    assert report["commands"]["diff"]["relaxrepro_modules"] > 0


def test_a_trainer_without_trackers_imports_none_of_them(tmp_path):
    from tests.helpers.trackers import run_trainer

    mods = set(run_trainer(tmp_path, "none")["modules"])
    assert "relaxrepro.record.trackers" in mods  # it really looked
    assert sorted(m for m in mods if m.split(".")[0] in ("wandb", "mlflow", "tensorboard", "tensorboardX", "torch")
                  ) == []


def test_importing_the_api_loads_neither_the_collection_nor_the_writer():
    # A trainer that only imports relaxrepro (or only traces) pays for the small modules alone; the collection,
    # the redaction rules and the writer come with the first collect_manifest or write.
    code = "import json, sys; import relaxrepro.api; print(json.dumps(sorted(sys.modules)))"
    res = subprocess.run([sys.executable, "-S", "-c", code], env=clean_env(), capture_output=True, text=True,
                         check=True)
    ours = [m for m in json.loads(res.stdout) if m.startswith("relaxrepro.")]
    assert [m for m in ours if m.startswith(("relaxrepro.collect", "relaxrepro.manifest.redact",
                                             "relaxrepro.manifest.writer", "relaxrepro.manifest.reader"))] == []
    assert "relaxrepro.record.session" in ours  # it really imported the API
