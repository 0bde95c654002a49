"""The writer: atomic, exclusive, capped at 100 KB by a documented degradation order, never raises."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from relaxrepro.manifest import writer
from relaxrepro.manifest.model import CAP_BYTES
from relaxrepro.manifest.redact import Redactor
from tests.helpers.common import clean_env, validate_manifest

NO_REDACT = Redactor(home="/nonexistent-home", hostname=None)


def _doc(**extra):
    doc = {"schema_version": "1.0", "run_id": "20260101_000000_abcdef0", "generated_at": "2026-01-01T00:00:00Z",
           "command": {"argv": []}, "code": {}, "config": {}, "environment": {}, "hardware": {}, "runtime": {},
           "training": {}, "collection": {}}
    doc.update(extra)
    return doc


def test_serialize_is_deterministic_and_sorted():
    a = writer.serialize({"b": 1, "a": {"d": 2, "c": [3]}})
    b = writer.serialize({"a": {"c": [3], "d": 2}, "b": 1})
    assert a == b and a.index(b'"a"') < a.index(b'"b"') and a.endswith(b"\n")


def test_non_finite_floats_become_marked_strings():
    out = json.loads(writer.serialize({"x": float("inf"), "y": float("-inf"), "z": float("nan"), "w": 1.5}))
    assert out == {"x": "<non-finite:inf>", "y": "<non-finite:-inf>", "z": "<non-finite:nan>", "w": 1.5}


def test_non_json_values_are_rendered_not_fatal():
    class Odd:
        def __str__(self):
            return "odd!"
    rec: list = []
    rec.append(rec)
    out = json.loads(writer.serialize({"p": Odd(), "t": (1, 2), "r": rec, 3: "int key"}))
    assert out == {"p": "odd!", "t": [1, 2], "r": ["<recursive>"], "3": "int key"}


def test_writes_manifest_named_after_run_id(tmp_path):
    res = writer.write(_doc(), directory=str(tmp_path), redactor=NO_REDACT)
    assert res.path == str(tmp_path / "manifest_20260101_000000_abcdef0.json") and res.warnings == []
    validate_manifest(json.loads(open(res.path).read()))
    assert [p.name for p in tmp_path.iterdir()] == ["manifest_20260101_000000_abcdef0.json"]


def test_clash_in_directory_takes_a_new_run_id(tmp_path):
    first = writer.write(_doc(), directory=str(tmp_path), redactor=NO_REDACT)
    second = writer.write(_doc(), directory=str(tmp_path), redactor=NO_REDACT)
    assert first.path != second.path and second.path
    assert json.loads(open(second.path).read())["run_id"] in second.path
    assert json.loads(open(first.path).read())["run_id"] == "20260101_000000_abcdef0"


def test_explicit_path_is_never_overwritten(tmp_path):
    target = tmp_path / "m.json"
    target.write_text("precious")
    res = writer.write(_doc(), path=str(target), redactor=NO_REDACT)
    assert res.path is None and "already exists" in res.warnings[0]
    assert target.read_text() == "precious"


@pytest.mark.parametrize("case", ["missing-dir", "read-only-dir", "path-is-dir"])
def test_unwritable_targets_warn_and_leave_nothing(tmp_path, case):
    if case == "missing-dir":
        kwargs = {"directory": str(tmp_path / "nope" / "deeper")}
        expect = "directory does not exist"
    elif case == "read-only-dir":
        ro = tmp_path / "ro"
        ro.mkdir()
        # chmod is not enough for root: a read-only bind mount is the real thing.
        if subprocess.run(["mount", "--bind", "-o", "ro", str(ro), str(ro)], capture_output=True).returncode:
            pytest.skip("cannot make a read-only mount here")
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True)
        kwargs = {"directory": str(ro)}
        expect = "read-only file system"
    else:
        (tmp_path / "m.json").mkdir()
        kwargs = {"path": str(tmp_path / "m.json")}
        expect = "is a directory"
    try:
        res = writer.write(_doc(), redactor=NO_REDACT, **kwargs)
        assert res.path is None and expect in res.warnings[0], res.warnings
        if case == "read-only-dir":
            assert os.listdir(kwargs["directory"]) == []
    finally:
        if case == "read-only-dir":
            subprocess.run(["umount", str(tmp_path / "ro")], capture_output=True)


def test_disk_full_leaves_no_partial_file(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(small)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        doc = _doc(config={"blob": "y" * 60000})
        res = writer.write(doc, directory=str(small), redactor=NO_REDACT)
        assert res.path is None and "no space left on device" in res.warnings[0]
        assert os.listdir(small) == []
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_file_size_limit_is_a_warning_not_a_crash(tmp_path):
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from relaxrepro.manifest import writer\n"
        "from relaxrepro.manifest.redact import Redactor\n"
        "doc = {'schema_version': '1.0', 'run_id': 'r1', 'generated_at': 'x', 'config': {'b': 'z' * 50000}}\n"
        "res = writer.write(doc, directory=sys.argv[1], redactor=Redactor())\n"
        "print(res.path, res.warnings)\n"
    )
    # -B: under a file-size limit CPython would write truncated .pyc files (it ignores short writes).
    out = subprocess.run([sys.executable, "-B", "-c", code, str(tmp_path)], capture_output=True, text=True,
                         env=clean_env(), timeout=30)
    assert out.returncode == 0, out.stderr
    assert "None" in out.stdout and "file too large (file-size limit)" in out.stdout
    assert os.listdir(tmp_path) == []


def test_size_cap_moves_patch_to_sidecar_first(tmp_path):
    patch_text = "diff --git a/x b/x\n" + "+line\n" * 30000
    doc = _doc(code={"relax": {"commit": "a" * 40, "patch": {"sha256": "f" * 64, "size": len(patch_text),
                                                              "files": ["x"], "text": patch_text}}})
    res = writer.write(doc, directory=str(tmp_path), redactor=NO_REDACT)
    data = open(res.path, "rb").read()
    assert len(data) <= CAP_BYTES
    written = json.loads(data)
    patch = written["code"]["relax"]["patch"]
    assert "text" not in patch and patch["sha256"] == "f" * 64 and patch["files"] == ["x"]
    assert (tmp_path / patch["sidecar"]).read_text() == patch_text
    assert written["collection"]["truncated"] == ["code.relax.patch.text moved to sidecar %s" % patch["sidecar"]]
    assert res.warnings == []  # a big patch always lives in its sidecar: nothing was cut for the cap
    validate_manifest(written)


def test_a_cut_for_the_cap_is_a_warning(tmp_path):
    res = writer.write(_doc(config={"selected_env": {"NCCL_DEBUG": "x" * 200000}}), directory=str(tmp_path),
                       redactor=NO_REDACT)
    assert res.path and res.warnings == [
        "manifest over 100000 bytes: config.selected_env.NCCL_DEBUG: kept the first 256 of 200000 bytes"]


def test_size_cap_then_shortens_long_maps_keeping_key_packages_and_a_sample():
    packages = {"pkg%04d" % i: "1.0.%d" % i for i in range(5000)}
    packages.update({"torch": "2.11.0+cu129", "nvidia-nccl-cu12": "2.23.4"})
    data, written, sidecars = writer.fit(_doc(environment={"packages": packages}))
    assert len(data) <= CAP_BYTES and not sidecars
    env = written["environment"]
    assert env["packages"] == dict({"torch": "2.11.0+cu129", "nvidia-nccl-cu12": "2.23.4"},
                                   **{"pkg%04d" % i: "1.0.%d" % i for i in range(32)})
    assert env["packages_truncated"] == {"count": 5002, "sha256": writer._digest(packages)}
    assert written["collection"]["truncated"] == [
        "environment.packages: kept 34 of 5002 entries (key ones and a sample; count and digest of all in "
        "packages_truncated)"]
    validate_manifest(written)


def _packages(n=103):
    return dict({"torch": "2.11.0", "numpy": "2.3.1"}, **{"lib%03d" % i: "1.%d" % i for i in range(n - 2)})


def test_one_huge_value_is_cut_alone_to_its_head():
    # One 120 KB NCCL_DEBUG once cost the whole package list (cut to 1 of 103) and left a 4 KB manifest.
    huge = "WARN " * 24000
    doc = _doc(environment={"packages": _packages()},
               config={"selected_env": {"NCCL_DEBUG": huge, "CUDA_VISIBLE_DEVICES": "0,1"}})
    data, written, _ = writer.fit(doc)
    assert len(data) <= CAP_BYTES
    assert written["environment"]["packages"] == _packages()
    value = written["config"]["selected_env"]["NCCL_DEBUG"]
    assert value == huge[:256] + "<cut 119744 of 120000 bytes, sha256:%s>" % hashlib.sha256(huge.encode()).hexdigest()
    assert written["config"]["selected_env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert written["collection"]["truncated"] == ["config.selected_env.NCCL_DEBUG: kept the first 256 of 120000 bytes"]
    validate_manifest(written)


def test_thousands_of_entries_give_way_before_the_few_that_matter():
    env = {"MYVAR_%05d" % i: "v" * 20 for i in range(10000)}
    env.update({"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "SLURM_JOB_ID": "42",
                "OMP_NUM_THREADS": "8"})
    data, written, _ = writer.fit(_doc(environment={"packages": _packages()}, config={"selected_env": env}))
    assert len(data) <= CAP_BYTES
    kept = written["config"]["selected_env"]
    # The key variables, then the smallest families of names first: SLURM_* and OMP_* before MYVAR_*.
    assert {k: kept[k] for k in ("CUDA_VISIBLE_DEVICES", "NCCL_ALGO", "NCCL_PROTO", "SLURM_JOB_ID",
                                 "OMP_NUM_THREADS")} == {k: env[k] for k in ("CUDA_VISIBLE_DEVICES", "NCCL_ALGO",
                                                                             "NCCL_PROTO", "SLURM_JOB_ID",
                                                                             "OMP_NUM_THREADS")}
    assert len(kept) == 3 + 32 and sorted(k for k in kept if k.startswith("MYVAR_")) == [
        "MYVAR_%05d" % i for i in range(30)]
    assert written["config"]["selected_env_truncated"]["count"] == 10005
    assert written["environment"]["packages"] == _packages()
    assert written["collection"]["truncated"] == [
        "config.selected_env: kept 35 of 10005 entries (key ones and a sample; count and digest of all in "
        "selected_env_truncated)"]
    validate_manifest(written)


def test_the_largest_offender_goes_first_and_only_as_many_as_needed():
    doc = _doc(environment={"packages": _packages()},
               hardware={"gpus": [{"index": i, "model": "NVIDIA H100 80GB HBM3"} for i in range(5000)],
                         "gpu_count": 5000, "gpu_model": "NVIDIA H100 80GB HBM3"},
               config={"selected_env": {"NCCL_DEBUG": "x" * 30000}})
    data, written, _ = writer.fit(doc)
    assert len(data) <= CAP_BYTES
    # The 5,000-GPU list alone brings the document under the cap: the 30 KB string stays whole.
    assert written["config"]["selected_env"]["NCCL_DEBUG"] == "x" * 30000
    assert [g["index"] for g in written["hardware"]["gpus"]] == list(range(16))
    assert written["hardware"]["gpu_count"] == 5000 and written["hardware"]["gpus_truncated"]["count"] == 5000
    assert written["environment"]["packages"] == _packages()
    assert written["collection"]["truncated"] == [
        "hardware.gpus: kept the first 16 of 5000 items (count and digest of all in gpus_truncated)"]


def test_config_file_contents_go_whole_and_only_as_many_as_needed_their_digests_stay():
    names = ["conf/c%02d.yaml" % i for i in range(16)]
    contents = {n: ("# %s\n" % n + "lr: 0.1\n" * 1000)[:8000] for n in names}  # 16 x 8 KB, the inline limit
    files = {n: "sha256:" + hashlib.sha256(contents[n].encode()).hexdigest() for n in names}
    doc = _doc(config={"files": files, "file_details": {n: {"size": 8000} for n in names},
                       "file_contents": contents})
    data, written, _ = writer.fit(doc)
    assert len(data) <= CAP_BYTES
    config = written["config"]
    assert config["files"] == files and config["file_details"] == doc["config"]["file_details"]
    kept = config["file_contents"]
    assert 0 < len(kept) < 16 and all(kept[n] == contents[n] for n in kept)  # never cut to a head
    dropped = sorted(set(names) - set(kept))
    assert written["collection"]["truncated"] == [
        "config.file_contents.%s dropped (8000 characters)" % n for n in dropped]
    validate_manifest(written)


def test_earlier_notes_are_kept_when_more_is_cut():
    doc = _doc(collection={"truncated": ["runtime.nodes: kept 32 of 40 nodes"]},
               config={"selected_env": {"NCCL_DEBUG": "x" * 200000}})
    _data, written, _ = writer.fit(doc)
    assert written["collection"]["truncated"] == [
        "runtime.nodes: kept 32 of 40 nodes", "config.selected_env.NCCL_DEBUG: kept the first 256 of 200000 bytes"]


def test_size_cap_last_resort_still_valid():
    # 64,000 small leaves three maps deep: sampling each map still leaves too much, so every section goes
    nested = {"k%d" % i: {"j%d" % j: {"l%d" % k: "x" * 20 for k in range(40)} for j in range(40)} for i in range(40)}
    doc = _doc(hardware=nested, command={"argv": ["python", "train.py"], "cwd": "/work/proj"})
    data, written, _ = writer.fit(doc)
    assert written["collection"]["truncated"][-1] == "every section dropped: the document stayed over 100000 bytes"
    assert len(data) <= CAP_BYTES
    validate_manifest(json.loads(data))
    # what identifies the run stays, and the command Relax's reader requires (argv dropped, cwd kept)
    assert written["command"] == {"argv": [], "cwd": "/work/proj", "working_directory": "/work/proj"}


def test_sigkill_at_random_points_never_leaves_a_partial_file(tmp_path):
    # A writer killed at any instant: the final name holds a complete manifest or nothing.
    code = (
        "import sys\n"
        "from relaxrepro.manifest import writer\n"
        "from relaxrepro.manifest.redact import Redactor\n"
        "doc = {'schema_version': '1.0', 'run_id': 'r', 'generated_at': 'x', 'config': {'b': 'z' * 90000}}\n"
        "r = Redactor()\n"
        "while True:\n"
        "    doc['run_id'] = None\n"
        "    from relaxrepro.manifest.model import new_run_id\n"
        "    doc['run_id'] = new_run_id()\n"
        "    writer.write(doc, directory=sys.argv[1], redactor=r)\n"
    )
    for i in range(12):
        p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], env=clean_env())
        time.sleep(0.25 + (i % 4) * 0.07)
        p.send_signal(signal.SIGKILL)
        p.wait()
    finals = [f for f in os.listdir(tmp_path) if f.startswith("manifest_")]
    assert finals
    for name in finals:
        assert json.loads((tmp_path / name).read_text())["config"]["b"] == "z" * 90000


def test_64_concurrent_generates_give_64_distinct_valid_files(tmp_path, repo):
    env = clean_env()
    (tmp_path / "out").mkdir()
    procs = [subprocess.Popen([sys.executable, "-m", "relaxrepro", "generate", "--output-dir", str(tmp_path / "out")],
                              cwd=str(repo), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(64)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs if o[1]][:2]
    files = sorted(os.listdir(tmp_path / "out"))
    assert len(files) == 64 and len(set(files)) == 64
    for f in files[:8]:
        validate_manifest(json.loads((tmp_path / "out" / f).read_text()))


