"""A hostile manifest through every command: what reaches the terminal holds no raw control.

Every field a person reads (run ids, repo names, branches, hostnames, argv, env values, notes, file
names, a tool's stderr) carries a screen clear, an OSC title, an 8-bit CSI, a carriage return, a
newline and a right-to-left override. The output bytes must hold none of them raw, and a table keeps
one row per run. ``--json`` output is JSON-escaped and gives back the very values.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.helpers.common import clean_env, fake_tool, make_repo, run_cli
from tests.helpers.read import SHA_A, head, write_json
from tests.helpers.recording import make_doc, put

EVIL = "x\x1b[2J\x1b]0;pwned\x07\x9b31m\rFAKE\nFAKE\u202eZ"
"""No ``/``: it is also a file name."""

# Raw in the output: any C0 control but the line feed (tab too: a table pads with spaces), DEL, C1,
# and the bidi and line-separator characters. Spelled out here, not taken from the code under test.
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(data: bytes) -> str:
    """``data`` as text, asserting that it holds no raw control (it says where one is)."""
    text = data.decode("utf-8")
    m = _RAW.search(text)
    assert m is None, "raw %r in %r" % (m.group(0), text[max(0, m.start() - 60):m.end() + 60])
    return text


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    res = run_cli(*args, text=False, **kwargs)
    res.out, res.err = clean(res.stdout), clean(res.stderr)
    return res


def _runs(tmp_path: Path) -> Path:
    """Two runs of one group, B the child of A, A's parent gone; and one unreadable file, all hostile."""
    runs = tmp_path / "runs"
    common = dict(
        code={"repo" + EVIL: {"commit": SHA_A, "dirty": True, "branch": EVIL, "path": "/w/" + EVIL}},
        hardware={"gpu_count": 8, "gpu_model": "NVIDIA " + EVIL},
        training={"algorithm": EVIL},
        environment={"system": {"hostname": EVIL}, "packages": {"torch": EVIL}},
        outcome={"status": "signal", "signal_name": EVIL, "exit_code": 137},
    )
    a = make_doc("A" + EVIL, generated_at="2026-01-01T10:00:00Z",
                 command={"argv": ["python", "train.py", EVIL], "cwd": "/w/" + EVIL, "source": "cli"},
                 config={"resolved_args": {"lr": "1", "k" + EVIL: EVIL}, "selected_env": {"NCCL_X": EVIL}},
                 lineage={"group": "g" + EVIL, "note": EVIL, "parent": {"run_id": "gone" + EVIL, "reason": EVIL}},
                 **common)
    b = make_doc("B" + EVIL, generated_at="2026-01-02T10:00:00Z",
                 config={"resolved_args": {"lr": "2", "k" + EVIL: EVIL + "2"}, "selected_env": {"NCCL_X": "y"}},
                 lineage={"group": "g" + EVIL, "note": EVIL, "parent": {"run_id": "A" + EVIL, "reason": EVIL}},
                 **common)
    put(runs, a, name="manifest_a%s.json" % EVIL)
    put(runs, b, name="manifest_b%s.json" % EVIL)
    (runs / ("manifest_bad%s.json" % EVIL)).write_text("{")
    return runs


def test_ls_one_row_per_run_and_nothing_raw(tmp_path):
    runs = _runs(tmp_path)
    res = run("ls", str(runs), cwd=tmp_path)
    assert res.returncode == 0
    lines = res.out.splitlines()
    assert len(lines) == 4, res.out  # the header, A, B, the unreadable file
    assert lines[1].startswith("A%s  2026-01-01 10:00  repo%s@aaaaaaa*  %s  8x%s  g%s  gone%s  %s (137)  runs/"
                               % ((SHOWN,) * 7))
    assert lines[2].startswith("B" + SHOWN) and lines[2].endswith("runs/manifest_b%s.json" % SHOWN)
    assert lines[3].startswith("unreadable  runs/manifest_bad%s.json: " % SHOWN)
    assert res.err == "relaxrepro ls: 1 of 3 manifests unreadable\n"
    rows = json.loads(run("ls", str(runs), "--json").out)
    assert sorted(r.get("run_id", "") for r in rows) == ["", "A" + EVIL, "B" + EVIL]


def test_lineage_lines_and_warning_hold_nothing_raw(tmp_path):
    runs = _runs(tmp_path)
    res = run("lineage", "B" + EVIL, str(runs), cwd=tmp_path)
    assert res.returncode == 0, res.err
    lines = res.out.splitlines()
    # the missing parent, then per run the step from its parent and the run itself
    assert lines[:3] == ["gone%s  (missing: recorded as parent, no manifest found)" % SHOWN,
                         "  | %s: parent missing, nothing to compare" % SHOWN,
                         "A%s  2026-01-01 10:00  runs/manifest_a%s.json" % (SHOWN, SHOWN)]
    assert lines[3].startswith("  | %s: args: k%s %s -> %s2, lr 1 -> 2" % ((SHOWN,) * 4))
    assert lines[4:] == ["B%s  2026-01-02 10:00  runs/manifest_b%s.json" % (SHOWN, SHOWN)]
    assert res.err.splitlines() == [
        "relaxrepro lineage: warning: unreadable: %s/manifest_bad%s.json: not JSON: Expecting property name "
        "enclosed in double quotes at line 1 column 2" % (runs, SHOWN),
        "relaxrepro lineage: warning: parent gone%s not found under %s; the chain stops there" % (SHOWN, runs)]
    result = json.loads(run("lineage", "B" + EVIL, str(runs), "--json").out)
    assert [c["run_id"] for c in result["chain"]] == ["gone" + EVIL, "A" + EVIL, "B" + EVIL]


def test_compare_table_keeps_one_row_per_key(tmp_path):
    runs = _runs(tmp_path)
    res = run("compare", "--group", "g" + EVIL, str(runs), cwd=tmp_path)
    assert res.returncode == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].startswith("group g%s: 2 runs, 3 of " % SHOWN)
    assert lines[1:3] == ["  [1] A%s  runs/manifest_a%s.json  (%s)" % ((SHOWN,) * 3),
                          "  [2] B%s  runs/manifest_b%s.json  (%s)" % ((SHOWN,) * 3)]
    assert lines[3] == "" and lines[4].split() == ["KEY", "[1]", "[2]"]
    assert [line.split()[0] for line in lines[5:]] == ["arg.k" + SHOWN, "arg.lr", "env.NCCL_X"]
    result = json.loads(run("compare", "--group", "g" + EVIL, str(runs), "--json").out)
    assert result["varying"]["env.NCCL_X"] == [EVIL, "y"]


def test_check_and_diff_say_nothing_raw(tmp_path):
    runs = _runs(tmp_path)
    a, b = sorted(runs.glob("manifest_[ab]x*.json"))
    assert run("check", str(a), cwd=tmp_path).returncode in (0, 1)
    assert run("diff", str(a), str(b), cwd=tmp_path).returncode == 1


def test_show_summary_section_and_json_hold_nothing_raw(tmp_path):
    runs = _runs(tmp_path)
    a = next(runs.glob("manifest_ax*.json"))
    res = run("show", str(a), cwd=tmp_path)
    assert res.returncode == 0, res.err
    lines = res.out.splitlines()
    assert "  group            g%s" % SHOWN in lines and "  note             %s" % SHOWN in lines
    assert not any(line.startswith("FAKE") for line in lines)
    for section in ("code", "lineage", "environment.system"):
        res = run("show", str(a), "--section", section, cwd=tmp_path)
        assert res.returncode == 0 and all(line.startswith(section + ".") for line in res.out.splitlines())
    assert json.loads(run("show", str(a), "--json").out)["lineage"]["note"] == EVIL
    res = run("show", str(a), "--section", "nope" + EVIL)
    assert res.returncode == 2 and res.err.count("\n") == 1


def test_rerun_dry_run_script_holds_nothing_raw_and_parses(tmp_path):
    runs = _runs(tmp_path)
    a = next(runs.glob("manifest_ax*.json"))
    res = run("rerun", str(a), "--dry-run")
    assert res.returncode == 0, res.err
    assert res.out.startswith("#!/usr/bin/env bash\n")
    script = tmp_path / "replay.sh"
    script.write_text(res.out)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_rerun_refusal_lists_redacted_values_escaped(tmp_path):
    m = write_json(tmp_path / "m.json", make_doc("r1", command={"argv": ["python", "t.py", "<redacted>" + EVIL],
                                                              "source": "cli"}))
    res = run("rerun", str(m), "--confirm")
    assert res.returncode == 2
    lines = res.err.splitlines()
    assert lines[0].startswith("relaxrepro rerun: refused: the command or its env hold redacted values")
    assert lines[1:] == ["  argv[2]: <redacted>" + SHOWN]


def test_restore_error_names_a_hostile_path_on_one_line(tmp_path):
    m = write_json(tmp_path / "m.json", make_doc("r1", code={"proj": {"commit": SHA_A, "path": "/nowhere/" + EVIL}}))
    res = run("restore", str(m), "--into", str(tmp_path / "out"))
    assert res.returncode == 1 and res.out == ""
    assert res.err == "relaxrepro restore: repo proj: no local repository at /nowhere/%s; give --from proj=PATH\n" \
        % SHOWN
    assert not (tmp_path / "out").exists()


def test_restore_prints_the_restored_path_escaped(tmp_path):
    repo = make_repo(tmp_path / "src")
    m = write_json(tmp_path / "m.json", make_doc("r1", code={"proj": {"commit": head(repo), "path": str(repo)}}))
    into = tmp_path / ("into" + EVIL)
    res = run("restore", str(m), "--into", str(into))
    assert res.returncode == 0, res.err
    assert res.out == "%s/proj\n" % _esc(str(into))


def test_merge_reports_hostile_fragments_escaped(tmp_path):
    m = write_json(tmp_path / "manifest_run-1.json", make_doc("run-1"))
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    for i, kernel in enumerate(["5.15", "5.15", EVIL]):
        write_json(nodes / ("node_node-%08d.json" % i), {
            "fragment_version": "1.0", "kind": "node", "run_id": "run-1", "generated_at": "2026-01-01T00:00:00Z",
            "node": {"name": "node-%08d" % i, "source": "cli"},
            "environment": {"system": {"kernel": kernel}}, "collection": {"probes": {}}})
    res = run("merge", str(m), str(nodes), cwd=tmp_path)
    assert res.returncode == 0, res.err
    assert res.err == "relaxrepro: 1 of 3 nodes: kernel 5.15 -> %s (node-00000002)\n" % SHOWN
    bad = write_json(tmp_path / "node_x.json", {"fragment_version": "2." + EVIL, "kind": "node", "run_id": "run-1",
                                                "node": {"name": "n"}})
    res = run("merge", str(m), str(bad), "-o", str(tmp_path / "o.json"))
    assert res.returncode == 2
    assert res.err == "relaxrepro merge: error: %s: unsupported fragment_version 2.%s: this relaxrepro reads 1.x\n" \
        % (bad, SHOWN)


def test_generate_warning_quoting_a_tools_stderr_is_escaped(tmp_path):
    bindir = tmp_path / "bin"
    fake_tool(bindir, "nvidia-smi", r"""
        printf 'NVIDIA-SMI has failed\033[2J\033]0;pwned\007\302\233X\342\200\256\n' >&2
        exit 9
        """)
    res = run("generate", "--output", str(tmp_path / "m.json"), env=clean_env(PATH=str(bindir)), cwd=tmp_path)
    assert res.returncode == 0, res.err
    assert "relaxrepro: warning: probe gpu failed: nvidia-smi gave no GPU data: nvidia-smi -q -x: exit 9: " \
           "NVIDIA-SMI has failed\\x1b[2J\\x1b]0;pwned\\x07\\x9bX\\u202e\n" in res.err
    # the manifest keeps what the tool said, exactly
    assert "\x1b[2J" in json.loads((tmp_path / "m.json").read_text())["collection"]["probes"]["gpu"]["warnings"][0]


def test_generate_print_escapes_what_json_leaves_raw(tmp_path):
    res = run("generate", "--output", str(tmp_path / "p.json"), "--print", "--", "train.py", EVIL, cwd=tmp_path)
    assert res.returncode == 0, res.err
    assert json.loads(res.out) == json.loads((tmp_path / "p.json").read_text())
    assert json.loads(res.out)["command"]["argv"][-1] == EVIL


def test_fingerprint_names_a_hostile_file_on_one_line(tmp_path):
    data = tmp_path / ("data" + EVIL)
    data.write_text("x")
    res = run("fingerprint", str(data), env=clean_env(HOME=str(tmp_path)))
    assert res.returncode == 0, res.err
    assert res.out.count("\n") == 1 and res.out.endswith("  1 files  1 bytes  %s\n" % _esc(str(data)))


def test_run_names_a_command_that_cannot_start_escaped(tmp_path):
    res = run("run", "--output", str(tmp_path / "r.json"), "--", str(tmp_path / ("nope" + EVIL)), cwd=tmp_path)
    assert res.returncode == 127
    assert "relaxrepro run: cannot start %s: " % _esc(str(tmp_path / ("nope" + EVIL))) in res.err


def test_argparse_and_usage_errors_quote_the_arguments_escaped(tmp_path):
    res = run("ls", "--bogus" + EVIL)
    assert res.returncode == 2
    assert res.err.endswith("relaxrepro ls: error: unrecognized arguments: --bogus%s\n" % SHOWN)
    m = write_json(tmp_path / "m.json", make_doc("r1"))
    res = run("rerun", str(m), "--dry-run", "--set", EVIL)
    assert res.returncode == 2 and res.err == "relaxrepro: error: --set %s: expected NAME=VALUE\n" % _esc(repr(EVIL))


def _esc(text: str) -> str:
    """How safe_text writes EVIL's characters (spelled out: the test does not call the code under test)."""
    for raw, shown in (("\x1b", "\\x1b"), ("\x07", "\\x07"), ("\x9b", "\\x9b"), ("\r", "\\r"), ("\n", "\\n"),
                       ("\u202e", "\\u202e")):
        text = text.replace(raw, shown)
    return text


SHOWN = _esc(EVIL)
