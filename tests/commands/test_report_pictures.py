"""The pictures of the report's pages, read in a real browser (headless Chromium) as people would see them: the
two-run page (``report A B`` and ``verify A B --html FILE``) with both traces and the step where they part, and
where a page goes when ``-o`` is not given."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from relaxrepro import cli
from tests.helpers.browser import dump_dom, need_chromium
from tests.helpers.common import clean_env, make_repo, run_cli
from tests.helpers.recording import make_doc, put
from tests.helpers.results import H, pair, trace


@pytest.fixture
def browser():
    return need_chromium()


def parting_at(step: int, rows: int = 100) -> Tuple[Dict, Dict]:
    """Runs ``old`` and ``new`` whose traced loss is the same bit for bit up to ``step``, then apart."""
    old, new = pair()
    old["results"]["trace"] = trace(range(rows), loss=[H(2.0 * 0.97 ** i) for i in range(rows)])
    new["results"]["trace"] = trace(range(rows), loss=[H(2.0 * 0.97 ** i * (1 + 0.01 * max(0, i - step + 1)))
                                                       for i in range(rows)])
    return old, new


def polylines(dom: str) -> List[str]:
    return re.findall(r'<polyline class="ln (\w)" data-run="(\w+)"', dom)


def test_a_verify_page_shows_both_curves_and_marks_the_step_where_they_part(tmp_path, browser, capsys):
    old, new = parting_at(40)
    a, b = put(tmp_path / "runs", old), put(tmp_path / "runs", new)
    page = tmp_path / "verify.html"
    assert cli.main(["verify", str(a), str(b), "--html", str(page)]) == 1
    assert "first parts at step 40, loss" in capsys.readouterr().out  # the verdict on stdout as before
    static = tmp_path / "static.html"  # the same page with no script at all
    static.write_text(re.sub(r"<script>.*?</script>", "", page.read_text(), flags=re.S))
    for shown in (page, static):
        dom = dump_dom(shown)
        main = dom[dom.index("<main>"):]
        assert re.match(r'<main>\s*<section id="verify"><h2>Did it reproduce\?</h2><p class="verdict" '
                        r'data-verdict="diverged">', main)  # the verdict first
        assert polylines(dom) == [("a", "old"), ("b", "new")]
        assert re.findall(r'<line class="mark" data-step="(\w+)"', dom) == ["40"]
        assert dom.count('class="chart gap"') == 1 and "parts at step 40" in dom


def test_report_of_two_runs_with_results_is_the_same_page(tmp_path, browser):
    old, new = parting_at(40)
    a, b = put(tmp_path / "runs", old), put(tmp_path / "runs", new)
    out = tmp_path / "two.html"
    assert cli.main(["report", str(a), str(b), "-o", str(out)]) == 0
    dom = dump_dom(out)
    assert dom.index('id="verify"') < dom.index('id="diff"')
    assert "volatile fields hidden)" in dom and "--all" not in dom  # a page cannot take the flag
    assert polylines(dom) == [("a", "old"), ("b", "new")]
    assert re.findall(r'data-step="(\w+)"', dom) == ["40"]


def test_a_bit_identical_pair_shows_one_verdict_and_no_marker(tmp_path, browser):
    old, _ = parting_at(40)
    a = put(tmp_path / "runs", old)
    page = tmp_path / "same.html"
    assert cli.main(["verify", str(a), str(a), "--html", str(page)]) == 0
    dom = dump_dom(page)
    assert re.findall(r'data-verdict="([\w ]+)"', dom) == ["reproduced"]
    assert polylines(dom) == [("a", "old"), ("b", "old")]
    assert 'class="mark"' not in dom and "parts at step" not in dom


def test_verify_html_never_replaces_a_file_it_did_not_write(tmp_path, capsys):
    a, b = (put(tmp_path / "runs", d) for d in parting_at(40))
    victim = tmp_path / "notes.html"
    victim.write_text("<p>mine</p>")
    assert cli.main(["verify", str(a), str(b), "--html", str(victim)]) == 2
    assert capsys.readouterr().err == ("relaxrepro verify: error: %s exists and is not a relaxrepro report: not "
                                       "replaced (name another file with --html)\n" % victim)
    assert victim.read_text() == "<p>mine</p>"


def git_status(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.parametrize("ignored", [True, False], ids=["runs-ignored", "runs-committed"])
def test_report_of_runs_in_a_checkout_leaves_git_status_clean(tmp_path, ignored):
    repo = make_repo(tmp_path / "proj", {".gitignore": "runs/\n" if ignored else "\n", "README.md": "x\n"})
    old, new = parting_at(40)
    put(repo / "runs", old), put(repo / "runs", new)
    if not ignored:
        subprocess.run(["git", "add", "runs"], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-qm", "runs"], cwd=repo, check=True)
    assert git_status(repo) == ""
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    res = run_cli("report", "runs", cwd=repo, env=env)
    assert res.returncode == 0, res.stderr
    assert git_status(repo) == ""
    if ignored:  # beside the runs it shows
        assert res.stdout == "runs/report.html\n" and res.stderr == ""
        assert (repo / "runs" / "report.html").is_file()
    else:  # the checkout would record it: the cache, and a note saying why
        where = tmp_path / "cache" / "relaxrepro" / "reports" / "report.html"
        assert res.stdout == "%s\n" % where and where.is_file()
        assert res.stderr == ("relaxrepro report: note: runs/report.html would be a change in a git checkout (not "
                              "ignored there): written to %s instead (-o names the file)\n" % where)


def test_a_page_outside_any_checkout_goes_beside_the_runs(tmp_path):
    runs = tmp_path / "exp" / "runs"
    a, b = (put(runs, d) for d in parting_at(40))
    res = run_cli("report", str(runs), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "exp/runs/report.html\n" and (runs / "report.html").is_file()
    res = run_cli("report", str(a), str(b), cwd=tmp_path)  # two files: their common directory
    assert res.stdout == "exp/runs/report_old_vs_new.html\n", res.stderr
    res = run_cli("report", "old", "--runs", "exp/runs", cwd=tmp_path)  # a run id: where its manifest is
    assert res.stdout == "exp/runs/report_old.html\n", res.stderr


def lr_sweep(runs: Path) -> None:
    """Group ``lr``: four runs at lr 1e-4 ... 3e-3 (the last failed), the same flat metric in all, and a replay
    of the first; each with the same output digest and trace."""
    results = {"outputs": {"w.pt": {"kind": "file", "sha256": "a" * 64, "size": 1}},
               "trace": trace(range(3), loss=[H(1.0), H(0.5), H(0.25)])}
    for i, lr in enumerate((1e-4, 3e-4, 1e-3, 3e-3)):
        outcome = {"status": "ok" if i < 3 else "exit", "exit_code": 0 if i < 3 else 1}
        put(runs, make_doc("r%d" % i, generated_at="2026-01-0%dT00:00:00Z" % (i + 1), schema_version="1.3",
                           config={"resolved_args": {"lr": lr, "epochs": 3}}, lineage={"group": "lr"},
                           outcome=outcome, results=dict(results, metrics={"loss": 1 - i / 10, "flat": 0.617})))
    put(runs, make_doc("r9", generated_at="2026-01-09T00:00:00Z", schema_version="1.3", outcome={"status": "ok"},
                       config={"resolved_args": {"lr": 1e-4, "epochs": 3}},
                       lineage={"group": "lr", "replay_of": "r0"}, results=dict(results, metrics={"loss": 1.0,
                                                                                                   "flat": 0.617})))


def charts(dom: str) -> Dict[str, str]:
    """Each sweep chart's SVG by its aria-label."""
    return {m.group(1): m.group(0) for m in re.finditer(r'<svg class="chart sweep"[^>]*aria-label="([^"]+)".*?</svg>',
                                                        dom, flags=re.S)}


def ticks(svg: str, axis: str) -> List[str]:
    return re.findall(r'<text class="tick %s"[^>]*>([^<]*)</text>' % axis, svg)


def test_a_sweep_plots_each_metric_against_the_argument_that_varies_on_a_log_axis(tmp_path, browser):
    lr_sweep(tmp_path / "runs")
    out = tmp_path / "sweep.html"
    assert cli.main(["report", str(tmp_path / "runs"), "--group", "lr", "-o", str(out)]) == 0
    dom = dump_dom(out)
    got = charts(dom)
    assert sorted(got) == ["metric.flat against arg.lr, log x", "metric.loss against arg.lr, log x"]
    loss = got["metric.loss against arg.lr, log x"]
    assert ticks(loss, "x") == ["1e-4", "1e-3"]  # powers of ten on the log axis
    assert len(set(ticks(loss, "y"))) == len(ticks(loss, "y")) >= 2
    assert ticks(got["metric.flat against arg.lr, log x"], "y") == ["0.617"]  # a flat series: one label, not two
    assert re.findall(r'<text class="sub"[^>]*>([^<]*)</text>', loss) == ["arg.lr (log)"]  # the x axis is lr's
    assert re.findall(r'<text class="title"[^>]*>([^<]*)</text>', loss) == ["metric.loss"]
    assert re.findall(r'<circle class="pt( \w+)?" data-run="(\w+)"', loss) == [
        (" replay", "r9"), ("", "r0"), ("", "r1"), ("", "r2"), (" failed", "r3")]
    assert ("Reproducibility: 4 of 4 runs have a bit-identical trace; 4 of 4 runs wrote the same weights (output "
            "digests matching).") in dom
    assert "rate 1.0" not in dom and "<dt>reproducibility</dt>" not in dom  # a sentence, not a key/value dump


def test_a_run_page_shows_its_configuration_and_seeds_as_people_read_them_and_its_title_once(tmp_path, browser):
    doc = make_doc("20260105_000000_eeeeeee", schema_version="1.3",
                   config={"resolved_args": {"lr": 0.0003, "epochs": 3}, "resolved_args_source": "argparse",
                           "files": {"conf/train.yaml": "f" * 64},
                           "file_details": {"conf/train.yaml": {"size": 120}}, "hash": "c" * 64},
                   seeds={"values": {}, "env": {}, "flags": {"deterministic": True}, "bit_reproducible": False,
                          "missing": ["PYTHONHASHSEED is not set", "torch.use_deterministic_algorithms is off"]})
    out = tmp_path / "run.html"
    assert cli.main(["report", str(put(tmp_path / "runs", doc)), "-o", str(out)]) == 0
    dom = dump_dom(out)
    assert dom.count("20260105_000000_eeeeeee</h") == 1  # the title, not again above the summary
    config = dom[dom.index("<h3>Configuration</h3>"):dom.index("<h3>Seeds and determinism</h3>")]
    assert "<h4>Arguments (argparse)</h4>" in config and "<dt>lr</dt><dd>0.0003</dd>" in config
    assert "<td>conf/train.yaml</td>" in config and 'title="%s">%s<' % ("f" * 64, "f" * 12) in config
    seeds = dom[dom.index("<h3>Seeds and determinism</h3>"):]
    seeds = seeds[:seeds.index("</ul>")]
    assert re.findall(r"<li[^>]*>(.*?)</li>", seeds) == [
        "flag: <code>deterministic = True</code>", 'bit-reproducible: <span class="WARN">no</span>',
        "PYTHONHASHSEED is not set", "torch.use_deterministic_algorithms is off"]
    assert "{}" not in seeds and "[&quot;" not in dom


def fifty_runs(runs: Path) -> None:
    """50 runs: three bases, each with a group of derived runs (some derived again), four runs on their own and
    one whose parent is not here. Each child changes its parent's --lr or commit."""
    made = 0

    def run(rid: str, parent: str = "", group: str = "", lr: float = 0.1, commit: str = "1") -> None:
        nonlocal made
        made += 1
        lineage: Dict = {"group": group} if group else {}
        if parent:
            lineage["parent"] = {"run_id": parent, "reason": "explicit", "found": True}
        put(runs, make_doc(rid, generated_at="2026-02-01T00:%02d:00Z" % made, lineage=lineage,
                           command={"argv": ["python", "train.py", "--lr", str(lr)]},
                           code={"proj": {"commit": commit * 40, "dirty": False}}))

    for b, group in enumerate(("lr", "wd", "arch")):
        base = "base%d" % b
        run(base, commit=str(b + 1))
        for i in range(11):
            child = "%s%02d" % (group, i)
            run(child, base, group, lr=0.1 * (i + 2), commit=str(b + 1))
            if i % 4 == 0:
                run(child + "x", child, group, lr=0.1 * (i + 2), commit=str(b + 4))
    for i in range(4):
        run("alone%d" % i)
    run("orphan", "20250101_000000_gone", "lr")
    assert made == 50


def boxes_and_paths(dom: str) -> Tuple[Dict[str, Tuple[float, ...]], List[Tuple[str, str, List[Tuple[float, ...]]]]]:
    svg = dom[dom.index('<svg class="lineage"'):]
    svg = svg[:svg.index("</svg>")]
    boxes = {rid: tuple(map(float, xywh)) for rid, *xywh in re.findall(
        r'<g class="n[^"]*" data-run="([^"]+)"><title>[^<]*</title><rect x="([\d.]+)" y="([\d.]+)" '
        r'width="([\d.]+)" height="([\d.]+)"', svg)}
    paths = [(a, b, [tuple(map(float, p.split())) for p in d.split("L")]) for a, b, d in re.findall(
        r'data-edge="parent" data-from="([^"]+)" data-to="([^"]+)" d="M([^"]+)"', svg)]
    return boxes, paths


def crosses(p: Tuple[float, ...], q: Tuple[float, ...], box: Tuple[float, ...]) -> bool:
    """Whether segment p-q passes through the inside of ``box`` (x, y, w, h), its border excluded
    (Liang-Barsky clipping against the box shrunk by half a pixel)."""
    x, y, w, h = box
    lo, hi = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for d, near, far in ((dx, x + 0.5 - p[0], x + w - 0.5 - p[0]), (dy, y + 0.5 - p[1], y + h - 0.5 - p[1])):
        if d == 0:
            if near > 0 or far < 0:
                return False
        else:
            t0, t1 = sorted((near / d, far / d))
            lo, hi = max(lo, t0), min(hi, t1)
    return lo < hi


def test_fifty_runs_lay_out_with_no_edge_through_a_box_and_every_edge_labelled(tmp_path, browser):
    fifty_runs(tmp_path / "runs")
    out = tmp_path / "runs.html"
    assert cli.main(["report", str(tmp_path / "runs"), "-o", str(out)]) == 0
    dom = dump_dom(out)
    boxes, paths = boxes_and_paths(dom)
    assert len(boxes) == 51 and len(paths) == 43  # 50 runs and the missing parent; every child's edge
    through = [(a, b, rid) for a, b, pts in paths for p, q in zip(pts, pts[1:]) for rid, box in boxes.items()
               if crosses(p, q, box)]
    assert through == []
    for a, b, pts in paths:  # from the parent's bottom to the child's top
        (ax, ay, aw, ah), (bx, by, bw, _) = boxes[a], boxes[b]
        assert pts[0] == (ax + aw / 2, ay + ah) and pts[-1] == (bx + bw / 2, by) and by > ay
    labels = re.findall(r'</path><text class="el"[^>]*>([^<]*)</text>', dom)
    assert len(labels) == 43 and "derived" not in labels
    assert "--lr 0.1 → 0.2" in labels and "commit 1111 → 4444" in labels
    bands = re.findall(r'<rect class="gband" data-group="(\w+)"', dom)
    assert set(bands) == {"lr", "wd", "arch"}
    alone = [boxes["alone%d" % i][1] for i in range(4)]  # set apart: below every connected run
    assert min(alone) > max(y for rid, (x, y, w, h) in boxes.items() if not rid.startswith("alone"))
    assert "runs with no parent or child here" in dom


def test_a_route_that_passes_through_a_box_is_caught():
    assert crosses((0, 50), (300, 50), (100, 30, 50, 40)) and not crosses((0, 10), (300, 10), (100, 30, 50, 40))
    assert not crosses((125, 70), (125, 90), (100, 30, 50, 40))  # leaving from its bottom edge


def test_a_run_page_draws_its_recorded_trace(tmp_path, browser):
    old, _ = parting_at(40)
    out = tmp_path / "run.html"
    assert cli.main(["report", str(put(tmp_path / "runs", old)), "-o", str(out)]) == 0
    dom = dump_dom(out)
    trace_part = dom[dom.index('<section id="trace">'):dom.index('<section id="lineage">')]
    assert polylines(trace_part) == [("a", "old")] and 'class="mark"' not in trace_part
    assert re.findall(r'<text class="tick y"[^>]*>([^<]*)</text>', trace_part) == ["0.1", "1"]  # log y: 2 ... 0.1
