"""``relaxrepro report``: which page the inputs make, what each shows, where it is written, and every
refusal. The rendered pages are opened in a real browser in test_report_browser.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from relaxrepro import cli
from tests.helpers.common import FIXTURES, ROOT, generate, make_repo, run_cli
from tests.helpers.recording import make_doc, put

A, B, C, D = ("20260101_000000_aaaaaaa", "20260102_000000_bbbbbbb", "20260103_000000_ccccccc",
              "20260104_000000_ddddddd")


PROBES = {"git": {"status": "ok", "seconds": 0.2, "warnings": []},
          "gpu": {"status": "timeout", "seconds": 4.0, "warnings": ["nvidia-smi did not answer in 4 s"]}}


def sweep_tree(base: Path) -> Path:
    """A base run, and a three-run lr sweep derived from it (one failed), with metrics."""
    put(base / "base", make_doc(A, generated_at="2026-01-01T00:00:00Z", lineage={"note": "base"},
                                code={"proj": {"commit": "1" * 40, "dirty": False}}))
    for i, (rid, lr, auc) in enumerate(((B, 0.1, 0.81), (C, 0.01, 0.88), (D, 0.001, "NaN"))):
        outcome = {"status": "ok", "exit_code": 0, "duration_s": 12.5} if i < 2 else \
            {"status": "exit", "exit_code": 3, "duration_s": 4.0}
        put(base / "sweep", make_doc(rid, generated_at="2026-01-0%dT00:00:00Z" % (i + 2),
                                     config={"resolved_args": {"lr": lr, "epochs": 3}},
                                     code={"proj": {"commit": "2" * 40, "dirty": False}},
                                     lineage={"group": "lr", "parent": {"run_id": A, "reason": "explicit",
                                                                        "found": True}},
                                     results={"metrics": {"auc": auc, "loss": 1 - i / 10}}, outcome=outcome,
                                     collection={"probes": PROBES}))
    return base


def report(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "out.html"
    assert cli.main(["report", *args, "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_one_manifest_is_a_run_page_with_its_lineage(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    page = report(tmp_path, str(tree / "sweep" / ("manifest_%s.json" % C)), str(tree))
    assert 'data-page="run"' in page and "<title>Run %s</title>" % C in page
    assert 'data-run="%s"' % A in page and "this run" in page  # its parent, from the directory given
    assert "explicit" in page and "lr 0.01" not in page  # the step says what changed from the parent
    assert "auc=0.88" in page and "12.5 s" in page and "ended" in page
    assert '<span class="timeout">timeout</span></td><td data-v="4.0">4.0</td><td>nvidia-smi did not answer' in page


def test_a_run_page_draws_its_descendants_below_it(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    put(tree / "next", make_doc("20260110_000000_eeeeeee", lineage={"parent": {"run_id": C, "found": True}}))
    page = report(tmp_path, str(tree / "base" / ("manifest_%s.json" % A)), str(tree))
    for rid in (B, C, D, "20260110_000000_eeeeeee"):
        assert 'data-run="%s"' % rid in page
    assert page.count("descendant") >= 4


def test_a_run_id_is_found_under_the_directories_and_the_default_name_is_its_id(tmp_path, capsys):
    tree = sweep_tree(tmp_path / "runs")
    os.chdir(tmp_path)
    assert cli.main(["report", B, str(tree)]) == 0
    assert capsys.readouterr().out == "runs/report_%s.html\n" % B  # beside the runs: their common directory
    assert "<title>Run %s</title>" % B in (tmp_path / "runs" / ("report_%s.html" % B)).read_text()


def test_against_adds_checks_verdicts(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    page = report(tmp_path, str(tree / "sweep" / ("manifest_%s.json" % B)), "--against",
                  str(tree / "base" / ("manifest_%s.json" % A)))
    assert "<h3>check</h3>" in page
    assert re.search(r"<td>code proj commit</td><td>2{12}</td><td>1{12}</td><td><span class=\"FAIL\">",
                     page), "another commit FAILs, as check says"
    assert "FAIL (not compatible)" in page


def test_two_runs_are_their_diff_in_diffs_ranking(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    page = report(tmp_path, str(tree / "base" / ("manifest_%s.json" % A)),
                  str(tree / "sweep" / ("manifest_%s.json" % B)))
    assert 'data-page="diff"' in page
    heads = re.findall(r"<h3>(\w+)</h3>", page)
    assert heads[0] == "code" and heads.index("code") < heads.index("config")
    assert "<td>config.resolved_args.lr</td><td><span class=\"added\">added</span></td><td>(absent)</td><td>0.1</td>" \
        in page


def test_directories_give_every_run_a_sweep_per_group_and_the_graph(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    page = report(tmp_path, str(tree))
    assert 'data-page="runs"' in page and "<title>4 runs</title>" in page
    assert page.count('<section id="run-') == 4
    sweep = page[page.index('<section id="group-lr"'):page.index('<section id="lineage"')]
    assert "<th>metric.auc</th><th>metric.loss</th><th>arg.lr</th>" in sweep
    assert sweep.count("<tr>") == 4 and "code.proj" not in sweep  # equal in all runs: left out
    charts = re.findall(r'aria-label="(metric\.\w+) against arg\.lr[",]', sweep)
    assert charts == ["metric.auc", "metric.loss"]  # each metric against the argument that varies
    auc = sweep[sweep.index('aria-label="metric.auc against'):sweep.index('aria-label="metric.loss against')]
    assert auc.count("<circle") == 2  # NaN is no point
    assert page.count('data-edge="parent"') == 3 and page.count('data-group="lr"') == 1  # one band, no dashes
    assert '<g class="n bad" data-run="%s">' % D in page


def test_group_and_chart_choose_the_sweep_and_its_column(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    page = report(tmp_path, str(tree), "--group", "lr", "--chart", "arg.lr")
    assert 'data-page="sweep"' in page and page.count('<section id="run-') == 3
    assert re.findall(r'aria-label="([\w.]+ against [\w.]+)[",]', page) == ["metric.auc against arg.lr",
                                                                            "metric.loss against arg.lr"]
    page = report(tmp_path, str(tree), "--group", "lr", "--chart", "metric.loss")
    assert re.findall(r'aria-label="([\w.]+ against [\w.]+)[",]', page) == ["metric.loss against arg.lr"]
    page = report(tmp_path, str(tree), "--group", "lr", "--chart", "arg.nope")
    assert "chart: arg.nope does not vary in this group" in page


def test_a_manifest_written_by_relax_shows_a_useful_summary(tmp_path):
    page = report(tmp_path, str(FIXTURES / "relax" / "relax-A-dirty.json"))
    assert "20261203_080019_550590_b8b14a6d" in page
    assert "relax@347a675*" in page  # code, under relaxrepro's names from Relax's
    assert "Python</dt><dd>3.11.7" in page and "not recorded: " in page


def test_a_partial_manifest_says_what_it_lacks(tmp_path):
    path = tmp_path / "manifest_p.json"
    path.write_text(json.dumps({"schema_version": "1.0", "run_id": "p", "code": {"r": {"commit": "f" * 40}}}))
    page = report(tmp_path, str(path))
    assert "recorded: code; not recorded: command, config, environment, hardware" in page
    assert "no GPU recorded" in page and "collection not recorded" in page


def test_a_hundred_runs_fit_in_500_kb(tmp_path):
    packages = {"pkg-%03d" % i: "1.%d" % i for i in range(300)}
    for i in range(100):
        put(tmp_path / "runs", make_doc("20260101_%06d_%07x" % (i, i), generated_at="2026-01-01T%02d:%02d:00Z"
                                        % (i // 60, i % 60),
                                        config={"resolved_args": {"lr": i / 1000, "seed": i}},
                                        environment={"packages": packages, "python": {"version": "3.11.7"}},
                                        code={"proj": {"commit": "%040x" % (i // 10), "dirty": i % 3 == 0}},
                                        hardware={"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3"},
                                        lineage={"group": "g%d" % (i // 25), "note": "x" * 100},
                                        results={"metrics": {"auc": i / 100, "loss": 1 / (i + 1)}},
                                        outcome={"status": "ok", "exit_code": 0, "duration_s": 3600.0}))
    page = report(tmp_path, str(tmp_path / "runs"))
    assert page.count('<section id="run-') == 100 and page.count('<section id="group-') == 4
    assert len(page.encode()) <= 500 * 1024, len(page.encode())


# -- where it is written --------------------------------------------------------------------------

def test_o_directory_takes_the_default_name_and_a_report_is_replaced(tmp_path, capsys):
    tree = sweep_tree(tmp_path / "runs")
    out = tmp_path / "out"
    out.mkdir()
    for _ in range(2):
        assert cli.main(["report", str(tree), "-o", str(out)]) == 0
    assert capsys.readouterr().out == ("%s\n" % (out / "report.html")) * 2
    assert sorted(os.listdir(out)) == ["report.html"]  # replaced in place, no temporary left


def test_o_creates_missing_parents(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    assert cli.main(["report", str(tree), "-o", str(tmp_path / "a" / "b" / "r.html")]) == 0
    assert (tmp_path / "a" / "b" / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("kind", ["manifest", "other-html"])
def test_a_file_that_is_not_a_report_is_never_replaced(tmp_path, capsys, kind):
    tree = sweep_tree(tmp_path / "runs")
    victim = tree / "base" / ("manifest_%s.json" % A) if kind == "manifest" else tmp_path / "index.html"
    if kind != "manifest":
        victim.write_text("<!DOCTYPE html><p>mine</p>")
    before = victim.read_bytes()
    assert cli.main(["report", str(tree), "-o", str(victim)]) == 2
    assert capsys.readouterr().err == ("relaxrepro report: error: %s exists and is not a relaxrepro report: not "
                                       "replaced (name another file with -o)\n" % victim)
    assert victim.read_bytes() == before


def test_a_hostile_run_id_never_names_the_file(tmp_path, capsys):
    path = put(tmp_path / "runs", make_doc("../../evil"), name="manifest_x.json")
    os.chdir(tmp_path)
    assert cli.main(["report", str(path)]) == 0
    assert capsys.readouterr().out == "runs/report.html\n"  # beside the run it shows
    assert sorted(os.listdir(tmp_path)) == ["runs"] and sorted(os.listdir(tmp_path / "runs")) == [
        "manifest_x.json", "report.html"]


# -- refusals ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["a.json", "b.json", "c.json"],
     "give one run (its page), two (their diff) or directories (every run); got 3 runs"),
    (["--group", "lr", "x.json"], "--group takes directories only, not x.json"),
    (["--here"], "--against and --here judge one run: give exactly one manifest or run id"),
    (["x.json", "--chart", "arg.lr"], "--chart draws a sweep: give directories"),
    (["20990101_000000_fffffff"], "20990101_000000_fffffff: no such file, and no run id starts with it under . "
                                  "(name where runs are with --runs DIR or $RELAXREPRO_RUNS)"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    for name in ("a.json", "b.json", "c.json", "x.json"):
        put(tmp_path, make_doc(name), name=name)
    os.chdir(tmp_path)
    assert cli.main(["report", *argv]) == 2
    assert capsys.readouterr() == ("", "relaxrepro report: error: %s\n" % message)
    assert not list(tmp_path.glob("*.html"))


def test_no_runs_is_exit_1_and_unreadable_ones_are_named(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "manifest_bad.json").write_text("{")
    res = run_cli("report", "runs", cwd=tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == ("relaxrepro report: error: no readable manifest under runs: "
                                           "1 manifest_*.json unreadable (named above)")
    assert "warning: unreadable: runs/manifest_bad.json: not JSON" in res.stderr
    res = run_cli("report", "runs", "--group", "nope", cwd=tmp_path)
    assert res.stderr.splitlines()[-1] == ("relaxrepro report: error: no runs in group 'nope' under runs: "
                                           "1 manifest_*.json unreadable (named above)")
    assert not list(tmp_path.glob("*.html"))
    (tmp_path / "runs" / "manifest_bad.json").unlink()
    res = run_cli("report", "runs", cwd=tmp_path)
    assert res.returncode == 1 and res.stderr == "relaxrepro report: error: no manifest_*.json under runs\n"


def test_a_real_run_reported_here_with_its_patch_and_checks_verdicts(tmp_path):
    repo = make_repo(tmp_path / "proj", {"train.py": "lr = 1\n"})
    (repo / "train.py").write_text("lr = 2  # <b>tuned</b>\n")
    generate(tmp_path, command=["python", "train.py"], cwd=repo)
    manifest = next(tmp_path.glob("m_*.json"))
    res = run_cli("report", str(manifest), "--here", "-o", str(tmp_path / "r.html"), cwd=repo)
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text()
    assert "compared with this machine: <b>PASS" in page or "compared with this machine: <b>WARN" in page
    assert '<span class="d">-lr = 1</span>' in page
    assert '<span class="a">+lr = 2  # &lt;b&gt;tuned&lt;/b&gt;</span>' in page
    assert "<td>code proj commit</td>" in page and "1 lines" not in page


_COUNT_OPENS = """
import collections, sys
opened = collections.Counter()
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".json") and "manifest_" in args[0]:
        opened[args[0]] += 1
sys.addaudithook(hook)
from relaxrepro import cli
code = cli.main(sys.argv[1:])
print(code, sorted(set(opened.values())), len(opened))
"""


def test_a_page_of_many_runs_reads_each_manifest_once(tmp_path):
    # The table, the cards and every sweep come from one read of each file (a sweep's runs were read three
    # times: the listing, the group's lookup, the whole document), a broken one among them. Through the run
    # index, the next page reads none (test_report_index.py).
    tree = sweep_tree(tmp_path / "runs")
    for i in range(6):
        put(tree / "more", make_doc("20260201_00000%d_eeeeeee" % i, generated_at="2026-02-01T00:00:0%dZ" % i,
                                    config={"resolved_args": {"lr": i}}, lineage={"group": "g%d" % (i % 2)}))
    (tree / "more" / "manifest_broken.json").write_text("{")
    res = subprocess.run([sys.executable, "-c", _COUNT_OPENS, "report", str(tree), "-o", str(tmp_path / "o.html"),
                          "--no-index"],
                         capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert res.stdout.splitlines()[-1] == "0 [1] 11", res.stderr
    page = (tmp_path / "o.html").read_text(encoding="utf-8")
    assert page.count('class="sweep"') == 3 and "manifest_broken.json" in res.stderr
