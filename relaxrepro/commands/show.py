"""``relaxrepro show RUN``: one manifest for a person: who the run is, what it ran, on which code, environment
and machine, its topology, seeds and results (the report's run card, in the terminal). ``--section NAME``
prints one section (or a dotted path into it) as ``path  value`` lines; ``--json`` the recorded JSON.

Every value read from the manifest is one escaped line (:func:`~relaxrepro.std.text.safe_text`): a manifest
cannot add a line to what the user reads, nor act on the terminal.
"""

from __future__ import annotations

import json
import os
import sys

from ..analyze.container import describe
from ..manifest.fields import MISSING, get, patch_counts, patch_text, python_version, section, untracked_files
from ..manifest.flat import flatten
from ..manifest.numbers import shown
from ..manifest.summary import gpu_cell, outcome_text, parent_id, short, trackers
from ..std.table import rel_path
from ..std.text import safe_json, safe_text
from ._common import Exit, say
from ._runs import read_with_notes, resolve_args

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List, Tuple

VALUE_WIDTH = 160
"""A value longer than this is cut (``...``) in the summary; ``--section`` shows values whole."""


def run(args: argparse.Namespace) -> int:
    if not resolve_args("show", args, "manifest"):
        return Exit.USAGE
    doc = read_with_notes("show", args.manifest)
    if doc is None:
        return Exit.USAGE
    if args.section is not None:
        value = get(doc, args.section)
        if value is MISSING:
            have = ", ".join(k for k in sorted(doc) if isinstance(doc[k], dict))
            say("relaxrepro show: error: %s: no section %s in this manifest (it records: %s)", args.manifest,
                args.section, have or "no section")
            return Exit.USAGE
        if args.json:
            sys.stdout.write(as_json(value))
        else:
            sys.stdout.write(render_section(args.section, value))
        return Exit.OK
    sys.stdout.write(as_json(doc) if args.json else render(doc, args.manifest))
    return Exit.OK


def as_json(value: Any) -> str:
    """``value`` as the writer lays a manifest out (sorted keys, one-space indent), safe on a terminal."""
    return safe_json(json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False, default=str)) + "\n"


# -- the summary ---------------------------------------------------------------------------------

def render(doc: Dict[str, Any], path: str) -> str:
    """The readable summary: a heading line, then one block per part of the run that the manifest records."""
    blocks: List[Tuple[str, List[Tuple[str, Any]]]] = [
        ("identity", _identity(doc, path)), ("command", _command(doc)), ("code", _code(doc)),
        ("environment", _environment(doc)), ("hardware", _hardware(doc)), ("topology", _topology(doc)),
        ("seeds", _seeds(doc)), ("results", _results(doc)),
    ]
    lines = ["run %s" % safe_text(doc.get("run_id") or "-")]
    for title, rows in blocks:
        rows = [(k, v) for k, v in rows if v is not None and v != ""]
        lines.append("")
        lines.append(title)
        if not rows:
            lines.append("  not recorded")
            continue
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            lines.append(("  %-*s  %s" % (width, safe_text(key), safe_text(value, VALUE_WIDTH))).rstrip())
    return "\n".join(lines) + "\n"


def _identity(doc: Dict[str, Any], path: str) -> List[Tuple[str, Any]]:
    lin = section(doc, "lineage")
    rows = [("run id", doc.get("run_id")), ("manifest", rel_path(os.path.abspath(path), os.getcwd())),
            ("schema", doc.get("schema_version")), ("generated (UTC)", doc.get("generated_at")),
            ("group", lin.get("group")), ("parent", parent_id(doc)), ("replay of", lin.get("replay_of")),
            ("note", lin.get("note"))]
    for t in trackers(doc):
        rows.append(("tracker", "%s %s" % (t.get("tool"), t.get("run") or t.get("run_id") or t.get("log_dir") or "")))
    out = section(doc, "outcome")
    if out:
        text = outcome_text(doc)
        dur = out.get("duration_s")
        if isinstance(dur, (int, float)) and not isinstance(dur, bool):
            text += ", %.1f s" % dur if dur < 120 else ", %.1f min" % (dur / 60)
        rows.append(("outcome", text))
    return rows


def _command(doc: Dict[str, Any]) -> List[Tuple[str, Any]]:
    cmd = section(doc, "command")
    argv = cmd.get("argv")
    return [("argv", " ".join(str(a) for a in argv) if isinstance(argv, list) else None),
            ("directory", cmd.get("cwd") or cmd.get("working_directory")), ("source", cmd.get("source"))]


def _code(doc: Dict[str, Any]) -> List[Tuple[str, Any]]:
    rows = []
    for name, repo in sorted(section(doc, "code").items()):
        if not isinstance(repo, dict):
            continue
        parts = [short(repo.get("commit"))]
        branch = repo.get("branch") or ("detached" if repo.get("detached") else None)
        if branch:
            parts.append(str(branch))
        parts.append("dirty" if repo.get("dirty") else "clean")
        patch = repo.get("patch")
        text = patch_text(patch)
        if text is not None:
            _, plus, minus = patch_counts(text)
            files = patch.get("files") if isinstance(patch, dict) else None
            parts.append("patch %s+%d -%d" % ("%d file(s) " % len(files) if isinstance(files, list) else "",
                                              plus, minus))
        elif isinstance(patch, dict):
            parts.append("patch %s" % (patch.get("sidecar") or patch.get("not_stored") or patch.get("error")
                                       or "not inline"))
        untracked = untracked_files(repo.get("untracked"))
        if untracked:
            parts.append("%d untracked" % len(untracked))
        rows.append((name, ", ".join(parts)))
        if repo.get("path"):
            rows.append(("", "at %s" % repo["path"]))
    return rows


def _environment(doc: Dict[str, Any]) -> List[Tuple[str, Any]]:
    env = section(doc, "environment")
    packages = env.get("packages")
    count = env.get("packages_count")
    if count is None and isinstance(packages, dict):
        count = len(packages)
    system = section(env, "system")
    rows = [("python", python_version(doc)), ("packages", count),
            ("system", " ".join(str(system[k]) for k in ("os", "kernel", "arch") if system.get(k)) or None),
            ("container", describe(doc["container"]) if isinstance(doc.get("container"), dict) else None)]
    for name, version in sorted(section(env, "key_packages").items()):
        rows.append((name, version))
    return rows


def _hardware(doc: Dict[str, Any]) -> List[Tuple[str, Any]]:
    hw = section(doc, "hardware")
    cpu = section(hw, "cpu")
    gpus = gpu_cell(doc)
    cpu_text = None
    if cpu:
        cpu_text = ", ".join(p for p in (str(cpu["model"]) if cpu.get("model") else "",
                                         "%s logical CPUs" % shown(cpu["logical_cpus"]) if cpu.get("logical_cpus")
                                         else "") if p) or None
    memory = hw.get("memory_total_gb")
    return [("gpus", gpus if gpus != "-" else "none recorded"), ("driver", hw.get("driver_version")),
            ("cuda", hw.get("cuda_version")), ("nccl", hw.get("nccl_version")), ("cudnn", hw.get("cudnn_version")),
            ("cpu", cpu_text), ("memory", "%s GB" % shown(memory) if memory is not None else None)]


def _topology(doc: Dict[str, Any]) -> List[Tuple[str, Any]]:
    rt = section(doc, "runtime")
    tr = section(doc, "training")
    rows = [("mode", rt.get("mode")), ("nodes", rt.get("node_count")), ("world size", tr.get("world_size")),
            ("algorithm", tr.get("algorithm") or tr.get("algo"))]
    topo = tr.get("parallel_topology")
    if isinstance(topo, dict) and topo:
        rows.append(("parallel", ", ".join("%s=%s" % (k, shown(v)) for k, v in sorted(topo.items())
                                           if not isinstance(v, (dict, list)))))
    for key in ("global_batch_size", "micro_batch_size"):
        rows.append((key.replace("_", " "), tr.get(key)))
    return rows


def _seeds(doc: Dict[str, Any]) -> List[Tuple[str, Any]]:
    seeds = section(doc, "seeds")
    if not seeds:
        return []
    values = section(seeds, "values")
    bit = seeds.get("bit_reproducible")
    rows = [("values", ", ".join("%s=%s" % (k, shown(v)) for k, v in sorted(flatten(values).items())) or None),
            ("bit-reproducible", None if bit is None else "yes" if bit is True else "no")]
    missing = seeds.get("missing")
    if isinstance(missing, list):
        for m in missing:
            rows.append(("missing", m))
    return rows


def _results(doc: Dict[str, Any]) -> List[Tuple[str, Any]]:
    res = section(doc, "results")
    rows: List[Tuple[str, Any]] = []
    for name, value in sorted(flatten(section(res, "metrics")).items()):
        rows.append(("metric " + name, shown(value)))
    outputs = res.get("outputs")
    if isinstance(outputs, (dict, list)) and outputs:
        rows.append(("outputs", "%d recorded" % len(outputs)))
    trace = res.get("trace")
    if isinstance(trace, dict) and trace:
        steps = trace.get("steps")
        rows.append(("trace", "%d steps" % len(steps) if isinstance(steps, (list, dict)) else "recorded"))
    return rows


# -- one section ---------------------------------------------------------------------------------

def render_section(name: str, value: Any) -> str:
    """``value`` (the section or path ``name``) as ``path  value`` lines, leaves in the recorded order; a
    multi-line string is one escaped line (``\\n``)."""
    if not isinstance(value, (dict, list)):
        return "%s  %s\n" % (safe_text(name), safe_text(_leaf(value)))
    flat = flatten(value, name, label_lists=True) if isinstance(value, dict) else {
        "%s[%d]" % (name, i): v for i, v in enumerate(value)}
    if not flat:
        return "%s  (empty)\n" % safe_text(name)
    width = min(max(len(k) for k in flat), 48)
    return "".join(("%-*s  %s" % (width, safe_text(k), safe_text(_leaf(v)))).rstrip() + "\n"
                   for k, v in flat.items())


def _leaf(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return shown(value)
