"""Build relaxrepro.pyz reproducibly: sorted entries, fixed timestamps, normalised modes.

Usage: python tools/build_pyz.py OUT   (zipapp.sh calls this). Honours SOURCE_DATE_EPOCH.
"""

import hashlib
import io
import os
import sys
import time
import tokenize
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHEBANG = b"#!/usr/bin/env python3\n"
# The zip root's __main__ must parse on any Python 3 so 3.6/3.7 get one line, not a traceback.
MAIN = b"""import sys

if sys.version_info < (3, 8):
    sys.stderr.write("relaxrepro needs Python 3.8 or newer (found %d.%d.%d)\\n" % tuple(sys.version_info[:3]))
    sys.exit(2)

BUILD_ID = "@BUILD_ID@"


def _use_unpacked_copy():
    # Python never caches bytecode for modules imported from a zip, so every run would compile the whole
    # package again (tens of ms). Unpack once per build into a private per-user cache and import from
    # there, where the usual __pycache__ applies. Any problem: run straight from the zip instead.
    import os

    if os.environ.get("RELAXREPRO_NO_CACHE"):
        return
    try:
        base = os.environ.get("RELAXREPRO_CACHE_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "relaxrepro")
        root = os.path.join(base, "pyz")
        final = os.path.join(root, BUILD_ID)
        if not os.path.isfile(os.path.join(final, ".complete")):
            import shutil
            import tempfile
            import zipfile

            os.makedirs(root, mode=0o700, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".unpack-", dir=root)
            try:
                with zipfile.ZipFile(sys.argv[0]) as zf:
                    for name in zf.namelist():
                        if name.startswith("relaxrepro/") and not name.endswith("/"):
                            zf.extract(name, tmp)
                open(os.path.join(tmp, ".complete"), "w").close()
                try:
                    os.rename(tmp, final)
                except OSError:
                    pass  # another process unpacked the same build first
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        st = os.stat(final)
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            return  # never import code from a directory someone else controls
        if st.st_mode & 0o022:
            return
        tag = getattr(sys.implementation, "cache_tag", None)
        if sys.dont_write_bytecode and tag and not os.path.exists(os.path.join(final, ".compiled-" + tag)):
            # PYTHONDONTWRITEBYTECODE=1 (set in many container images' Dockerfiles) stops imports from
            # writing __pycache__, so every run would compile the package again (~200 ms); reading
            # bytecode is still allowed, so compile this private copy once, explicitly.
            import compileall

            if compileall.compile_dir(os.path.join(final, "relaxrepro"), quiet=2):
                open(os.path.join(final, ".compiled-" + tag), "w").close()
        sys.path.insert(0, final)
    except Exception:
        return


_use_unpacked_copy()

from relaxrepro.cli import run_main  # noqa: E402

run_main()
"""
_DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest time a zip entry can carry


def strip_source(src):
    """Comments and docstrings out, every line kept: tracebacks from the .pyz still point at the
    right line of the repository's source, and the file is about a quarter smaller once compressed."""
    toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    offsets = [0]
    for line in src.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))

    def pos(rowcol):
        return offsets[rowcol[0] - 1] + rowcol[1]

    edits = []
    previous = None
    for i, tok in enumerate(toks):
        if tok.type == tokenize.COMMENT:
            if not (tok.start[0] <= 2 and tok.string.startswith("#!")):
                edits.append((pos(tok.start), pos(tok.end), ""))
            continue
        starts_statement = previous is None or previous.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        if tok.type == tokenize.STRING and starts_statement:
            j = i + 1
            while j < len(toks) and toks[j].type in (tokenize.NL, tokenize.COMMENT):
                j += 1
            if j < len(toks) and toks[j].type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                lines = tok.end[0] - tok.start[0]
                edits.append((pos(tok.start), pos(tok.end), '"""' + "\n" * lines + '"""' if lines else '""'))
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok
    out = src
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return _tabs(_drop_annotations(_drop_type_checking("\n".join(line.rstrip() for line in out.split("\n")))))


def _drop_annotations(src):
    """Type annotations out (``def f(x: int) -> str`` becomes ``def f(x)``; ``x: T = v`` becomes ``x = v``; a
    bare ``x: T`` becomes ``pass``), lines kept. Every module has ``from __future__ import annotations``, so
    they never run. In a class body ``x: T`` becomes ``x: 0``: the name declares a ``Record``'s field
    (``std/records.py`` reads the class's ``__annotations__``), the type is for readers; ``ClassVar`` stays.
    With no other annotation left, the ``__future__`` import goes too. The result must parse to the same tree
    as the source so stripped, or the source is kept as it was."""
    import ast

    tree = ast.parse(src)
    offsets = [0]
    for line in src.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))

    def at(line, col):
        return offsets[line - 1] + len(src[offsets[line - 1]:].encode("utf-8")[:col].decode("utf-8", "ignore"))

    def blank(start, end):
        return "\n" * src.count("\n", start, end)

    def fields_of(module):
        return {ast.dump(n) for c in ast.walk(module) if isinstance(c, ast.ClassDef) for n in c.body
                if isinstance(n, ast.AnnAssign)}

    fields = fields_of(tree)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                if arg.annotation is not None:
                    start = at(arg.lineno, arg.col_offset) + len(arg.arg)
                    end = at(arg.annotation.end_lineno, arg.annotation.end_col_offset)
                    edits.append((start, end, blank(start, end)))
            if node.returns is not None:
                end = at(node.returns.end_lineno, node.returns.end_col_offset)
                start = src.rindex("->", 0, at(node.returns.lineno, node.returns.col_offset))
                while src[start - 1] in " \t":
                    start -= 1
                edits.append((start, end, blank(start, end)))
        elif isinstance(node, ast.AnnAssign) and ast.dump(node) in fields:
            if not _class_var(node):
                start = at(node.annotation.lineno, node.annotation.col_offset)
                end = at(node.annotation.end_lineno, node.annotation.end_col_offset)
                edits.append((start, end, "0" + blank(start, end)))
        elif isinstance(node, ast.AnnAssign):
            if node.value is None:
                start, end = at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)
                edits.append((start, end, "pass" + blank(start, end)))
            else:
                start = at(node.target.end_lineno, node.target.end_col_offset)
                end = at(node.annotation.end_lineno, node.annotation.end_col_offset)
                edits.append((start, end, blank(start, end)))
    out = src
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]

    class Strip(ast.NodeTransformer):
        def visit_arg(self, node):
            node.annotation = None
            return node

        def visit_FunctionDef(self, node):
            self.generic_visit(node)
            node.returns = None
            return node

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_AnnAssign(self, node):
            if ast.dump(node) in fields:
                if not _class_var(node):
                    node.annotation = ast.Constant(0)
                return node
            if node.value is None:
                return ast.Pass()
            return ast.Assign(targets=[node.target], value=self.visit(node.value))

    want = ast.dump(Strip().visit(ast.parse(src)))
    got = ast.dump(ast.parse(out))
    if got != want:
        return src
    return _drop_future_annotations(out)


def _class_var(node):
    """``x: ClassVar[...]``: a class attribute, not a record's field; its annotation is kept."""
    import ast

    ann = node.annotation
    ann = ann.value if isinstance(ann, ast.Subscript) else ann
    return (isinstance(ann, ast.Name) and ann.id == "ClassVar") or (isinstance(ann, ast.Attribute)
                                                                    and ann.attr == "ClassVar")


def _drop_future_annotations(src):
    """``from __future__ import annotations`` becomes a blank line where every annotation left is the
    constant ``0`` (nothing would be evaluated that it defers)."""
    import ast

    tree = ast.parse(src)
    for node in ast.walk(tree):
        ann = getattr(node, "annotation", None) if isinstance(node, (ast.AnnAssign, ast.arg)) else None
        if ann is not None and not (isinstance(ann, ast.Constant) and ann.value == 0):
            return src
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            return src
    lines = src.split("\n")
    for node in tree.body:
        if (isinstance(node, ast.ImportFrom) and node.module == "__future__"
                and [a.name for a in node.names] == ["annotations"] and node.lineno == node.end_lineno):
            lines[node.lineno - 1] = ""
    return "\n".join(lines)


def _drop_type_checking(src):
    """``if TYPE_CHECKING:`` blocks, and ``TYPE_CHECKING = False`` itself, become blank lines: every module
    sets it False, so the blocks never run; they only name types for readers and type checkers."""
    import ast

    lines = src.split("\n")
    tree = ast.parse(src)
    blocks = [n for n in tree.body if isinstance(n, ast.If) and isinstance(n.test, ast.Name)
              and n.test.id == "TYPE_CHECKING" and not n.orelse]
    for node in blocks:
        lines[node.lineno - 1:node.end_lineno] = [""] * (node.end_lineno - node.lineno + 1)
    uses = sum(1 for n in ast.walk(ast.parse("\n".join(lines))) if isinstance(n, ast.Name) and n.id == "TYPE_CHECKING")
    for node in tree.body:
        if uses == 1 and isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "TYPE_CHECKING":
            lines[node.lineno - 1:node.end_lineno] = [""] * (node.end_lineno - node.lineno + 1)
    return "\n".join(lines)


def _tabs(src):
    """Each four spaces of indentation as one tab, outside string literals (whose text stays exact):
    block indents are multiples of four, so the tokenizer sees the same structure."""
    inside = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    out = []
    for number, line in enumerate(src.split("\n"), 1):
        spaces = len(line) - len(line.lstrip(" "))
        out.append(line if number in inside else "\t" * (spaces // 4) + " " * (spaces % 4) + line[spaces:])
    return "\n".join(out)


def _entries():
    pkg = os.path.join(ROOT, "relaxrepro")
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name.endswith(".json"):
                full = os.path.join(dirpath, name)
                yield os.path.relpath(full, ROOT).replace(os.sep, "/"), full


def build(out):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", _DEFAULT_EPOCH))
    stamp = time.gmtime(max(epoch, _DEFAULT_EPOCH))[:6]
    tmp = out + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(SHEBANG)
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            def add(arcname, data):
                info = zipfile.ZipInfo(arcname, date_time=stamp)
                info.external_attr = 0o100644 << 16
                info.create_system = 3
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data, compresslevel=9)

            files = []
            for arcname, full in sorted(_entries()):
                with open(full, "rb") as src:
                    data = src.read()
                if arcname.endswith(".py"):
                    data = strip_source(data.decode("utf-8")).encode("utf-8")
                files.append((arcname, data))
            digest = hashlib.sha256()
            for arcname, data in files:
                digest.update(arcname.encode() + b"\0" + hashlib.sha256(data).digest())
            add("__main__.py", MAIN.replace(b"@BUILD_ID@", digest.hexdigest()[:16].encode()))
            for arcname, data in files:
                add(arcname, data)
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "dist", "relaxrepro.pyz")
    os.makedirs(os.path.dirname(os.path.abspath(target)) or ".", exist_ok=True)
    print(build(target))
