"""Text for people and for a reviewer's shell: escaped values, JSON safe on a terminal, readable shell words.

The shell words are checked by a real bash: each quoted value, given back as ``$1``, is the same bytes.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess

import pytest

from relaxrepro.std.text import safe_format, safe_json, safe_lines, say, shell_quote

HOSTILE = {
    "screen-clear": "\x1b[2J",
    "osc-title": "\x1b]0;pwned\x07",
    "c1-csi": "\x9b31m",
    "carriage-return": "ok\rFAIL",
    "newlines": "one\ntwo\n",
    "rtl-override": "\u202eevil",
    "tab": "a\tb",
    "nel-and-line-separator": "a\x85b\u2028c",
    "not-utf8-byte": "raw\udc80byte",
    "quotes-and-backslashes": "$'x' \\e \\n '\\'' \\x41 \x1b",
    "hex-digit-after-escape": "\x1bab\x07f0",
    "del": "a\x7fb",
}
PLAIN = ["", "a b", "$(touch x)", "`x`", "it's", "é", "*", "-n", "\\", "--opt=x y"]


def test_safe_format_escapes_values_and_keeps_the_templates_lines():
    out = safe_format("a %s\nb %d %s", "x\n\x1b[2J", 3, 1.5)
    assert out == "a x\\n\\x1b[2J\nb 3 1.5"


def test_say_writes_one_escaped_message_on_stderr_or_the_stream_given(capsys):
    say("relaxrepro x: %s: %d", "a\n\x1b[2Jb", 2)
    assert capsys.readouterr() == ("", "relaxrepro x: a\\n\\x1b[2Jb: 2\n")
    out = io.StringIO()
    say("%s", "\x07", out=out)
    assert (out.getvalue(), capsys.readouterr().err) == ("\\x07\n", "")


def test_safe_lines_keeps_line_breaks_and_escapes_the_rest():
    assert safe_lines("usage: x\nerror: \x1b]0;t\x07\r\n") == "usage: x\nerror: \\x1b]0;t\\x07\\r\n"


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_safe_json_is_the_same_document_with_nothing_raw(value):
    text = json.dumps({"v": value, "é": "ü"}, ensure_ascii=False, indent=1)
    out = safe_json(text)
    assert json.loads(out) == {"v": value, "é": "ü"}
    assert "é" in out and all(c == "\n" or " " <= c < "\x7f" or c in "éü" for c in out)


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def _through_bash(word: str) -> bytes:
    """The bytes bash makes of ``word``: it must be exactly one argument."""
    res = subprocess.run(["bash", "-c", "set -- %s; [ $# = 1 ] && printf %%s \"$1\"" % word], capture_output=True,
                         timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


@needs_bash
@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_value_is_one_visible_bash_word_holding_the_same_bytes(value):
    word = shell_quote(value)
    assert word.startswith("$'") and all(" " <= c < "\x7f" for c in word), word
    assert _through_bash(word) == value.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("value", PLAIN)
def test_a_plain_value_stays_a_posix_word(value):
    word = shell_quote(value)
    assert not word.startswith("$'")
    res = subprocess.run(["sh", "-c", "set -- %s; [ $# = 1 ] && printf %%s \"$1\"" % word], capture_output=True,
                         timeout=30)
    assert (res.returncode, res.stdout) == (0, value.encode("utf-8"))


def test_escapes_are_named_where_bash_has_a_name():
    assert shell_quote("\x1b[2J\n\r\t'\\") == "$'\\e[2J\\n\\r\\t\\'\\\\'"
    assert shell_quote("\x9b\u202e") == "$'\\xc2\\x9b\\xe2\\x80\\xae'"
