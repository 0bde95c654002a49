"""Patch bodies in the writer: inline up to a budget, sidecars beyond it, the manifest under the cap."""

from __future__ import annotations

import base64
import hashlib
import json

from relaxrepro.collect.context import default_policy
from relaxrepro.manifest import writer
from relaxrepro.manifest.model import CAP_BYTES
from tests.helpers.common import make_repo, validate_manifest
from tests.helpers.git import probe_doc


def test_several_dirty_repos_keep_the_manifest_under_the_cap(tmp_path):
    names = {}
    for i in range(5):
        repo = make_repo(tmp_path / ("repo%d" % i))
        (repo / "gen.py").write_text("".join("value_%05d = %d\n" % (n, n) for n in range(1500)))  # ~27 KB
        names["r%d" % i] = str(repo)
    doc = probe_doc(tmp_path, tmp_path, repos=names)
    out = tmp_path / "out"
    out.mkdir()
    result = writer.write(doc, directory=str(out), default=default_policy({"HOME": str(tmp_path / "home")}))
    assert result.path
    data = open(result.path, "rb").read()
    assert len(data) <= CAP_BYTES
    written = json.loads(data)
    validate_manifest(written)
    inline = sidecar = 0
    for name in names:
        patch = written["code"][name]["patch"]
        if patch["inline"]:
            body = patch["text"].encode()
            inline += 1
        else:
            body = (out / patch["sidecar"]).read_bytes()
            sidecar += 1
        assert hashlib.sha256(body).hexdigest() == patch["stored_sha256"] == patch["sha256"]
    assert inline and sidecar  # some stay inline, the rest moved out to fit
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".patch") == sorted(
        written["code"][n]["patch"]["sidecar"] for n in names if not written["code"][n]["patch"]["inline"])


def test_patch_over_the_inline_budget_always_goes_to_its_sidecar():
    text = "x" * (writer.INLINE_PATCH_BYTES + 1)
    doc = {"run_id": "r1", "code": {"big": {"patch": {"text": text}}, "small": {"patch": {"text": "s"}}}}
    data, written, sidecars = writer.fit(doc)
    assert written["code"]["big"]["patch"] == {"sidecar": "manifest_r1.big.patch", "inline": False}
    assert written["code"]["small"]["patch"] == {"text": "s"}
    assert sidecars == {"manifest_r1.big.patch": text.encode()}
    assert doc["code"]["big"]["patch"]["text"] == text  # the caller's document is left alone
    assert written["collection"]["truncated"] == ["code.big.patch.text moved to sidecar manifest_r1.big.patch"]


def test_non_utf8_patch_sidecar_has_the_exact_bytes():
    body = b"+caf\xe9\n"
    doc = {"run_id": "r2", "code": {"legacy": {"patch": {"text_base64": base64.b64encode(body).decode()}}}}
    _data, written, sidecars = writer.fit(doc)
    assert sidecars == {"manifest_r2.legacy.patch": body}
    assert "text_base64" not in written["code"]["legacy"]["patch"]


def test_repo_names_with_slashes_make_flat_sidecar_names():
    doc = {"run_id": "r3", "code": {"top/third_party/lib": {"patch": {"text": "y" * 40000}}}}
    _data, _written, sidecars = writer.fit(doc)
    assert list(sidecars) == ["manifest_r3.top_third_party_lib.patch"]


def test_a_rewrite_whose_patch_cannot_be_stored_keeps_the_manifest_and_says_so(tmp_path):
    # Adding the outcome later tips the manifest over: the patch moves out, and its sidecar cannot be written
    # (a directory sits at its name). The outcome is still added, the patch marked, the loss said.
    text = "x" * (writer.INLINE_PATCH_BYTES + 1)
    path = tmp_path / "manifest_r1.json"
    path.write_text('{"run_id": "r1"}')
    (tmp_path / "manifest_r1.big.patch").mkdir()
    doc = {"schema_version": "1.0", "run_id": "r1", "outcome": {"status": "ok"},
           "code": {"big": {"patch": {"text": text, "sha256": "a" * 64}}}}
    lost = writer.rewrite(str(path), doc)
    assert lost == ["patch of repo big not stored: could not write %s: already exists; the manifest keeps its "
                    "sha256" % (tmp_path / "manifest_r1.big.patch")]
    written = json.loads(path.read_text())
    assert written["outcome"] == {"status": "ok"}
    assert written["code"]["big"]["patch"] == {"inline": False, "not_stored": "already exists", "sha256": "a" * 64}


def test_a_rewrite_keeps_the_sidecar_this_run_wrote_before(tmp_path):
    text = "x" * (writer.INLINE_PATCH_BYTES + 1)
    path = tmp_path / "manifest_r1.json"
    path.write_text('{"run_id": "r1"}')
    (tmp_path / "manifest_r1.big.patch").write_text(text)
    assert writer.rewrite(str(path), {"run_id": "r1", "code": {"big": {"patch": {"text": text}}}}) == []
    assert json.loads(path.read_text())["code"]["big"]["patch"]["sidecar"] == "manifest_r1.big.patch"


def _big_doc():
    packages = {"pkg-%05d" % i: "1.%d.0" % i for i in range(4000)}  # ~100 KB: over the cap with the rest
    return {"run_id": "r1", "code": {"repo": {"commit": "a" * 40, "patch": {"text": "+x = 1\n" * 200000}},
                                     "other": {"commit": "b" * 40}},
            "environment": {"packages": packages, "python": {"version": "3.11.7"}},
            "collection": {"truncated": ["an earlier note"], "probes": {"git": {"status": "ok"}}}}


def test_fitting_copies_only_what_it_changes_and_leaves_the_callers_document_as_it_was():
    doc = _big_doc()
    before = json.dumps(doc, sort_keys=True)
    data, written, sidecars = writer.fit(doc)
    assert json.dumps(doc, sort_keys=True) == before  # the caller's document: untouched
    assert len(data) <= CAP_BYTES and list(sidecars) == ["manifest_r1.repo.patch"]
    assert written["code"]["repo"]["patch"]["sidecar"] == "manifest_r1.repo.patch"
    assert written["environment"]["packages_truncated"]["count"] == 4000
    assert written["collection"]["truncated"][0] == "an earlier note"
    # what no cut touched is the caller's own, not a copy (a deep copy of the whole cost ~0.2 s beside a patch)
    assert written["code"]["other"] is doc["code"]["other"]
    assert written["environment"]["python"] is doc["environment"]["python"]
    assert written["collection"]["probes"] is doc["collection"]["probes"]
    assert json.loads(data) == json.loads(writer.serialize(written))
