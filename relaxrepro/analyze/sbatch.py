"""A SLURM batch script that replays a recorded run (``rerun --sbatch``): pure, the manifest in, the text out.

The ``#SBATCH`` lines come from what the scheduler probe recorded (``scheduler.node_count``,
``ntasks_per_node`` or ``ntasks``, ``gpus_per_node`` or ``gpus_on_node``, ``cpus_per_task``, ``partition``,
``account``, ``qos``);
what it did not record (the time limit, which no SLURM environment variable holds) is written as a
commented ``##SBATCH`` line marked ``fill in``, never guessed. The job then writes every node's report
(``generate --node-report`` under ``srun``, one task per node), replays the run with ``rerun --confirm`` on
the batch host (recorded the way ``relaxrepro run`` records, ``lineage.replay_of`` the original, verified)
and merges the node reports into the replay's manifest. A value the manifest redacted is never written:
the script reads it from the job's environment (``${NAME:?...}``, which stops the job with the reason when
it is missing), since sbatch hands the submitting shell's environment to the job.
"""

from __future__ import annotations

import re

from ..manifest.fields import get, redacted_parts, scalar
from ..manifest.model import valid_run_id
from ..std.text import safe_text, shell_quote

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, List, Mapping, Optional, Sequence

FILL = "fill in"
"""The mark on every line the user has to complete (``grep -n 'fill in'``)."""

# what sbatch reads safely from an #SBATCH line (no quoting there: a space would split the option)
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9._:@%+,=/-]{1,200}$")
_ARGV_KEY = re.compile(r"^argv\[(\d+)\]$")


def fill_variable(key: str) -> str:
    """The environment variable the job reads a redacted ``--set KEY`` from: the env var itself,
    ``RELAXREPRO_ARGV_<N>`` for ``argv[N]``, ``RELAXREPRO_CWD`` for ``cwd``."""
    m = _ARGV_KEY.match(key)
    if m:
        return "RELAXREPRO_ARGV_%s" % m.group(1)
    return "RELAXREPRO_CWD" if key == "cwd" else key


def pattern_variable(n: int) -> str:
    """The environment variable the job reads the run's ``n``-th ``--redact-pattern`` from (1-based)."""
    return "RELAXREPRO_REDACT_PATTERN_%d" % n


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _line(option: str, value: Any, why: str) -> str:
    """``#SBATCH --option=value``, or the marked line to fill when the value is missing, redacted or unsafe."""
    if value is None:
        return "##SBATCH --%s=   # %s: %s" % (option, why, FILL)
    text = str(value)
    if redacted_parts(text):
        return "##SBATCH --%s=   # redacted in the manifest (%s): %s" % (option, safe_text(text, 60), FILL)
    if not _SAFE_VALUE.match(text):
        return "##SBATCH --%s=   # recorded as %s, which an #SBATCH line cannot hold: %s" % (
            option, safe_text(text, 60), FILL)
    return "#SBATCH --%s=%s" % (option, text)


def resources(rec: Mapping[str, Any], nodes: Optional[int] = None) -> List[str]:
    """The ``#SBATCH`` lines for the recorded job; ``nodes`` (``--nodes``) stands for or overrides its node count."""
    slurm = get(rec, "scheduler", None)
    slurm = slurm if isinstance(slurm, dict) and slurm.get("type") == "slurm" else {}
    recorded_nodes = _int(slurm.get("node_count")) or _int(slurm.get("nodelist_count"))
    lines = []
    if nodes is not None and recorded_nodes and nodes != recorded_nodes:
        lines.append("# --nodes %d given; the run was recorded on %d" % (nodes, recorded_nodes))
    lines.append(_line("nodes", nodes or recorded_nodes, "not recorded"))
    per_node, ntasks = _int(slurm.get("ntasks_per_node")), _int(slurm.get("ntasks"))
    if per_node:
        lines.append(_line("ntasks-per-node", per_node, ""))
    elif ntasks:
        lines.append(_line("ntasks", ntasks, ""))
    else:
        lines.append(_line("ntasks-per-node", None, "not recorded"))
    gpus = _int(slurm.get("gpus_per_node"))
    if not gpus and _int(slurm.get("gpus_on_node")):
        gpus = slurm["gpus_on_node"]
        lines.append("# the GPUs the job had on its node (SLURM_GPUS_ON_NODE; it asked with --gres or --gpus)")
    lines.append(_line("gpus-per-node", gpus, "no GPUs in the job's SLURM variables"))
    if _int(slurm.get("cpus_per_task")):
        lines.append(_line("cpus-per-task", slurm["cpus_per_task"], ""))
    lines.append(_line("partition", scalar(slurm.get("partition")), "not recorded (the cluster's default)"))
    for option in ("account", "qos"):
        if scalar(slurm.get(option)):
            lines.append(_line(option, slurm[option], ""))
    lines.append(_line("time", None, "no time limit is recorded (the partition's default applies)"))
    return lines


def _job_name(run_id: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:60]
    return "replay-" + (name or "run")


def script(rec: Mapping[str, Any], manifest_path: str, *, relaxrepro: Sequence[str],
           fill: Sequence[str] = (), redact_patterns: int = 0, replay: Sequence[str] = (),
           nodes: Optional[int] = None, container: Optional[List[str]] = None) -> str:
    """The batch script replaying ``rec`` (read from the absolute ``manifest_path``).

    ``relaxrepro``: the argv that runs relaxrepro in the job; ``fill``: the ``--set`` keys whose recorded
    values were redacted (read from the job's environment, :func:`fill_variable`); ``redact_patterns``: how
    many ``--redact-pattern`` values the run was recorded with (read alike, :func:`pattern_variable`);
    ``replay``: more ``rerun --confirm`` options (``--full``, ``--rtol R``...); ``container``: the wrapper
    (:func:`relaxrepro.record.container_wrap.wrapper`) that ``rerun --confirm --container`` will put before the
    recorded command on the node, shown for review, or None to replay on the host. Only the recorded command
    runs in the image: relaxrepro itself (the check, the node reports, verify, merge) runs on the node, where
    the image need not have it."""
    run_id = str(rec.get("run_id", ""))
    base = manifest_path.rsplit("/", 1)[0] if "/" in manifest_path else "."
    me = " ".join(shell_quote(a) for a in relaxrepro)
    out = [
        "#!/bin/sh",
        "# SLURM replay of run %s, written by: relaxrepro rerun --sbatch %s" % (safe_text(run_id, 200),
                                                                           safe_text(manifest_path, 400)),
        "# Review it and complete every line marked '%s' (grep -n '%s'), then: sbatch THIS_FILE" % (FILL, FILL),
        "#SBATCH --job-name=%s" % _job_name(run_id),
    ]
    out += resources(rec, nodes)
    log = base + ".replay-job%j.out"
    if _SAFE_VALUE.match(log):
        out.append("#SBATCH --output=%s" % log)
    else:
        out.append("# (the job's log goes to slurm-<job id>.out where sbatch runs: the run's directory cannot be "
                   "named in an #SBATCH line)")
    need = [fill_variable(k) for k in fill] + [pattern_variable(i + 1) for i in range(redact_patterns)]
    if need:
        out.append("# Redacted in the manifest, so read from the job's environment (export them before sbatch,")
        out.append("# which hands the job your environment, or set them here): %s" % FILL)
        out.extend("#   %s" % name for name in need)
    image = scalar(get(rec, "container.image.name", None))
    if image and container is None:
        out.append("# The run was recorded in container %s; this script replays on the host (rerun --sbatch"
                   % safe_text(image, 200))
        out.append("# --container writes one that replays inside it).")
    elif container:
        out.append("# The recorded command runs inside the recorded image, pinned by its digest (rerun --container):")
        out.append("#   %s ..." % safe_text(" ".join(shell_quote(a) for a in container), 600))
    out += [
        "set -eu",
        "",
        "# Runs relaxrepro: %s" % safe_text(me, 300),
        "# (the one that wrote this script; change it where the nodes have it elsewhere)",
        "manifest=%s" % shell_quote(manifest_path),
        "replay=%s.replay-job\"${SLURM_JOB_ID}\"" % shell_quote(base),
        "# one run id for the replay's manifest and every node's report, so that merge matches them",
        "export RELAXREPRO_RUN_ID=%s\"${SLURM_JOB_ID}\"" % shell_quote(
            (run_id + ".replay-job") if valid_run_id(run_id) and len(run_id) <= 100 else "replay-job"),
        "",
        "# every node's own report (hardware, drivers, packages), one task per node",
        'srun --nodes="${SLURM_JOB_NUM_NODES}" --ntasks="${SLURM_JOB_NUM_NODES}" --ntasks-per-node=1 \\',
        '  %s generate --node-report --output-dir "${replay}.nodes"' % me,
        "",
        "# the replay: check, then the recorded command, recorded like the run and verified against it",
    ]
    args = ['"${manifest}"', "--confirm", '--output-dir "${replay}"'] + [shell_quote(a) for a in replay]
    args += ["--set %s=\"${%s:?redacted in the manifest: export %s before sbatch}\"" % (
        shell_quote(k), fill_variable(k), fill_variable(k)) for k in fill]
    args += ["--redact-pattern \"${%s:?the run's --redact-pattern: export it before sbatch}\"" % pattern_variable(
        i + 1) for i in range(redact_patterns)]
    if container:
        args.insert(2, "--container")
    out.append("status=0")
    out.append("%s rerun %s || status=$?" % (me, " \\\n  ".join(args)))
    out += [
        "",
        "# the node reports folded into the replay's manifest (manifest_<id>.merged.json beside it)",
        'if [ -f "${replay}/manifest_${RELAXREPRO_RUN_ID}.json" ]; then',
        '  %s merge "${replay}/manifest_${RELAXREPRO_RUN_ID}.json" "${replay}.nodes" || true' % me,
        "fi",
        'exit "$status"',
    ]
    return "\n".join(out) + "\n"


def fill_keys(redacted: Sequence[str]) -> List[str]:
    """The ``--set`` keys of rerun's redacted lines (``env NAME: value`` -> NAME, ``argv[3]: v`` -> argv[3])."""
    keys = []
    for line in redacted:
        where = line.split(":", 1)[0]
        key = where[4:] if where.startswith("env ") else where
        if key not in keys:
            keys.append(key)
    return keys


def needs(fill: Sequence[str], redact_patterns: int, env: Mapping[str, str]) -> List[str]:
    """The variables the job reads that the environment ``env`` (the submitting shell's) does not set."""
    names = [fill_variable(k) for k in fill] + [pattern_variable(i + 1) for i in range(redact_patterns)]
    return [n for n in names if not env.get(n)]


def parse_job_id(text: str) -> Optional[str]:
    """``sbatch --parsable`` prints ``JOBID`` or ``JOBID;CLUSTER``; None for anything else."""
    first = text.strip().split(";", 1)[0]
    return first if first.isdigit() else None

