"""The package's architecture, read from the source alone (``ast``; nothing of relaxrepro is imported).

Target layout::

    relaxrepro/
      __init__.py __main__.py _version.py cli.py api.py   the only top-level modules
      commands/   one module per subcommand
      record/     one run's manifest over its life
      collect/    everything that looks at the machine (incl. collect/probes/)
      manifest/   the document as data
      std/        imports nothing of relaxrepro

Layers point one way, ``cli -> commands -> record -> collect -> manifest -> std`` (see ``ALLOWED``); a module may
always import within its own layer, and ``relaxrepro._version`` from anywhere. There are no import cycles, and no
module reaches for another module's ``_private`` names (a private *module*, such as ``_version``, may be imported).

Every check is a plain function over an ``ImportGraph`` built by ``build_import_graph(package_dir)``, so the tests
at the bottom run each one on a small synthetic package in ``tmp_path`` and see it fail there.
"""

from __future__ import annotations

import ast
import textwrap
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Set, Tuple

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "relaxrepro"

TOP_LEVEL_MODULES = ("__init__", "__main__", "_version", "cli", "api")
LAYER_PACKAGES = ("commands", "analyze", "record", "collect", "manifest", "std")
IGNORED_DIRS = ("__pycache__",)

_BELOW_COMMANDS = ("record", "collect", "manifest", "std")
ALLOWED: Dict[str, Tuple[str, ...]] = {
    "std": (),
    "manifest": ("std",),
    "collect": ("manifest", "std"),
    "record": ("collect", "manifest", "std"),
    "analyze": _BELOW_COMMANDS,
    "commands": ("analyze",) + _BELOW_COMMANDS,
    "api": _BELOW_COMMANDS,
    "cli": ("commands",) + _BELOW_COMMANDS,
    "__main__": ("cli",),
    "__init__": ("__main__", "cli", "api") + LAYER_PACKAGES,  # it maps public names lazily, by string
    "_version": (),
}
"""Which other layers of relaxrepro each layer may import (besides its own, and ``_version``)."""


# --------------------------------------------------------------------------------------------------------------------
# The graph


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    """The module imported: ``pkg.name`` for ``from pkg import name`` when that is a submodule, else ``pkg``."""
    name: Optional[str]
    """For ``from target import name`` where ``name`` is not a submodule: the name taken from the module."""
    where: str


@dataclass(frozen=True)
class AttributeUse:
    """``mod.attr`` where ``mod`` is bound to a module of the package by an import."""

    user: str
    owner: str
    attr: str
    text: str
    where: str


@dataclass
class ImportGraph:
    package: str
    package_dir: Path
    modules: Dict[str, Path] = field(default_factory=dict)
    imports: List[Import] = field(default_factory=list)
    attribute_uses: List[AttributeUse] = field(default_factory=list)
    unresolved: List[str] = field(default_factory=list)
    """Relative imports that climb above the package."""

    def edges(self) -> Dict[str, Set[str]]:
        """importer -> the existing modules it imports (self-imports left out)."""
        out: Dict[str, Set[str]] = {m: set() for m in self.modules}
        for imp in self.imports:
            if imp.target in self.modules and imp.target != imp.importer:
                out[imp.importer].add(imp.target)
        return out

    def first_site(self, importer: str, target: str) -> str:
        return next(i.where for i in self.imports if i.importer == importer and i.target == target)


def module_name(package_dir: Path, path: Path, package: str) -> str:
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package] + parts)


def _python_files(package_dir: Path) -> Iterator[Path]:
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).parts
        if not any(p in IGNORED_DIRS or p.startswith(".") for p in rel[:-1]):
            yield path


def _resolve_relative(module: str, is_package: bool, level: int, name: Optional[str]) -> Optional[str]:
    """``from <level dots><name> import ...`` in ``module``; None when it climbs above the top package."""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level - 1 >= len(parts):
        return None
    parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return base + "." + name if name else base


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else base + "." + node.attr
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class _File:
    """One file's imports, resolved against the package's modules."""

    def __init__(self, graph: ImportGraph, module: str, path: Path) -> None:
        self.graph = graph
        self.module = module
        self.is_package = path.name == "__init__.py"
        self.shown = path.relative_to(graph.package_dir.parent).as_posix()

    def ours(self, name: str) -> bool:
        return name == self.graph.package or name.startswith(self.graph.package + ".")

    def resolve(self, node: ast.stmt) -> List[Tuple[str, Optional[str], Optional[str], Optional[str]]]:
        """For each alias of an import statement: (local name bound, module imported or None when not of the
        package, name taken from it or None, module the local name is bound to or None)."""
        out: List[Tuple[str, Optional[str], Optional[str], Optional[str]]] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.split(".")[0]
                if not self.ours(alias.name):
                    out.append((alias.asname or head, None, None, None))
                else:
                    out.append((alias.asname or head, alias.name, None, alias.name if alias.asname else head))
            return out
        assert isinstance(node, ast.ImportFrom)
        base: Optional[str] = node.module or ""
        if node.level:
            base = _resolve_relative(self.module, self.is_package, node.level, node.module)
        for alias in node.names:
            local = alias.asname or alias.name
            sub = "%s.%s" % (base, alias.name)
            if base is None or not self.ours(base):
                out.append((local, None, None, None))
            elif alias.name != "*" and sub in self.graph.modules:
                out.append((local, sub, None, sub))
            else:
                out.append((local, base, None if alias.name == "*" else alias.name, None))
        return out

    def where(self, node: ast.AST) -> str:
        return "%s:%d" % (self.shown, getattr(node, "lineno", 0))


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes evaluated in ``scope`` itself. Nested functions, lambdas and classes are yielded but not entered,
    except for what of them runs here (decorators, defaults, bases)."""
    todo: List[ast.AST] = [scope.body] if isinstance(scope, ast.Lambda) else list(scope.body)  # type: ignore
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(getattr(node, "decorator_list", []))
            todo.extend(node.args.defaults)
            todo.extend(d for d in node.args.kw_defaults if d is not None)
        elif isinstance(node, ast.ClassDef):
            todo.extend(node.decorator_list)
            todo.extend(node.bases)
            todo.extend(k.value for k in node.keywords)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _scope_bindings(scope: ast.AST, file: _File) -> Dict[str, Optional[str]]:
    """Local name -> the module of the package it is bound to in ``scope``; None where it is bound to anything else
    (a parameter, an assignment, a def), or to different things."""
    bound: Dict[str, Optional[str]] = {}

    def bind(name: str, module: Optional[str]) -> None:
        bound[name] = module if bound.get(name, module) == module else None

    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        for arg in getattr(a, "posonlyargs", []) + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
            bind(arg.arg, None)
    for node in _scope_nodes(scope):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bind(node.id, None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for local, _target, _name, module in file.resolve(node):
                bind(local, module)
    return bound


def _module_of(expr: ast.expr, lookup: Callable[[str], Optional[str]], modules: Mapping[str, Path]) -> Optional[str]:
    """The module of the package that ``expr`` (a name or dotted chain) stands for, if any."""
    if isinstance(expr, ast.Name):
        return lookup(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _module_of(expr.value, lookup, modules)
        if base is not None and base + "." + expr.attr in modules:
            return base + "." + expr.attr
    return None


def _attribute_uses(scope: ast.AST, file: _File, chain: List[Tuple[bool, Dict[str, Optional[str]]]]) -> None:
    """``mod.attr`` in ``scope`` and the scopes nested in it, where ``mod`` is a name that an import bound to a
    module of the package, as Python resolves names (class bodies are not seen from the functions in them)."""
    chain = chain + [(isinstance(scope, ast.ClassDef), _scope_bindings(scope, file))]

    def lookup(name: str) -> Optional[str]:
        for depth, (is_class, bound) in enumerate(reversed(chain)):
            if (depth == 0 or not is_class) and name in bound:
                return bound[name]
        return None

    for node in _scope_nodes(scope):
        if isinstance(node, _SCOPES):
            _attribute_uses(node, file, chain)
        elif isinstance(node, ast.Attribute):
            owner = _module_of(node.value, lookup, file.graph.modules)
            if owner is not None and owner + "." + node.attr not in file.graph.modules:
                use = AttributeUse(file.module, owner, node.attr, _dotted(node) or node.attr, file.where(node))
                file.graph.attribute_uses.append(use)


def build_import_graph(package_dir: Path, package: Optional[str] = None) -> ImportGraph:
    """Every import of every ``.py`` under ``package_dir`` that names the package, found anywhere in the file:
    at the top, inside functions, under ``if TYPE_CHECKING:``. ``package`` defaults to the directory's name."""
    package_dir = Path(package_dir)
    package = package or package_dir.name
    graph = ImportGraph(package, package_dir)
    files = {module_name(package_dir, p, package): p for p in _python_files(package_dir)}
    graph.modules = dict(sorted(files.items()))
    for mod, path in graph.modules.items():
        file = _File(graph, mod, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level and _resolve_relative(
                    mod, file.is_package, node.level, node.module) is None:
                graph.unresolved.append("%s: %s climbs above %s" % (file.where(node), "." * node.level, package))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for _local, target, name, _module in file.resolve(node):
                    if target is not None:
                        graph.imports.append(Import(mod, target, name, file.where(node)))
        _attribute_uses(tree, file, [])
    graph.imports.sort(key=lambda i: _by_site(i.where + ":"))
    graph.attribute_uses.sort(key=lambda u: _by_site(u.where + ":"))
    return graph


# --------------------------------------------------------------------------------------------------------------------
# The checks: each returns a sorted list of readable offenders, empty when all is well


def strongly_connected_components(edges: Mapping[str, Set[str]]) -> List[List[str]]:
    """Tarjan's algorithm, iterative (no recursion limit), in a stable order."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in sorted(edges):
        if root in index:
            continue
        visit(root)
        work = [(root, iter(sorted(edges.get(root, ()))))]
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    visit(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(sorted(component))
    return sorted(found)


def _shortest_cycle_through(start: str, members: Set[str], edges: Mapping[str, Set[str]]) -> List[str]:
    parent: Dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for nxt in sorted(edges.get(node, ())):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [start]
            if nxt not in seen:
                seen.add(nxt)
                parent[nxt] = node
                queue.append(nxt)
    raise AssertionError("%s is in a strongly connected component but on no cycle" % start)  # pragma: no cover


def find_cycles(graph: ImportGraph) -> List[str]:
    """Each import cycle as ``a -> b -> a``, with where each of its imports is: for every strongly connected
    component, the shortest cycle through each of its modules (so every module of the component shows up)."""
    edges = graph.edges()
    report: List[str] = []
    for component in strongly_connected_components(edges):
        if len(component) < 2:
            continue
        members = set(component)
        cycles: List[List[str]] = []
        for start in component:
            cycle = _shortest_cycle_through(start, members, edges)[:-1]
            turn = cycle.index(min(cycle))
            cycle = cycle[turn:] + cycle[:turn]
            if cycle not in cycles:
                cycles.append(cycle)
        for cycle in sorted(cycles, key=lambda c: (len(c), c)):
            closed = cycle + [cycle[0]]
            lines = [" -> ".join(closed)]
            for a, b in zip(closed, closed[1:]):
                lines.append("      %s -> %s  (%s)" % (a, b, graph.first_site(a, b)))
            report.append("\n".join(lines))
    return report


def find_private_imports(graph: ImportGraph) -> List[str]:
    """``_private`` names (not dunders) taken from another module of the package, by ``from m import _x`` or as
    ``m._x`` on a name an import bound to module ``m``. Importing a private module (``from . import _common``,
    ``relaxrepro._version``) is fine: that is a module, not a name inside one."""
    found: Set[str] = set()
    for imp in graph.imports:
        if imp.name is not None and _is_private(imp.name) and imp.target != imp.importer:
            found.add("%s: %s imports %s from %s" % (imp.where, imp.importer, imp.name, imp.target))
    for use in graph.attribute_uses:
        if _is_private(use.attr) and use.owner != use.user:
            found.add("%s: %s uses %s (%s of %s)" % (use.where, use.user, use.text, use.attr, use.owner))
    return sorted(found, key=_by_site)


def _by_site(line: str) -> Tuple[str, int, str]:
    path, _, rest = line.partition(":")
    num, _, tail = rest.partition(":")
    return (path, int(num) if num.isdigit() else 0, tail)


def find_layout_problems(package_dir: Path) -> List[str]:
    """Top-level modules other than ``TOP_LEVEL_MODULES``, directories other than ``LAYER_PACKAGES``, and any of
    those two missing (or a layer directory without ``__init__.py``)."""
    package_dir = Path(package_dir)
    problems: List[str] = []
    present_modules: Set[str] = set()
    present_dirs: Set[str] = set()
    for entry in sorted(package_dir.iterdir()):
        if entry.is_dir():
            if entry.name in IGNORED_DIRS:
                continue
            present_dirs.add(entry.name)
            if entry.name not in LAYER_PACKAGES:
                problems.append("%s/%s/: a directory that is not a layer package" % (package_dir.name, entry.name))
            elif not (entry / "__init__.py").is_file():
                problems.append("%s/%s/: a layer package without __init__.py" % (package_dir.name, entry.name))
        elif entry.suffix in (".py", ".pyi"):
            present_modules.add(entry.stem)
            if entry.stem not in TOP_LEVEL_MODULES:
                problems.append("%s/%s: a top-level module outside the layer packages" % (package_dir.name, entry.name))
    for name in TOP_LEVEL_MODULES:
        if name not in present_modules:
            problems.append("%s/%s.py: missing" % (package_dir.name, name))
    for name in LAYER_PACKAGES:
        if name not in present_dirs:
            problems.append("%s/%s/: missing layer package" % (package_dir.name, name))
    return problems


def layer_of(module: str, package: str) -> Optional[str]:
    """``__init__``, ``__main__``, ``_version``, ``cli``, ``api`` or one of ``LAYER_PACKAGES``; None for a module
    outside the layout (``find_layout_problems`` reports those)."""
    if module == package:
        return "__init__"
    if not module.startswith(package + "."):
        return None
    rest = module[len(package) + 1:].split(".")
    if len(rest) == 1 and rest[0] in TOP_LEVEL_MODULES:
        return rest[0]
    if rest[0] in LAYER_PACKAGES:
        return rest[0]
    return None


def find_layer_violations(graph: ImportGraph) -> List[str]:
    """``importer -> imported (layer A may not import layer B)`` for every import across layers that ``ALLOWED``
    does not list. Modules outside every layer are left to ``find_layout_problems``."""
    found: Dict[Tuple[str, str], str] = {}
    for imp in graph.imports:
        a = layer_of(imp.importer, graph.package)
        b = layer_of(imp.target, graph.package)
        if a is None or b is None or a == b or b == "_version" or b in ALLOWED[a]:
            continue
        if (imp.importer, imp.target) not in found:
            found[(imp.importer, imp.target)] = "%s -> %s (layer %s may not import layer %s)  at %s" % (
                imp.importer, imp.target, a, b, imp.where)
    return [found[k] for k in sorted(found)]


def find_missing_modules(graph: ImportGraph) -> List[str]:
    """Imports naming a module of the package that has no file (a move left a stale import behind), and relative
    imports that climb above the package."""
    found = list(graph.unresolved)
    for imp in graph.imports:
        if imp.target not in graph.modules:
            found.append("%s: %s imports %s, which is no module of %s" % (imp.where, imp.importer, imp.target,
                                                                           graph.package))
    return sorted(set(found), key=_by_site)


def _fail_on(offenders: List[str], what: str) -> None:
    if offenders:
        pytest.fail("%d %s:\n  %s" % (len(offenders), what, "\n  ".join(offenders)), pytrace=False)


# --------------------------------------------------------------------------------------------------------------------
# The real package


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_import_graph(PACKAGE_DIR)


def test_the_graph_sees_the_package(graph):
    # Guards the checks below from passing on an empty graph (a wrong path, a broken walk).
    assert "relaxrepro.cli" in graph.modules
    assert any(i.importer == "relaxrepro.__main__" and i.target == "relaxrepro.cli" for i in graph.imports)


def test_the_package_has_no_import_cycles(graph):
    _fail_on(find_cycles(graph), "import cycle(s)")


def test_no_module_imports_private_names_of_another(graph):
    _fail_on(find_private_imports(graph), "use(s) of another module's _private names")


def test_the_top_level_holds_only_the_entry_points_and_the_layer_packages():
    what = "layout problem(s) at the top of relaxrepro/ (it holds the modules %s and the packages %s only)" % (
        ", ".join(TOP_LEVEL_MODULES), ", ".join(LAYER_PACKAGES))
    _fail_on(find_layout_problems(PACKAGE_DIR), what)


def test_imports_follow_the_layers(graph):
    _fail_on(find_layer_violations(graph), "layer violation(s)")


def test_every_import_names_an_existing_module(graph):
    _fail_on(find_missing_modules(graph), "import(s) of modules that do not exist")


# --------------------------------------------------------------------------------------------------------------------
# The checks, proven able to fail on small synthetic packages


def make_package(root: Path, files: Mapping[str, str], name: str = "relaxrepro") -> Path:
    """A package ``root/name`` laid out as the target (every layer package, every top-level module, all empty),
    plus ``files`` (paths relative to the package, dedented), which may replace any of those."""
    pkg = root / name
    skeleton = {m + ".py": "" for m in TOP_LEVEL_MODULES}
    skeleton.update({layer + "/__init__.py": "" for layer in LAYER_PACKAGES})
    skeleton.update(files)
    for rel, text in skeleton.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return pkg


def _targets(graph: ImportGraph, importer: str) -> Set[str]:
    return {i.target for i in graph.imports if i.importer == importer}


@pytest.mark.parametrize("name", ["relaxrepro", "otherpkg"])
def test_a_clean_synthetic_package_passes_every_check(tmp_path, name):
    pkg = make_package(tmp_path, {
        "__init__.py": "from %s._version import __version__\n" % name,
        "__main__.py": "from %s.cli import run_main\n" % name,
        "_version.py": "__version__ = '1'\n",
        "cli.py": """
            from ._version import __version__
            def main():
                from .commands import generate
                from .collect import probes
                return generate, probes
            """,
        "api.py": "from .record import run\nfrom .std import _sha\n",
        "commands/__init__.py": "from . import _common\n",
        "commands/_common.py": "from ..manifest import doc\n",
        "commands/generate.py": "from . import _common\nfrom ..record import run\nfrom .._version import __version__\n",
        "record/run.py": "from ..collect.probes import gpu\nfrom ..manifest.doc import Manifest\n",
        "collect/probes/__init__.py": "from . import gpu\n",  # a package importing its own submodules: no cycle
        "collect/probes/gpu.py": "from .. import util\nfrom ...std import _sha\n",
        "collect/util.py": "import %s.manifest.doc as doc\nX = doc.Manifest.__name__\n" % name,
        "manifest/doc.py": "from ..std._sha import sha256_hex\nclass Manifest: pass\n",
        "std/_sha.py": "def sha256_hex(b): return b\n",
    }, name=name)
    graph = build_import_graph(pkg)
    assert graph.package == name
    assert len(graph.imports) > 10
    assert find_cycles(graph) == []
    assert find_private_imports(graph) == []
    assert find_layout_problems(pkg) == []
    assert find_layer_violations(graph) == []
    assert find_missing_modules(graph) == []


def test_relative_imports_resolve_from_modules_and_from_packages(tmp_path):
    pkg = make_package(tmp_path, {
        "collect/util.py": "",
        "collect/probes/__init__.py": "from .. import util\nfrom . import gpu\nfrom .gpu import parse\n",
        "collect/probes/gpu.py": """
            from .. import util, NAME_IN_COLLECT_INIT
            from . import sibling
            from ...manifest import doc, NAME_IN_MANIFEST_INIT
            from ...manifest.doc import Manifest
            import relaxrepro.std.text as text
            def parse():
                from relaxrepro import cli
            """,
        "collect/probes/sibling.py": "",
        "manifest/doc.py": "",
        "std/text.py": "",
    })
    graph = build_import_graph(pkg)
    assert _targets(graph, "relaxrepro.collect.probes") == {
        "relaxrepro.collect.util", "relaxrepro.collect.probes.gpu"}
    assert _targets(graph, "relaxrepro.collect.probes.gpu") == {
        "relaxrepro.collect.util", "relaxrepro.collect", "relaxrepro.collect.probes.sibling",
        "relaxrepro.manifest.doc", "relaxrepro.manifest", "relaxrepro.std.text", "relaxrepro.cli"}
    by_name = {i.name: i.target for i in graph.imports if i.name}
    assert by_name["NAME_IN_COLLECT_INIT"] == "relaxrepro.collect"
    assert by_name["Manifest"] == "relaxrepro.manifest.doc"
    assert by_name["parse"] == "relaxrepro.collect.probes.gpu"
    assert find_layer_violations(graph) == [
        "relaxrepro.collect.probes.gpu -> relaxrepro.cli (layer collect may not import layer cli)"
        "  at relaxrepro/collect/probes/gpu.py:8"]


def test_a_relative_import_above_the_package_is_reported(tmp_path):
    pkg = make_package(tmp_path, {"std/text.py": "from ... import nothing\n"})
    assert find_missing_modules(build_import_graph(pkg)) == [
        "relaxrepro/std/text.py:1: ... climbs above relaxrepro"]


def test_a_cycle_through_a_function_level_import_is_reported(tmp_path):
    pkg = make_package(tmp_path, {
        "manifest/a.py": "from . import b\n",
        "manifest/b.py": "def load():\n    from .a import thing\n    return thing\n",
    })
    cycles = find_cycles(build_import_graph(pkg))
    assert cycles == ["relaxrepro.manifest.a -> relaxrepro.manifest.b -> relaxrepro.manifest.a\n"
                      "      relaxrepro.manifest.a -> relaxrepro.manifest.b  (relaxrepro/manifest/a.py:1)\n"
                      "      relaxrepro.manifest.b -> relaxrepro.manifest.a  (relaxrepro/manifest/b.py:2)"]
    with pytest.raises(pytest.fail.Exception, match=r"1 import cycle\(s\):\n  relaxrepro.manifest.a -> "):
        _fail_on(cycles, "import cycle(s)")


def test_a_cycle_under_type_checking_and_a_longer_one_are_reported(tmp_path):
    pkg = make_package(tmp_path, {
        "std/x.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .y import Y\n",
        "std/y.py": "from . import z\n",
        "std/z.py": "import relaxrepro.std.x\n",
    })
    cycles = find_cycles(build_import_graph(pkg))
    assert [c.splitlines()[0] for c in cycles] == [
        "relaxrepro.std.x -> relaxrepro.std.y -> relaxrepro.std.z -> relaxrepro.std.x"]


def test_a_submodule_importing_its_package_init_that_imports_it_is_a_cycle(tmp_path):
    pkg = make_package(tmp_path, {
        "record/__init__.py": "from .run import Run\nDEFAULT = 1\n",
        "record/run.py": "from . import DEFAULT\nclass Run: pass\n",
    })
    cycles = find_cycles(build_import_graph(pkg))
    assert [c.splitlines()[0] for c in cycles] == ["relaxrepro.record -> relaxrepro.record.run -> relaxrepro.record"]


def test_private_names_taken_from_another_module_are_reported(tmp_path):
    pkg = make_package(tmp_path, {
        "std/util.py": "_helper = 1\n_other = 2\npublic = 3\n",
        "std/_private_mod.py": "",
        "std/a.py": """
            from relaxrepro.std.util import _helper
            from .util import _other, public
            from . import util, _private_mod
            import relaxrepro.std.util as u
            import relaxrepro.std.util
            from relaxrepro._version import __version__
            def f():
                return util._helper, u._other, relaxrepro.std.util._helper, util.__name__, _private_mod.x
            """,
    })
    assert find_private_imports(build_import_graph(pkg)) == [
        "relaxrepro/std/a.py:2: relaxrepro.std.a imports _helper from relaxrepro.std.util",
        "relaxrepro/std/a.py:3: relaxrepro.std.a imports _other from relaxrepro.std.util",
        "relaxrepro/std/a.py:9: relaxrepro.std.a uses relaxrepro.std.util._helper (_helper of relaxrepro.std.util)",
        "relaxrepro/std/a.py:9: relaxrepro.std.a uses u._other (_other of relaxrepro.std.util)",
        "relaxrepro/std/a.py:9: relaxrepro.std.a uses util._helper (_helper of relaxrepro.std.util)",
    ]


def test_a_private_attribute_counts_only_where_the_name_is_the_imported_module(tmp_path):
    pkg = make_package(tmp_path, {
        "std/util.py": "_helper = 1\n",
        "std/b.py": """
            def f():
                from . import util
                return util.public
            def g(util):
                return util._helper  # a parameter of the same name
            def h():
                util = {}
                return util._x  # a local of the same name
            from . import util as u2
            def k():
                return u2._helper  # the module-level import, seen from a function
            class C:
                from . import util as cu
                x = cu._helper
                def m(self):
                    return cu._helper  # a class body's names are not seen from its methods
            """,
    })
    assert find_private_imports(build_import_graph(pkg)) == [
        "relaxrepro/std/b.py:12: relaxrepro.std.b uses u2._helper (_helper of relaxrepro.std.util)",
        "relaxrepro/std/b.py:15: relaxrepro.std.b uses cu._helper (_helper of relaxrepro.std.util)",
    ]


def test_layer_violations_are_reported(tmp_path):
    pkg = make_package(tmp_path, {
        "__main__.py": "from relaxrepro.commands import generate\n",
        "api.py": "from .cli import main\n",
        "cli.py": "def main(): pass\n",
        "commands/generate.py": "from ..collect import probe\n",  # allowed: commands may skip record
        "collect/probe.py": "def f():\n    from ..record import run\n",
        "record/run.py": "",
        "manifest/doc.py": "from relaxrepro._version import __version__\n",  # allowed from anywhere
        "std/text.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ..manifest import doc\n",
    })
    assert find_layer_violations(build_import_graph(pkg)) == [
        "relaxrepro.__main__ -> relaxrepro.commands.generate (layer __main__ may not import layer commands)"
        "  at relaxrepro/__main__.py:1",
        "relaxrepro.api -> relaxrepro.cli (layer api may not import layer cli)  at relaxrepro/api.py:1",
        "relaxrepro.collect.probe -> relaxrepro.record.run (layer collect may not import layer record)"
        "  at relaxrepro/collect/probe.py:2",
        "relaxrepro.std.text -> relaxrepro.manifest.doc (layer std may not import layer manifest)"
        "  at relaxrepro/std/text.py:3",
    ]


def test_stray_top_level_modules_and_directories_are_reported(tmp_path):
    pkg = make_package(tmp_path, {"helpers.py": "", "probes/__init__.py": "", "std/text.py": ""})
    (pkg / "api.py").unlink()
    (pkg / "record" / "__init__.py").unlink()
    (pkg / "__pycache__").mkdir()
    (pkg / "py.typed").write_text("")
    assert find_layout_problems(pkg) == [
        "relaxrepro/helpers.py: a top-level module outside the layer packages",
        "relaxrepro/probes/: a directory that is not a layer package",
        "relaxrepro/record/: a layer package without __init__.py",
        "relaxrepro/api.py: missing",
    ]


def test_imports_of_missing_modules_are_reported(tmp_path):
    pkg = make_package(tmp_path, {"cli.py": "def main():\n    from .commands.gone import run\n"})
    assert find_missing_modules(build_import_graph(pkg)) == [
        "relaxrepro/cli.py:2: relaxrepro.cli imports relaxrepro.commands.gone, which is no module of relaxrepro"]
