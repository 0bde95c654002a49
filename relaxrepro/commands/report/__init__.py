"""``relaxrepro report RUN|MANIFEST|DIR... [-o report.html]``: one self-contained HTML page.

What the inputs select: one run (a manifest file, or a run id found under the directories given, else
under ``.``) gives a run page, with its ancestry and descendants when directories are given; two runs give
the ``diff`` of the two; directories alone give every run below them: a table, the lineage graph, a sweep
per group (``compare``'s table) and a card per run; ``--group NAME`` only that group's runs.

The data comes from the analyses the commands share (:mod:`relaxrepro.analyze`: ``compare``'s sweep, ``ancestry``,
``diff_documents``, ``check``'s rules); :mod:`.._pages` turns it into the page. A page of many runs reads each
run's card from the run index (:mod:`.cards`: the file is read once, the first time, unless ``--no-index``). The
page is written atomically, and only over a file that is itself a relaxrepro report.
"""

from __future__ import annotations

import os
import re
import sys

from ...analyze.check import judge
from ...analyze.compare import compare_facts
from ...analyze.lineage import ancestry, descendants
from ...manifest import summary
from ...manifest.fields import get
from ...manifest.reader import ManifestError, read_manifest_file
from ...manifest.writer import describe_os_error
from .._common import Exit, print_json, say, unreadable_tail
from .._pages import html as H
from .._pages import output
from .._pages.charts import run_trace
from .._pages.graph import first_change, lineage_svg
from .._pages.sweep import sweep_section
from .._pages.twoway import two_run_page
from .._runs import NotFound, find_manifest, run_dirs
from . import cards

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Optional, Sequence, Tuple

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


class _Refused(Exception):
    """A request refused: one ``error:`` line, exit 2."""


class _Unreadable(_Refused):
    """A manifest that cannot be read: one line as ``check`` and ``diff`` word it, exit 2."""


def _fail(template: str, *values: Any) -> int:
    say("relaxrepro report: error: " + template, *values)
    return Exit.USAGE


def _read(path: str) -> Dict[str, Any]:
    try:
        return read_manifest_file(path)[0]
    except ManifestError as exc:
        raise _Unreadable("%s: %s" % (path, exc)) from None


def _find(given: str, where: Sequence[str], use_index: bool = True) -> str:
    """The manifest ``given`` names (a path, or a run id or a unique prefix of one below ``where``)."""
    warnings: List[str] = []
    try:
        return find_manifest(given, where, use_index=use_index, warnings=warnings)
    except NotFound as exc:
        raise _Refused(str(exc)) from None
    finally:
        for w in warnings:
            say("relaxrepro report: warning: %s", w)


def _name(*parts: Any) -> str:
    """The default file name: ``report_<run-id>.html`` (``_vs_`` between two); ``report.html`` when a part
    could not safely name a file."""
    if parts and all(isinstance(p, str) and _SAFE_NAME.match(p) for p in parts):
        return "report_%s.html" % "_vs_".join(parts)
    return "report.html"


def _graph(docs: Sequence[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Tuple[str, str, str]]]:
    """Nodes and edges of runs: depth from the parent chain (a parent not among them is a ``missing``
    node), parent edges, and same-group edges between consecutive runs of a group (drawn as a band)."""
    by_id = {str(d.get("run_id")): d for d in docs}
    depth: Dict[str, int] = {}
    nodes: List[Dict[str, Any]] = []
    edges: List[Tuple[str, str, str]] = []
    missing: Dict[str, int] = {}

    def depth_of(rid: str) -> int:
        chain: List[str] = []
        cur: Optional[str] = rid
        while cur is not None and cur in by_id and cur not in depth and cur not in chain:
            chain.append(cur)
            cur = summary.parent_id(by_id[cur])
        # Below a placed run; a missing parent sits at depth 0; a root, or a cycle, starts at 0.
        base = depth[cur] if cur in depth else 0 if cur is not None and cur not in by_id else -1
        for i, r in enumerate(reversed(chain)):
            depth[r] = base + 1 + i
        return depth[rid]

    for rid, d in by_id.items():
        parent = summary.parent_id(d)
        if parent is not None and parent not in by_id:
            missing.setdefault(parent, 0)
        if parent is not None:
            edges.append((parent, rid, "parent"))
    for rid, d in by_id.items():
        bad = isinstance(d.get("outcome"), dict) and d["outcome"].get("status") not in ("ok", None)
        sub = " ".join(x for x in (str(get(d, "lineage.group", "") or ""), summary.outcome_text(d)) if x and x != "-")
        group = get(d, "lineage.group", None)
        nodes.append({"id": rid, "depth": depth_of(rid), "sub": sub, "bad": bad, "title": "%s %s" % (rid, sub),
                      "group": group if isinstance(group, str) else None})
    nodes += [{"id": m, "depth": 0, "sub": "missing", "missing": True} for m in sorted(missing)]
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for d in docs:
        g = get(d, "lineage.group", None)
        if isinstance(g, str) and g:
            groups.setdefault(g, []).append(d)
    for members in groups.values():
        for a, b in zip(members, members[1:]):
            edges.append((str(a.get("run_id")), str(b.get("run_id")), "group"))
    nodes.sort(key=lambda n: (n["depth"], str(get(by_id.get(n["id"]), "lineage.group", "") or ""), n["id"]))
    return nodes, edges


def _sweep(group: str, paths: Sequence[str], runs: cards.Runs) -> Dict[str, Any]:
    """``compare_group``'s result for the runs at ``paths`` (in time order), from their facts in ``runs``."""
    facts, unreadable = [], []
    for p in paths:
        f = runs.facts.get(p)
        if isinstance(f, dict):
            facts.append((p, f))
        else:
            unreadable.append("%s: %s" % (p, f))
    return compare_facts(group, facts, unreadable, runs.load)


def _by_time(docs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return sorted(docs, key=lambda d: (str(d.get("generated_at") or ""), str(d.get("run_id") or "")))


# -- the pages -------------------------------------------------------------------------------------

def run_page(path: str, doc: Dict[str, Any], roots: Sequence[str], check: str = "", use_index: bool = True) -> str:
    """One run: its full card, ``check``'s verdicts when asked, its ancestry and descendants under ``roots``."""
    result = ancestry(path, list(roots), use_index=use_index)
    chain = [c for c in result["chain"] if c.get("run_id") is not None]
    nodes = [{"id": str(c["run_id"]), "depth": i, "missing": c.get("missing"),
              "sub": "missing" if c.get("missing") else "ancestor", "bad": False} for i, c in enumerate(chain)]
    edges = [(str(a["run_id"]), str(b["run_id"]), "parent") for a, b in zip(chain, chain[1:])]
    rid = str(doc.get("run_id"))
    if nodes:
        nodes[-1]["sub"] = "this run"
    if roots:  # descendants: runs whose parent chain reaches this one, level by level
        seen = {n["id"] for n in nodes}
        below = descendants(rid, list(roots), use_index=use_index)["root"] or {}
        level, depth = list(below.get("children", ())), len(nodes)
        parent_of = {c["run_id"]: rid for c in level}
        while level and len(nodes) < 300:
            nxt = []
            for c in sorted(level, key=lambda c: str(c["run_id"])):
                if c["run_id"] not in seen:
                    seen.add(c["run_id"])
                    nodes.append({"id": c["run_id"], "depth": depth, "sub": "descendant", "bad": False})
                    edges.append((parent_of[c["run_id"]], c["run_id"], "parent"))
                    parent_of.update((k["run_id"], c["run_id"]) for k in c["children"])
                    nxt.extend(c["children"])
            level, depth = nxt, depth + 1
    labels = {(str(s["from"]), str(s["to"])): str(s["summary"]).split("; ")[0] for s in result["steps"]}
    steps = "".join("<li>%s &rarr; %s (%s): %s</li>" % (H.esc(s["from"]), H.esc(s["to"]), H.esc(s["reason"]),
                                                          H.esc(s["summary"])) for s in result["steps"])
    lineage = '<section id="lineage"><h2>Lineage</h2>%s%s</section>\n' % (
        lineage_svg(nodes, edges, [rid], labels), "<ol>%s</ol>" % steps if steps else "")
    body = H.run_section(doc, full=True, check=check) + run_trace(doc) + lineage
    return H.page("Run %s" % rid, "run", body, H.esc(path))


def runs_page(entries: Sequence[Any], roots: Sequence[str], group: Optional[str] = None,
              chart: Optional[str] = None, runs: Optional[cards.Runs] = None) -> str:
    """Many runs: the table, the lineage graph, one sweep per group of two runs or more, a card per run.
    ``runs``: what :func:`cards.read` read, the sweeps' facts (default: read below ``roots`` now)."""
    if runs is None:
        runs = cards.read(roots)
    docs = _by_time([e.doc for e in entries])
    paths = {e.run_id: e.path for e in entries}
    by_id = {str(d.get("run_id")): d for d in docs}
    members: Dict[str, List[str]] = {}
    for d in docs:
        g = get(d, "lineage.group", None)
        if isinstance(g, str) and g:
            members.setdefault(g, []).append(paths[d["run_id"]])
    sweeps = "".join(sweep_section(_sweep(g, members[g], runs), by_id, chart)
                     for g in sorted(members) if len(members[g]) > 1 or g == group)
    nodes, edges = _graph(docs)
    labels = {(a, b): first_change(by_id[a], by_id[b]) if a in by_id else "parent not found here"
              for a, b, kind in edges if kind == "parent" and b in by_id}
    body = ('<section id="runs"><h2>Runs</h2>%s</section>\n%s<section id="lineage"><h2>Lineage</h2>%s</section>\n'
            '%s' % (H.runs_table(docs), sweeps, lineage_svg(nodes, edges, by_id, labels),
                    "".join(H.run_section(d, full=False) for d in docs)))
    title = "Sweep %s" % group if group else "%d runs" % len(docs)
    return H.page(title, "sweep" if group else "runs", body, H.esc(", ".join(roots)))


# -- the command -----------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    inputs = list(args.inputs) or ["."]
    roots = [p for p in inputs if os.path.isdir(p)]
    where = run_dirs(args.runs, os.environ, roots)
    try:
        picked: List[str] = []
        for p in inputs:
            if os.path.isdir(p):
                continue
            picked.append(p if os.path.lexists(p) else _find(p, where, not args.no_index))
        if args.group is not None and picked:
            return _fail("--group takes directories only, not %s", picked[0])
        if len(picked) > 2:
            return _fail("give one run (its page), two (their diff) or directories (every run); got %d runs",
                         len(picked))
        if (args.against or args.here) and len(picked) != 1:
            return _fail("--against and --here judge one run: give exactly one manifest or run id")
        if args.chart is not None and picked:
            return _fail("--chart draws a sweep: give directories")
        docs = [_read(p) for p in picked]
        if len(docs) == 1:
            check = _check(docs[0], args) if (args.against or args.here) else ""
            text = run_page(picked[0], docs[0], roots, check, not args.no_index)
            default = _name(docs[0].get("run_id"))
            kind, shown = "run", [docs[0].get("run_id")]
        elif len(docs) == 2:
            text = two_run_page(picked, docs)
            default = _name(docs[0].get("run_id"), docs[1].get("run_id"))
            kind, shown = "diff", [d.get("run_id") for d in docs]
        else:
            runs = cards.read(roots, use_index=not args.no_index)
            entries = runs.entries
            for w in runs.warnings:
                say("relaxrepro report: warning: %s", w)
            for e in entries:
                if e.error is not None:
                    say("relaxrepro report: warning: unreadable: %s: %s", e.path, e.error)
            good = [e for e in entries if e.error is None and
                    (args.group is None or get(e.doc, "lineage.group", None) == args.group)]
            if not good:
                unread = sum(1 for e in entries if e.error is not None)
                say("relaxrepro report: error: no %s under %s%s", "runs in group '%s'" % args.group if args.group
                    else "readable manifest" if unread else "manifest_*.json", ", ".join(roots),
                    unreadable_tail(unread))
                return Exit.FAIL
            text = runs_page(good, roots, args.group, args.chart, runs)
            default = _name(args.group) if args.group else "report.html"
            kind, shown = "group" if args.group else "runs", [e.doc.get("run_id") for e in good]
        path, note = output.target(args.output, default, roots + picked, os.environ)
        output.write(path, text)
        if note:
            say("relaxrepro report: note: %s: written to %s instead (-o names the file)", note, path)
    except _Unreadable as exc:
        say("relaxrepro report: %s", str(exc))
        return Exit.USAGE
    except (_Refused, output.NotOurs) as exc:
        return _fail("%s", str(exc))
    except OSError as exc:
        return _fail("%s", describe_os_error(exc, args.output or "the report"))
    if args.json:
        print_json({"path": path, "kind": kind, "runs": shown, "bytes": len(text.encode("utf-8", "replace"))})
        return Exit.OK
    say("%s", path, out=sys.stdout)
    return Exit.OK


def _check(doc: Dict[str, Any], args: argparse.Namespace) -> str:
    """``check``'s verdicts: against the manifest ``--against`` names, or this machine (``--here``)."""
    if args.against:
        other = _read(_find(args.against, run_dirs(args.runs, os.environ), not args.no_index))
        report = judge(doc, other)
        where = "compared with %s (run %s)" % (args.against, other.get("run_id"))
    else:
        from ...collect.here import collect_here  # lazy: ~15 ms (the probes' registry), only for --here

        report = judge(doc, *collect_here(doc, repos={}, env=dict(os.environ)))
        where = "compared with this machine"
    return H.check_block(report.items, report.summary_line(), where)
