"""CUDA runtime, cuDNN and NCCL versions: real wheels' libraries, compiled stand-ins, a crashing library,
nvcc and ldconfig through fake executables, NGC variables, torch's build tag, and the consistency deriver."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from relaxrepro.collect.probes import cuda
from tests.helpers.common import FIXTURES, clean_env, fake_tool, generate
from tests.helpers.env import add_dist, build_so, cuda_python, cuda_site, interp, link, make_ctx

NVCC = sorted((FIXTURES / "cuda" / "nvcc").glob("*.txt"))
NVCC_12_5 = FIXTURES / "cuda" / "nvcc" / "feuyeux-hello-ai__cuda-12.5.txt"


@pytest.mark.parametrize("value,expect", [(12090, "12.9"), (11080, "11.8"), (13000, "13.0"), (10010, "10.1"),
                                          (0, None)])
def test_decode_cuda(value, expect):
    assert cuda.decode_cuda(value) == expect


@pytest.mark.parametrize("value,expect", [(22304, "2.23.4"), (23203, "2.32.3"), (21805, "2.18.5"),
                                          (2708, "2.7.8"), (2408, "2.4.8"), (-1, None)])
def test_decode_nccl_both_encodings(value, expect):
    assert cuda.decode_nccl(value) == expect


@pytest.mark.parametrize("value,expect", [(90100, "9.1.0"), (91002, "9.10.2"), (8902, "8.9.2"), (7605, "7.6.5")])
def test_decode_cudnn_both_encodings(value, expect):
    assert cuda.decode_cudnn(value) == expect


@pytest.mark.parametrize("version,expect", [("2.3.0+cu121", "12.1"), ("1.13.1+cu117", "11.7"), ("1.4.0+cu92", "9.2"),
                                            ("2.9.0+cu130", "13.0"), ("2.3.0+rocm6.0", None), ("2.3.0", None),
                                            ("2.3.0+cpu", None)])
def test_torch_cuda_tag(version, expect):
    assert cuda.torch_cuda_tag(version) == expect


def test_nvcc_fixtures_found():
    assert len(NVCC) == 7


@pytest.mark.parametrize("path", NVCC, ids=[p.stem for p in NVCC])
def test_parse_nvcc_real_outputs(path):
    got = cuda.parse_nvcc(path.read_text())
    release = path.stem.split("__cuda-")[1].replace("_no_build_line", "")
    assert got["version"] == ".".join(release.split(".")[:2])
    assert got["full"].startswith(got["version"] + ".")
    if release.count(".") == 2:
        assert got["full"] == release


def test_parse_ldconfig_real_outputs():
    ldconfig = FIXTURES / "cuda" / "ldconfig"
    nccl = cuda.parse_ldconfig((ldconfig / "nccl-issue1991__ldconfig_p_grep_nccl.txt").read_text())
    assert nccl == {"libnccl.so.2": ["/lib/x86_64-linux-gnu/libnccl.so.2"]}
    deb = cuda.parse_ldconfig((ldconfig / "debian12-cuda13__ldconfig_p_grep.txt").read_text())
    assert deb["libcudart.so.13"] == ["/usr/local/cuda-13.0/lib/libcudart.so.13"]
    assert cuda.parse_ldconfig("garbage\n\n1234 libs found in cache\n") == {}


# -- real libraries -----------------------------------------------------------------------------------

def test_real_wheels_answer_through_ctypes_in_a_child(tmp_path):
    site = cuda_site()
    ctx = make_ctx(tmp_path, interpreter=interp([str(site)]))
    out = cuda.collect(ctx)
    hw = out.data["hardware"]
    assert out.status == "ok", out.warnings
    assert (hw["cuda_version"], hw["nccl_version"]) == ("12.9", "2.32.3")
    assert hw["cuda"]["raw"] == {"cudart": 12090, "nccl": 23203}
    assert hw["cuda"]["libraries"]["nccl"] == str(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    assert hw["cuda"]["sources"]["cuda_version"] == "libcudart (cudaRuntimeGetVersion)"
    assert "cudnn_version" not in hw


def test_stand_in_cudnn_libraries(tmp_path):
    site = tmp_path / "site"
    build_so("cudnn9", site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")
    build_so("cudnn8", tmp_path / "ld" / "libcudnn.so.8")
    build_so("nccl_old", tmp_path / "ld" / "libnccl.so.2")
    ctx = make_ctx(tmp_path, interpreter=interp([str(site)]), env={"LD_LIBRARY_PATH": str(tmp_path / "ld")})
    hw = cuda.collect(ctx).data["hardware"]
    assert (hw["cudnn_version"], hw["nccl_version"]) == ("9.1.0", "2.7.8")  # site dirs before LD_LIBRARY_PATH
    assert hw["cuda"]["raw"]["cudnn"] == 90100


def test_search_reads_each_directory_once_and_finds_what_glob_would(tmp_path, monkeypatch):
    ld = tmp_path / "ld"
    ld.mkdir()
    for name in ("libcudart.so.12", "libcudart-d0da41ae.so.11.0", "libcudart_static.a", "libcudnn_ops.so.9",
                 "libnccl.so.2", "libnccl-net.so", "notlibnccl.so.2"):
        (ld / name).write_bytes(b"\0")
    listed = []
    real = cuda.os.listdir
    monkeypatch.setattr(cuda.os, "listdir", lambda d: listed.append(d) or real(d))
    ctx = make_ctx(tmp_path, interpreter=interp([]), env={"LD_LIBRARY_PATH": str(ld)}, root=str(tmp_path / "r"))
    listings: dict = {}
    found = cuda.search(ctx, interp([]), None, listings)
    cuda.search(ctx, interp([]), {}, listings)
    assert found["cudart"] == [str(ld / "libcudart.so.12"), str(ld / "libcudart-d0da41ae.so.11.0")]
    assert found["nccl"] == [str(ld / "libnccl.so.2"), str(ld / "libnccl-net.so")] and found["cudnn"] == []
    assert len(listed) == len(set(listed)) and str(ld) in listed


def test_a_library_returning_an_error_falls_through_to_the_next(tmp_path):
    build_so("nccl_err", tmp_path / "first" / "libnccl.so.2")
    build_so("nccl_old", tmp_path / "second" / "libnccl.so.2")
    ctx = make_ctx(tmp_path, interpreter=interp([]),
                   env={"LD_LIBRARY_PATH": "%s:%s" % (tmp_path / "first", tmp_path / "second")})
    out = cuda.collect(ctx)
    assert out.data["hardware"]["nccl_version"] == "2.7.8"
    assert any("ncclGetVersion returned error 5" in w for w in out.warnings)


def test_a_library_that_aborts_on_load_kills_only_the_child(tmp_path):
    site = tmp_path / "site"
    real = cuda_site() / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12"
    link(real, site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12")
    crash = build_so("crash", site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")
    build_so("nccl_old", site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    out = cuda.collect(make_ctx(tmp_path, interpreter=interp([str(site)])))
    assert out.status == "partial"
    assert out.data["hardware"]["cuda_version"] == "12.9"  # answered before the crash
    assert "nccl_version" not in out.data["hardware"]  # asked after it: lost with the child
    assert any("loading %s died with signal 6 (SIGABRT)" % crash in w for w in out.warnings), out.warnings


def test_only_a_crashing_library_is_failed(tmp_path):
    crash = build_so("crash", tmp_path / "ld" / "libcudart.so.12")
    out = cuda.collect(make_ctx(tmp_path, interpreter=interp([]), env={"LD_LIBRARY_PATH": str(tmp_path / "ld")},
                                root=str(tmp_path / "root")))
    assert out.status == "failed" and out.data == {}
    assert any(str(crash) in w and "SIGABRT" in w for w in out.warnings)


def test_a_library_that_hangs_on_load_is_abandoned_within_the_budget(tmp_path):
    build_so("hang", tmp_path / "ld" / "libnccl.so.2")
    ctx = make_ctx(tmp_path, interpreter=interp([]), env={"LD_LIBRARY_PATH": str(tmp_path / "ld")},
                   probe_budget_s=1.0, root=str(tmp_path / "root"))
    ctx.begin_probe()
    out = cuda.collect(ctx)
    assert out.status == "failed"
    assert any("libnccl.so.2 timed out" in w for w in out.warnings), out.warnings


def test_generate_survives_a_crashing_library(tmp_path):
    build_so("crash", tmp_path / "ld" / "libcudart.so.12")
    doc = generate(tmp_path, "--python", cuda_python(), env=clean_env(LD_LIBRARY_PATH=str(tmp_path / "ld")))
    # the wheel's own libcudart comes first; NCCL too: the crashing one is never needed
    assert doc["hardware"]["cuda_version"] == "12.9" and doc["hardware"]["nccl_version"] == "2.32.3"
    doc = generate(tmp_path, env=clean_env(LD_LIBRARY_PATH=str(tmp_path / "ld")))
    assert doc["collection"]["probes"]["cuda"]["status"] in ("failed", "partial")
    assert "SIGABRT" in " ".join(doc["collection"]["probes"]["cuda"]["warnings"])
    assert doc["environment"]["packages_count"] > 0  # the other probes carried on


# -- tools, environment, torch tag ------------------------------------------------------------------------

@pytest.mark.parametrize("body,expect", [
    ("exit 1\n", "nvcc --version: "),
    ("", "nvcc --version printed no release line"),
    ("echo 'Segmentation fault'\n", "nvcc --version printed no release line"),
    ("exec %s 30\n" % shutil.which("sleep"), "timed out"),
], ids=["non-zero", "empty", "garbage", "hanging"])
def test_nvcc_failures_are_warnings(tmp_path, body, expect):
    fake_tool(tmp_path / "bin", "nvcc", body)
    ctx = make_ctx(tmp_path, interpreter=interp([]), root=str(tmp_path / "root"))
    out = cuda.collect(ctx)
    assert any(expect in w for w in out.warnings), out.warnings
    assert "nvcc" not in out.data.get("hardware", {}).get("cuda", {})


def test_nvcc_from_cuda_home_and_missing_everything(tmp_path):
    root = tmp_path / "root"
    nvcc = (FIXTURES / "cuda" / "nvcc" / "feuyeux-hello-ai__cuda-12.5.txt")
    fake_tool(root / "opt" / "cuda" / "bin", "nvcc", "exec %s '%s'\n" % (shutil.which("cat"), nvcc))
    ctx = make_ctx(tmp_path, interpreter=interp([]), root=str(root), env={"CUDA_HOME": "/opt/cuda"})
    hw = cuda.collect(ctx).data["hardware"]
    assert hw["cuda_version"] == "12.5" and hw["cuda"]["nvcc_full"] == "12.5.82"
    assert hw["cuda"]["sources"]["cuda_version"] == "nvcc --version"
    out = cuda.collect(make_ctx(tmp_path / "x", interpreter=interp([]), root=str(tmp_path / "empty")))
    assert out.status == "absent" and out.data == {}


@pytest.mark.parametrize("body", ["exit 1\n", "", "echo garbage\n", "exec %s 30\n" % shutil.which("sleep")],
                         ids=["non-zero", "empty", "garbage", "hanging"])
def test_ldconfig_failures_leave_the_other_sources(tmp_path, body):
    fake_tool(tmp_path / "bin", "ldconfig", body)
    ctx = make_ctx(tmp_path, interpreter=interp([]), root=str(tmp_path / "root"),
                   env={"NCCL_VERSION": "2.21.5-1"}, probe_budget_s=2.0)
    ctx.begin_probe()
    out = cuda.collect(ctx)
    assert out.data["hardware"]["nccl_version"] == "2.21.5"
    if "exit" in body or "sleep" in body:
        assert any(w.startswith("ldconfig -p: ") for w in out.warnings)


def test_ldconfig_cache_finds_a_library(tmp_path):
    root = tmp_path / "root"
    build_so("nccl_old", root / "lib" / "x86_64-linux-gnu" / "libnccl.so.2")
    fixture = FIXTURES / "cuda" / "ldconfig" / "nccl-issue1991__ldconfig_p_grep_nccl.txt"
    fake_tool(tmp_path / "bin", "ldconfig", "exec %s '%s'\n" % (shutil.which("cat"), fixture))
    hw = cuda.collect(make_ctx(tmp_path, interpreter=interp([]), root=str(root))).data["hardware"]
    assert hw["nccl_version"] == "2.7.8"
    assert hw["cuda"]["libraries"]["nccl"] == str(root / "lib" / "x86_64-linux-gnu" / "libnccl.so.2")


def test_ngc_environment_and_torch_tag(tmp_path):
    site = tmp_path / "site"
    add_dist(site, "torch", "2.4.0+cu124")
    env = {"CUDA_VERSION": "12.4.1", "NCCL_VERSION": "2.21.5-1", "CUDNN_VERSION": "9.1.0.70-1",
           "NVIDIA_PYTORCH_VERSION": "24.05"}
    ctx = make_ctx(tmp_path, interpreter=interp([str(site)]), root=str(tmp_path / "root"), env=env)
    hw = cuda.collect(ctx).data["hardware"]
    assert (hw["cuda_version"], hw["nccl_version"], hw["cudnn_version"]) == ("12.4", "2.21.5", "9.1.0.70")
    assert hw["cuda"]["ngc"] == env
    assert hw["cuda"]["sources"] == {"cuda_version": "torch build tag (+cu)",
                                     "nccl_version": "NCCL_VERSION (image environment)",
                                     "cudnn_version": "CUDNN_VERSION (image environment)"}


# -- deriver --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("hardware,expect", [
    ({"cuda_driver_version": "12.4", "cuda": {"runtime": "12.9"}},
     ["CUDA runtime library 12.9 is newer than the driver supports (12.4): minor-version compatibility only"]),
    ({"cuda_driver_version": "11.8", "cuda": {"torch_cuda": "12.1"}},
     ["CUDA torch build 12.1 is newer than the driver supports (11.8): will not run"]),
    ({"cuda": {"runtime": "12.9", "torch_cuda": "12.1", "nvcc": "12.1"}},
     ["CUDA runtime library 12.9 differs from torch build 12.1"]),
    ({"cuda": {"runtime": "12.4", "ngc": {"CUDA_VERSION": "12.4.1"}}, "cuda_driver_version": "12.8"}, []),
], ids=["runtime-newer-than-driver", "torch-needs-newer-major", "runtime-vs-torch", "all-agree"])
def test_disagreements(hardware, expect):
    assert cuda.disagreements(hardware) == expect


def test_deriver_writes_into_the_document(tmp_path):
    doc = {"hardware": {"cuda_driver_version": "12.2", "cuda": {"runtime": "12.9"}}}
    out = cuda.derive(doc, make_ctx(tmp_path))
    assert out.data["hardware"]["cuda"]["disagreements"][0].startswith("CUDA runtime library 12.9 is newer")
    assert cuda.derive({"hardware": {}}, make_ctx(tmp_path)) is None


def test_generate_records_sources_and_disagreements(tmp_path):
    env = clean_env(CUDA_VERSION="12.4.1", NCCL_VERSION="2.21.5-1")
    doc = generate(tmp_path, "--python", cuda_python(), env=env)
    hw = doc["hardware"]
    assert (hw["cuda_version"], hw["nccl_version"]) == ("12.9", "2.32.3")  # the libraries beat the image's claims
    assert hw["cuda"]["sources"]["nccl_version"] == "libnccl (ncclGetVersion)"
    assert "CUDA runtime library 12.9 differs from image CUDA_VERSION 12.4" in hw["cuda"]["disagreements"]
    assert doc["collection"]["probes"]["cuda-consistency"]["status"] == "ok"


# -- the cache of known library files ------------------------------------------------------------------------

def _facts(tmp_path) -> dict:
    path = tmp_path / ".cache" / "relaxrepro" / "facts-v1.json"  # make_ctx sets HOME=tmp_path
    return json.loads(path.read_text()) if path.exists() else {}


def _set_fact(tmp_path, prefix: str, value) -> None:
    path = tmp_path / ".cache" / "relaxrepro" / "facts-v1.json"
    data = json.loads(path.read_text())
    keys = [k for k in data if k.startswith(prefix)]
    assert len(keys) == 1, data
    data[keys[0]] = value
    path.write_text(json.dumps(data))


def test_a_known_library_file_is_answered_from_the_cache_until_it_changes(tmp_path):
    lib = build_so("nccl_old", tmp_path / "ld" / "libnccl.so.2")
    ctx = lambda: make_ctx(tmp_path, interpreter=interp([]), env={"LD_LIBRARY_PATH": str(tmp_path / "ld")},  # noqa: E731
                           root=str(tmp_path / "root"))
    assert cuda.collect(ctx()).data["hardware"]["nccl_version"] == "2.7.8"
    assert [v for k, v in _facts(tmp_path).items() if k.startswith("libversion|")] == [2708]
    # The cached answer is what the next run reports (proved by planting another one for the same file)...
    _set_fact(tmp_path, "libversion|%s|" % lib, 22105)
    assert cuda.collect(ctx()).data["hardware"]["nccl_version"] == "2.21.5"
    # ...until the file changes: a rebuilt library is asked again.
    lib.unlink()
    build_so("nccl_old", lib)
    assert cuda.collect(ctx()).data["hardware"]["nccl_version"] == "2.7.8"


def test_failures_are_not_remembered_and_an_earlier_candidate_is_still_asked_first(tmp_path):
    build_so("nccl_err", tmp_path / "first" / "libnccl.so.2")
    second = build_so("nccl_old", tmp_path / "second" / "libnccl.so.2")
    env = {"LD_LIBRARY_PATH": "%s:%s" % (tmp_path / "first", tmp_path / "second")}
    for _ in range(2):
        out = cuda.collect(make_ctx(tmp_path, interpreter=interp([]), env=env, root=str(tmp_path / "root")))
        assert out.data["hardware"]["nccl_version"] == "2.7.8"
        assert any("ncclGetVersion returned error 5" in w for w in out.warnings)  # asked every time
        assert [k.split("|")[1] for k in _facts(tmp_path) if k.startswith("libversion|")] == [str(second)]


@pytest.mark.parametrize("setting", ["no-cache", "untrusted-dir", "corrupt", "not-a-directory"])
def test_a_cache_that_is_off_or_unusable_only_costs_time(tmp_path, setting):
    lib = build_so("nccl_old", tmp_path / "ld" / "libnccl.so.2")
    cache = tmp_path / "c"
    env = {"LD_LIBRARY_PATH": str(tmp_path / "ld"), "RELAXREPRO_CACHE_DIR": str(cache)}
    if setting == "no-cache":
        env["RELAXREPRO_NO_CACHE"] = "1"
    elif setting == "untrusted-dir":
        cache.mkdir(mode=0o755)
        cache.chmod(0o777)
        key = "libversion|%s" % __import__("relaxrepro.std.cache").std.cache.file_key(str(lib))
        (cache / "facts-v1.json").write_text(json.dumps({key: 22105}))
    elif setting == "corrupt":
        cache.mkdir(mode=0o700)
        (cache / "facts-v1.json").write_text("{not json")
    else:
        cache.write_text("a file where the directory should be")
    out = cuda.collect(make_ctx(tmp_path, interpreter=interp([]), env=env, root=str(tmp_path / "root")))
    assert out.status == "ok" and out.warnings == []
    assert out.data["hardware"]["nccl_version"] == "2.7.8"  # never the planted 2.21.5
    written = cache / "facts-v1.json"
    if setting == "corrupt":
        assert 2708 in json.loads(written.read_text()).values()  # replaced by a good one
    elif setting != "not-a-directory":
        assert written.exists() == (setting == "untrusted-dir")  # the planted file, left alone
        if setting == "untrusted-dir":
            assert list(json.loads(written.read_text()).values()) == [22105]


def test_nvcc_output_is_remembered_only_for_a_real_binary(tmp_path):
    text = NVCC_12_5.read_text()
    src = tmp_path / "nvcc.c"
    src.write_text("#include <stdio.h>\nint main(void) { fputs(%s, stdout); return 0; }\n" % json.dumps(text))
    (tmp_path / "bin").mkdir()
    try:
        subprocess.run(["gcc", "-o", str(tmp_path / "bin" / "nvcc"), str(src)], check=True, capture_output=True)
    except FileNotFoundError:
        pytest.skip("gcc not available to build a stand-in nvcc")
    ctx = lambda: make_ctx(tmp_path, interpreter=interp([]), root=str(tmp_path / "root"))  # noqa: E731
    assert cuda.collect(ctx()).data["hardware"]["cuda"]["nvcc_full"] == "12.5.82"
    _set_fact(tmp_path, "tool-output|nvcc --version|", text.replace("12.5.82", "12.5.99"))
    assert cuda.collect(ctx()).data["hardware"]["cuda"]["nvcc_full"] == "12.5.99"
    # A wrapper script's answer may depend on the environment: asked every time, never stored.
    fake_tool(tmp_path / "bin2", "nvcc", "exec %s '%s'\n" % (shutil.which("cat"), NVCC_12_5))
    before = _facts(tmp_path)
    out = cuda.collect(make_ctx(tmp_path, interpreter=interp([]), root=str(tmp_path / "root"),
                                env={"PATH": str(tmp_path / "bin2")}))
    assert out.data["hardware"]["cuda"]["nvcc_full"] == "12.5.82"
    assert _facts(tmp_path) == before


def test_ldconfig_output_is_remembered_with_the_ld_so_cache_it_printed(tmp_path):
    root = tmp_path / "root"
    build_so("nccl_old", root / "opt" / "nccl" / "lib" / "libnccl.so.2")  # only ldconfig knows this place
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "ld.so.cache").write_bytes(b"glibc-ld.so.cache1.1 one")
    fake_tool(tmp_path / "bin", "ldconfig",
              "echo '1 libs found in cache'; echo '\tlibnccl.so.2 (libc6,x86-64) => /opt/nccl/lib/libnccl.so.2'\n")
    ctx = lambda: make_ctx(tmp_path, interpreter=interp([]), root=str(root))  # noqa: E731
    assert cuda.collect(ctx()).data["hardware"]["nccl_version"] == "2.7.8"
    _set_fact(tmp_path, "tool-output|ldconfig -p|", {})
    assert "nccl_version" not in cuda.collect(ctx()).data.get("hardware", {})  # the remembered listing was used
    (root / "etc" / "ld.so.cache").write_bytes(b"glibc-ld.so.cache1.1 two, after an ldconfig run")
    assert cuda.collect(ctx()).data["hardware"]["nccl_version"] == "2.7.8"
