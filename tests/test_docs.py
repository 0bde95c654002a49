"""The guides (docs/en, docs/zh) stay honest: same shape, real subcommands only, every manifest section named."""

from __future__ import annotations

import json
import re
from typing import Dict, List, Set, Tuple

import pytest

from tests.helpers.common import ROOT, SCHEMA_PATH, clean_env, generate, make_repo, run_cli

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


# --------------------------------------------------------------------------------------------------------------------
# The --help capture and the exit codes: what the guides and the README say against what the CLI does

_CODE = re.compile(r"(?<![\w.+/-])(\d{1,3})(?![\w.])")
"""An exit status in prose: "1 any FAIL", "128+N"; not "3e-4", "3.11", "SIGUSR1/2", "--steps 5x"."""
_EXIT_NAMES = {"OK": 0, "FAIL": 1, "USAGE": 2, "REFUSED": 2}


def _readme_exit_codes() -> Dict[str, Dict[int, str]]:
    """README's command table: {command: {code: what it means}}, rows naming one command merged."""
    out: Dict[str, Dict[int, str]] = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if not line.startswith("| `") or len(cells) != 3:
            continue
        meanings = {int(m.group(1)): cells[2][m.end():].split(",")[0].split(";")[0].strip()
                    for m in _CODE.finditer(cells[2])}
        for name in {span.split()[0] for span in re.findall(r"`([^`]+)`", cells[0])}:
            out.setdefault(name, {}).update(meanings)
    return out


def _guide_exit_codes(lang: str) -> Dict[str, Set[int]]:
    """The guide's exit-code table (columns 0, 1, 2, other): {command: the codes it fills in}."""
    out: Dict[str, Set[int]] = {}
    for line in _text(lang).splitlines():
        m = re.match(r"^\| `([a-z]+)` \|(.*)\|\s*$", line)
        cells = [c.strip() for c in m.group(2).split("|")] if m else []
        if len(cells) == 4:
            out[m.group(1)] = {code for code, cell in enumerate(cells[:3]) if cell}
            out[m.group(1)] |= {int(c) for c in _CODE.findall(cells[3]) if int(c) > 2}
    return out


def _help_exit_codes(name: str) -> Set[int]:
    """The codes ``relaxrepro NAME --help`` states in its description and epilog (sentences saying "exit")."""
    out = run_cli(name, "--help", env=clean_env(COLUMNS="1000"))
    assert out.returncode == 0, out.stderr
    prose = [p for p in out.stdout.split("\n\n") if not p.startswith("usage:")
             and not re.match(r"(positional arguments|options|optional arguments):", p)]
    sentences = re.split(r"(?<=\.)\s+", " ".join(" ".join(prose).split()))
    return {int(c) for s in sentences if "exit" in s.lower() for c in _CODE.findall(s)}


def _code_exit_codes(name: str) -> Set[int]:
    """The ``Exit.X`` a command's own module (or package) returns somewhere."""
    path = ROOT / "relaxrepro" / "commands" / name
    files = sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    found = set()
    for f in files:
        found |= {_EXIT_NAMES[n] for n in re.findall(r"\bExit\.([A-Z]+)\b", f.read_text(encoding="utf-8"))
                  if n in _EXIT_NAMES}
    return found


def test_the_guides_help_capture_is_the_real_help_and_lists_every_subcommand(real_subcommands: Set[str]) -> None:
    real = run_cli("--help", env=clean_env(COLUMNS="80")).stdout.splitlines()
    for lang in GUIDES:
        m = re.search(r"^\$ relaxrepro --help\n(.*?)\n\[\.\.\. (\d+) lines trimmed \.\.\.\]$", _text(lang), re.S | re.M)
        assert m, "%s guide: no `$ relaxrepro --help` capture" % lang
        shown = m.group(1).split("\n")
        assert shown + real[len(shown):] == real and len(real) - len(shown) == int(m.group(2)), (
            "%s guide: the --help capture is not the real output (regenerate it at COLUMNS=80)" % lang)
        listed = {w for line in shown for w in re.findall(r"^    ([a-z][a-z-]*)(?:\s|$)", line)}
        assert listed == real_subcommands, "%s guide's --help lacks %s" % (lang, sorted(real_subcommands - listed))


def test_readme_has_an_exit_code_row_for_every_subcommand(real_subcommands: Set[str]) -> None:
    assert real_subcommands - set(_readme_exit_codes()) == set()


def test_readme_exit_codes_cover_every_code_a_command_returns(real_subcommands: Set[str]) -> None:
    table = _readme_exit_codes()
    for name in sorted(real_subcommands - {"run"}):  # run exits with its command's status
        missing = _code_exit_codes(name) - set(table[name])
        assert not missing, "README: `%s` can exit %s, its row says only %s" % (name, sorted(missing),
                                                                              sorted(table[name]))


def test_readme_exit_codes_agree_with_each_commands_help(real_subcommands: Set[str]) -> None:
    table = _readme_exit_codes()
    stated = {name: _help_exit_codes(name) for name in sorted(real_subcommands)}
    assert {"check", "diff", "verify", "restore", "rerun", "run", "generate"} <= {n for n, c in stated.items() if c}
    for name, codes in stated.items():
        if codes:
            assert codes == set(table[name]), "`%s --help` says exit %s, README %s" % (name, sorted(codes),
                                                                                      sorted(table[name]))


def test_readme_and_guides_exit_code_tables_agree(real_subcommands: Set[str]) -> None:
    readme = _readme_exit_codes()
    for lang in GUIDES:
        guide = _guide_exit_codes(lang)
        assert real_subcommands - set(guide) == set(), "%s guide's exit-code table lacks rows" % lang
        for name in sorted(real_subcommands - {"run"}):  # run's 0/1/2 are its command's own
            usage = {2}  # argparse's usage error: every command has it, whether a table says so or not
            assert set(readme[name]) | usage == guide[name] | usage, "`%s`: README %s, %s guide %s" % (
                name, sorted(readme[name]), lang, sorted(guide[name]))


def test_readme_says_what_restore_into_a_non_empty_directory_exits(tmp_path) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "runs").mkdir()
    generate(tmp_path / "runs", cwd=repo, command=["python", "train.py"])
    manifest = next((tmp_path / "runs").glob("m_*.json"))
    into = tmp_path / "into"
    into.mkdir()
    (into / "keep.txt").write_text("mine")
    res = run_cli("restore", str(manifest), "--into", str(into))
    assert res.returncode == 1 and (into / "keep.txt").read_text() == "mine" and len(list(into.iterdir())) == 1
    assert "not empty" in _readme_exit_codes()["restore"][res.returncode]


def test_attach_names_the_packages_each_tracker_needs_in_help_readme_and_guides() -> None:
    needed = ("wandb", "mlflow", "tensorboardX", "torch")  # --tensorboard: tensorboardX, or torch's own writer
    out = run_cli("attach", "--help", env=clean_env(COLUMNS="1000"))
    readme_row = next(line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
                      if line.startswith("| `attach "))
    for where, text in [("attach --help", out.stdout), ("README", readme_row)] + [
            ("%s guide" % lang, _text(lang).split("relaxrepro attach MANIFEST", 1)[1][:800]) for lang in GUIDES]:
        missing = [name for name in needed if name not in text]
        assert not missing, "%s does not say attach needs %s" % (where, missing)


def test_readme_says_when_a_new_untracked_file_is_info_and_when_it_warns(tmp_path) -> None:
    lines = {}
    for case in ("clean", "dirty"):
        repo = make_repo(tmp_path / case)
        if case == "dirty":
            (repo / "README.md").write_text("changed\n")
        (tmp_path / ("runs-" + case)).mkdir()
        generate(tmp_path / ("runs-" + case), cwd=repo, command=["python", "train.py"])
        (repo / "new.py").write_text("x = 1\n")
        res = run_cli("check", str(next((tmp_path / ("runs-" + case)).glob("m_*.json"))), cwd=repo)
        lines[case] = [line for line in res.stdout.splitlines() if line.startswith("code %s changes" % case)]
    assert len(lines["clean"]) == 1 and " INFO " in lines["clean"][0] + " ", lines
    assert len(lines["dirty"]) == 1 and "WARN  (uncommitted changes differ: +new.py)" in lines["dirty"][0], lines
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "new untracked files and bookkeeping env vars are INFO" in readme
    assert "a new untracked file changes the recorded patch and WARNs (`uncommitted changes differ: +FILE`)" in readme
