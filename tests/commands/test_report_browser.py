"""The report's pages in a real browser (headless Chromium): what the DOM holds after the page's own
script ran, that the script ran without an error (it writes ``data-report="ok"``), that the page reads
the same with no script, and that no string of a hostile manifest ever runs as code.

What proves non-execution: every payload, if it ran, would set ``data-pwned`` on ``<html>``. The
positive controls show the detector works (the same payload pasted raw into a page without our
Content-Security-Policy does set it) and that the policy alone stops it; the hostile pages are then
checked with the policy removed too, so the escaping is shown to hold on its own.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from relaxrepro import cli
from tests.commands.test_report import A, B, C, D, sweep_tree
from tests.helpers.browser import dump_dom, need_chromium
from tests.helpers.recording import make_doc, put

pytestmark = pytest.mark.usefixtures("browser")


@pytest.fixture
def browser():
    return need_chromium()


def render(tmp_path: Path, *args: str, name: str = "page.html") -> Path:
    out = tmp_path / name
    assert cli.main(["report", *args, "-o", str(out)]) == 0
    return out


def root_tag(dom: str) -> str:
    """The ``<html>`` start tag as the browser serialised it: where a payload that ran would have written."""
    return re.search(r"<html[^>]*>", dom).group(0)


def ran_clean(dom: str) -> None:
    assert re.fullmatch(r'<html lang="en" data-page="\w+" data-report="ok">', root_tag(dom)), root_tag(dom)
    assert "scripts: ok" in dom


def test_run_page_in_the_browser(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    dom = dump_dom(render(tmp_path, str(tree / "sweep" / ("manifest_%s.json" % C)), str(tree)))
    ran_clean(dom)
    assert re.findall(r'<section id="run-(\w+)"', dom) == [C]
    assert re.findall(r'<g class="n[^"]*" data-run="(\w+)"', dom) == [A, C]  # its ancestry
    assert dom.count('data-edge="parent"') == 1 and '<a href="#run-%s">' % C in dom
    assert 'tabindex="0"' in dom  # the script made the probe table's headings sortable


def test_runs_page_in_the_browser(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    dom = dump_dom(render(tmp_path, str(tree)))
    ran_clean(dom)
    assert re.findall(r'<section id="run-(\w+)"', dom) == [A, B, C, D]
    assert sorted(re.findall(r'<g class="n[^"]*" data-run="(\w+)"', dom)) == [A, B, C, D]
    assert dom.count('data-edge="parent"') == 3 and dom.count('<rect class="gband" data-group="lr"') == 1
    sweep = dom[dom.index('id="group-lr"'):dom.index('id="lineage"')]
    assert re.findall(r'<tr><td><a href="#run-(\w+)">', sweep) == [B, C, D]
    assert sweep.count('<th tabindex="0"') == 4  # run, metric.auc, metric.loss, arg.lr: each sorts


def test_sweep_and_diff_pages_in_the_browser(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    dom = dump_dom(render(tmp_path, str(tree), "--group", "lr", name="sweep.html"))
    ran_clean(dom)
    assert 'data-page="sweep"' in dom and dom.count("<circle") == 5  # auc (its NaN no point), loss
    dom = dump_dom(render(tmp_path, str(tree / "base" / ("manifest_%s.json" % A)),
                          str(tree / "sweep" / ("manifest_%s.json" % B)), name="diff.html"))
    ran_clean(dom)
    assert "<td>config.resolved_args.lr</td>" in dom and re.findall(r'<section id="run-(\w+)"', dom) == [A, B]


def test_the_page_reads_the_same_with_scripts_off(tmp_path):
    tree = sweep_tree(tmp_path / "runs")
    page = render(tmp_path, str(tree))
    static = tmp_path / "static.html"
    static.write_text(re.sub(r"<script>.*?</script>", "", page.read_text(), flags=re.S))
    dom = dump_dom(static)
    assert "data-report" not in root_tag(dom) and "scripts off: a static page" in dom
    assert re.findall(r'<section id="run-(\w+)"', dom) == [A, B, C, D]
    assert dom.count('data-edge="parent"') == 3 and "metric.auc" in dom


# -- hostile manifests ---------------------------------------------------------------------------------

def _pwn(tag: str) -> str:
    return "document.documentElement.setAttribute('data-pwned','%s')" % tag


PAYLOADS = [
    "<script>%s</script>" % _pwn("script"),
    "\"><img src=x onerror=\"%s\">" % _pwn("img"),
    "'><img src=x onerror='%s'>" % _pwn("img1"),
    "</style><script>%s</script>" % _pwn("style"),
    "</pre></details><script>%s</script>" % _pwn("pre"),
    "<svg onload=\"%s\"><circle/></svg>" % _pwn("svg"),
    "</text></g></svg><svg><set attributeName=x onbegin=\"%s\"/></svg>" % _pwn("set"),
    "</title><img src=x onerror=%s>" % _pwn("title").replace(" ", ""),
    "a\x1b]0;title\x07b\x00c\u202ed",
]
JS_URL = "javascript:%s" % _pwn("href")


def hostile_doc(run_id: str, i: int = 0) -> dict:
    p = PAYLOADS[i % len(PAYLOADS)]
    everything = " ".join(PAYLOADS)
    return make_doc(
        run_id,
        command={"argv": ["python", everything], "cwd": p},
        code={p: {"commit": p, "branch": p, "dirty": True, "remotes": {"origin": JS_URL, p: p},
                  "untracked": {"files": PAYLOADS}, "patch": {"text": "+%s\n-%s\n@@ %s" % (p, p, everything)}},
                  "x": {"commit": "1" * 40, "remotes": {"o": "https://x.example/\"onmouseover=%s" % _pwn("attr")}}},
        config={"resolved_args": {p: p, "lr": i}}, environment={"key_packages": {p: p}, "python": {"version": p}},
        hardware={"gpu_model": p, "gpu_count": 1, "driver_version": p},
        training={"algorithm": p, "parallel_topology": {p: PAYLOADS}},
        lineage={"group": everything, "note": everything, "parent": {"run_id": p, "reason": p},
                 "trackers": [{"tool": "wandb", "run": JS_URL}, {"tool": "mlflow", "run_id": p, "experiment_id": "1",
                                                                 "tracking_uri": JS_URL}, {"tool": p, "log_dir": p}]},
        results={"metrics": {p: i, "auc": p}, "outputs": {p: {"kind": "file", "sha256": p}},
                 "trace": {"steps": [0, 1, p], "names": [p, "loss"], "values": [[0.5, p, float(i)], [1.0, 0.5, p]],
                           "last_step": p, "calls": 3}},
        outcome={"status": p, "exit_code": p},
        collection={"probes": {p: {"status": p, "seconds": p, "warnings": PAYLOADS}}})


class _Tags(HTMLParser):
    """Every element and attribute of the serialised DOM (text is text, however it reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: List[Tuple[str, List[Tuple[str, Optional[str]]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def assert_inert(dom: str) -> None:
    assert "data-pwned" not in root_tag(dom)
    parser = _Tags()
    parser.feed(dom)
    names = [t for t, _ in parser.tags]
    assert names.count("script") == 1, "only the page's own script"
    assert not {"img", "set", "iframe", "object", "embed", "animate"} & set(names)
    attrs = [(k, v or "") for _, a in parser.tags for k, v in a]
    assert not [k for k, _ in attrs if k.startswith("on")], "no event handler attribute"
    assert not [v for _, v in attrs if v.strip().lower().startswith(("javascript:", "data:"))]
    assert "&lt;script&gt;" + _pwn("script") in dom.replace("&#x27;", "'").replace("&#39;", "'")  # shown as text
    assert "a\\x1b]0;title\\x07b\\x00c\\u202ed" in dom


@pytest.fixture
def hostile(tmp_path):
    runs = tmp_path / "runs"
    paths = [put(runs, hostile_doc("h%d" % i, i), name="manifest_h%d.json" % i) for i in range(len(PAYLOADS))]
    # The hostile ids as run ids too (not as file names: the default name never takes them).
    paths.append(put(runs, hostile_doc(PAYLOADS[0], 1), name="manifest_hid.json"))
    return runs, paths


def _no_csp(page: Path) -> Path:
    text = page.read_text()
    bare = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
    assert bare != text
    out = page.with_name("nocsp-" + page.name)
    out.write_text(bare)
    return out


@pytest.mark.parametrize("kind", ["run", "diff", "runs", "sweep"])
def test_no_string_of_a_hostile_manifest_runs(tmp_path, hostile, kind):
    runs, paths = hostile
    args = {"run": [str(paths[-1]), "--against", str(paths[1])], "diff": [str(paths[0]), str(paths[-1])],
            "runs": [str(runs)], "sweep": [str(runs), "--group", " ".join(PAYLOADS)]}[kind]
    page = render(tmp_path, *args)
    for p in (page, _no_csp(page)):  # the escaping holds without the policy too
        dom = dump_dom(p)
        ran_clean(dom)
        assert_inert(dom)


@pytest.mark.parametrize("csp, runs", [(False, True), (True, False)])
def test_the_detector_sees_a_payload_that_runs_and_the_policy_stops_it(tmp_path, csp, runs):
    tree = sweep_tree(tmp_path / "runs")
    page = render(tmp_path, str(tree))
    text = page.read_text().replace("<main>", "<main>" + PAYLOADS[1][2:] + PAYLOADS[0], 1)  # pasted raw
    raw = tmp_path / "raw.html"
    raw.write_text(text)
    dom = dump_dom(raw if csp else _no_csp(raw))
    assert ("data-pwned" in root_tag(dom)) is runs
