"""The repositories known before the training interpreter (the working directory's, the script's) are collected
while it is resolved; the discovery that follows adds the others and the routes, and collects nothing twice."""

from __future__ import annotations

import json
from collections import Counter

from relaxrepro.collect.probes import git as git_probe
from tests.helpers.common import git, make_repo
from tests.helpers.git import probe_doc


def _editable(site, name: str, src) -> None:
    d = site / ("%s-0.1.dist-info" % name)
    d.mkdir(parents=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: 0.1\n\nbody\n" % name)
    (d / "direct_url.json").write_text(json.dumps({"url": src.as_uri(), "dir_info": {"editable": True}}))


def _counting(monkeypatch) -> Counter:
    calls: Counter = Counter()
    collect_repo = git_probe.collect_repo

    def counted(ctx, found, *args, **kw):  # type: ignore[no-untyped-def]
        calls[found.name] += 1
        return collect_repo(ctx, found, *args, **kw)

    monkeypatch.setattr(git_probe, "collect_repo", counted)
    return calls


def test_the_working_directorys_repo_also_installed_editable_is_collected_once(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "proj", {"train.py": "x = 1\n"})
    (repo / "train.py").write_text("x = 2\n")
    site = tmp_path / "site"
    _editable(site, "proj", repo)
    calls = _counting(monkeypatch)
    doc = probe_doc(tmp_path, repo, argv=["python", "train.py"], site_dirs=[str(site)])
    assert list(doc["code"]) == ["proj"] and dict(calls) == {"proj": 1}
    rec = doc["code"]["proj"]
    assert rec["found_by"] == ["cwd", "script", "editable"]  # the later discovery's routes
    assert rec["dirty"] is True and rec["patch"]["files"] == ["train.py"]


def test_a_repo_found_only_through_the_interpreter_is_collected_after_it(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "proj", {"train.py": "x = 1\n"})
    lib = make_repo(tmp_path / "lib", {"lib/__init__.py": "y = 1\n"})
    (lib / "lib" / "__init__.py").write_text("y = 2\n")
    site = tmp_path / "site"
    _editable(site, "lib", lib)
    calls = _counting(monkeypatch)
    doc = probe_doc(tmp_path, repo, argv=["python", "train.py"], site_dirs=[str(site)])
    assert sorted(doc["code"]) == ["lib", "proj"] and dict(calls) == {"lib": 1, "proj": 1}
    assert doc["code"]["lib"]["found_by"] == ["editable"] and doc["code"]["lib"]["dirty"] is True
    assert doc["code"]["proj"]["commit"] == git(repo, "rev-parse", "HEAD").strip()
