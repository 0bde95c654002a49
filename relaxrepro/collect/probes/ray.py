"""Ray cluster topology: mode, alive nodes with roles and resources, dead nodes apart, versions.

Order of sources (measured in ``/work/shared/fixtures/ray/REPORT.md``):

1. No subprocess: ``RAY_ADDRESS``, the ``ray_current_cluster`` file, ``raylet`` processes in ``/proc``.
   None of them -> ``mode: local`` at once (``ray status`` would spend ~1 s reaching the same answer).
2. The dashboard's REST API (``/api/v0/nodes``, ``/api/version``: ~20 ms, what ``ray list nodes``
   itself asks), only when ``RAY_ADDRESS`` names it or a local raylet vouches for the cluster;
   ``ray --version`` runs alongside for the CLI/cluster version check.
3. Else ``ray list nodes --format json`` (roles, IPs, resources, labels; needs the dashboard,
   ~1 s idle, 2.6-3.5 s on a busy machine), then ``ray status -v``: node count and per-node
   resources, no roles (2.9 and 2.6x text formats).

Every call is capped (a stale address makes the CLI hang ~41 s before it gives up).
"""

from __future__ import annotations

import os
import re

from ...std import deadline, proc
from ...std.files import read_regular
from ..context import Context, policy_of
from ..runner import Outcome
from . import ray_parse, training

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Mapping, Optional, Tuple

    from ...std.deadline import Call

CALL_TIMEOUT_S = 3.5
"""Cap for each ray CLI call. A healthy ``ray list nodes`` takes ~1 s on an idle 2-core machine but
2.6-3.5 s at load average 5 (measured here, Ray 2.60), so 2.5 s would call a busy node "unreachable";
a stale address hangs ~41 s, so some cap below the 4 s probe budget is needed anyway."""

# -- detection without a subprocess ---------------------------------------------------------------

def _address_file(ctx: Context) -> Optional[str]:
    seen = set()
    for base in (ctx.env.get("RAY_TMPDIR"), ctx.env.get("TMPDIR"), "/tmp"):
        if not base or base in seen:
            continue
        seen.add(base)
        text = ctx.read_text(os.path.join(base, "ray", "ray_current_cluster"), limit=4096)
        if text and text.strip():
            return text.strip().splitlines()[0]
    return None


def scan_raylets(ctx: Context, limit: int = 100000) -> List[Dict[str, Any]]:
    """Raylets among this machine's processes (Ray's own fallback, ``services.find_gcs_addresses``)."""
    try:
        names = os.listdir(ctx.path("/proc"))
    except OSError:
        return []
    found = []
    ours = _netns(ctx, "self")
    my_uid = os.geteuid() if hasattr(os, "geteuid") else None
    for name in sorted(names)[:limit]:
        if not name.isdigit():
            continue
        raw = ctx.read_text("/proc", name, "cmdline", limit=1 << 16)
        if not raw or "raylet" not in raw:
            continue
        node = ray_parse.parse_raylet_cmdline([a for a in raw.split("\0") if a])
        if node is None or not _same_user(ctx, name, my_uid):
            continue
        if ours is not None and _is_loopback(node.get("gcs_address")):
            theirs = _netns(ctx, name)
            if theirs is not None and theirs != ours:
                # A loopback cluster of another network namespace (another container or test sandbox on a
                # shared host): unreachable from here, so asking the CLI about it only burns its 3.5 s cap.
                continue
        found.append(node)
    return found


def _netns(ctx: Context, pid: str) -> Optional[str]:
    """``net:[4026531833]`` of a process, or None when it cannot be read (another user's, gone, a test root)."""
    try:
        return os.readlink(ctx.path("/proc", pid, "ns", "net"))
    except OSError:
        return None


def _same_user(ctx: Context, pid: str, my_uid: Optional[int]) -> bool:
    """Another user's raylet on a shared machine is not the cluster this run belongs to."""
    try:
        owner = os.stat(ctx.path("/proc", pid)).st_uid
    except OSError:
        return False
    return my_uid is None or owner == my_uid


def _is_loopback(address: Optional[str]) -> bool:
    host = (address or "").rsplit(":", 1)[0].strip("[]")
    return host == "localhost" or host == "::1" or host.startswith("127.")


def _dist_version(ctx: Context, raylet_exe: str) -> Optional[str]:
    """Ray version installed beside a running raylet (``site-packages/ray-<v>.dist-info``)."""
    marker = os.sep + os.path.join("ray", "core", "src", "ray", "raylet", "raylet")
    if not raylet_exe.endswith(marker):
        return None
    site = raylet_exe[: -len(marker)]
    try:
        entries = os.listdir(ctx.path(site))
    except OSError:
        return None
    for entry in sorted(entries):
        m = re.match(r"^ray-([0-9][^-]*)\.dist-info$", entry)
        if m:
            return m.group(1)
    return None


def _cli_dist_version(ctx: Context) -> Optional[str]:
    """The version of the Ray that the ``ray`` on PATH runs, read from its install without running it.

    ``ray --version`` imports Ray (0.8 s idle, ~3 s on a busy 2-core machine: measured with bench/run.py)
    and the collection waited for it. A pip console script ``<prefix>/bin/ray`` whose ``#!`` names
    ``<prefix>/bin/python*`` runs the Ray of that prefix's one ``ray-<v>.dist-info``; anything else (a
    wrapper, several installs, no dist-info): None, and the CLI is asked.
    """
    script = ctx.which("ray")
    if not script:
        return None
    try:
        first = read_regular(script, 512).split(b"\n", 1)[0].decode("utf-8", "replace")
    except OSError:
        return None
    words = first[2:].split() if first.startswith("#!") else []
    bindir = os.path.dirname(os.path.abspath(script))
    if len(words) != 1 or os.path.dirname(words[0]) != bindir or not re.match(r"^python[0-9.]*$",
                                                                                os.path.basename(words[0])):
        return None
    found = []
    libdir = os.path.join(os.path.dirname(bindir), "lib")
    try:
        pythons = [d for d in os.listdir(libdir) if d.startswith("python")]
    except OSError:
        return None
    for d in pythons:
        site = os.path.join(libdir, d, "site-packages")
        try:
            entries = os.listdir(site)
        except OSError:
            continue
        found.extend(m.group(1) for m in (re.match(r"^ray-([0-9][^-]*)\.dist-info$", e) for e in entries) if m)
    return found[0] if len(found) == 1 else None


def detect(ctx: Context) -> Dict[str, Any]:
    """Hints that a Ray cluster may be reachable, gathered without any subprocess."""
    hints: Dict[str, Any] = {}
    env_address = (ctx.env.get("RAY_ADDRESS") or "").strip()
    if env_address:
        hints["address"] = env_address
        hints["address_source"] = "env"
    file_address = _address_file(ctx)
    if file_address and "address" not in hints:
        hints["address"] = file_address
        hints["address_source"] = "address_file"
    raylets = scan_raylets(ctx)
    if raylets:
        hints["raylets"] = raylets
        if "address" not in hints and raylets[0].get("gcs_address"):
            hints["address"] = raylets[0]["gcs_address"]
            hints["address_source"] = "proc"
    return hints


# -- the collector --------------------------------------------------------------------------------

def _call_timeout(ctx: Context) -> float:
    """``options["ray_timeout_s"]`` (API callers with a larger probe budget) or the default cap."""
    value = ctx.options.get("ray_timeout_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return CALL_TIMEOUT_S


def _version_answer(call: Call) -> proc.ProcResult:
    """What ``ray --version`` run in the background gave; a crash is reported as proc.run reports, not raised."""
    if call.ok:
        return call.value
    return proc.ProcResult(argv=["ray"], error=call.why("no answer"))


def _failure(res: Any) -> str:
    """The last meaningful stderr line of a failed ray call (tracebacks end with the reason)."""
    if res.timed_out:
        return "timed out after %.1f s (stale or unreachable address?)" % res.seconds
    lines = [ln.strip() for ln in (res.stderr or "").splitlines() if ln.strip()]
    # Inside a loopback-only namespace each Ray process warns about 8.8.8.8 first: skip log lines.
    lines = [ln for ln in lines if not re.match(r"^\[\d{4}-\d\d-\d\d ", ln)]
    return "%s: %s" % (res.describe(), lines[-1][:300] if lines else "no message")


def _mark_local(nodes: List[Dict[str, Any]], raylets: List[Dict[str, Any]]) -> None:
    """``ray status`` shows no roles; a raylet on this machine tells its own node's role."""
    known = {r.get("node_id"): r for r in raylets if r.get("node_id")}
    for node in nodes:
        local = known.get(node.get("node_id"))
        if local is not None and node.get("role") == "unknown":
            node["role"] = local["role"]
            if local.get("address"):
                node["address"] = local["address"]


DASHBOARD_PORT = 8265
DASHBOARD_TIMEOUT_S = 1.0
"""The dashboard answers in ~20 ms (vs 1-3.5 s for a ray CLI call); a firewalled head costs this cap."""


def dashboard_url(address: Optional[str], port: int = DASHBOARD_PORT) -> Optional[str]:
    """The dashboard of the cluster at ``address``: ``RAY_ADDRESS`` may already be its URL (the form
    ``ray job submit`` uses); a GCS ``host:port`` has it on the same host, default port 8265."""
    if not address:
        return None
    if address.startswith(("http://", "https://")):
        return address.rstrip("/")
    m = re.match(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d+$", address)  # not "auto", not ray://
    return "http://%s:%d" % (m.group(1), port) if m else None


def _http_get(url: str, timeout: float, limit: int = 16 << 20) -> str:
    import urllib.request  # lazy: ~130 ms (http.client, email, ssl), only when a dashboard may answer

    # No proxy: an https_proxy from the user's shell must not carry a cluster-internal request away.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as resp:
        return resp.read(limit).decode("utf-8", "replace")


def _from_dashboard(url: str, timeout: float) -> Tuple[Optional[Dict[str, Any]], Optional[str], Optional[str]]:
    """(node summary, cluster version, why not) from the dashboard's REST API; never raises."""
    try:
        nodes_url = url + "/api/v0/nodes?limit=10000&timeout=%d" % max(timeout, 1)
        summary = ray_parse.parse_dashboard_nodes(_http_get(nodes_url, timeout))
    except Exception as exc:  # refused, timed out, HTTP error, not the expected JSON
        return None, None, "%s: %s" % (type(exc).__name__, exc)
    try:
        version = ray_parse.parse_dashboard_version(_http_get(url + "/api/version", timeout))
    except Exception:
        version = None
    return summary, version, None


def _dashboard_may_answer(hints: Dict[str, Any]) -> bool:
    """Ask the dashboard only when it is named (an http ``RAY_ADDRESS``) or a raylet on this machine
    belongs to the hinted GCS: port 8265 of a host with a stale address file may serve another cluster."""
    address = hints.get("address") or ""
    if address.startswith(("http://", "https://")):
        return True
    return any(r.get("gcs_address") == address for r in hints.get("raylets", []))


def _same_cluster(summary: Dict[str, Any], hints: Dict[str, Any]) -> bool:
    """The dashboard's nodes include a local raylet of the hinted GCS (or the user named the dashboard)."""
    address = hints.get("address") or ""
    if address.startswith(("http://", "https://")):
        return True
    local = {r.get("node_id") for r in hints.get("raylets", []) if r.get("gcs_address") == address}
    listed = {n.get("node_id") for n in summary.get("nodes", []) + summary.get("dead_nodes", [])}
    return bool(local & listed)


def collect(ctx: Context) -> Outcome:
    hints = detect(ctx)
    if not hints:
        # No cluster: the run is on this one machine (node_count counts machines, not Ray nodes).
        return Outcome(data={"runtime": {"mode": "local", "node_count": 1}}, status="absent")
    out = Outcome()
    raylets = hints.get("raylets", [])
    ray_info: Dict[str, Any] = {"address": hints.get("address"), "address_source": hints.get("address_source")}
    for r in raylets:
        version = _dist_version(ctx, r.get("executable") or "")
        if version:
            ray_info["version"] = version
            break
    has_cli = ctx.which("ray") is not None
    env = dict(ctx.env)
    env["RAY_USAGE_STATS_ENABLED"] = "0"  # never let a probe make Ray report to usage-stats.ray.io
    cap = min(_call_timeout(ctx), max(ctx.budget() - 0.2, 0.1))
    # `ray --version` runs alongside everything else; it is only needed for the mismatch check.
    installed = _cli_dist_version(ctx) if has_cli else None
    if installed:
        ray_info["cli_version"] = installed
    version_call = None
    if has_cli and not installed:
        version_call = deadline.start(lambda: ctx.run(["ray", "--version"], timeout=cap, env=env),
                                      name="relaxrepro-ray-version")
    summary: Optional[Dict[str, Any]] = None
    port = ctx.options.get("ray_dashboard_port")  # a head started with --dashboard-port
    port = port if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536 else DASHBOARD_PORT
    url = dashboard_url(hints.get("address"), port) if ctx.options.get("ray_dashboard", True) else None
    if url and _dashboard_may_answer(hints):
        summary, version, _why = _from_dashboard(url, min(DASHBOARD_TIMEOUT_S, cap))  # the CLI says why better
        if summary is not None and not _same_cluster(summary, hints):
            summary = None
        if summary is not None:
            ray_info["source"] = "dashboard_api"
            if version:
                ray_info["version"] = version
    if summary is None and has_cli:
        summary = _from_cli(ctx, env, raylets, ray_info, out)
    if version_call is not None:
        res = _version_answer(version_call.wait())  # ctx.run has its own timeout
        if res.ok:
            ray_info.setdefault("cli_version", ray_parse.parse_cli_version(res.stdout))
    if summary is None:
        return _from_raylets(out, raylets, ray_info, None if has_cli else "the ray command is not on PATH")
    if "version" not in ray_info and ray_info.get("cli_version") and ray_info.get("source") == "status_text":
        # `ray status` refuses a cluster of another version (rc 1, "Ray version mismatch"), so its
        # answer came from a cluster of its own version. `ray list` goes through the dashboard and
        # was not seen to check, so it proves nothing about the cluster's version.
        ray_info["version"] = ray_info["cli_version"]
    _finish_versions(ray_info, out)
    runtime = dict(summary)
    runtime["mode"] = ray_parse.mode_of(summary["node_count"])
    runtime["ray"] = {k: v for k, v in ray_info.items() if v is not None}
    out.data = {"runtime": runtime}
    return out


def _from_cli(ctx: Context, env: Dict[str, str], raylets: List[Dict[str, Any]], ray_info: Dict[str, Any],
              out: Outcome) -> Optional[Dict[str, Any]]:
    """``ray list nodes``, else ``ray status -v``; the node summary or None (warnings on ``out``)."""
    list_res = ctx.run(["ray", "list", "nodes", "--format", "json", "--limit", "10000"],
                       timeout=min(_call_timeout(ctx), max(ctx.budget() - 0.2, 0.1)), env=env)
    if list_res.ok:
        try:
            ray_info["source"] = "list_nodes"
            return ray_parse.parse_list_nodes(list_res.stdout)
        except ValueError as exc:
            ray_info.pop("source", None)
            out.warn("ray list nodes printed no node list: %s" % exc)
    else:
        _note_mismatch(list_res.stderr, ray_info)
        out.warn("ray list nodes failed: " + _failure(list_res))
    if list_res.timed_out:
        out.status = "timeout"  # a stale address: a retry would hang the same way
        return None
    if ctx.budget() <= 0.2:
        return None
    # No dashboard (plain `ray`, or --include-dashboard=false): the autoscaler text still has counts.
    status_res = ctx.run(["ray", "status", "-v"], timeout=min(_call_timeout(ctx), ctx.budget()), env=env)
    if status_res.ok and status_res.stdout.strip():
        summary = ray_parse.parse_status_text(status_res.stdout)
        _mark_local(summary["nodes"], raylets)
        ray_info["source"] = "status_text"
        return summary
    _note_mismatch(status_res.stderr, ray_info)
    out.warn("ray status failed: " + _failure(status_res), status="timeout" if status_res.timed_out else None)
    return None


def _note_mismatch(stderr: str, ray_info: Dict[str, Any]) -> None:
    pair = ray_parse.parse_version_mismatch(stderr)
    if pair:
        ray_info["version"], ray_info["cli_version"] = pair


def _finish_versions(ray_info: Dict[str, Any], out: Outcome) -> None:
    cluster, cli = ray_info.get("version"), ray_info.get("cli_version")
    if cluster and cli:
        ray_info["mismatch"] = cluster != cli
        if cluster != cli:
            out.warn("ray CLI %s differs from the cluster's Ray %s: the CLI cannot query it" % (cli, cluster))


def _from_raylets(out: Outcome, raylets: List[Dict[str, Any]], ray_info: Dict[str, Any],
                  why: Optional[str]) -> Outcome:
    """The cluster could not be queried: record what the local raylets and hints say."""
    if why:
        out.warn(why)
    if out.status == "ok":
        out.status = "partial"
    _finish_versions(ray_info, out)
    ray_info["reachable"] = False
    if raylets:
        ray_info["source"] = "proc"
    # Relax's name for this state (its schema has no plain "unknown"); our readers take both.
    runtime: Dict[str, Any] = {"mode": "ray_initialized_unknown",
                               "ray": {k: v for k, v in ray_info.items() if v is not None}}
    if raylets:
        runtime["local_nodes"] = ray_parse.sort_nodes([
            {"node_id": r.get("node_id"), "address": r.get("address"), "role": r["role"],
             "resources": r["resources"], "alive": True}
            for r in raylets
        ])
    out.data = {"runtime": runtime}
    return out


# -- the live topology, from the trainer's own driver ------------------------------------------------

def update_live(manifest: Dict[str, Any], modules: Mapping[str, Any], lock: Any) -> Optional[Outcome]:
    """The live Ray topology from the trainer's own driver: ``ray.nodes()`` and ``cluster_resources()``.

    No subprocess, no second driver. Ray is never imported here: without an initialised Ray among
    ``modules`` (the trainer's ``sys.modules``) the step reports nothing (None). It replaces the runtime
    seen from outside (which may have been partial) and re-derives the training topology from it,
    holding ``lock`` (the API's) while it changes ``manifest``.
    """
    ray = modules.get("ray")
    if ray is None or not callable(getattr(ray, "is_initialized", None)) or not ray.is_initialized():
        return None
    live = ray_parse.runtime_from_ray_nodes(
        ray.nodes(), ray.cluster_resources(), str(getattr(ray, "__version__", "") or "") or None)
    with lock:
        runtime = dict(manifest.get("runtime") or {})
        old_ray = runtime.get("ray") if isinstance(runtime.get("ray"), dict) else {}
        for key in ("mode", "node_count", "nodes", "dead_nodes", "totals", "local_nodes"):
            runtime.pop(key, None)
        live_ray = live.pop("ray")
        for key in ("cli_version", "address", "address_source"):
            if old_ray.get(key) is not None:
                live_ray[key] = old_ray[key]
        if live_ray.get("cli_version") and live_ray.get("version"):
            live_ray["mismatch"] = live_ray["cli_version"] != live_ray["version"]
        runtime.update(live)
        runtime["ray"] = live_ray
        manifest["runtime"] = runtime
        derived, _ = training.derive_training(manifest)
        kept = {k: v for k, v in (manifest.get("training") or {}).items() if k not in training.OWNED_KEYS}
        kept.update(derived)
        manifest["training"] = kept
        red = policy_of(manifest)  # the policy the manifest was collected with
        for section in ("runtime", "training"):
            manifest[section] = red.value(manifest[section])
    return Outcome()
