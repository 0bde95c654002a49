"""The house manners inside the layers, read from the source alone (``ast``; nothing of relaxrepro is imported).

``tests/test_layout.py`` keeps the layers pointing one way; these keep one home per concept inside them:

- no command module imports another command (what several commands need is an analysis in ``analyze/``,
  or plumbing in ``commands/_common.py``);
- ``manifest/`` never looks at the machine (no ``pwd``, ``socket`` or ``subprocess``, no ``os.uname``);
- threads are started in ``std/`` only (one deadline helper serves every caller);
- no module reads another module's ``_private`` attribute, of a module or of an object it handed out;
- no module is over ``MAX_LINES`` lines;
- every function-level import says why it is not at the top, in a comment on its line or the line above; those of
  relaxrepro's own modules name the measured cost (``~6 ms``) and there are at most ``MAX_OWN_LATE_IMPORTS``.

Each check is a plain function over a package directory, so the tests at the bottom run it on a small synthetic
package and see it fail there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from tests.test_layout import PACKAGE_DIR, build_import_graph, make_package, module_name

MAX_LINES = 700
MAX_OWN_LATE_IMPORTS = 30
MACHINE_MODULES = ("pwd", "socket", "subprocess")
COST = re.compile(r"\d+(\.\d+)?\s*(ms|µs|us)\b")
"""A measured cost in a comment: ``~6 ms``, ``0.3 ms``."""

STDLIB_PRIVATE = {("os", "_exit"), ("sys", "_getframe"), ("os", "_Environ")}
"""Private attributes of the standard library used on purpose (``os._exit`` after a stuck probe thread)."""


def _files(package_dir: Path) -> Iterator[Tuple[str, Path, ast.Module, List[str]]]:
    for path in sorted(Path(package_dir).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        yield module_name(package_dir, path, package_dir.name), path, ast.parse(text), text.splitlines()


def _shown(package_dir: Path, path: Path, node: ast.AST) -> str:
    return "%s:%d" % (path.relative_to(package_dir.parent).as_posix(), getattr(node, "lineno", 0))


def is_command(module: str, package: str) -> bool:
    """``package.commands.<name>`` where name is not private (``_common`` is shared plumbing, not a command)."""
    parts = module.split(".")
    return len(parts) == 3 and parts[:2] == [package, "commands"] and not parts[2].startswith("_")


def find_command_imports(package_dir: Path) -> List[str]:
    graph = build_import_graph(package_dir)
    found = set()
    for imp in graph.imports:
        if (is_command(imp.importer, graph.package) and is_command(imp.target, graph.package)
                and imp.importer != imp.target):
            found.add("%s: %s imports the command %s" % (imp.where, imp.importer, imp.target))
    return sorted(found)


def find_machine_lookups(package_dir: Path) -> List[str]:
    """``manifest/`` modules importing ``pwd``/``socket``/``subprocess`` or calling ``os.uname``."""
    found = []
    for module, path, tree, _lines in _files(package_dir):
        if ".manifest" not in module:
            continue
        for node in ast.walk(tree):
            names: List[str] = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [(node.module or "").split(".")[0]]
                if node.module == "os":
                    names += ["os.uname" for a in node.names if a.name == "uname"]
            elif isinstance(node, ast.Attribute) and node.attr == "uname":
                names = ["os.uname"]
            for name in names:
                if name in MACHINE_MODULES or name == "os.uname":
                    found.append("%s: %s looks at the machine (%s)" % (_shown(package_dir, path, node), module, name))
    return found


def find_thread_starts(package_dir: Path) -> List[str]:
    """``Thread(...)`` made outside ``std/``."""
    found = []
    for module, path, tree, _lines in _files(package_dir):
        if module.split(".")[1:2] == ["std"]:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name in ("Thread", "Timer", "start_new_thread", "ThreadPoolExecutor"):
                    found.append("%s: %s starts a thread" % (_shown(package_dir, path, node), module))
    return found


def _defined_private_names(tree: ast.Module) -> Set[str]:
    """Every ``_name`` this module defines: functions, classes, assignments (``self._x = ...`` too), parameters."""
    names: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)  # __slots__ = ("_x",), object.__setattr__(self, "_x", ...)
    return names


def find_private_attribute_reads(package_dir: Path) -> List[str]:
    """``obj._x`` where ``_x`` is a name this module never defines (so it belongs to another module), on anything but
    ``self``/``cls``. A module's own private names may be used on any object of its own making."""
    found = []
    for module, path, tree, _lines in _files(package_dir):
        own = _defined_private_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            base = node.value
            if isinstance(base, ast.Name) and (base.id in ("self", "cls") or (base.id, node.attr) in STDLIB_PRIVATE):
                continue
            if node.attr in own:
                continue
            found.append("%s: %s reads %s of something it did not make"
                         % (_shown(package_dir, path, node), module, ast.unparse(node) if hasattr(ast, "unparse")
                            else node.attr))
    return found


def find_long_modules(package_dir: Path) -> List[str]:
    found = []
    for _module, path, _tree, lines in _files(package_dir):
        if len(lines) > MAX_LINES:
            found.append("%s: %d lines (at most %d)" % (path.relative_to(package_dir.parent).as_posix(), len(lines),
                                                         MAX_LINES))
    return found


def _late_imports(tree: ast.Module) -> Iterator[ast.stmt]:
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield node


def late_import_report(package_dir: Path) -> Tuple[List[str], int]:
    """(function-level imports without their reason, how many function-level imports of the package's own modules).

    The reason is a comment on the import's first line or on the lines right above it, or the reason of the import
    on the line just before (a block of imports shares one); for the package's own modules it names a measured cost."""
    package = Path(package_dir).name
    missing: List[str] = []
    own = 0
    for _module, path, tree, lines in _files(package_dir):
        seen: Set[int] = set()
        block_reason: Dict[int, str] = {}
        for node in _late_imports(tree):
            if id(node) in seen:
                continue
            seen.add(id(node))
            heads = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else [
                package if node.level else (node.module or "").split(".")[0]]
            ours = package in heads
            own += ours
            why = " ".join(c for c in [_comment(lines[node.lineno - 1])] + _comments_above(lines, node.lineno) if c)
            why = why or block_reason.get(node.lineno - 1, "")
            if not why or (ours and not COST.search(why)):
                missing.append("%s: %s" % (_shown(package_dir, path, node), lines[node.lineno - 1].strip()))
            block_reason[node.end_lineno] = why  # the next line's import, if any, is of the same block
    return missing, own


def _comments_above(lines: List[str], lineno: int) -> List[str]:
    """The comment lines standing right above line ``lineno`` (1-based)."""
    out = []
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        out.append(_comment(lines[i]))
        i -= 1
    return out


def _comment(line: str) -> str:
    """The ``# ...`` part of a line of code (good enough for import lines, which hold no strings with ``#``)."""
    return line[line.index("#") + 1:].strip() if "#" in line else ""


def _fail_on(offenders: List[str], what: str) -> None:
    if offenders:
        pytest.fail("%d %s:\n  %s" % (len(offenders), what, "\n  ".join(offenders)), pytrace=False)


# --------------------------------------------------------------------------------------------------------------------
# The real package


def test_no_command_imports_another_command():
    _fail_on(find_command_imports(PACKAGE_DIR), "command(s) importing another command (move the shared part to "
                                                "analyze/ or commands/_common.py)")


def test_the_document_layer_never_looks_at_the_machine():
    _fail_on(find_machine_lookups(PACKAGE_DIR), "machine lookup(s) in manifest/ (pass them in from collect/)")


def test_threads_are_started_in_std_only():
    _fail_on(find_thread_starts(PACKAGE_DIR), "thread(s) started outside std/ (use std.deadline)")


def test_no_module_reads_another_modules_private_attributes():
    _fail_on(find_private_attribute_reads(PACKAGE_DIR), "read(s) of another module's _private attribute")


def test_no_module_is_too_long():
    _fail_on(find_long_modules(PACKAGE_DIR), "module(s) too long: split along their concerns")


def test_every_function_level_import_says_why_and_few_are_our_own():
    missing, own = late_import_report(PACKAGE_DIR)
    _fail_on(missing, "function-level import(s) without a reason (own modules: with the measured cost)")
    assert own <= MAX_OWN_LATE_IMPORTS, "%d function-level imports of relaxrepro's own modules (at most %d)" % (
        own, MAX_OWN_LATE_IMPORTS)


# --------------------------------------------------------------------------------------------------------------------
# The checks, proven able to fail on small synthetic packages


def test_a_command_importing_another_is_reported_but_common_plumbing_is_not(tmp_path):
    pkg = make_package(tmp_path, {
        "commands/_common.py": "",
        "commands/diff.py": "from . import _common\n",
        "commands/report.py": "from . import _common\ndef run():\n    from .diff import run\n",
        "commands/verify.py": "from relaxrepro.commands import diff\n",
    })
    assert find_command_imports(pkg) == [
        "relaxrepro/commands/report.py:3: relaxrepro.commands.report imports the command relaxrepro.commands.diff",
        "relaxrepro/commands/verify.py:1: relaxrepro.commands.verify imports the command relaxrepro.commands.diff",
    ]


def test_machine_lookups_in_the_document_layer_are_reported(tmp_path):
    pkg = make_package(tmp_path, {
        "manifest/redact.py": "import os, pwd\nfrom socket import gethostname\nNAME = os.uname().nodename\n",
        "manifest/ok.py": "import os\nHOME = os.sep\n",
        "collect/context.py": "import pwd, socket\n",
    })
    assert find_machine_lookups(pkg) == [
        "relaxrepro/manifest/redact.py:1: relaxrepro.manifest.redact looks at the machine (pwd)",
        "relaxrepro/manifest/redact.py:2: relaxrepro.manifest.redact looks at the machine (socket)",
        "relaxrepro/manifest/redact.py:3: relaxrepro.manifest.redact looks at the machine (os.uname)",
    ]


def test_threads_outside_std_are_reported(tmp_path):
    pkg = make_package(tmp_path, {
        "std/deadline.py": "import threading\nthreading.Thread(target=print).start()\n",
        "collect/probe.py": "import threading\nLOCK = threading.Lock()\nthreading.Thread(target=print)\n",
    })
    assert find_thread_starts(pkg) == ["relaxrepro/collect/probe.py:3: relaxrepro.collect.probe starts a thread"]


def test_private_attribute_reads_of_another_modules_objects_are_reported(tmp_path):
    pkg = make_package(tmp_path, {
        "manifest/rows.py": "class Row:\n    def __init__(self):\n        self._doc = {}\n    def doc(self):\n"
                            "        return self._doc\ndef peek(other):\n    return other._doc\n",
        "commands/ls.py": "import os\ndef show(row):\n    os._exit(0)\n    return row._doc, row.doc()\n",
    })
    assert find_private_attribute_reads(pkg) == [
        "relaxrepro/commands/ls.py:4: relaxrepro.commands.ls reads row._doc of something it did not make"]


def test_long_modules_are_reported(tmp_path):
    pkg = make_package(tmp_path, {"std/big.py": "x = 1\n" * (MAX_LINES + 1), "std/ok.py": "x = 1\n" * MAX_LINES})
    assert find_long_modules(pkg) == ["relaxrepro/std/big.py: %d lines (at most %d)" % (MAX_LINES + 1, MAX_LINES)]


def test_function_level_imports_without_a_reason_are_reported_and_counted(tmp_path):
    pkg = make_package(tmp_path, {"cli.py": """
        def a():
            from .commands import generate  # lazy: ~4 ms, only for generate
            # only on --here: ~6 ms
            from .collect import here
            from .collect import probes
            import json  # the report alone needs it
            from .std import text  # not at the top

            import zlib
            from relaxrepro import api
        """})
    missing, own = late_import_report(pkg)
    assert own == 5
    assert missing == [
        "relaxrepro/cli.py:8: from .std import text  # not at the top",
        "relaxrepro/cli.py:10: import zlib",
        "relaxrepro/cli.py:11: from relaxrepro import api",
    ]
