"""The command line: ``main(argv) -> int``, one ``_cmd_<name>`` per subcommand, exit codes in one place.

A subcommand imports only what it uses, so ``--version`` and reading commands start fast.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import List, Optional, Sequence, Tuple

from ._version import __version__

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


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as a return value instead of exiting the interpreter."""

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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="relaxrepro",
        description="Record, check and compare ML experiment manifests.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="relaxrepro " + __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    gen = sub.add_parser(
        "generate",
        help="write a manifest of this run (best effort, never blocks training)",
        description="Collect the manifest and write manifest_<run-id>.json. "
        "COMMAND after -- is recorded as the run's command, not executed.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    out = gen.add_mutually_exclusive_group()
    out.add_argument("--output", "-o", metavar="FILE", help="write exactly this file (never overwritten)")
    out.add_argument("--output-dir", metavar="DIR",
                     help="directory for manifest_<run-id>.json (default: $RELAXREPRO_OUTPUT_DIR, else .)")
    gen.add_argument("--run-id", metavar="ID", help="use this run id instead of a fresh one")
    gen.add_argument("--strict", action="store_true", help="exit 1 when a probe failed or nothing was written")
    gen.add_argument("--all-ranks", action="store_true",
                     help="write on every rank (default: only rank 0 by RANK, else SLURM_PROCID)")
    gen.add_argument("--print", dest="print_doc", action="store_true", help="also print the manifest to stdout")
    gen.add_argument("--node-report", action="store_true",
                     help="write this node's fragment node_<name>.json instead (every rank writes; run id from "
                     "--run-id, $RELAXREPRO_RUN_ID or $SLURM_JOB_ID)")

    gen.add_argument("--python", metavar="PATH",
                     help="the training interpreter (default: from COMMAND, e.g. its python or launcher's shebang)")
    gen.add_argument("--redact-pattern", metavar="REGEX", action="append", default=[],
                     help="also replace matches of this Python regex with <redacted> (repeatable)")
    gen.add_argument("--keep-paths", action="store_true",
                     help="keep home directories and the user name (for private use; secrets are still redacted)")
    # config, seeds and data (issue 6)
    gen.add_argument("--args-json", metavar="FILE",
                     help="the trainer's resolved arguments as a JSON object (else parsed from COMMAND)")
    gen.add_argument("--env-prefix", metavar="P", action="append", default=[],
                     help="also record environment variables starting with P (repeatable)")
    gen.add_argument("--data", metavar="PATH", action="append", default=[],
                     help="fingerprint this data file or tree (repeatable); see 'relaxrepro fingerprint'")
    fp = sub.add_parser("fingerprint", help="hash data trees fully into the cache that generate reads",
                        description="Compute the full content digest of each PATH (sha256 of a file, Merkle "
                        "digest of a tree) and cache per-file digests in $XDG_CACHE_HOME/relaxrepro (else "
                        "~/.cache/relaxrepro), so 'generate' records them at launch without rereading.")
    fp.add_argument("paths", metavar="PATH", nargs="+")
    fp.add_argument("--json", action="store_true", help="print the results as JSON")
    gen.add_argument("--repo", action="append", default=[], metavar="NAME=PATH",
                     help="also record the git repository at PATH under code.NAME (repeatable)")
    gen.add_argument("--private-patch", action="store_true",
                     help="also keep each unredacted patch in a mode-0600 sidecar (for this machine only)")
    mrg = sub.add_parser(
        "merge", help="fold node fragments into a manifest (per-node data, heterogeneity)",
        description="Fold node_<name>.json fragments (or directories of them) into MANIFEST. Writes "
        "manifest_<run-id>.merged.json beside MANIFEST unless -o is given; never overwrites.")
    mrg.add_argument("manifest", metavar="MANIFEST")
    mrg.add_argument("fragments", metavar="FRAGMENT", nargs="+", help="node fragment file or directory")
    mrg.add_argument("--output", "-o", metavar="OUT", help="write exactly this file (never overwritten)")
    return parser


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
    parser = build_parser()
    try:
        args = parser.parse_args(own)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        if command and args.command != "generate":
            parser.error("'--' and a command are only taken by generate")
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


def _cmd_generate(args: argparse.Namespace, command: List[str]) -> int:
    env = dict(os.environ)
    if args.node_report:
        return _node_report(args, env, command)
    rank = _rank(env)
    if rank not in (None, 0) and not args.all_ranks:
        return EXIT_OK  # under a multi-rank launcher only rank 0 writes
    if args.run_id is None and env.get("RELAXREPRO_RUN_ID"):
        args.run_id = env["RELAXREPRO_RUN_ID"]  # shared with every node's --node-report, so merge can match them
    if args.run_id is not None and not _RUN_ID_RE.match(args.run_id):
        sys.stderr.write("relaxrepro generate: error: --run-id %r: use letters, digits, '.', '_' and '-' only\n"
                         % args.run_id)
        return EXIT_USAGE

    repos, problem = _parse_repos(args.repo)
    if problem:
        sys.stderr.write("relaxrepro generate: error: %s\n" % problem)
        return EXIT_USAGE

    from . import manifest
    from .context import Context
    from .redact import Redactor

    try:
        redactor = Redactor.for_environment(env, extra_patterns=args.redact_pattern, keep_paths=args.keep_paths)
    except ValueError as exc:
        sys.stderr.write("relaxrepro generate: error: %s\n" % exc)
        return EXIT_USAGE
    options = {"env_prefixes": list(args.env_prefix), "data": list(args.data), "repos": repos,
               "private_patch": args.private_patch}
    if args.python:
        options["python"] = args.python
    if args.args_json is not None:
        loaded = _load_args_json(args.args_json)
        if isinstance(loaded, str):
            sys.stderr.write("relaxrepro generate: error: --args-json %s: %s\n" % (args.args_json, loaded))
            return EXIT_USAGE
        options["args_json"] = loaded
    ctx = Context(env=env, argv=command, argv_source="cli" if command else "none", options=options)
    doc = manifest.build(ctx, run_id=args.run_id, redactor=redactor)
    if rank is not None:
        doc.setdefault("runtime", {})["rank"] = rank
    problems = manifest.probe_problems(doc)
    for line in problems:
        sys.stderr.write("relaxrepro: warning: probe %s\n" % line)
    directory = None if args.output else (args.output_dir or env.get("RELAXREPRO_OUTPUT_DIR") or ".")
    result = manifest.write(doc, path=args.output, directory=directory, env=env, redactor=redactor)
    for w in result.warnings:
        sys.stderr.write("relaxrepro: warning: %s\n" % w)
    if args.print_doc:
        from . import writer

        sys.stdout.write(writer.serialize(doc).decode("utf-8"))
    if result.path is None:
        return EXIT_FAIL if args.strict else EXIT_OK
    print(result.path)
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


def run_main() -> None:
    """Entry point of the console script, ``python -m relaxrepro`` and the .pyz."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    runner = sys.modules.get("relaxrepro.runner")  # only when probes ran; keeps --version lean
    if runner is not None and runner.stray_threads():
        # A probe thread is stuck in a call that ignores the deadline: exit now rather than wait for it.
        os._exit(code)
    sys.exit(code)
