"""The patch pass's prefilter (prefilter.py) finds what it found before, faster: its expressions one anchor at a
time hit where their alternation hits, and over real code with secrets planted in it the prefiltered pass gives
the very text, changed lines, counts and remembered values of reading every line."""

from __future__ import annotations

import base64
import os
import random
import re
from typing import Dict, List, Tuple

import pytest

from relaxrepro.collect.probes.git_patch import stream_for
from relaxrepro.manifest.redact import Redactor, redact_document
from relaxrepro.manifest.redact.prefilter import Lines, _needles, _occurrences, hot_lines
from tests.helpers.redact import password
from tests.manifest.test_redact_leaks import LOOK_ALIKES
from tests.manifest.test_redact_patches import BENIGN, MACHINE, NEVER, PLANTED, _files_patch, _patch


def _stdlib_patch(size: int, seed: int) -> str:
    """About ``size`` characters of this interpreter's standard library as a patch of whole new modules (what
    bench/patch.py diffs: code holding tokens, keys, hosts, urls and passwords as code does), each file with a
    few planted secrets and look-alikes at random lines, some as removed or context lines."""
    rng = random.Random(seed)
    lib = os.path.dirname(os.__file__)
    names = sorted(n for n in os.listdir(lib) if n.endswith(".py"))
    rng.shuffle(names)
    extra = [line for _, line, _ in PLANTED] + list(LOOK_ALIKES)
    parts: List[str] = []
    total = 0
    for name in names:
        with open(os.path.join(lib, name), encoding="utf-8", errors="replace") as fh:
            lines = ["+" + line for line in fh.read().splitlines()[:1500]]
        for _ in range(3):
            lines.insert(rng.randrange(len(lines) + 1), rng.choice("+- ") + rng.choice(extra))
        parts.append(_patch(lines, "lib/" + name))
        total += len(parts[-1])
        if total >= size:
            break
    return "".join(parts)


def _mixes(seed: int, n: int) -> List[str]:
    """Random lines of needles' pieces, planted lines and look-alikes cut and glued, separators and odd
    characters: where one expression's hit might end inside another one's needle."""
    rng = random.Random(seed)
    pieces = [line for _, line, _ in PLANTED] + list(LOOK_ALIKES) + [
        "pass", "token", "key", "ip", "host", "url", "uri", "user", "auth", "sig", "sas", "dsn", "addr", "node",
        "secret", "cred", "cookie", "login", "endpoint", "pwd", "ghp_", "hf_", "sk-", "akia", "AKIA", "ASIA", "eyJ",
        "://", "@", "curl ", "rar ", "http ", "zip ", "-u ", "--api-key ", "\\\n", ".internal", "10.0.0.1", "fd00:",
        "/home/alice/", "alice", "gpu-node-17", "= ", ": ", ", '", " " * 3, "\t", "\u212a", "\u017f", "é", "’"]
    out = []
    for _ in range(n):
        line = "".join(rng.choice(pieces)[rng.randrange(3):] for _ in range(rng.randrange(1, 6)))
        out.append(rng.choice("+- ") + line.replace("\n", " "))
    return out


_CRED = "Zx9Qw8Er7Ty6Ui5Op4As"
_KEYS = [  # a weak secret's name (``*_key``) masks a value only when it looks like a credential; internal names
    'db_key = "%s"' % _CRED, "x.enc_key='%s'" % _CRED, "--wandb-key %s" % _CRED, "hf_key: %s" % _CRED,
    'os.environ.setdefault("WANDB_KEY", "%s")' % _CRED, "url = 'https://h/?key=%s&x=1'" % _CRED,
    "key = \\", "    %s" % _CRED, "key =    '%s'" % _CRED, "key := %s" % _CRED, "key == %s" % _CRED,
    "keys:", "  - %s" % _CRED, "machine h login u key %s" % _CRED, "key\t%s" % _CRED, "KEY=%s;x=1" % _CRED,
    "key = [%s]" % _CRED, "key = (%s, 1)" % _CRED, "--key='%s'" % _CRED, "key: '%s'  # rotate" % _CRED,
    "key = next(iter(self))", "dict_keys = type({}.keys())", 'key = "a b c d e f g h i j k 1"',
    "key = abcdefghijklmnop", "key=/usr/lib/x86_64-linux-gnu/libabc1.so", "key = '%s'" % _CRED[:15],
    "key = 0x1234567890abcdef1", "sort_keys=True, skipkeys=False", "--key %s" % _CRED[:15], "key %s" % _CRED,
    "self._int = str(value.int)", "ray-head.internal:6379", "db.corp", "nas.lan", "printer.local:631",
    "x.lang = 1", "a.localhost", "wiki.intranet/x", "v.internals", "host.corp.example.com",
    "if self._closefd:", "closefd:", "aifc:", "addr fd12:3456::1", "[fd00::1]:8080", "x.fd00::1", "fc00::/7",
    "proto = 'fd::'", "(fdab:cd::2)", "FD00:0:0::1", "fd0:", "http://example.com/x", "https://u:p@h/x",
    "https://abcdefghijklmnopqrstuvwxyz@github.com/x", "see http://a.b/c?d=e@f", "ftp://host:21/",
    "'http://a' + '@b'", "HTTPS://U:P@H", "s3://bucket/key@v1", "redis://:Tr0ub4dor&3@cache:6379/0",
]


def _corpus() -> Dict[str, str]:
    return {
        "files": _files_patch(),
        "stdlib": _stdlib_patch(400_000, 32),
        "mixes": _patch(_mixes(32, 3000)),
        "planted": _patch(["+" + line for _, line, _ in PLANTED] + ["-" + line for line in LOOK_ALIKES]),
        "keys": _patch(["+" + line for line in _KEYS] + [" " + line for line in _KEYS], "lib/keys.py")
        + _patch(["+" + line for line in _KEYS], "notes.txt"),
    }


CORPUS = _corpus()


def _low(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii").lower()


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_needles_found_one_anchor_at_a_time_are_those_of_their_alternation(name: str) -> None:
    # Apart, an expression consumes the rest of a needle that holds other expressions' anchors (``ghp_`` after
    # its ``g``); together they must not: the same places and groups either way.
    from relaxrepro.manifest.redact.prefilter import _branches, _listed

    low = _low(CORPUS[name])
    for machine in (Redactor(**MACHINE).needles(), Redactor().needles()):
        expressions, _common = _needles(sorted(set(machine)))
        one = re.compile("|".join(_branches(_listed(sorted(set(machine)))[0], together=True)))
        apart = sorted((m.start(), m.lastgroup) for rx in expressions for m in rx.finditer(low))
        together = sorted((m.start(), m.lastgroup) for m in one.finditer(low))
        assert apart == together and len(apart) > 10


def _pass(red: Redactor, text: str) -> Tuple[str, List[int], dict, list, dict]:
    out, changed = red.lines(text)
    doc = redact_document({"code": {"repo": {"patch": {"text": out, "redacted_lines": changed}}}}, red)
    return out, changed, dict(red.counts), sorted(red._secrets), doc


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_a_patch_redacted_from_its_hot_lines_is_the_patch_redacted_line_by_line(name: str) -> None:
    text = CORPUS[name]
    fast = _pass(Redactor(**MACHINE), text)
    every = _pass(Redactor(extra_patterns=[NEVER], **MACHINE), text)
    assert fast == every
    assert fast[1], "nothing planted was found"


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_a_needle_of_common_letters_is_found_wherever_str_find_finds_it(name: str) -> None:
    low = _low(CORPUS[name]) + " sasas rarar addraddr nodenode secretsecret credcred dsndsn ssas aadd"
    _rare, common = _needles(sorted(set(Redactor(**MACHINE).needles())))
    found: Dict[str, List[int]] = {}
    for finder, members in common:
        for k, at in _occurrences(low, finder, [back for _needle, back, _after, _kind in members]):
            found.setdefault(members[k][0], []).append(at)
    assert set(found) >= {"secret", "cred", "sas", "dsn", "addr", "node", "rar"}  # and the login, "alice"
    assert len(common) < len(found)  # some share an expression
    for needle, places in found.items():
        expected = []
        at = low.find(needle)
        while at >= 0:
            expected.append(at)
            at = low.find(needle, at + 1)
        assert places == expected


@pytest.mark.parametrize("needles", [
    ["secret", "cred", "sas", "dsn", "addr", "node", "rar"],
    ["de", "node", "dex", "addr", "dsn"],  # "de" and "node" both from "de": apart
    ["cred", "credit", "cret"],  # "cred" is the start of "credit": apart
    ["rar", "ar", "sas", "as"],
])
def test_needles_that_share_an_expression_are_each_found_where_str_find_finds_them(needles: List[str]) -> None:
    from relaxrepro.manifest.redact.prefilter import _common

    low = _low(CORPUS["stdlib"][:50_000]) + " " + " ".join(n + n + n[1:] + "x" + n[:-1] for n in needles)
    found: Dict[str, List[int]] = {}
    for finder, members in _common(needles):
        for k, at in _occurrences(low, finder, [back for _needle, back in members]):
            found.setdefault(members[k][0], []).append(at)
    for needle in needles:
        expected = []
        at = low.find(needle)
        while at >= 0:
            expected.append(at)
            at = low.find(needle, at + 1)
        assert found.get(needle, []) == expected and expected, needle


@pytest.mark.parametrize("name,whole", [(".env", True), ("deploy/.netrc", True), (".pgpass", True),
                                        ("train.py", False), ("kernel.cu", False), ("notes.txt", False)])
def test_only_a_file_whose_values_run_on_goes_through_the_rules_line_by_line(name: str, whole: bool) -> None:
    # A .env value runs to the end of its line, a .netrc one stands after a blank: each of their lines is read.
    # Source code (a mode of its own for what a value is there) is read where a needle stands, like any file.
    text = _patch(["+" + line for line in BENIGN], name)
    hot = hot_lines(text, Lines(text), ["/home/alice/", "alice", "gpu-node-17"])
    starts = [0] + [m.end() for m in re.finditer("\n", text)][:-1]
    assert hot == (starts if whole else [0])


def test_every_name_of_a_secret_or_a_key_holds_one_of_the_words_followed_up_before_blanks() -> None:
    # The prefilter follows up a word after blanks (a .netrc line's ``password X``) only behind these trigger words;
    # a name of a secret or a key without one of them would lose that line. Every two-word name of the words
    # the names' rules know, in three spellings, is checked.
    from relaxrepro.manifest.redact import names
    from relaxrepro.manifest.redact.assignments import TRIGGERS
    from relaxrepro.manifest.redact.prefilter import _SECRET_WORDS

    vocab = sorted(set().union(names._BENIGN_LAST, names._KEY_QUALIFIERS, names._SPECIAL_TOKEN_WORDS,
                               names._STRONG_WORDS, names._ADDRESS_LAST, names._NOT_ADDRESS, names._URL_LAST,
                               names._USER_NAMES, TRIGGERS, ("", "my", "db", "hf", "wandb", "api", "x509", "oauth",
                                                             "storepass", "keypass", "authtoken", "tokens", "keys")))
    secret = (names.KIND_SECRET, names.KIND_WEAK)
    checked = 0
    for a in vocab:
        for b in vocab:
            for name in {a + b, "%s_%s" % (a, b), a + b[:1].upper() + b[1:]}:
                if name and (names.name_kind(name) in secret or names.sequence_kind(name) in secret):
                    checked += 1
                    assert any(w in name.lower() for w in _SECRET_WORDS) or "bearer" in name.lower(), name
    assert checked > 1000


@pytest.mark.parametrize("brk", ["", "\r\n", "\r", "\x0b", "\x1c", "\x85", "\u2028"],
                         ids=["none", "crlf", "cr", "vt", "fs", "nel", "line-separator"])
def test_the_runs_a_stream_redacts_number_the_changed_lines_as_the_text_does(brk: str) -> None:
    # Each run of files counts its lines as splitlines does (a lone \r, \x0b, \u2028... end a line too): the
    # changed lines the stream numbers are those of reading the text whole, wherever the break stands.
    planted = ["+token = %s" % password("prefilter/odd-%d" % i) for i in range(3)]
    files = [_patch(["+x = 1", "+y = 2"], "a.py"), _patch(["+note %d%s+z = 3" % (1, brk)] + planted, "b.txt"),
             _patch(["+w = 4"] + planted, "c.py")]
    text = "".join(files)
    body = text.encode("utf-8", "surrogateescape")
    red = Redactor(**MACHINE)
    stream = stream_for(red)
    for at in range(0, len(body), 5):
        stream.feed(body[at:at + 5])
    runs, changed, count = stream.redacted(body)
    assert stream.redacted(body) == (runs, changed, count)  # asked again, the same
    assert "".join(t for _n, t, _new in runs) == text and count == len(text.splitlines())
    assert (Lines(text).starts is not None) == (brk not in ("", "\r\n"))
    out = "".join(new for _n, _t, new in runs)
    assert (out, changed) == Redactor(**MACHINE).lines(text)
    assert changed == [i + 1 for i, (a, b) in enumerate(zip(text.splitlines(), out.splitlines())) if a != b]
    assert len(changed) == 6


_OPEN_ENDED = "".join([  # files that end with something open, each followed by another file
    _patch(["+DB_HOST=db", '+DB_PASSWORD="Tr0ub4dor&3'], ".env"),
    _patch(["+curl -u bob:Tr0ub4dor&3 \\"], "run.sh"),
    _patch(["+-----BEGIN RSA PRIVATE KEY-----", "+MIIEowIBAAKCAQEA"], "deploy/key.pem"),
    _patch(["+export HF_TOKEN=\\"], "env.sh"),
    _patch(["+x = 1", "+token = 'Zx9Qw8Er7Ty6Ui5Op4As'"], "train.py"),
])


@pytest.mark.parametrize("size", [7, 4096, 65536])
@pytest.mark.parametrize("name", ["stdlib", "files", "open-ended"])
def test_a_patch_redacted_file_by_file_as_git_prints_it_is_the_patch_redacted_whole(size: int, name: str) -> None:
    # What a file leaves open (a quote, a continued command, a PEM key) ends with it, so the runs of files the
    # stream redacts as they come give the text, changed lines, counts and remembered values of the whole.
    text = _OPEN_ENDED if name == "open-ended" else CORPUS[name]
    body = text.encode("utf-8", "surrogateescape")
    red = Redactor(**MACHINE)
    stream = stream_for(red)
    for at in range(0, len(body), size):
        stream.feed(body[at:at + size])
    runs, changed, count = stream.redacted(body)
    whole = Redactor(**MACHINE)
    assert ("".join(new for _n, _t, new in runs), changed) == whole.lines(text)
    assert (red.counts, red._secrets) == (whole.counts, whole._secrets) and changed
    assert count == len(text.splitlines()) and sum(n for n, _t, _new in runs) == len(body)


def test_what_a_file_leaves_open_never_runs_into_the_next_files_header() -> None:
    out, _changed = Redactor(**MACHINE).lines(_OPEN_ENDED)
    headers = [line for line in _OPEN_ENDED.splitlines() if line.startswith("diff --git ")]
    assert [line for line in out.splitlines() if line.startswith("diff --git ")] == headers
    assert "Tr0ub4dor&3" not in out and "Zx9Qw8Er7Ty6Ui5Op4As" not in out and "MIIEowIBAAKCAQEA" not in out


@pytest.mark.parametrize("size", [7, 65536])
def test_the_record_of_a_patch_redacted_as_git_printed_it_is_the_record_of_the_whole(size: int) -> None:
    # Runs nothing changed are hashed as git's own bytes (ASCII) or encoded again (not ASCII); the untracked files'
    # hunks after them are redacted apart: the record (digests, text, changed lines) is the whole pass's.
    from relaxrepro.collect.probes.git_patch import PatchParts, new_file_patch, patch_record

    tracked = "".join([_patch(["+x = %d" % i for i in range(50)], "a%d.py" % k) for k in range(5)]
                      + [_patch(["+note = 'Ünï ’'"], "u.txt"), _patch(["+token = 'Zx9Qw8Er7Ty6Ui5Op4As'"], "t.py")]
                      + [_patch(["+y = %d" % i for i in range(50)], "b%d.py" % k) for k in range(5)])
    latin = _patch(["+# caf\udce9 in latin-1"], "legacy.py").encode("utf-8", "surrogateescape")  # not UTF-8
    body = latin + tracked.encode("utf-8")
    untracked = new_file_patch(b"new.sh", b"curl -u bob:Tr0ub4dor&3 https://x.example.com\n")
    records = []
    for streamed in (True, False):
        red = Redactor(**MACHINE)
        parts = PatchParts(body=body + untracked, files=["x"])
        if streamed:
            stream = stream_for(red)
            for at in range(0, len(body), size):
                stream.feed(body[at:at + size])
            parts.streamed = stream.redacted(body)
            assert parts.streamed is not None
        rec, original = patch_record(parts, red)
        records.append((rec, dict(red.counts), sorted(red._secrets)))
        assert red._patches  # the document pass keeps the text as it is
    assert records[0] == records[1]
    rec = records[0][0]
    assert "text" not in rec and b"caf\xe9" in base64.b64decode(rec["text_base64"])
    assert b"Zx9Qw8Er7Ty6Ui5Op4As" not in base64.b64decode(rec["text_base64"])
    assert len(rec["redacted_lines"]) == 2
