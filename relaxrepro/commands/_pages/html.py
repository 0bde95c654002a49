"""The HTML of the pages ``relaxrepro report`` and ``verify --html`` write: pure functions from documents
(and the analyses of ``compare``, ``lineage``, ``diff`` and ``check``) to text. No I/O here.

One rule holds it together: nothing read from a manifest reaches the page unescaped. Element text and
attribute values go through :func:`esc` (control and bidi characters shown as escapes, then
``html.escape``), a link through :func:`link` (``http``/``https`` only, anything else is shown as text),
an anchor name through :func:`anchor` (letters, digits, ``_``, ``-``), and the inline SVG takes the same
escaped text and numbers computed here. The style and the script are constants: no manifest value is
ever written inside ``<style>`` or ``<script>``, and the Content-Security-Policy admits only those two
(by hash), so a page opened from ``file://`` loads nothing and runs nothing else.
"""

from __future__ import annotations

import base64
import html
import json
import re

from ..._version import __version__
from ...manifest.fields import MISSING, get, patch_counts, patch_text, python_version, section, untracked_files
from ...manifest.summary import gpu_cell, outcome_text, short
from ...manifest.summary import trackers as summary_trackers
from ...std.sha import sha256
from ...std.text import safe_text, shell_quote

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

GENERATOR = "relaxrepro report"
"""The ``<meta name="generator">`` of every page: ``report`` replaces only a file that carries it."""

CSS = """
:root{--bg:#fff;--fg:#1d232a;--mute:#5b6670;--line:#d5dbe1;--card:#f6f8fa;--acc:#0b62c4;--add:#e6f6ea;
--addf:#176b2c;--del:#fdecec;--delf:#a32020;--warn:#8a5a00;--node:#fff}
@media (prefers-color-scheme:dark){:root{--bg:#0f1318;--fg:#dde3ea;--mute:#93a0ad;--line:#2d3640;
--card:#171d24;--acc:#6cb1ff;--add:#12301b;--addf:#7fd99a;--del:#3a1717;--delf:#ff9b9b;--warn:#f0c060;
--node:#1b232c}}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,sans-serif}
header,main{max-width:1200px;margin:0 auto;padding:0 16px}header{padding-top:16px}
h1{font-size:1.4em;margin:.3em 0}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid var(--line)}
h3{font-size:1em;margin:1em 0 .3em}h4{font-size:.95em;margin:.6em 0 .2em}a{color:var(--acc)}
.mute,.meta{color:var(--mute)}
code,pre,.mono,td,dd{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin:10px 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:4px 0}dt{color:var(--mute)}
dd{margin:0;overflow-wrap:anywhere}table{border-collapse:collapse;margin:4px 0;font-size:12.5px}
th,td{border:1px solid var(--line);padding:2px 6px;text-align:left;vertical-align:top}
td{max-width:36em;overflow-wrap:anywhere}
th{background:var(--card);font-weight:600}.scroll{overflow-x:auto}.diff th,.diff td:nth-child(2){white-space:nowrap}
table.sortable th{cursor:pointer}th[aria-sort=ascending]::after{content:" \\25b2"}
th[aria-sort=descending]::after{content:" \\25bc"}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0}.patch{border:1px solid var(--line);padding:4px}
.a{background:var(--add);color:var(--addf);display:block}.d{background:var(--del);color:var(--delf);display:block}
.h{color:var(--acc);display:block}.PASS,.ok,.added,.upgraded{color:var(--addf)}
.FAIL,.failed,.timeout,.removed,.downgraded,.bad{color:var(--delf);font-weight:600}
.WARN,.partial,.changed{color:var(--warn)}.two{display:grid;grid-template-columns:1fr 1fr;gap:12px}
svg{max-width:100%;height:auto}svg text{fill:var(--fg);font:11px ui-monospace,monospace}
svg .n rect{fill:var(--node);stroke:var(--acc)}svg .n.bad rect{stroke:var(--delf);stroke-width:2}
svg .n.missing rect{stroke:var(--mute);stroke-dasharray:3 3}svg .p{stroke:var(--fg);fill:none}
svg .gband{fill:var(--card);stroke:var(--line)}svg .el{fill:var(--mute);font-size:10px}
svg .ax{stroke:var(--mute);fill:none}
svg .pt{fill:var(--acc)}svg .ln{stroke:var(--acc);fill:none}svg .sub{fill:var(--mute)}
svg .ln.b{stroke:var(--warn);stroke-dasharray:6 3}svg .dl{stroke:var(--delf);fill:none}
svg .mark{stroke:var(--delf);stroke-width:1.5}svg .mark+text{fill:var(--delf)}
.verdict{font-size:1.2em;font-weight:600}.key-a{color:var(--acc)}.key-b{color:var(--warn)}
svg .band{fill:var(--card)}svg .pt.failed{fill:none;stroke:var(--delf);stroke-width:2}
svg .pt.replay{fill:var(--bg);stroke:var(--acc);stroke-width:1.5}
svg .track{fill:var(--line)}svg .fill{fill:var(--addf)}svg .title{font-weight:600}
.multiples{display:flex;flex-wrap:wrap;gap:8px}.bar{margin:2px 0}
"""

SCRIPT = """(function(){var d=document,r=d.documentElement,s=d.getElementById('js-status');
window.onerror=function(m){r.setAttribute('data-report','error: '+m);if(s)s.textContent='script error: '+m;};
function key(c){var v=c?c.getAttribute('data-v'):null;return v===null?[1,c?c.textContent:'']:[0,parseFloat(v)];}
function sort(t,i,th){var b=t.tBodies[0],rows=[].slice.call(b.rows),up=th.getAttribute('aria-sort')!=='ascending';
[].forEach.call(t.tHead.rows[0].cells,function(h){h.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',up?'ascending':'descending');
rows.sort(function(x,y){var a=key(x.cells[i]),b2=key(y.cells[i]),o=a[0]-b2[0]||(a[1]<b2[1]?-1:a[1]>b2[1]?1:0);
return up?o:-o;});rows.forEach(function(x){b.appendChild(x);});}
[].forEach.call(d.querySelectorAll('table.sortable'),function(t){
[].forEach.call(t.tHead.rows[0].cells,function(th,i){th.tabIndex=0;th.title='sort by this column';
th.addEventListener('click',function(){sort(t,i,th);});
th.addEventListener('keydown',function(e){if(e.key==='Enter')sort(t,i,th);});});});
r.setAttribute('data-report','ok');if(s)s.textContent='scripts: ok (click a column heading to sort)';})();"""


def _sha(text: str) -> str:
    return base64.b64encode(sha256(text.encode("utf-8")).digest()).decode("ascii")


CSP = ("default-src 'none'; style-src 'sha256-%s'; script-src 'sha256-%s'; img-src data:; base-uri 'none'; "
       "form-action 'none'" % (_sha(CSS), _sha(SCRIPT)))
"""Only this page's own style and script, by hash: no remote load, and no other inline code, ever runs."""


# -- escaping, one function per context ----------------------------------------------------------

def esc(value: Any, limit: Optional[int] = None) -> str:
    """Element text or a double-quoted attribute value: controls and bidi characters shown as escapes."""
    if value is None or value is MISSING:
        return "-"
    if isinstance(value, bool):
        value = "true" if value else "false"
    return html.escape(safe_text(value, limit), quote=True)


_URL = re.compile(r"^https?://[^\s<>\"'`\\]+$", re.IGNORECASE)


def link(url: Any, label: Any = None) -> str:
    """``<a>`` to an ``http(s)`` URL; any other value (``javascript:``, ``data:``, a path) is shown as text."""
    if isinstance(url, str) and _URL.match(url) and url.isprintable():
        return '<a href="%s" rel="noopener noreferrer">%s</a>' % (esc(url), esc(url if label is None else label))
    return esc(url if label is None else label)


def anchor(run_id: Any) -> str:
    """The fragment name of a run's section: ``run-`` and the id with anything unusual made ``-``."""
    return "run-" + re.sub(r"[^A-Za-z0-9_-]", "-", str(run_id))[:96]


def number(value: Any) -> Optional[float]:
    """A recorded number (or the strings "NaN"/"Infinity" the writer uses for non-finite metrics)."""
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if out == out and abs(out) != float("inf") else None


def metric(value: Any) -> str:
    """A metric in a table: a float to 6 significant digits (the cell sorts by its full value)."""
    return esc("%.6g" % value) if isinstance(value, float) else cell(value, 80)


def cell(value: Any, limit: int = 200) -> str:
    """A value as table text: strings as they are, other scalars and structures as compact JSON."""
    if value is MISSING:
        return "(absent)"
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return esc(value, limit)


# -- building blocks -----------------------------------------------------------------------------

def page(title: str, kind: str, body: str, subtitle: str = "") -> str:
    """The whole document: one file, inline style and script, readable with scripts off."""
    return ("<!DOCTYPE html>\n<html lang=\"en\" data-page=\"%s\"><head><meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"%s\">\n"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<meta name=\"color-scheme\" content=\"light dark\">"
            "<meta name=\"generator\" content=\"%s %s\">\n<title>%s</title><style>%s</style></head>\n"
            "<body><header><h1>%s</h1><p class=\"meta\">%s relaxrepro %s &middot; "
            "<span id=\"js-status\">scripts off: a static page</span></p></header>\n<main>\n%s</main>\n"
            "<script>%s</script></body></html>\n"
            % (kind, CSP, GENERATOR, esc(__version__), esc(title), CSS, esc(title),
               subtitle + " &middot;" if subtitle else "", esc(__version__), body, SCRIPT))


def dl(rows: Iterable[Tuple[str, str]]) -> str:
    """A definition list of (label, html) pairs; labels are ours, values already escaped."""
    return "<dl>%s</dl>" % "".join("<dt>%s</dt><dd>%s</dd>" % (esc(k), v) for k, v in rows)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], sortable: bool = False, cls: str = "") -> str:
    """A table; a cell is html or ``(html, number)`` (the number sorts it), or ``(html, None, class)``."""
    out = ['<div class="scroll"><table class="%s">' % (("sortable " if sortable else "") + cls).strip(),
           "<thead><tr>%s</tr></thead><tbody>" % "".join("<th>%s</th>" % h for h in headers)]
    for row in rows:
        cells = []
        for c in row:
            if isinstance(c, tuple):
                attrs = ' data-v="%r"' % c[1] if c[1] is not None else ""
                attrs += ' class="%s"' % c[2] if len(c) > 2 and c[2] else ""
                cells.append("<td%s>%s</td>" % (attrs, c[0]))
            else:
                cells.append("<td>%s</td>" % c)
        out.append("<tr>%s</tr>" % "".join(cells))
    return "".join(out) + "</tbody></table></div>"


def tree(value: Any, depth: int = 0, limit: int = 60) -> str:
    """Any recorded structure, nested lists of at most ``limit`` items each (and how many more)."""
    if isinstance(value, dict) and value and depth < 4:
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        more = len(items) - limit
        rows = [(str(k), tree(v, depth + 1, limit)) for k, v in items[:limit]]
        return dl(rows) + ('<span class="mute">... %d more</span>' % more if more > 0 else "")
    if isinstance(value, list) and value and depth < 4 and any(isinstance(v, (dict, list)) for v in value):
        more = len(value) - limit
        return "<ol>%s</ol>" % "".join("<li>%s</li>" % tree(v, depth + 1, limit) for v in value[:limit]) + (
            '<span class="mute">... %d more</span>' % more if more > 0 else "")
    return cell(value, 400)


def patch_block(text: str) -> str:
    """A unified diff, added lines green, removed red, hunk headers blue (plain text with styles off)."""
    out = []
    for line in text.split("\n"):
        kind = "a" if line.startswith("+") and not line.startswith("+++") else \
            "d" if line.startswith("-") and not line.startswith("---") else \
            "h" if line.startswith(("@@", "diff --git")) else ""
        out.append('<span class="%s">%s</span>' % (kind, esc(line)) if kind else esc(line))
    return '<pre class="patch">%s</pre>' % "\n".join(out)


# -- inline SVG ----------------------------------------------------------------------------------

def chart_svg(label: str, points: Sequence[Tuple[str, Optional[float]]]) -> str:
    """One value per run, in run order: a line through the points, each titled with its run and value."""
    got = [(i, run, v) for i, (run, v) in enumerate(points) if v is not None]
    if not got:
        return '<p class="mute">%s: no numeric value to chart.</p>' % esc(label)
    lo, hi = min(v for _, _, v in got), max(v for _, _, v in got)
    span = (hi - lo) or 1.0
    n = max(len(points) - 1, 1)
    w, h, left, top = 560, 180, 64, 12
    xy = [(left + (w - left - 12) * i / n, top + (h - top - 28) * (1 - (v - lo) / span), run, v)
          for i, run, v in got]
    dots = "".join('<circle class="pt" cx="%.1f" cy="%.1f" r="3.5"><title>%s: %s</title></circle>'
                   % (x, y, esc(run), esc("%g" % v)) for x, y, run, v in xy)
    line = " ".join("%.1f,%.1f" % (x, y) for x, y, _, _ in xy)
    return ('<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
            'role="img" aria-label="%s across runs"><path class="ax" d="M%d %dV%dH%d"/>'
            '<text x="2" y="%d">%s</text><text x="2" y="%d">%s</text><text x="%d" y="%d">run 1</text>'
            '<text x="%d" y="%d" text-anchor="end">run %d</text><text x="%d" y="%d" text-anchor="middle">%s</text>'
            '<polyline class="ln" points="%s"/>%s</svg>'
            % (w, h, w, h, esc(label), left - 4, top, h - 24, w - 8, top + 10, esc("%.4g" % hi), h - 26,
               esc("%.4g" % lo), left, h - 8, w - 12, h - 8, len(points), (w + left) // 2, h - 8, esc(label, 40),
               line, dots))


# -- one run -------------------------------------------------------------------------------------

def _val(doc: Any, *paths: str) -> Any:
    for p in paths:
        v = get(doc, p)
        if v is not MISSING and v is not None and v != "" and v != {} and v != []:
            return v
    return None


def trackers(doc: Any) -> str:
    """``lineage.trackers`` as links where the tool has a web page (W&B; MLflow with an http server)."""
    out = []
    for t in summary_trackers(doc):
        tool, run = t.get("tool"), t.get("run")
        if tool == "wandb" and isinstance(run, str) and re.match(r"^[\w.-]+/[\w.-]+/[\w.-]+$", run):
            entity, project, rid = run.split("/")
            out.append("W&amp;B " + link("https://wandb.ai/%s/%s/runs/%s" % (entity, project, rid), run))
        elif tool == "mlflow" and isinstance(t.get("tracking_uri"), str) and isinstance(t.get("run_id"), str) \
                and isinstance(t.get("experiment_id"), str):
            url = "%s/#/experiments/%s/runs/%s" % (t["tracking_uri"].rstrip("/"), t["experiment_id"], t["run_id"])
            out.append("MLflow " + link(url, t["run_id"]))
        else:
            out.append("%s %s" % (esc(tool), esc(run or t.get("run_id") or t.get("log_dir") or "")))
    return "<br>".join(out)


def _metrics(doc: Any) -> Dict[str, Any]:
    m = get(doc, "results.metrics", None)
    return m if isinstance(m, dict) else {}


def summary_rows(doc: Any) -> List[Tuple[str, str]]:
    """The headline of a run: when, how it ended, the command, the code, the machine, the lineage."""
    outcome = section(doc, "outcome")
    dur = number(outcome.get("duration_s"))
    argv = get(doc, "command.argv", None)
    rows = [("run id", esc(doc.get("run_id"))), ("when (UTC)", esc(doc.get("generated_at"))),
            ("ended", '<span class="%s">%s</span>' % ("ok" if outcome.get("status") == "ok" else "bad" if outcome else
                                                      "mute", esc(outcome_text(doc) if outcome else "not recorded")))]
    if dur is not None:
        rows.append(("duration", esc("%.1f s" % dur if dur < 120 else "%.1f min" % (dur / 60))))
    if isinstance(argv, list):
        rows.append(("command", "<code>%s</code>" % esc(" ".join(shell_quote(str(a)) for a in argv), 2000)))
    cwd = _val(doc, "command.cwd", "command.working_directory")
    if cwd:
        rows.append(("directory", esc(cwd)))
    code = section(doc, "code")
    if code:
        rows.append(("code", esc(", ".join("%s@%s%s" % (n, short(r.get("commit")), "*" if r.get("dirty") else "")
                                           for n, r in sorted(code.items()) if isinstance(r, dict)))))
    gpus = gpu_cell(doc) if isinstance(doc, dict) else "-"
    hw = [gpus if gpus != "-" else "no GPU recorded"]
    for label, path in (("driver", "hardware.driver_version"), ("CUDA", "hardware.cuda_version"),
                        ("NCCL", "hardware.nccl_version"), ("cuDNN", "hardware.cudnn_version")):
        v = _val(doc, path)
        if v is not None:
            hw.append("%s %s" % (label, v))
    rows.append(("GPUs", esc(", ".join(str(x) for x in hw))))
    py = python_version(doc)
    pkgs = _val(doc, "environment.packages_count")
    if pkgs is None and isinstance(get(doc, "environment.packages", None), dict):
        pkgs = len(doc["environment"]["packages"])
    if py or pkgs:
        rows.append(("Python", esc("%s, %s packages" % (py or "?", pkgs if pkgs is not None else "?"))))
    for label, path in (("group", "lineage.group"), ("parent", "lineage.parent.run_id"),
                        ("replay of", "lineage.replay_of"), ("note", "lineage.note")):
        v = _val(doc, path)
        if v is not None:
            rows.append((label, '<a href="#%s">%s</a>' % (anchor(v), esc(v)) if label == "parent" else esc(v)))
    seeds = section(doc, "seeds")
    if "bit_reproducible" in seeds:
        rows.append(("bit-reproducible", esc("yes" if seeds["bit_reproducible"] is True else "no")))
    links = trackers(doc)
    if links:
        rows.append(("trackers", links))
    metrics = _metrics(doc)
    if metrics:
        rows.append(("metrics", esc(", ".join("%s=%s" % (k, v) for k, v in sorted(metrics.items())), 600)))
    return rows


_SECTIONS = ("command", "code", "config", "environment", "hardware", "runtime", "training", "seeds", "data",
             "results", "outcome", "lineage", "collection")


def recorded_line(doc: Any) -> str:
    """Which sections the manifest holds and which it does not: a partial manifest says so up front."""
    have = [s for s in _SECTIONS if isinstance(doc.get(s), dict) and doc.get(s)]
    lacks = [s for s in _SECTIONS if s not in have]
    text = "schema %s; recorded: %s" % (safe_text(doc.get("schema_version")), ", ".join(have) or "nothing")
    if lacks:
        text += "; not recorded: " + ", ".join(lacks)
    return '<p class="mute">%s</p>' % esc(text)


def _code_block(doc: Any) -> str:
    out = []
    for name, repo in sorted(section(doc, "code").items()):
        if not isinstance(repo, dict):
            continue
        rows = [("commit", esc(repo.get("commit"))),
                ("branch", esc(repo.get("branch") or ("detached" if repo.get("detached") else None))),
                ("dirty", '<span class="%s">%s</span>' % ("WARN" if repo.get("dirty") else "ok",
                                                           esc(bool(repo.get("dirty")))))]
        for key in ("describe", "operation", "path"):
            if repo.get(key):
                rows.append((key, esc(repo[key])))
        remotes = repo.get("remotes")
        if isinstance(remotes, dict) and remotes:
            rows.append(("remotes", "<br>".join("%s %s" % (esc(k), link(v)) for k, v in sorted(remotes.items()))))
        files = untracked_files(repo.get("untracked"))
        if files:
            rows.append(("untracked", esc(", ".join(files[:20]) + (" ..." if len(files) > 20 else ""))))
        patch = repo.get("patch")
        text = patch_text(patch)
        if text is not None:
            rows.append(("patch", "<details><summary>%s</summary>%s</details>" % (
                esc("%d lines: +%d -%d" % patch_counts(text)), patch_block(text))))
        elif isinstance(patch, dict):
            where = patch.get("sidecar") or patch.get("not_stored") or patch.get("error") or "not inline"
            rows.append(("patch", esc("%s (sha256 %s)" % (where, short(patch.get("sha256"))))))
        out.append("<h3>%s</h3>%s" % (esc(name), dl(rows)))
    return "".join(out)


def _probes(doc: Any) -> str:
    probes = section(doc, "collection.probes")
    rows = []
    for name, p in sorted(probes.items()):
        if isinstance(p, dict):
            status = str(p.get("status"))
            warnings = p.get("warnings") if isinstance(p.get("warnings"), list) else []
            rows.append([esc(name), ("<span class=\"%s\">%s</span>" % (esc(status), esc(status)), None),
                         (esc(p.get("seconds")), number(p.get("seconds"))), "<br>".join(esc(w) for w in warnings)])
    return table(["probe", "status", "seconds", "warnings"], rows, sortable=True) if rows else \
        '<p class="mute">collection not recorded</p>'


def config_block(doc: Any) -> str:
    """``config``: the resolved arguments (and where they came from), the selected environment, each config
    file with its digest, the one digest over them all."""
    config = section(doc, "config")
    if not config:
        return ""
    out = ["<h3>Configuration</h3>"]
    args = config.get("resolved_args")
    if isinstance(args, dict) and args:
        source = config.get("resolved_args_source")
        out.append("<h4>Arguments%s</h4>%s" % (" (%s)" % esc(source) if isinstance(source, str) and source else "",
                                               tree(args)))
    env = config.get("selected_env")
    if isinstance(env, dict) and env:
        out.append("<h4>Environment</h4>" + tree(env))
    files = config.get("files")
    if isinstance(files, dict) and files:
        details = config.get("file_details") if isinstance(config.get("file_details"), dict) else {}
        rows = []
        for path, digest in sorted(files.items(), key=lambda kv: str(kv[0])):
            d = details.get(path) if isinstance(details.get(path), dict) else {}
            rows.append([esc(path), '<span class="mono" title="%s">%s</span>' % (esc(digest), esc(str(digest)[:12])),
                         (esc(d.get("size")), number(d.get("size")))])
        out.append("<h4>Config files</h4>" + table(["file", "sha256", "bytes"], rows))
    if config.get("hash"):
        out.append('<p class="mute">configuration digest %s</p>' % esc(config["hash"]))
    return "".join(out) if len(out) > 1 else ""


def _pairs(node: Any) -> List[str]:
    return ["%s = %s" % (k, v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True))
            for k, v in sorted(node.items(), key=lambda kv: str(kv[0]))] if isinstance(node, dict) else []


def seeds_block(doc: Any) -> str:
    """``seeds`` as a short list people read: the seeds, the determinism switches, the verdict and what stands
    between this setup and a bit-exact rerun."""
    seeds = section(doc, "seeds")
    if not seeds:
        return ""
    items = []
    for label, key in (("seed", "values"), ("environment", "env"), ("flag", "flags"), ("torch", "torch")):
        items += ["<li>%s: <code>%s</code></li>" % (esc(label), esc(p)) for p in _pairs(seeds.get(key))]
    if "bit_reproducible" in seeds:
        yes = seeds["bit_reproducible"] is True
        items.append('<li>bit-reproducible: <span class="%s">%s</span></li>' % ("ok" if yes else "WARN",
                                                                                 "yes" if yes else "no"))
    missing = seeds.get("missing")
    if isinstance(missing, list):
        items += ['<li class="WARN">%s</li>' % esc(m) for m in missing]
    if not items:
        return '<h3>Seeds and determinism</h3><p class="mute">no seed nor determinism setting recorded</p>'
    return "<h3>Seeds and determinism</h3><ul class=\"seeds\">%s</ul>" % "".join(items)


def run_section(doc: Any, full: bool = True, check: str = "") -> str:
    """One run: its summary card; ``full`` (the run's own page, whose title names it): every recorded section,
    the configuration, seeds, the patches, the probes, ``check``."""
    rid = doc.get("run_id")
    parts = ['<section id="%s" class="run" data-run="%s"><h2>%s</h2>' % (
        anchor(rid), esc(rid), "Summary" if full else "Run " + esc(rid)),
        recorded_line(doc) if full else "", '<div class="card">%s</div>' % dl(summary_rows(doc))]
    if not full:
        return "".join(parts) + "</section>\n"
    if check:
        parts.append("<h3>check</h3>" + check)
    parts.append(config_block(doc))
    parts.append(seeds_block(doc))
    if section(doc, "code"):
        parts.append("<h3>Code</h3>" + _code_block(doc))
    key = section(doc, "environment.key_packages")
    if key:
        parts.append("<h3>Key packages</h3>" + dl((k, esc(v)) for k, v in sorted(key.items())))
    for name, title in (("hardware", "Hardware"), ("runtime", "Runtime (Ray, launcher)"),
                        ("scheduler", "Scheduler"), ("container", "Container"), ("training", "Training topology"),
                        ("data", "Data"), ("results", "Results"), ("outcome", "Outcome")):
        node = doc.get(name)
        if isinstance(node, dict) and node:
            parts.append("<details%s><summary>%s</summary>%s</details>"
                         % (" open" if name in ("training", "results") else "", esc(title), tree(node)))
    parts.append("<h3>Collection</h3>" + _probes(doc))
    return "".join(parts) + "</section>\n"


def check_block(items: Sequence[Any], summary: str, against: str) -> str:
    """``check``'s verdicts (``Item`` rows) against another manifest or this machine."""
    rows = [[esc(i.item), esc(i.recorded), esc(i.here), ("<span class=\"%s\">%s</span>" % (
        esc(i.verdict).replace(" ", "-"), esc(i.verdict)), None), esc(i.note)] for i in items]
    return '<p>%s: <b>%s</b></p>%s' % (esc(against), esc(summary),
                                       table(["item", "recorded", "there", "verdict", "note"], rows, sortable=True))


# -- many runs -----------------------------------------------------------------------------------

def runs_table(docs: Sequence[Any]) -> str:
    """Every run, one row: the ``ls`` columns with the metrics, each id linking to its section."""
    names = sorted({k for d in docs for k in _metrics(d)})[:12]
    rows = []
    for d in docs:
        rid = d.get("run_id")
        m = _metrics(d)
        rows.append(['<a href="#%s">%s</a>' % (anchor(rid), esc(rid)), esc(d.get("generated_at")),
                     esc(get(d, "lineage.group", None)), esc(outcome_text(d))]
                    + [(metric(m.get(k, "")), number(m.get(k))) for k in names])
    return table(["run", "when (UTC)", "group", "ended"] + [esc("metric." + k) for k in names], rows, sortable=True)


# -- two runs ------------------------------------------------------------------------------------

def diff_section(changes: Sequence[Any], hidden: Mapping[str, int], summary: str, old_id: Any, new_id: Any,
                 categories: Sequence[str]) -> str:
    """``diff``'s changes in its ranking, one table per section: the field, then each run's value."""
    text = ['<section id="diff"><h2>What differs</h2><p><b>%s</b></p>' % esc(summary)]
    for cat in list(categories) + sorted({c.category for c in changes} - set(categories)):
        mine = [c for c in changes if c.category == cat]
        if not mine:
            continue
        rows = []
        for c in mine:
            note = c.extra.get("summary") if c.extra else None
            rows.append([esc(c.path), ("<span class=\"%s\">%s</span>" % (esc(c.kind), esc(c.kind)), None),
                         cell(c.old if note is None else note), cell(c.new if note is None else "")])
        text.append("<h3>%s</h3>" % esc(cat) + table(["field", "change", esc(old_id), esc(new_id)], rows, cls="diff"))
    return "".join(text) + "</section>\n"
