"""The shared rules of the reading commands: version distances, placeholders, terminal-safe text."""

from __future__ import annotations

import io

import pytest

from relaxrepro.manifest import fields as compare
from relaxrepro.std import text


@pytest.mark.parametrize("old,new,level", [
    ("2.3.0", "2.3.0", "equal"),
    ("12.1", "12.1.0", "equal"),
    ("2.3.0+cu121", "2.3.0+cu118", "local"),
    ("2.3.0", "2.3.1", "patch"),
    ("12.1.105", "12.1.66", "patch"),
    ("2.4.0rc1", "2.4.0", "patch"),
    ("2.3.0", "2.4.0", "minor"),
    ("11.8", "12.1", "major"),
    ("v2.20.5", "2.21.5", "minor"),
    ("2.4.0a0+git1234", "2.4.0a0+git5678", "local"),
    ("unknown", "2.3.0", "unknown"),
    (None, "2.3.0", "unknown"),
])
def test_change_level(old, new, level):
    assert compare.change_level(old, new) == level


@pytest.mark.parametrize("old,new,order", [
    ("2.3.0", "2.4.0", 1), ("2.4.0", "2.3.0", -1), ("1.26.4", "1.26.4", 0), ("2.4.0rc1", "2.4.0", 1),
    ("2.4.0", "2.4.0.post1", 1), ("weird", "2.0", 0),
])
def test_version_order(old, new, order):
    assert compare.version_order(old, new) == order


def test_packages_normalises_names_and_tells_absent_from_empty():
    doc = {"environment": {"packages": {"Flash_Attn": "2.5.8", "torch": "2.3.0"}}}
    assert compare.packages(doc) == {"flash-attn": "2.5.8", "torch": "2.3.0"}
    assert compare.packages({"environment": {}}) is None
    assert compare.packages({"environment": {"packages": {}}}) == {}
    assert compare.packages({"environment": "odd"}) is None


@pytest.mark.parametrize("value,found", [
    ("--wandb-key=wand***", ["wand***"]),
    ("***", ["***"]),
    ("<HOME>/proj/train.py", ["<HOME>"]),
    ("http://<internal-host>:8265", ["<internal-host>"]),
    ("<redacted>", ["<redacted>"]),
    # Relax's spellings (relax/utils/manifest.py) are redacted values too
    ("<home>/models/qwen", ["<home>"]),
    ("<host>", ["<host>"]),
    ("<user>", ["<user>"]),
    ("<slurm-nodes>", ["<slurm-nodes>"]),
    ("--lr=3e-4", []),
    (42, []),
])
def test_redacted_parts(value, found):
    assert compare.redacted_parts(value) == found


def test_resolve_home():
    assert compare.resolve_home("<HOME>/proj", "/home/me/") == "/home/me/proj"
    assert compare.resolve_home("<HOME>", "/home/me") == "/home/me"
    assert compare.resolve_home("/abs", "/home/me") == "/abs"
    assert compare.resolve_home("<HOME>/proj", None) is None
    assert compare.resolve_home(["odd"], "/h") is None


def test_relax_home_is_home():
    assert compare.resolve_home("<home>/models/qwen", "/home/me") == "/home/me/models/qwen"
    assert compare.resolve_home("<home>", "/home/me") == "/home/me"
    assert compare.resolve_home("<homely>/x", "/home/me") == "<homely>/x"
    assert compare.expand_home("--hf=<home>/m,<HOME>/n", "/home/me") == "--hf=/home/me/m,/home/me/n"


def test_redaction_leaves_either_tools_placeholder_as_it_is():
    from relaxrepro.manifest.redact import Redactor

    r = Redactor(home="/home/me", hostname="gpu-node-17", user="me", extra_patterns=["host", "slurm", "home"])
    for value in ("<home>/models/qwen", "<host>", "<slurm-nodes>", "<HOME>/x"):
        assert r.text(value) == value


@pytest.mark.parametrize("files", [
    [{"path": "conf/a.yaml", "sha256": "ab" * 32, "size": 3}],    # relaxrepro 1.1: a list
    {"conf/a.yaml": "ab" * 32},                                     # Relax: path -> digest
    {"conf/a.yaml": "sha256:" + "ab" * 32},
    {"conf/a.yaml": {"sha256": "ab" * 32, "size": 3}},              # path -> object
], ids=["list", "relax-object", "prefixed-digest", "object-of-objects"])
def test_config_files_read_in_every_form(files):
    got = compare.config_files({"config": {"files": files}})
    assert list(got) == ["conf/a.yaml"] and got["conf/a.yaml"]["sha256"] == "ab" * 32


def test_config_files_not_recorded():
    assert compare.config_files({"config": {}}) is None
    assert compare.config_files({"config": {"files": "odd"}}) is None
    assert compare.config_files({"config": {"files": {}}}) == {}


def test_expand_home_anywhere_in_a_value():
    assert compare.expand_home("--data=<HOME>/d:<HOME>/e", "/home/me/") == "--data=/home/me/d:/home/me/e"
    assert compare.expand_home("<HOME>/d", None) == "<HOME>/d"
    assert compare.expand_home("/abs", "/h") == "/abs"


def test_safe_text_escapes_terminal_controls_and_bidi():
    raw = "ok\x1b]0;pwned\x07\x1b[2J\nnext\r\u202etxt.exe\x9b"
    out = text.safe_text(raw)
    assert "\x1b" not in out and "\n" not in out and "\r" not in out and "\u202e" not in out and "\x9b" not in out
    assert out == "ok\\x1b]0;pwned\\x07\\x1b[2J\\nnext\\r\\u202etxt.exe\\x9b"
    assert text.safe_text("x" * 50, 10) == "xxxxxxx..."


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_use_color_only_on_a_tty_without_no_color():
    assert text.use_color(_Tty(), {}) is True
    assert text.use_color(_Tty(), {"NO_COLOR": "1"}) is False
    assert text.use_color(_Tty(), {"TERM": "dumb"}) is False
    assert text.use_color(io.StringIO(), {}) is False
    assert text.use_color(object(), {}) is False
