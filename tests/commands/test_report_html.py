"""The report's HTML builders, pure: escaping per context, the page shell, the SVGs."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from relaxrepro.commands._pages import html as H
from relaxrepro.commands._pages.graph import lineage_svg
from relaxrepro.commands._pages.sweep import scatter_svg


@pytest.mark.parametrize("value, shown", [
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ('"><img src=x onerror=alert(1)>', "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"),
    ("it's", "it&#x27;s"),
    ("a\x1b[31mred\x07", "a\\x1b[31mred\\x07"),
    ("line\nbreak", "line\\nbreak"),
    ("rtl\u202eevil", "rtl\\u202eevil"),
    ("lone \udc80", "lone \\udc80"),
    (None, "-"), (True, "true"), (3.5, "3.5"),
])
def test_element_and_attribute_text_is_escaped(value, shown):
    assert H.esc(value) == shown


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)",
                                 "data:text/html,<script>alert(1)</script>", "vbscript:x", "//evil.example/x",
                                 "https://ok.example/\"onmouseover=alert(1)", "https://a.example/\nx", "/etc/passwd"])
def test_only_http_links_become_links(url):
    out = H.link(url)
    assert "<a" not in out and out == H.esc(url)


def test_an_http_link_is_escaped_in_its_attribute():
    out = H.link("https://wandb.ai/e/p/runs/1?a=1&b=2")
    assert out == '<a href="https://wandb.ai/e/p/runs/1?a=1&amp;b=2" rel="noopener noreferrer">' \
                  'https://wandb.ai/e/p/runs/1?a=1&amp;b=2</a>'


def test_an_anchor_holds_only_safe_characters():
    assert H.anchor('x"><script>') == "run-x---script-"
    assert H.anchor("20260101_000000_abcdef0") == "run-20260101_000000_abcdef0"


def test_the_patch_keeps_its_lines_and_colours_them():
    out = H.patch_block("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old <b>\n+new\x1b")
    assert '<span class="d">-old &lt;b&gt;</span>' in out
    assert '<span class="a">+new\\x1b</span>' in out
    assert "\n--- a/x\n+++ b/x\n" in out  # file headers are neither added nor removed lines


def test_the_csp_admits_exactly_the_pages_own_style_and_script():
    page = H.page("t", "run", "<p>x</p>")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)

    def sha(text):
        return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert csp.startswith("default-src 'none'; ")
    assert "style-src %s;" % sha(style) in csp and "script-src %s;" % sha(script) in csp
    assert "unsafe" not in csp and "http" not in csp
    assert page.count("<script") == 1 and page.count("<style") == 1
    assert len(script.encode()) <= 4096, "a few KB of hand-written script at most"


def test_no_remote_reference_in_the_page_shell():
    page = H.page("t", "run", "")
    assert not re.search(r"(src|href)=|url\(|@import", page.replace('url(#ar)', ""))


def test_lineage_svg_lays_runs_out_below_their_parents_and_links_them():
    nodes = [{"id": "a", "depth": 0}, {"id": "b", "depth": 1, "bad": True, "group": "g"},
             {"id": '"<x>', "depth": 1, "group": "g"}]
    edges = [("a", "b", "parent"), ("a", '"<x>', "parent"), ("b", '"<x>', "group"), ("a", "gone", "parent")]
    svg = lineage_svg(nodes, edges, ["a"])
    assert svg.count('data-edge="parent"') == 2 and svg.count('data-group="g"') == 1  # a band behind b and "<x>
    assert '<a href="#run-a">' in svg and 'href="#run-b"' not in svg
    assert '<g class="n bad" data-run="b">' in svg
    assert "&quot;&lt;x&gt;" in svg and '"<x>' not in svg
    ya = int(re.search(r'data-run="a"><title>a</title><rect x="\d+" y="(\d+)"', svg).group(1))
    yb = int(re.search(r'data-run="b"><title>b</title><rect x="\d+" y="(\d+)"', svg).group(1))
    assert yb > ya


def test_chart_plots_numbers_and_says_when_there_is_none():
    svg = H.chart_svg("metric.auc", [("r1", 0.5), ("r2", None), ("r3", 0.9)])
    assert svg.count("<circle") == 2 and "r3: 0.9" in svg
    assert "no numeric value" in H.chart_svg("arg.name", [("r1", None)])


def test_non_finite_metrics_are_not_numbers():
    assert [H.number(v) for v in ("NaN", "Infinity", "-Infinity", "0.5", True, None)] == [None] * 3 + [0.5, None, None]


def test_untracked_files_are_shown_by_path():
    # git records untracked files as {path, size}: the page shows their paths, never a dict's repr.
    doc = {"schema_version": "1.3", "run_id": "r", "code": {"repo": {"commit": "a" * 40, "dirty": True, "untracked": {
        "count": 2, "files": [{"path": "notes.txt", "size": 3}, {"path": "data/<x>.csv", "size": 9}]}}}}
    text = H._code_block(doc)
    assert "notes.txt, data/&lt;x&gt;.csv" in text and "size" not in text


def test_a_sweep_chart_draws_other_values_as_bands_and_one_label_each():
    svg = scatter_svg("metric.auc", "arg.opt", [("adam", 0.9, "r1", "ok"), ("sgd", 0.8, "r2", "ok"),
                                                ("adam", 0.91, "r3", "failed"), ("<x>", 0.7, "r4", "ok")])
    assert re.findall(r'<text class="tick x"[^>]*>([^<]*)</text>', svg) == ["&lt;x&gt;", "adam", "sgd"]
    assert svg.count('<rect class="band"') == 2 and "<polyline" not in svg  # no line across categories
    assert re.findall(r'class="pt( failed)?" data-run="(\w+)"', svg) == [("", "r1"), ("", "r2"), (" failed", "r3"),
                                                                        ("", "r4")]


def test_a_cycle_of_parents_is_drawn_inside_the_picture():
    nodes = [{"id": "a", "depth": 1}, {"id": "b", "depth": 2}]
    svg = lineage_svg(nodes, [("a", "b", "parent"), ("b", "a", "parent")])
    w, h = map(float, re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).groups())
    points = [tuple(map(float, p.split())) for d in re.findall(r'data-edge="parent"[^>]* d="M([^"]+)"', svg)
              for p in d.split("L")]
    assert len(points) > 4 and all(0 <= x <= w and 0 <= y <= h for x, y in points)
