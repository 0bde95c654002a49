"""The guides (docs/en, docs/zh) stay honest: same shape, real subcommands only, every manifest section named."""

from __future__ import annotations

import json
import re
from typing import Dict, List, Set, Tuple

import pytest

from tests.helpers.common import ROOT, SCHEMA_PATH, run_cli

GUIDES = {"en": ROOT / "docs" / "en" / "guide.md", "zh": ROOT / "docs" / "zh" / "guide.md"}

_FENCE = re.compile(r"^\s*```")
# `relaxrepro X` / `relaxrepro.pyz X` in commands; not part of a path (~/.cache/relaxrepro/pyz) or a module.
_MENTION = re.compile(r"(?<![\w./-])relaxrepro(?:\.pyz)? ([a-z][a-z-]*)\b")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_PROSE_WORDS = {"reads"}
"""Words after "relaxrepro" in pasted output that are English, not a subcommand: "this relaxrepro reads 1.x"."""
_TYPOS = {"genrate"}
"""Subcommands mistyped on purpose, to show the "did you mean" of a usage error."""


def _text(lang: str) -> str:
    return GUIDES[lang].read_text(encoding="utf-8")


def _split(text: str) -> Tuple[List[str], List[str]]:
    """(prose lines, code-block lines)."""
    prose: List[str] = []
    code: List[str] = []
    inside = False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        (code if inside else prose).append(line)
    return prose, code


def _headings(text: str) -> Dict[str, int]:
    prose, _ = _split(text)
    return {level: sum(1 for line in prose if line.startswith(level + " ")) for level in ("##", "###")}


def _mentioned_subcommands(text: str) -> Set[str]:
    """Words after ``relaxrepro`` in code blocks and inline code spans."""
    prose, code = _split(text)
    spans = [m.group(1) for line in prose for m in _INLINE_CODE.finditer(line)]
    found = set()
    for chunk in code + spans:
        found.update(m.group(1) for m in _MENTION.finditer(chunk))
    return found - _PROSE_WORDS - _TYPOS


@pytest.fixture(scope="module")
def real_subcommands() -> Set[str]:
    out = run_cli("--help")
    assert out.returncode == 0, out.stderr
    names: Set[str] = set()
    inside = False
    for line in out.stdout.splitlines():
        if line.startswith("positional arguments"):
            inside = True
        elif inside and line and not line.startswith(" "):
            break  # "options:" (3.10+) or "optional arguments:"
        elif inside:
            m = re.match(r"^    ([a-z][a-z-]*)(?:\s|$)", line)
            if m:
                names.add(m.group(1))
    assert {"generate", "check", "merge"} <= names, out.stdout  # the parser itself must still work
    return names


def test_both_guides_exist_and_are_not_stubs() -> None:
    for path in GUIDES.values():
        assert path.is_file(), "missing %s" % path
        assert len(path.read_text(encoding="utf-8")) > 20000, "%s looks like a stub" % path


def test_same_heading_structure() -> None:
    en, zh = _headings(_text("en")), _headings(_text("zh"))
    assert en == zh, "heading counts differ: en %s, zh %s" % (en, zh)
    assert en["##"] >= 8 and en["###"] >= 20


def test_every_subcommand_mentioned_is_real(real_subcommands: Set[str]) -> None:
    for lang in GUIDES:
        unknown = _mentioned_subcommands(_text(lang)) - real_subcommands
        assert not unknown, "%s guide names subcommands that do not exist: %s" % (lang, sorted(unknown))


def test_every_subcommand_is_documented(real_subcommands: Set[str]) -> None:
    for lang in GUIDES:
        missing = real_subcommands - _mentioned_subcommands(_text(lang))
        assert not missing, "%s guide never shows: %s" % (lang, sorted(missing))


def test_every_schema_section_is_named() -> None:
    sections = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["properties"]
    for lang in GUIDES:
        text = _text(lang)
        missing = [name for name in sections if "`%s`" % name not in text]
        assert not missing, "%s guide never names manifest sections %s" % (lang, missing)


def test_the_checks_catch_what_they_look_for() -> None:
    # The helpers themselves: a made-up subcommand is seen, path-like and prose uses are not.
    text = "Run `relaxrepro frobnicate`.\n```sh\npython3 relaxrepro.pyz merge a b\n```\n~/.cache/relaxrepro/pyz here\n"
    assert _mentioned_subcommands(text) == {"frobnicate", "merge"}
    assert _headings("## a\n```\n## not a heading\n```\n### b\n") == {"##": 1, "###": 1}


def test_pasted_output_holds_no_secrets_or_home_paths() -> None:
    # The redactor itself, over every line of every code block: nothing in the guides may look like a
    # credential or a home directory. (The example's made-up SLURM nodelist is an internal host name: allowed.)
    from relaxrepro.collect.context import default_policy

    for lang in GUIDES:
        redactor = default_policy({})
        _, code = _split(_text(lang))
        changed = [line for line in code if redactor.text(line) != line and "SLURM_JOB_NODELIST=" not in line]
        fired = {rule: n for rule, n in redactor.counts.items() if rule != "internal-host"}
        assert not changed and not fired, "%s guide: %s %s" % (lang, fired, changed[:3])


def _where_things_live() -> List[str]:
    """The names in the README's "Where things live" tree, one per line (``cli.py``, ``commands/``...)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("### Where things live", 1)[1].split("```", 2)[1]
    return [m.group(1) for m in re.finditer(r"^(?: {2})?([\w.]+/?)(?=\s)", block, re.M)]


def test_the_readme_tree_names_every_layer_and_entry_point_that_exists():
    named = _where_things_live()
    package = ROOT / "relaxrepro"
    on_disk = sorted(p.name + "/" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__")
    on_disk += sorted(p.name for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py",
                                                                             "_version.py"))
    assert named[0] == "relaxrepro/" and "tests/" in named
    assert sorted(n for n in named[1:] if n != "tests/" and not n.startswith("__init__")) == sorted(on_disk)
