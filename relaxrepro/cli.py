"""The command line: argparse only. ``main(argv) -> int`` parses, then hands the arguments to
``relaxrepro.commands.<name>.run(args)``; the exit codes live in :mod:`relaxrepro.commands._common`.

A subcommand imports only what it uses, so ``--version`` and reading commands start fast.
"""

from __future__ import annotations

import argparse
import os
import sys

from ._version import __version__
from .commands._common import Exit, UsageError, say
from .std.text import safe_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Sequence, Tuple


_EPILOG = """\
examples:
  relaxrepro generate                                  manifest of this machine and repo, in .
  relaxrepro generate --output-dir runs/ -- python train.py --lr 3e-4
  relaxrepro generate --output manifest.json --strict  exit 1 if a probe failed
  srun --ntasks-per-node=1 relaxrepro generate --node-report --output-dir runs/
  relaxrepro merge runs/manifest_<run-id>.json runs/   fold node_*.json fragments in
  relaxrepro generate --redact-pattern 'proj-[0-9]+'   also hide your own identifiers

exit codes: 0 ok (a partial manifest is ok), 1 failure under --strict, 2 usage error.
"""


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing ``shutil`` (~3 ms with ``bz2``, ``lzma``):
    ``$COLUMNS``, else the terminal's width, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):  # stdout None, closed, or not a terminal
            columns = 0
    return columns or 80


def _sized(formatter_class: Any) -> Any:
    """``formatter_class`` given its width: argparse's own default imports ``shutil`` for it on the first
    ``add_argument`` (3.9+), so every command, even ``diff``, would pay for it."""
    def make(prog: str, **kwargs: Any) -> argparse.HelpFormatter:
        kwargs.setdefault("width", _terminal_columns() - 2)
        return formatter_class(prog, **kwargs)
    return make


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as a return value instead of exiting the interpreter."""

    def __init__(self, *args: Any, formatter_class: Any = argparse.HelpFormatter, **kwargs: Any) -> None:
        super().__init__(*args, formatter_class=_sized(formatter_class), **kwargs)

    def _add_action(self, action: argparse.Action) -> argparse.Action:
        # every argument, a group's too, passes here: the completion scripts are written from this list
        vars(self).setdefault("grammar_actions", []).append(action)
        return super()._add_action(action)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        # Each parser refuses what it does not know itself, so a subcommand's error shows its own usage (the
        # top-level parser would show ``relaxrepro COMMAND ...``) and can name the option that was meant.
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(_unrecognized(self, list(args or []), extras))
        return parsed, extras

    def exit(self, status: int = 0, message: Optional[str] = None) -> None:  # type: ignore[override]
        if message:
            sys.stderr.write(message)
        raise _ParserExit(status)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        # the message quotes the user's own arguments as typed: one escaped line
        raise _ParserExit(Exit.USAGE, "%s: error: %s\n" % (self.prog, safe_text(message)))


def _unrecognized(parser: argparse.ArgumentParser, argv: List[str], extras: List[str]) -> str:
    """argparse's "unrecognized arguments" with a hint: the close option for a typo, ``--`` for a command."""
    message = "unrecognized arguments: %s" % " ".join(extras)
    known = [s for a in vars(parser).get("grammar_actions", []) for s in a.option_strings if s.startswith("--")]
    meant = [_close(e.split("=", 1)[0], known) for e in extras if e.startswith("--")]
    hints = ["did you mean %s?" % m for m in meant if m]
    # a word right after an unknown option is taken as its value (--outptu-dir x), not as a command
    words = [e for i, e in enumerate(extras)
             if not e.startswith("-") and not (i and extras[i - 1].startswith("-") and "=" not in extras[i - 1])]
    if words and parser.prog.split()[-1] in ("generate", "run"):
        command = argv[argv.index(words[0]):] if words[0] in argv else words
        hints.append("put -- before the command: %s [options] -- %s" % (parser.prog, " ".join(command)))
    return "; ".join([message] + hints)


def _close(word: str, known: Sequence[str]) -> Optional[str]:
    """The one of ``known`` that ``word`` most likely misspells, if any is close enough."""
    import difflib  # lazy: only a usage error needs it

    found = difflib.get_close_matches(word, known, n=1, cutoff=0.7)
    return found[0] if found else None


class _ParserExit(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(code)
        self.code = code
        self.message = message


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The CLI's parser; with ``only`` (a subcommand's name) just that subcommand's, because building
    all twelve costs more than a fast command's whole work (ArgumentParser objects are not cheap)."""
    parser = _Parser(
        prog="relaxrepro",
        description="Record, check and compare ML experiment manifests.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="relaxrepro " + __version__)
    sub = _Commands(parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser))
    for name, add in _SUBCOMMANDS:
        if only is None or only == name:
            add(sub)  # type: ignore[arg-type]
    parser.commands = sub  # type: ignore[attr-defined]
    return parser


class _Commands:
    """The subparsers action, keeping each command's parser and one-line help for the completion scripts."""

    def __init__(self, sub: "argparse._SubParsersAction") -> None:
        self.sub = sub
        self.helps: Dict[str, str] = {}
        self.parsers: Dict[str, argparse.ArgumentParser] = {}

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.helps[name] = kwargs.get("help") or ""
        self.parsers[name] = self.sub.add_parser(name, **kwargs)
        return self.parsers[name]


def _add_generate(sub: "argparse._SubParsersAction") -> None:
    gen = sub.add_parser(
        "generate",
        help="write a manifest of this run (best effort, never blocks training)",
        description="Collect the manifest and write manifest_<run-id>.json. "
        "COMMAND after -- is recorded as the run's command, not executed.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_generate_options(gen)
    gen.add_argument("--json", action="store_true", help="say what was written as JSON on stdout (path, run id, "
                     "each probe's status) instead of the path")
    gen.add_argument("--node-report", action="store_true",
                     help="write this node's fragment node_<name>.json instead (every rank writes; run id from "
                     "--run-id, $RELAXREPRO_RUN_ID or $SLURM_JOB_ID)")


def _add_run(sub: "argparse._SubParsersAction") -> None:
    run = sub.add_parser(
        "run",
        help="write the manifest, run COMMAND, then add its outcome",
        usage="relaxrepro run [generate options] -- COMMAND [ARG ...]",
        description="Write the manifest of COMMAND, run it (stdio passed through; SIGINT, SIGTERM, SIGHUP,\n"
        "SIGUSR1/2 forwarded), add how it ended to the manifest, and exit with its status: 128+N when\n"
        "killed by signal N, 127 when it cannot start. Use it where `python train.py` stood in an sbatch\n"
        "script. With --strict the command is not started when a probe failed or nothing was written.\n"
        "A trainer that records itself (relaxrepro.recorded, write_manifest) writes into this manifest\n"
        "(RELAXREPRO_RUN_ID, RELAXREPRO_MANIFEST): one run, one manifest.",
        epilog="example:\n  relaxrepro run --output-dir runs/ --group lr-sweep -- python train.py --lr 3e-4\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_generate_options(run)
    run.add_argument("--outputs", nargs="+", default=[], metavar="PATH",
                     help="after COMMAND exits, fingerprint these files or directories into results.outputs")
    run.add_argument("--metrics", metavar="FILE.json",
                     help="after COMMAND exits, read its final metrics from this JSON object into results.metrics")


def _add_ls(sub: "argparse._SubParsersAction") -> None:
    ls = sub.add_parser("ls", help="list every manifest below directories, one line each",
                        description="List every manifest_*.json below DIR (default .), oldest first: run id, "
                        "time, repos (short commit, * when dirty), algorithm, GPUs, group, parent, outcome.")
    ls.add_argument("dirs", nargs="*", metavar="DIR", help="directories (or manifest files) to search")
    ls.add_argument("--json", action="store_true", help="one JSON array instead of the table")
    ls.add_argument("--where", action="append", default=[], metavar="EXPR",
                    help="only runs matching EXPR (repeatable, all must match): group=NAME, commit=PREFIX, "
                    "pkg.torch==2.3.*, pkg.torch>=2.3, metric.auc>0.89, arg.lr=3e-4, data=sha256:..., exit!=0, "
                    "dirty, ... (see the guide)")
    ls.add_argument("--same-as", metavar="RUN", help="runs with the same code (commits, patch digests), config "
                    "hash and packages as RUN")
    ls.add_argument("--since", metavar="DATE", help="runs generated at or after DATE (YYYY-MM-DD[THH:MM], UTC)")
    ls.add_argument("--until", metavar="DATE", help="runs generated up to DATE (a day: to its end)")
    ls.add_argument("--sort", metavar="KEY", help="order by this column (run, time, code, algo, gpus, group, parent, "
                    "outcome, trackers, path) or metric.NAME; --sort=-KEY descending; runs without a value last "
                    "(default: time)")
    ls.add_argument("--limit", type=_count, metavar="N", help="only the first N runs (after --sort)")
    ls.add_argument("--columns", metavar="LIST", help="these columns, comma-separated, in this order (the names of "
                    "--sort; metric.NAME too), e.g. run,time,metric.auc,path")
    ls.add_argument("--wide", action="store_true", help="never fit the terminal's width (by default, on a terminal or "
                    "with $COLUMNS, empty columns go, long paths are shortened in the middle, then the least needed "
                    "columns go)")
    _add_no_index(ls)


def _add_no_index(p: "argparse.ArgumentParser") -> None:
    p.add_argument("--no-index", action="store_true", help="read every manifest instead of the run index in "
                   "the per-user cache (the output is the same)")


_RUN_HELP = "a manifest file, or a run id or a unique prefix of one (see --runs); an existing path is a path"


def _add_runs(p: "argparse.ArgumentParser") -> None:
    """``--runs DIR``: where a run id (or a unique prefix of one) given for a manifest is looked up."""
    p.add_argument("--runs", action="append", default=[], metavar="DIR",
                   help="where to look up a run id or a unique prefix of one given instead of a manifest file "
                   "(repeatable; default: $RELAXREPRO_RUNS, os.pathsep-separated, else $RELAXREPRO_OUTPUT_DIR and .)")


def _add_index(sub: "argparse._SubParsersAction") -> None:
    idx = sub.add_parser("index", help="build or refresh the run index of directories (ls, lineage and compare "
                         "keep it up to date themselves)",
                         description="Build or refresh the SQLite run index of each DIR (default .) in the "
                         "per-user cache ($RELAXREPRO_CACHE_DIR, else $XDG_CACHE_HOME/relaxrepro, else "
                         "~/.cache/relaxrepro). A progress line shows on a terminal.")
    idx.add_argument("dirs", nargs="*", metavar="DIR", help="directories holding the runs (default .)")
    idx.add_argument("--json", action="store_true", help="one JSON array of {dir, manifests, unreadable, not_stored}")


def _add_lineage(sub: "argparse._SubParsersAction") -> None:
    lin = sub.add_parser("lineage", help="the ancestry of a run, oldest first, and what changed at each step")
    lin.add_argument("run", metavar="RUN", help=_RUN_HELP)
    lin.add_argument("dirs", nargs="*", metavar="DIR", help="directories holding the runs (default .)")
    lin.add_argument("--json", action="store_true", help="machine-readable output")
    way = lin.add_mutually_exclusive_group()
    way.add_argument("--up", dest="down", action="store_false", help="the ancestry, oldest first (default)")
    way.add_argument("--down", dest="down", action="store_true", help="the descendants, as a tree")
    lin.set_defaults(down=False)
    _add_no_index(lin)
    _add_runs(lin)


def _add_compare(sub: "argparse._SubParsersAction") -> None:
    cmp_ = sub.add_parser("compare", help="a sweep side by side: only what varies across its runs")
    cmp_.add_argument("--group", required=True, metavar="NAME", help="the lineage group (--group of the runs)")
    cmp_.add_argument("dirs", nargs="*", metavar="DIR", help="directories holding the runs (default .)")
    cmp_.add_argument("--json", action="store_true", help="machine-readable output")
    _add_no_index(cmp_)


def _add_report(sub: "argparse._SubParsersAction") -> None:
    rep = sub.add_parser(
        "report", help="one self-contained HTML page: a run, two runs' diff, or every run (sweeps, lineage)",
        description="Write one HTML file (no network, no external file; readable with scripts off). One run "
        "(a manifest, or a run id found under the directories given): its page, with its lineage. Two runs: "
        "verify's verdict with both traces, and their diff. Directories: every run below them, a sweep per "
        "group, the lineage graph. Default file: report_<run-id>.html (report_<a>_vs_<b>.html, "
        "report_<group>.html, report.html) beside the runs, or in the user's cache where a git checkout would "
        "record it; an existing file is replaced only if it is a relaxrepro report.")
    rep.add_argument("inputs", nargs="*", metavar="RUN|MANIFEST|DIR", help="default: every run below .")
    rep.add_argument("--output", "-o", metavar="OUT", help="the file to write, or a directory to write it in")
    rep.add_argument("--against", metavar="MANIFEST", help="one run: add check's verdicts against this manifest")
    rep.add_argument("--here", action="store_true", help="one run: add check's verdicts against this machine")
    rep.add_argument("--group", metavar="NAME", help="directories: only this group's runs (a sweep page)")
    rep.add_argument("--json", action="store_true", help="say what was written as JSON (path, kind: run, diff, runs "
                     "or group, the run ids, bytes) instead of the path")
    rep.add_argument("--chart", metavar="COLUMN", help="chart only this metric (metric.NAME) or only against this "
                     "varying value (arg.NAME, ...); default: each metric against each value that varies")
    _add_no_index(rep)
    _add_runs(rep)


def _add_attach(sub: "argparse._SubParsersAction") -> None:
    att = sub.add_parser("attach", help="attach a manifest to a W&B, MLflow or TensorBoard run started without the API",
                         description="Record the tracker run under the manifest's lineage.trackers and give the run "
                         "the manifest (W&B: a run file and config['relaxrepro']; MLflow: an artifact and relaxrepro.* "
                         "tags; TensorBoard: manifest_<run-id>.json in LOGDIR and a text summary). Needs that tool's "
                         "package installed: wandb; mlflow; tensorboardX, or torch with tensorboard.")
    att.add_argument("manifest", metavar="RUN", help=_RUN_HELP)
    to = att.add_mutually_exclusive_group(required=True)
    to.add_argument("--wandb", metavar="[ENTITY/]PROJECT/RUN_ID", help="a W&B run (resumed; honours WANDB_MODE), "
                    "as lineage.trackers records it")
    to.add_argument("--mlflow", metavar="RUN_ID", help="an MLflow run")
    to.add_argument("--tensorboard", metavar="LOGDIR", help="a TensorBoard log directory")
    att.add_argument("--tracking-uri", metavar="URI", help="with --mlflow: the tracking server (default: MLflow's own)")
    att.add_argument("--json", action="store_true", help="say what was attached as JSON (manifest, tool, the "
                     "lineage.trackers entry recorded) instead of a sentence")
    _add_runs(att)


def _add_fingerprint(sub: "argparse._SubParsersAction") -> None:
    fp = sub.add_parser("fingerprint", help="hash data trees fully into the cache that generate reads",
                        description="Compute the full content digest of each PATH (sha256 of a file, Merkle "
                        "digest of a tree) and cache per-file digests in $RELAXREPRO_CACHE_DIR (else "
                        "$XDG_CACHE_HOME/relaxrepro, else ~/.cache/relaxrepro), so 'generate' records them at "
                        "launch without rereading.")
    fp.add_argument("paths", metavar="PATH", nargs="+")
    fp.add_argument("--json", action="store_true", help="print the results as JSON")


def _add_merge(sub: "argparse._SubParsersAction") -> None:
    mrg = sub.add_parser(
        "merge", help="fold node fragments into a manifest (per-node data, heterogeneity)",
        description="Fold node_<name>.json fragments (or directories of them) into RUN's manifest. Writes "
        "manifest_<run-id>.merged.json beside it unless -o is given; never overwrites.")
    mrg.add_argument("manifest", metavar="RUN", help=_RUN_HELP)
    mrg.add_argument("fragments", metavar="FRAGMENT", nargs="+", help="node fragment file or directory")
    mrg.add_argument("--output", "-o", metavar="OUT", help="write exactly this file (never overwritten)")
    mrg.add_argument("--json", action="store_true", help="say what was written as JSON (path, run id, fragments, "
                     "nodes, heterogeneity lines) instead of the path")
    _add_runs(mrg)


def _add_generate_options(gen: argparse.ArgumentParser) -> None:
    """The options of ``generate``, shared by ``run``."""
    out = gen.add_mutually_exclusive_group()
    out.add_argument("--output", "-o", metavar="FILE", help="write exactly this file (never overwritten)")
    out.add_argument("--output-dir", metavar="DIR",
                     help="directory for manifest_<run-id>.json (default: $RELAXREPRO_OUTPUT_DIR, else .)")
    gen.add_argument("--run-id", metavar="ID", help="use this run id instead of a fresh one")
    gen.add_argument("--strict", action="store_true",
                     help="exit 1 when a probe failed, nothing was written or the --run-id was taken")
    gen.add_argument("-q", "--quiet", action="store_true", help="do not print the warnings of probes that are not ok")
    gen.add_argument("--all-ranks", action="store_true",
                     help="write on every rank (default: only rank 0 by RANK, else SLURM_PROCID)")
    gen.add_argument("--print", dest="print_doc", action="store_true", help="also print the manifest to stdout")
    gen.add_argument("--parent", metavar="RUN_ID|MANIFEST",
                     help="the run this one derives from (default: $RELAXREPRO_PARENT)")
    gen.add_argument("--group", metavar="NAME", help="a sweep or experiment group (default: $RELAXREPRO_GROUP)")
    gen.add_argument("--note", metavar="TEXT", help="a free-text note kept in lineage.note")
    gen.add_argument("--python", metavar="PATH",
                     help="the training interpreter (default: from COMMAND, e.g. its python or launcher's shebang)")
    gen.add_argument("--redact-pattern", metavar="REGEX", action="append", default=[],
                     help="also replace matches of this Python regex with <redacted> (repeatable)")
    gen.add_argument("--keep-paths", action="store_true",
                     help="keep home directories and the user name (for private use; secrets are still redacted)")
    gen.add_argument("--args-json", metavar="FILE",
                     help="the trainer's resolved arguments as a JSON object (else parsed from COMMAND)")
    gen.add_argument("--env-prefix", metavar="P", action="append", default=[],
                     help="also record environment variables starting with P (repeatable)")
    gen.add_argument("--data", metavar="PATH", action="append", default=[],
                     help="fingerprint this data file or tree (repeatable); see 'relaxrepro fingerprint'")
    gen.add_argument("--repo", action="append", default=[], metavar="NAME=PATH",
                     help="also record the git repository at PATH under code.NAME (repeatable)")
    gen.add_argument("--private-patch", action="store_true",
                     help="also keep each unredacted patch in a mode-0600 sidecar (for this machine only)")


def _add_check(sub: "argparse._SubParsersAction") -> None:
    chk = sub.add_parser("check", help="compare this machine with a manifest: PASS / WARN / FAIL per item",
                         description="Collect this environment and compare it with RUN's manifest item by item. "
                         "Exit 0 compatible (PASS or WARN), 1 any FAIL (--strict: any WARN too), "
                         "2 unreadable manifest.")
    chk.add_argument("manifest", metavar="RUN", help=_RUN_HELP)
    chk.add_argument("--json", action="store_true", help="machine-readable report")
    chk.add_argument("--strict", action="store_true", help="WARN fails too (exit 1)")
    chk.add_argument("--repo", action="append", default=[], metavar="NAME=PATH",
                     help="where recorded repo NAME is on this machine (repeatable)")
    chk.add_argument("--python", metavar="PATH", help="judge this interpreter's Python and packages (default: the "
                     "recorded one when it is here, else the one the recorded command would run)")
    _add_runs(chk)


def _add_show(sub: "argparse._SubParsersAction") -> None:
    shw = sub.add_parser("show", help="one manifest for a person: identity, command, code, environment, hardware, "
                         "topology, seeds, results",
                         description="Print a readable summary of RUN's manifest; --section NAME prints one section "
                         "(or a dotted path into it, e.g. code.relax) as path and value lines; --json the JSON.")
    shw.add_argument("manifest", metavar="RUN", help=_RUN_HELP)
    shw.add_argument("--section", metavar="NAME", help="only this section, or a dotted path into one (hardware, "
                     "code.NAME, results.metrics, ...)")
    shw.add_argument("--json", action="store_true", help="the recorded JSON (of --section when given)")
    _add_runs(shw)


def _add_env(sub: "argparse._SubParsersAction") -> None:
    env = sub.add_parser("env", help="the recorded packages as requirements.txt, environment.yml or a Dockerfile; "
                         "--check: against an interpreter here",
                         description="Write RUN's training interpreter's packages as a file an installer reads: "
                         "exact pins, git installs at their commit, the Python version, and (conda, dockerfile) "
                         "the recorded image or CUDA; what cannot be pinned (editable, redacted) is a comment saying "
                         "why. Installs nothing. -o replaces only a file env wrote. --check: PASS / WARN / FAIL per "
                         "package against an interpreter here. Exit 0 written or compatible, 1 any FAIL or could not "
                         "write, 2 unreadable manifest, no package list or refused.")
    env.add_argument("manifest", metavar="RUN", help=_RUN_HELP)
    env.add_argument("--format", metavar="FORMAT", help="requirements (default), conda or dockerfile")
    env.add_argument("--output", "-o", metavar="FILE", help="write this file (default: stdout)")
    env.add_argument("--check", action="store_true", help="compare the recorded packages with an interpreter here "
                     "instead of writing them")
    env.add_argument("--python", metavar="PATH", help="with --check: this interpreter (default: the one check "
                     "would judge)")
    env.add_argument("--json", action="store_true", help="with --check: machine-readable report")
    _add_runs(env)


def _add_diff(sub: "argparse._SubParsersAction") -> None:
    dif = sub.add_parser("diff", help="what differs between two manifests, most important first",
                         description="Exit 0 identical, 1 different, 2 unreadable input (like diff(1)).")
    dif.add_argument("old", metavar="OLD", help=_RUN_HELP)
    dif.add_argument("new", metavar="NEW", help=_RUN_HELP)
    dif.add_argument("--json", action="store_true", help="exact machine-readable output")
    dif.add_argument("--all", action="store_true",
                     help="also show volatile fields (run id, times, job ids) and fields one side does not "
                          "record (absent vs null or empty, a cwd of \".\")")
    _add_runs(dif)


def _add_verify(sub: "argparse._SubParsersAction") -> None:
    ver = sub.add_parser("verify", help="did run B reproduce run A? outputs, metrics and trace, bit for bit",
                         description="Compare the results of two runs (manifest files or run ids): "
                         "output digests, final metrics and the determinism trace, bit-exact unless --rtol/--atol. "
                         "Exit 0 reproduced, 1 diverged, 2 unreadable or nothing to verify.")
    ver.add_argument("old", metavar="A", help=_RUN_HELP)
    ver.add_argument("new", metavar="B", help=_RUN_HELP)
    ver.add_argument("--rtol", type=float, default=0.0, metavar="R",
                     help="relative tolerance (|a-b| <= atol + rtol*|b|)")
    ver.add_argument("--atol", type=float, default=0.0, metavar="A", help="absolute tolerance")
    ver.add_argument("--steps", type=int, metavar="N",
                     help="compare only the first N trace steps (no outputs, metrics)")
    ver.add_argument("--json", action="store_true", help="machine-readable report")
    ver.add_argument("--html", metavar="FILE",
                     help="also write a page: the verdict, both runs' traces on one chart each with the step where "
                          "they part marked, metrics and outputs side by side, what else differs")
    _add_runs(ver)


def _add_rerun(sub: "argparse._SubParsersAction") -> None:
    rer = sub.add_parser("rerun", help="replay a recorded run: review a script, or run it after check",
                         description="--dry-run prints a POSIX sh script to review; --confirm runs check, "
                         "then the recorded command with the recorded env and interpreter in a new directory "
                         "of its own (arguments naming the original's are pointed there; --in-place writes into "
                         "it), records it the way the run was recorded, and exits with its status, then the "
                         "verdict of verify when the run recorded results (2 when refused; 1 when the replay "
                         "changed the original's files). With --quick N or --full it exits with the verdict: "
                         "0 reproduced, 1 diverged, 2 refused or nothing to verify.")
    rer.add_argument("manifest", metavar="RUN", help=_RUN_HELP)
    how = rer.add_mutually_exclusive_group(required=True)
    how.add_argument("--dry-run", action="store_true", help="print the replay script, run nothing")
    how.add_argument("--confirm", action="store_true", help="check, then run the recorded command")
    how.add_argument("--sbatch", action="store_true", help="print a SLURM batch script that replays it as a job "
                     "(recorded nodes, tasks, GPUs, partition; what was not recorded marked 'fill in'): every "
                     "node's report, then --confirm, then merge")
    rer.add_argument("--submit", action="store_true", help="with --sbatch: submit the script with sbatch and print "
                     "the job id")
    rer.add_argument("--nodes", type=_count, metavar="N", help="with --sbatch: the job's node count (needed when "
                     "the run was not recorded under SLURM)")
    rer.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set_values",
                     help="supply a redacted value: an env var NAME, argv[N], cwd, or a placeholder "
                     "such as <HOME> (repeatable)")
    rer.add_argument("--repo", action="append", default=[], metavar="NAME=PATH",
                     help="where recorded repo NAME is on this machine (for the check)")
    replay = rer.add_mutually_exclusive_group()
    replay.add_argument("--quick", type=_steps, metavar="N", help="with --confirm: stop the command after step N "
                        "(RELAXREPRO_MAX_STEPS) and verify its first N trace steps against the original")
    replay.add_argument("--full", action="store_true",
                        help="with --confirm: run it all, then verify outputs, metrics and trace")
    rer.add_argument("--output-dir", metavar="DIR", help="the replay's new or empty directory (default: beside the "
                     "original's, runs/a -> runs/a.replay-1)")
    rer.add_argument("--in-place", action="store_true", help="with --confirm: write into the original's own "
                     "directory, as recorded (its files may be written over)")
    rer.add_argument("--workspace", nargs="?", const="", metavar="DIR", help="with --confirm: restore every "
                     "recorded repo's exact tree into DIR (default: beside the replay's directory) and run there; "
                     "removed once reproduced unless --keep")
    rer.add_argument("--keep", action="store_true", help="keep the --workspace after a reproduced replay")
    rer.add_argument("--from", action="append", default=[], metavar="NAME=PATH", dest="sources",
                     help="with --workspace: clone recorded repo NAME from PATH (repeatable)")
    rer.add_argument("--redact-pattern", action="append", default=[], metavar="REGEX",
                     help="the run's own --redact-pattern values, which its manifest does not keep (repeatable)")
    rer.add_argument("--container", action="store_true", help="run the replay inside the recorded image, pinned "
                     "by its digest (apptainer exec, docker/podman run, srun --container-image); refused (2) when "
                     "that image or its runtime cannot be had here (--sbatch: the job's node judges that)")
    rer.add_argument("--json", action="store_true", help="--dry-run: the script in a JSON object; --confirm: the "
                     "outcome (replay directory, manifest, status, exit code, verify's verdict) as one JSON object "
                     "after the command's own output")
    rer.add_argument("--rtol", type=_tolerance, default=0.0, metavar="R", help="relative tolerance (default 0: exact)")
    rer.add_argument("--atol", type=_tolerance, default=0.0, metavar="A", help="absolute tolerance (default 0: exact)")
    _add_runs(rer)


def _steps(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number of steps, got %r" % text) from None
    if n < 1:
        raise argparse.ArgumentTypeError("expected at least 1 step, got %d" % n)
    return n


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number, got %r" % text) from None
    if n < 1:
        raise argparse.ArgumentTypeError("expected at least 1, got %d" % n)
    return n


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0.0 or value == float("inf"):
        raise argparse.ArgumentTypeError("expected a finite number >= 0, got %r" % text)
    return value


def _add_restore(sub: "argparse._SubParsersAction") -> None:
    res = sub.add_parser("restore", help="rebuild each recorded repo's exact source tree in a new directory",
                         description="Clone each recorded repo at its commit into DIR/<name>, apply the "
                         "recorded patch (verified by sha256) and check out submodules. The source repos "
                         "are never modified. Exit 0 restored, 1 could not restore (nothing left behind) or DIR "
                         "not empty, 2 unreadable manifest or refused.")
    res.add_argument("manifest", metavar="RUN", help=_RUN_HELP)
    res.add_argument("--into", required=True, metavar="DIR", help="new or empty directory")
    res.add_argument("--from", action="append", default=[], metavar="NAME=PATH", dest="sources",
                     help="clone repo NAME from PATH instead of its recorded path (repeatable)")
    res.add_argument("--allow-incomplete", action="store_true",
                     help="restore a repo whose patch was not recorded in full (git diff timed out or was too "
                     "big): its commit plus what was recorded, without the missing changes")
    res.add_argument("--json", action="store_true", help="say what was restored as JSON (into, run id, repos with "
                     "path and commit, notes) instead of the paths")
    _add_runs(res)


def _add_completion(sub: "argparse._SubParsersAction") -> None:
    com = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                         description="Print a completion script for SHELL, generated from this parser. Load it "
                         "with: bash: source <(relaxrepro completion bash); zsh: source <(relaxrepro completion "
                         "zsh) after compinit; fish: relaxrepro completion fish | source.")
    com.add_argument("shell", metavar="SHELL", choices=("bash", "fish", "zsh"), help="bash, fish or zsh")


def grammar(parser: argparse.ArgumentParser) -> List[Dict[str, Any]]:
    """What a completion script needs to know of ``parser``, as plain data: each subcommand's name, help,
    options (their strings, and whether one takes a value) and the words its positionals choose from."""
    commands = parser.commands  # type: ignore[attr-defined]
    out = []
    for name, child in commands.parsers.items():
        actions = vars(child).get("grammar_actions", [])
        options = [{"strings": list(a.option_strings), "value": a.nargs != 0} for a in actions if a.option_strings]
        words = [str(w) for a in actions if not a.option_strings and a.choices for w in a.choices]
        out.append({"name": name, "help": commands.helps[name], "options": options, "words": words})
    return out


# In the order `relaxrepro --help` lists them.
_SUBCOMMANDS = (
    ("generate", _add_generate), ("run", _add_run), ("ls", _add_ls), ("lineage", _add_lineage),
    ("compare", _add_compare), ("index", _add_index), ("report", _add_report), ("attach", _add_attach),
    ("fingerprint", _add_fingerprint), ("merge", _add_merge), ("show", _add_show), ("check", _add_check),
    ("env", _add_env), ("diff", _add_diff), ("verify", _add_verify), ("rerun", _add_rerun),
    ("restore", _add_restore), ("completion", _add_completion),
)


def _split_command(argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI; returns the exit code. Never raises, never prints a traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    own, command = _split_command(argv)
    named = own[0] if own and any(own[0] == name for name, _ in _SUBCOMMANDS) else None
    parser = build_parser(only=named)
    try:
        if named is None and own and not own[0].startswith("-"):
            names = [name for name, _ in _SUBCOMMANDS]
            meant = _close(own[0], names)
            parser.error("unknown command %r (%s)" % (own[0], "did you mean %r?" % meant if meant else
                                                       "commands: " + ", ".join(names)))
        args = parser.parse_args(own)
        if args.command is None:
            parser.print_help(sys.stderr)
            return Exit.USAGE
        if command and args.command not in ("generate", "run"):
            parser.error("'--' and a command are only taken by generate and run")
        args.command_argv = command
        if args.command == "completion":
            args.grammar = grammar(build_parser())
        import importlib  # lazy: ~0.4 ms, not needed by --version, help or a usage error

        module = importlib.import_module("relaxrepro.commands." + args.command)
        try:
            return int(module.run(args))
        except UsageError as exc:
            say("%s", exc.message)
            return Exit.USAGE
    except _ParserExit as exc:
        if exc.message:
            sys.stderr.write(exc.message)
        return exc.code
    except KeyboardInterrupt:
        sys.stderr.write("relaxrepro: interrupted\n")
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # The reader of our output stopped reading (`| head -1`): what it wanted it has, files are written
        # before anything is printed, so end quietly and successfully, whichever command it was.
        _reader_gone()
        return Exit.OK
    except Exception as exc:  # the promise: one line, never a traceback
        say("relaxrepro: internal error: %s: %s", type(exc).__name__, exc)
        return Exit.FAIL


def _reader_gone() -> None:
    """Point stdout at the null device: what is still buffered for a reader that left is dropped, and
    Python's own flush at exit neither fails nor prints "Exception ignored"."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a file (a caller's buffer): nothing to drop


def run_main() -> None:
    """Entry point of the console script, ``python -m relaxrepro`` and the .pyz."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _reader_gone()  # the command's verdict stands; the output it buffered has no reader left
    except (OSError, ValueError):
        pass
    # Only a command that ran probes can have stray threads; reading commands never import the runner.
    runner = sys.modules.get("relaxrepro.collect.runner")
    if runner is not None and runner.stray_threads():
        # A probe thread is stuck in a call that ignores the deadline: exit now rather than wait for it,
        # ending first the process groups it started (os._exit skips atexit).
        proc = sys.modules.get("relaxrepro.std.proc")
        if proc is not None:
            proc.end_all()
        os._exit(code)
    sys.exit(code)
