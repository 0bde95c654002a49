"""The command line: ``main(argv) -> int``, one ``_cmd_<name>`` per subcommand, exit codes in one place.

A subcommand imports only what it uses, so ``--version`` and reading commands start fast.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from ._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, List, Optional, Sequence, Tuple

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

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

    def exit(self, status: int = 0, message: Optional[str] = None) -> None:  # type: ignore[override]
        if message:
            sys.stderr.write(message)
        raise _Exit(status)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise _Exit(EXIT_USAGE, "%s: error: %s\n" % (self.prog, message))


class _Exit(Exception):
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, add in _SUBCOMMANDS:
        if only is None or only == name:
            add(sub)
    return parser


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


def _add_ls(sub: "argparse._SubParsersAction") -> None:
    ls = sub.add_parser("ls", help="list every manifest below directories, one line each",
                        description="List every manifest_*.json below DIR (default .), oldest first: run id, "
                        "time, repos (short commit, * when dirty), algorithm, GPUs, group, parent, outcome.")
    ls.add_argument("dirs", nargs="*", metavar="DIR", help="directories (or manifest files) to search")
    ls.add_argument("--json", action="store_true", help="one JSON array instead of the table")


def _add_lineage(sub: "argparse._SubParsersAction") -> None:
    lin = sub.add_parser("lineage", help="the ancestry of a run, oldest first, and what changed at each step")
    lin.add_argument("run", metavar="RUN", help="a run id, or a manifest file")
    lin.add_argument("dirs", nargs="*", metavar="DIR", help="directories holding the runs (default .)")
    lin.add_argument("--json", action="store_true", help="machine-readable output")


def _add_compare(sub: "argparse._SubParsersAction") -> None:
    cmp_ = sub.add_parser("compare", help="a sweep side by side: only what varies across its runs")
    cmp_.add_argument("--group", required=True, metavar="NAME", help="the lineage group (--group of the runs)")
    cmp_.add_argument("dirs", nargs="*", metavar="DIR", help="directories holding the runs (default .)")
    cmp_.add_argument("--json", action="store_true", help="machine-readable output")


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
        description="Fold node_<name>.json fragments (or directories of them) into MANIFEST. Writes "
        "manifest_<run-id>.merged.json beside MANIFEST unless -o is given; never overwrites.")
    mrg.add_argument("manifest", metavar="MANIFEST")
    mrg.add_argument("fragments", metavar="FRAGMENT", nargs="+", help="node fragment file or directory")
    mrg.add_argument("--output", "-o", metavar="OUT", help="write exactly this file (never overwritten)")


def _add_generate_options(gen: argparse.ArgumentParser) -> None:
    """The options of ``generate``, shared by ``run``."""
    out = gen.add_mutually_exclusive_group()
    out.add_argument("--output", "-o", metavar="FILE", help="write exactly this file (never overwritten)")
    out.add_argument("--output-dir", metavar="DIR",
                     help="directory for manifest_<run-id>.json (default: $RELAXREPRO_OUTPUT_DIR, else .)")
    gen.add_argument("--run-id", metavar="ID", help="use this run id instead of a fresh one")
    gen.add_argument("--strict", action="store_true", help="exit 1 when a probe failed or nothing was written")
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
                         description="Collect this environment and compare it with MANIFEST item by item. "
                         "Exit 0 compatible (PASS or WARN), 1 any FAIL (--strict: any WARN too), "
                         "2 unreadable manifest.")
    chk.add_argument("manifest", metavar="MANIFEST")
    chk.add_argument("--json", action="store_true", help="machine-readable report")
    chk.add_argument("--strict", action="store_true", help="WARN fails too (exit 1)")
    chk.add_argument("--repo", action="append", default=[], metavar="NAME=PATH",
                     help="where recorded repo NAME is on this machine (repeatable)")


def _add_diff(sub: "argparse._SubParsersAction") -> None:
    dif = sub.add_parser("diff", help="what differs between two manifests, most important first",
                         description="Exit 0 identical, 1 different, 2 unreadable input (like diff(1)).")
    dif.add_argument("old", metavar="OLD")
    dif.add_argument("new", metavar="NEW")
    dif.add_argument("--json", action="store_true", help="exact machine-readable output")
    dif.add_argument("--all", action="store_true", help="also show volatile fields (run id, times, job ids)")


def _add_rerun(sub: "argparse._SubParsersAction") -> None:
    rer = sub.add_parser("rerun", help="replay a recorded run: review a script, or run it after check",
                         description="--dry-run prints a POSIX sh script to review; --confirm runs check, "
                         "then the recorded command with the recorded env and interpreter, and exits with "
                         "its status (2 when refused).")
    rer.add_argument("manifest", metavar="MANIFEST")
    how = rer.add_mutually_exclusive_group(required=True)
    how.add_argument("--dry-run", action="store_true", help="print the replay script, run nothing")
    how.add_argument("--confirm", action="store_true", help="check, then run the recorded command")
    rer.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set_values",
                     help="supply a redacted value: an env var NAME, argv[N], cwd, or a placeholder "
                     "such as <HOME> (repeatable)")
    rer.add_argument("--repo", action="append", default=[], metavar="NAME=PATH",
                     help="where recorded repo NAME is on this machine (for the check)")


def _add_restore(sub: "argparse._SubParsersAction") -> None:
    res = sub.add_parser("restore", help="rebuild each recorded repo's exact source tree in a new directory",
                         description="Clone each recorded repo at its commit into DIR/<name>, apply the "
                         "recorded patch (verified by sha256) and check out submodules. The source repos "
                         "are never modified.")
    res.add_argument("manifest", metavar="MANIFEST")
    res.add_argument("--into", required=True, metavar="DIR", help="new or empty directory")
    res.add_argument("--from", action="append", default=[], metavar="NAME=PATH", dest="sources",
                     help="clone repo NAME from PATH instead of its recorded path (repeatable)")


# In the order `relaxrepro --help` lists them.
_SUBCOMMANDS = (
    ("generate", _add_generate), ("run", _add_run), ("ls", _add_ls), ("lineage", _add_lineage),
    ("compare", _add_compare), ("fingerprint", _add_fingerprint), ("merge", _add_merge),
    ("check", _add_check), ("diff", _add_diff), ("rerun", _add_rerun), ("restore", _add_restore),
)


def _pairs(values: Sequence[str], flag: str) -> dict:
    """``NAME=PATH`` options as a dict; a value without ``=`` is a usage error."""
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name:
            raise _Exit(EXIT_USAGE, "relaxrepro: error: %s %r: expected NAME=VALUE\n" % (flag, value))
        out[name] = rest
    return out


def _cmd_check(args: argparse.Namespace, command: List[str]) -> int:
    from . import check

    return check.run_cli(args.manifest, repos=_pairs(args.repo, "--repo"), as_json=args.json, strict=args.strict)


def _cmd_diff(args: argparse.Namespace, command: List[str]) -> int:
    from . import diff

    return diff.run(args.old, args.new, as_json=args.json, include_volatile=args.all, env=os.environ)


def _cmd_rerun(args: argparse.Namespace, command: List[str]) -> int:
    from . import rerun

    return rerun.run_cli(args.manifest, dry_run=args.dry_run, values=_pairs(args.set_values, "--set"),
                         repos=_pairs(args.repo, "--repo"))


def _cmd_restore(args: argparse.Namespace, command: List[str]) -> int:
    from . import restore

    return restore.run_cli(args.manifest, args.into, sources=_pairs(args.sources, "--from"))


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
        args = parser.parse_args(own)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        if command and args.command not in ("generate", "run"):
            parser.error("'--' and a command are only taken by generate and run")
        handler = globals()["_cmd_" + args.command.replace("-", "_")]
        return int(handler(args, command))
    except _Exit as exc:
        if exc.message:
            sys.stderr.write(exc.message)
        return exc.code
    except KeyboardInterrupt:
        sys.stderr.write("relaxrepro: interrupted\n")
        return 130
    except Exception as exc:  # the promise: one line, never a traceback
        sys.stderr.write("relaxrepro: internal error: %s: %s\n" % (type(exc).__name__, exc))
        return EXIT_FAIL


def _rank(env: dict) -> Optional[int]:
    for name in ("RANK", "SLURM_PROCID"):
        value = env.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


_REPO_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _parse_repos(items: Sequence[str]) -> Tuple[dict, Optional[str]]:
    """``--repo NAME=PATH`` values -> ({name: path}, None) or ({}, the problem in one line)."""
    repos: dict = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path:
            return {}, "--repo %r: expected NAME=PATH (e.g. --repo megatron=/opt/Megatron-LM)" % item
        if not _REPO_NAME_RE.match(name):
            return {}, "--repo %r: NAME may hold letters, digits, '.', '_' and '-' only" % item
        if name in repos:
            return {}, "--repo %r: NAME %s given twice" % (item, name)
        repos[name] = path
    return repos, None


def _record(args: argparse.Namespace, command: List[str], env: dict, verb: str
            ) -> Tuple[Optional[int], Optional[dict], Optional[str], List[str]]:
    """Collect and write as ``generate`` does: (exit code to stop with, document, path, probe problems).

    Shared by ``generate`` and ``run``. Skipped on ranks other than 0 unless ``--all-ranks``.
    """
    rank = _rank(env)
    if rank not in (None, 0) and not args.all_ranks:
        return None, None, None, []  # under a multi-rank launcher only rank 0 writes
    if args.run_id is None and env.get("RELAXREPRO_RUN_ID"):
        args.run_id = env["RELAXREPRO_RUN_ID"]  # shared with every node's --node-report, so merge can match them
    if args.run_id is not None and not _RUN_ID_RE.match(args.run_id):
        sys.stderr.write("relaxrepro %s: error: --run-id %r: use letters, digits, '.', '_' and '-' only\n"
                         % (verb, args.run_id))
        return EXIT_USAGE, None, None, []

    repos, problem = _parse_repos(args.repo)
    if problem:
        sys.stderr.write("relaxrepro %s: error: %s\n" % (verb, problem))
        return EXIT_USAGE, None, None, []

    from . import manifest
    from .context import Context
    from .redact import Redactor

    try:
        redactor = Redactor.for_environment(env, extra_patterns=args.redact_pattern, keep_paths=args.keep_paths)
    except ValueError as exc:
        sys.stderr.write("relaxrepro %s: error: %s\n" % (verb, exc))
        return EXIT_USAGE, None, None, []
    directory = None if args.output else (args.output_dir or env.get("RELAXREPRO_OUTPUT_DIR") or ".")
    options = {"parent": args.parent, "group": args.group, "note": args.note,
               "output_dir": directory or os.path.dirname(os.path.abspath(args.output)),
               "env_prefixes": list(args.env_prefix), "data": list(args.data), "repos": repos,
               "private_patch": args.private_patch, "python": args.python}
    if args.args_json is not None:
        loaded = _load_args_json(args.args_json)
        if isinstance(loaded, str):
            sys.stderr.write("relaxrepro %s: error: --args-json %s: %s\n" % (verb, args.args_json, loaded))
            return EXIT_USAGE, None, None, []
        options["args_json"] = loaded
    ctx = Context(env=env, argv=command, argv_source="cli" if command else "none",
                  options={k: v for k, v in options.items() if v is not None})
    doc = manifest.build(ctx, run_id=args.run_id, redactor=redactor)
    if rank is not None:
        doc.setdefault("runtime", {})["rank"] = rank
    problems = manifest.probe_problems(doc)
    for line in problems:
        sys.stderr.write("relaxrepro: warning: probe %s\n" % line)
    lineage = doc.get("lineage") if isinstance(doc.get("lineage"), dict) else {}
    parent = lineage.get("parent") if isinstance(lineage.get("parent"), dict) else None
    if parent is not None and not parent.get("found"):
        sys.stderr.write("relaxrepro: warning: parent %s not found; recorded as given\n" % parent.get("given"))
    result = manifest.write(doc, path=args.output, directory=directory, env=env, redactor=redactor)
    for w in result.warnings:
        sys.stderr.write("relaxrepro: warning: %s\n" % w)
    if args.print_doc:
        from . import writer

        sys.stdout.write(writer.serialize(doc).decode("utf-8"))
    if result.path is not None and os.path.basename(result.path) != "manifest_%s.json" % doc.get("run_id") \
            and args.output is None:
        doc["run_id"] = os.path.basename(result.path)[len("manifest_"):-len(".json")]
    return None, doc, result.path, problems


def _cmd_generate(args: argparse.Namespace, command: List[str]) -> int:
    if args.node_report:
        return _node_report(args, dict(os.environ), command)
    code, doc, path, problems = _record(args, command, dict(os.environ), "generate")
    if code is not None:
        return code
    if doc is None:
        return EXIT_OK  # rank 0 writes
    if path is None:
        return EXIT_FAIL if args.strict else EXIT_OK
    if args.print_doc:
        sys.stderr.write(path + "\n")  # stdout holds the manifest alone, for a pipe into jq
    else:
        print(path)
    if args.strict and problems:
        return EXIT_FAIL
    return EXIT_OK


def _node_report(args: argparse.Namespace, env: dict, command: List[str]) -> int:
    from . import manifest, node
    from .context import Context
    from .redact import Redactor

    run_id = args.run_id or node.run_id_from_env(env)
    if not run_id or not _RUN_ID_RE.match(run_id):
        sys.stderr.write("relaxrepro generate: error: --node-report needs a run id shared with rank 0's manifest: "
                         "--run-id, $RELAXREPRO_RUN_ID or $SLURM_JOB_ID%s\n" % (" (%r is unsafe)" % run_id if run_id
                                                                                else ""))
        return EXIT_USAGE
    try:
        redactor = Redactor.for_environment(env, extra_patterns=args.redact_pattern, keep_paths=args.keep_paths)
    except ValueError as exc:
        sys.stderr.write("relaxrepro generate: error: %s\n" % exc)
        return EXIT_USAGE
    options = {"run_id": run_id, "source": "cli"}
    if args.python:
        options["python"] = args.python  # the training interpreter whose packages this node has
    ctx = Context(env=env, argv=command, argv_source="cli" if command else "none", options=options)
    frag = node.collect_fragment(ctx)
    directory = args.output_dir or env.get("RELAXREPRO_OUTPUT_DIR") or "."
    path = args.output or os.path.join(directory, node.fragment_filename(frag))
    result = manifest.write(frag, path=path, env=env, redactor=redactor)
    for w in result.warnings:
        sys.stderr.write("relaxrepro: warning: %s\n" % w)
    if args.print_doc:
        from . import writer

        sys.stdout.write(writer.serialize(frag).decode("utf-8"))
    if result.path is None:
        return EXIT_FAIL if args.strict else EXIT_OK
    print(result.path)
    return EXIT_OK


def _cmd_merge(args: argparse.Namespace, command: List[str]) -> int:
    from . import manifest, node
    from .schema import ManifestError, load_manifest

    def fail(message: str) -> int:
        sys.stderr.write("relaxrepro merge: error: %s\n" % message)
        return EXIT_USAGE

    try:
        doc = load_manifest(args.manifest)
    except ManifestError as exc:
        return fail("%s: %s" % (args.manifest, exc))
    fragments = []
    for path in node.expand_paths(args.fragments):
        try:
            fragments.append(node.load_fragment(path, doc.run_id))
        except node.FragmentError as exc:
            return fail("%s: %s" % (path, exc))
    if not fragments:
        return fail("no node fragments (node_*.json) in %s" % ", ".join(args.fragments))
    merged = node.merge_fragments(doc, fragments)
    for w in merged["collection"]["probes"]["nodes"]["warnings"]:
        if "reported twice" in w:
            sys.stderr.write("relaxrepro: warning: %s\n" % w)
    out = args.output or os.path.join(os.path.dirname(os.path.abspath(args.manifest)),
                                      "manifest_%s.merged.json" % doc.run_id)
    result = manifest.write(merged, path=out)
    for w in result.warnings:
        sys.stderr.write("relaxrepro: warning: %s\n" % w)
    if result.path is None:
        return EXIT_FAIL
    for line in node.summarize_heterogeneity(merged):
        sys.stderr.write("relaxrepro: %s\n" % line)
    print(result.path)
    return EXIT_OK
def _load_args_json(path: str) -> object:
    """The parsed JSON object, or a one-line reason (str) why it cannot be used."""
    import json

    try:
        with open(path, "rb") as fh:
            raw = fh.read(16 << 20)
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except ValueError as exc:
        return "not valid JSON (%s)" % exc
    if not isinstance(value, dict):
        return "expected a JSON object of argument names, got %s" % type(value).__name__
    return value


def _cmd_fingerprint(args: argparse.Namespace, command: List[str]) -> int:
    from . import fingerprint
    from .context import _safe_getcwd

    return fingerprint.run_command(list(args.paths), as_json=args.json, env=dict(os.environ), cwd=_safe_getcwd())


def _cmd_run(args: argparse.Namespace, command: List[str]) -> int:
    if not command:
        sys.stderr.write("relaxrepro run: error: give the command to run after --, "
                         "e.g. relaxrepro run -- python train.py\n")
        return EXIT_USAGE
    env = dict(os.environ)
    out_dir = None if args.output else (args.output_dir or env.get("RELAXREPRO_OUTPUT_DIR"))
    if out_dir:
        try:  # the run's log directory often does not exist before the run, as with the API
            os.makedirs(out_dir, exist_ok=True)
        except OSError:
            pass  # the write names the reason
    try:
        code, doc, path, problems = _record(args, command, env, "run")
    except Exception as exc:  # a bug of ours must not keep the training from running
        sys.stderr.write("relaxrepro: warning: no manifest: internal error: %s: %s\n" % (type(exc).__name__, exc))
        code, doc, path, problems = None, None, None, []
    if code is not None:
        return code
    if path is not None:
        sys.stderr.write("relaxrepro: manifest %s\n" % path)
    elif args.strict and doc is not None:
        sys.stderr.write("relaxrepro run: error: no manifest written; not running the command (--strict)\n")
        return EXIT_FAIL
    if args.strict and problems:
        sys.stderr.write("relaxrepro run: error: a probe failed; not running the command (--strict)\n")
        return EXIT_FAIL

    from . import outcome, proc

    if path is not None and doc is not None:
        # The trainer's API adopts this run id and folds what it sees into this file (adopt.py).
        env = dict(env, RELAXREPRO_RUN_ID=str(doc.get("run_id")), RELAXREPRO_MANIFEST=os.path.abspath(path))
    result = proc.run_foreground(command, env=env)
    status = proc.exit_status(result)
    if result.error is not None:
        sys.stderr.write("relaxrepro run: cannot start %s: %s\n" % (command[0], result.error))
    if path is not None and doc is not None:
        # record() reads the file again: the trainer may have folded its own view into it meanwhile.
        warning = outcome.record(path, outcome.from_process(result.rc, result.error, result.seconds),
                                 run_id=str(doc.get("run_id")))
        if warning:
            sys.stderr.write("relaxrepro: warning: %s\n" % warning)
    return status


def _dirs(args: argparse.Namespace) -> List[str]:
    return list(args.dirs) or ["."]


def _missing_dirs(dirs: List[str], verb: str) -> bool:
    missing = [d for d in dirs if not os.path.exists(d)]
    for d in missing:
        sys.stderr.write("relaxrepro %s: error: %s: no such file or directory\n" % (verb, d))
    return bool(missing)


def _cmd_ls(args: argparse.Namespace, command: List[str]) -> int:
    import json

    from . import index

    dirs = _dirs(args)
    missing = _missing_dirs(dirs, "ls")
    entries = index.scan([d for d in dirs if os.path.exists(d)])
    if args.json:
        rows = [index.summary(e) for e in entries]
        rows.sort(key=lambda r: ("error" in r, str(r.get("generated_at") or ""), str(r.get("run_id") or r["path"])))
        sys.stdout.write(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    elif entries:
        sys.stdout.write(index.render_ls(entries))
    bad = sum(1 for e in entries if e.error is not None)
    if bad:
        sys.stderr.write("relaxrepro ls: %d of %d manifests unreadable\n" % (bad, len(entries)))
    elif not entries and not missing:
        sys.stderr.write("relaxrepro ls: no manifest_*.json under %s\n" % ", ".join(dirs))
    return EXIT_FAIL if missing else EXIT_OK


def _cmd_lineage(args: argparse.Namespace, command: List[str]) -> int:
    import json

    from . import lineage

    dirs = _dirs(args)
    if _missing_dirs(dirs, "lineage"):
        return EXIT_FAIL
    result = lineage.ancestry(args.run, dirs)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(lineage.render_ancestry(result))
    if result["error"]:
        sys.stderr.write("relaxrepro lineage: error: %s\n" % result["error"])
        return EXIT_FAIL
    if result["missing"]:
        sys.stderr.write("relaxrepro lineage: warning: parent %s not found under %s; the chain stops there\n"
                         % (result["missing"], ", ".join(dirs)))
    if result["cycle"]:
        sys.stderr.write("relaxrepro lineage: error: cycle in lineage: %s\n" % " -> ".join(result["cycle"]))
        return EXIT_FAIL
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace, command: List[str]) -> int:
    import json

    from . import sweep

    dirs = _dirs(args)
    if _missing_dirs(dirs, "compare"):
        return EXIT_FAIL
    result = sweep.compare_group(args.group, dirs)
    for line in result["unreadable"]:
        sys.stderr.write("relaxrepro compare: warning: unreadable: %s\n" % line)
    if not result["runs"]:
        sys.stderr.write("relaxrepro compare: error: no runs in group %r under %s\n" % (args.group, ", ".join(dirs)))
        return EXIT_FAIL
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(sweep.render(result))
    return EXIT_OK


def run_main() -> None:
    """Entry point of the console script, ``python -m relaxrepro`` and the .pyz."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    # Only a command that ran probes can have stray threads; reading commands never import the runner.
    runner = sys.modules.get("relaxrepro.runner")
    if runner is not None and runner.stray_threads():
        # A probe thread is stuck in a call that ignores the deadline: exit now rather than wait for it.
        os._exit(code)
    sys.exit(code)
