"""A patch is redacted in one pass over its text: only the lines holding something a rule looks for go through the
rules (prefilter.py), with the very result of reading every line, wherever a secret stands in the patch."""

from __future__ import annotations

from typing import List, Tuple

import pytest

from relaxrepro.manifest.redact import Redactor, redact_document
from tests.helpers.redact import fakes, leaked, password, pem_key
from tests.manifest.test_redact_leaks import LEAKS, LOOK_ALIKES, SPAN_LOOK_ALIKES, SPANNING

FAKES = fakes()
MACHINE = dict(home="/home/alice", hostname="gpu-node-17", user="alice")
NEVER = "a(?<!a)"
"""A --redact-pattern that matches nothing: with one, the pass reads every line (no needle tells what it matches)."""

BENIGN = [
    "import torch", "from transformers import AutoTokenizer", "", "def train(model, loader, args):",
    "    tokenizer = AutoTokenizer.from_pretrained('meta-llama/Llama-3-8B')",
    "    for step, batch in enumerate(loader):",
    "        loss = model(**batch).loss", "        loss.backward()  # keep the graph small",
    "        if step % args.log_every == 0:", "            print('step %d loss %.4f' % (step, loss.item()))",
    "    return {'auc': 0.91, 'max_new_tokens': 512}", "x = np.zeros((3, 4), dtype=np.float32)",
]


def _body(n: int) -> List[str]:
    return [("+" if i % 3 else " ") + BENIGN[i % len(BENIGN)] for i in range(n)]


def _patch(lines: List[str], name: str = "train.py", end: str = "\n") -> str:
    head = ["diff --git a/%s b/%s" % (name, name), "--- a/%s" % name, "+++ b/%s" % name, "@@ -1,9 +1,9 @@"]
    return "\n".join(head + lines) + end


def _both(text: str) -> Tuple[Tuple[str, List[int]], dict, Tuple[str, List[int]], dict]:
    fast, every = Redactor(**MACHINE), Redactor(extra_patterns=[NEVER], **MACHINE)
    return fast.lines(text), fast.counts, every.lines(text), every.counts


def _planted() -> List[Tuple[str, str, str]]:
    """``(id, line, secret)``: every shape, every client tool's option, and the machine's own names."""
    out = [("shape-" + k, "token_note = 'rerun with %s'" % v, v) for k, v in sorted(FAKES.items())]
    out += [("bare-" + k, v, v) for k, v in sorted(FAKES.items())]
    out += [("leak-" + cid, line, s) for cid, line, s in LEAKS]
    pw = password("patches/url")
    out += [
        ("url-credentials", "remote = 'https://bob:%s@git.example.com/o/r.git'" % pw, pw),
        ("authorization", "headers = {'Authorization': 'Token %s'}" % pw, pw),
        ("bearer", "curl_args = ['-H', 'Bearer %s']" % pw, pw),
        ("private-ipv4", "MASTER = '10.11.12.13:29500'", "10.11.12.13"),
        ("ipv6-ula", "peer = fd12:3456:789a::1", "fd12:3456:789a::1"),
        ("internal-name", "db = 'pg.prod.corp:5432'", "pg.prod.corp"),
        ("hostname", "ran on gpu-node-17 last night", "gpu-node-17"),
        ("home", "data = '/home/alice/datasets/c4'", "/home/alice"),
        ("user", "owner: alice", "alice"),
    ]
    return out


PLANTED = _planted()


def test_the_planted_set_covers_every_shape_and_tool() -> None:
    assert len(PLANTED) >= 2 * len(FAKES) + 60


@pytest.mark.parametrize("where", ["start", "middle", "end", "end-no-newline", "removed", "context"])
@pytest.mark.parametrize("line,secret", [(line, s) for _, line, s in PLANTED], ids=[cid for cid, _, _ in PLANTED])
def test_a_planted_secret_is_found_wherever_it_stands(line: str, secret: str, where: str) -> None:
    body = _body(40)
    lead = {"removed": "-", "context": " "}.get(where, "+")
    at = {"start": 0, "end": 40, "end-no-newline": 40}.get(where, 17)
    body.insert(at, lead + line)
    text = _patch(body, end="" if where == "end-no-newline" else "\n")
    if where == "start":
        text = lead + line + "\n" + text  # before any header: the very first line of the text
    fast, fast_counts, every, every_counts = _both(text)
    assert fast == every and fast_counts == every_counts
    assert not leaked(secret, fast[0], window=6), fast[0]


SEPARATORS = ["\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[repr(s) for s in SEPARATORS])
def test_lines_that_python_splits_at_odd_separators(sep: str) -> None:
    # str.splitlines splits there too: the lines the rules see, and the numbers of the lines changed, must agree
    pw = password("patches/sep")
    text = _patch(_body(20) + ["+DB_PASSWORD=%s%s+curl -u bob:%s https://x.example.com" % (pw, sep, pw),
                               "+ok = 1%s+HF_TOKEN=%s" % (sep, FAKES["huggingface"])])
    fast, fast_counts, every, every_counts = _both(text)
    assert fast == every and fast_counts == every_counts
    assert pw not in fast[0] and FAKES["huggingface"] not in fast[0]


@pytest.mark.parametrize("line", [
    "+blob = b'\\x00\\x01 \x00\x7f PK\x03\x04 \xff\xfe'",  # binary-ish: NUL and odd bytes, as surrogateescape reads
    "+name = 'Ünïcödé 日本語 \U0001f600 api_key=%s'" % password("patches/uni"),  # UCS-4 text
    "+\u212aEY = '%s'" % password("patches/kelvin"),  # KELVIN SIGN: lower-cases to an ASCII k
    "+\u0130 token = %s" % password("patches/dotted-i"),  # lower-cases to two characters
    "+\udcff\udcfe password: %s" % password("patches/surrogates"),  # undecodable bytes, surrogate-escaped
])
def test_binary_and_unicode_lines(line: str) -> None:
    text = _patch(_body(30) + [line] + _body(5))
    fast, fast_counts, every, every_counts = _both(text)
    assert fast == every and fast_counts == every_counts


def test_a_secret_split_across_removed_and_added_lines() -> None:
    old, new = password("patches/old"), password("patches/new")
    body = _body(10) + ["-WANDB_API_KEY=%s" % old, "+WANDB_API_KEY=%s" % new, "-  password: |", "-    " + old,
                        "+  password: |", "+    " + new, "+tokens:", "+  - " + FAKES["huggingface"] + "x1",
                        "-curl -X POST \\", "-  -u bob:%s https://x.example.com" % old, "+export HF_TOKEN=\\",
                        "+  " + new]
    fast, fast_counts, every, every_counts = _both(_patch(body + _body(10)))
    assert fast == every and fast_counts == every_counts
    assert not leaked(old, fast[0], window=6) and not leaked(new, fast[0], window=6)


@pytest.mark.parametrize("name,text,secret", [c[1:] for c in SPANNING], ids=[c[0] for c in SPANNING])
def test_values_below_their_name_in_a_long_patch(name: str, text: str, secret: str) -> None:
    body = _body(50) + ["+" + line for line in text.splitlines()] + _body(50)
    patch = _patch(body, name=name) + _patch(_body(20), name="after.py")
    fast, fast_counts, every, every_counts = _both(patch)
    assert fast == every and fast_counts == every_counts
    assert not leaked(secret, fast[0], window=6)


def test_a_pem_key_across_lines_of_a_long_patch() -> None:
    body = _body(30) + ["+" + line for line in pem_key().splitlines()] + _body(30)
    fast, _, every, _ = _both(_patch(body))
    assert fast == every
    assert all(line == "+<private-key>" for line in fast[0].splitlines()[34:34 + len(pem_key().splitlines())])


def test_look_alikes_survive_in_a_long_patch() -> None:
    lines = [line for line in LOOK_ALIKES] + [line for text in SPAN_LOOK_ALIKES.values() for line in text.splitlines()]
    text = _patch(_body(40) + ["+" + line for line in lines] + _body(40))
    fast, fast_counts, every, every_counts = _both(text)
    assert fast == every and fast_counts == every_counts


class _Counting(Redactor):
    def __init__(self, **kw: str) -> None:
        super().__init__(**kw)
        self.read: List[str] = []

    def scan(self, s, mode=None):  # type: ignore[no-untyped-def]
        self.read.append(s)  # what the rules ran over
        return super().scan(s, mode)


def test_only_the_lines_holding_a_needle_go_through_the_rules() -> None:
    pw = password("patches/count")
    text = _patch(_body(20000) + ["+DB_PASSWORD=" + pw] + _body(20000))
    red = _Counting(**MACHINE)
    out, changed = red.lines(text)
    assert pw not in out and changed == [20005]
    assert len(red.read) <= 10, len(red.read)  # every line went through the rules: 40,005 of them


def test_a_patch_redacted_by_lines_is_not_read_again_as_one_string() -> None:
    pw = password("patches/again")
    red = _Counting(**MACHINE)
    text, _ = red.lines(_patch(_body(2000) + ["+DB_PASSWORD=" + pw]))
    doc = {"code": {"repo": {"patch": {"text": text}}}, "command": {"argv": ["sshpass", "-p", pw + "9", "ssh", "h"]}}
    red.read.clear()
    out = redact_document(doc, red)
    assert text not in red.read and out["code"]["repo"]["patch"]["text"] == text


def test_a_value_masked_elsewhere_is_still_masked_in_a_patch() -> None:
    pw = password("patches/copy")
    red = Redactor(**MACHINE)
    text, _ = red.lines(_patch(_body(2000) + ["+note = 'the db is at %s'" % pw] + _body(10)))
    assert pw in text  # nothing in the patch says it is a secret
    out = redact_document({"code": {"repo": {"patch": {"text": text}}},
                           "command": {"argv": ["python", "x.py", "--db-password", pw]}}, red)
    patch = out["code"]["repo"]["patch"]["text"]
    assert pw not in patch and "+note = 'the db is at ***'\n" in patch
    assert patch.count("\n") == text.count("\n")


@pytest.mark.parametrize("line,copy", [
    ("+    password = getpass.getpass(prompt)", "+    answer = getpass.getpass(prompt)"),
    ("+_token_re = re.compile(r'[a-z]+')", "+_word_re = re.compile(r'[a-z]+')"),
    ("+    key = jax.random.PRNGKey(0)", "+    rng = jax.random.PRNGKey(0)"),
    ("+        self.cookie = self.tell()", "+        pos = self.tell()"),
], ids=["getpass", "re-compile", "prng-key", "method"])
def test_a_call_masked_by_its_name_is_not_chased_through_the_rest_of_the_patch(line: str, copy: str) -> None:
    # The value of a secret's name that is a call in code holds no secret (it returns one at run time): the
    # assignment is masked, its copies elsewhere are more code, and stay.
    red = Redactor(**MACHINE)
    text, changed = red.lines(_patch(_body(30) + [line] + _body(30) + [copy] + _body(10)))
    assert changed == [35] and "***" in text.splitlines()[34]
    out = redact_document({"code": {"repo": {"patch": {"text": text}}}}, red)["code"]["repo"]["patch"]["text"]
    assert copy + "\n" in out


@pytest.mark.parametrize("value", ["Tr0ub4dor&3", "Tr0ub4dor(3)", "hunter2!x", "x9(a)#Kq"])
def test_a_value_that_reads_as_a_password_is_still_chased_through_the_patch(value: str) -> None:
    red = Redactor(**MACHINE)
    text, _ = red.lines(_patch(_body(30) + ["+DB_PASSWORD = '%s'" % value] + _body(30)
                               + ["+connect('db', '%s')" % value] + _body(10)))
    out = redact_document({"code": {"repo": {"patch": {"text": text}}}}, red)["code"]["repo"]["patch"]["text"]
    assert value not in out and "+connect('db', '***')\n" in out


_EXPRESSIONS = [  # (the line of a source file, a copy of its masked value further on; from the standard library)
    ("+                    password = auth[2]", "+        return [auth[2]]"),
    ("+        self.user, self.password = user, password", "+    def login(self, user, password):"),
    ("+        if token == self.eof:", "+        while raw == self.eof:"),
    ("+        print(\"shlex: token=\" + repr(raw))", "+        print(\"shlex: word=\" + repr(raw))"),
    ("+def unix_getpass(prompt='Password: ', stream=None):", "+def win_getpass(prompt='>', stream=None):"),
    ("+        passwd = passwd + 'anonymous@'", "+        who = passwd + 'anonymous@'"),
    ("+        # and Signature: the former always returns 'self'", "+    # the former always returns 'self'"),
]


@pytest.mark.parametrize("line,copy", _EXPRESSIONS, ids=["subscript", "tuple", "comparison", "closing-quote",
                                                          "next-argument", "sum", "comment-prose"])
def test_an_expression_masked_by_its_name_in_source_code_is_not_chased_through_the_patch(line: str,
                                                                                          copy: str) -> None:
    # In a source file a text value is a quoted literal (or a number): what follows a secret's name bare is code.
    # It is masked where it stands, as before, and its copies elsewhere are more code, which stays (the standard
    # library's 3.5 MB had 19 such values remembered, each one more scan of every patch).
    red = Redactor(**MACHINE)
    text, changed = red.lines(_patch(_body(30) + [line] + _body(30) + [copy] + _body(10), name="lib/smtp.py"))
    assert changed == [35] and "***" in text.splitlines()[34]
    out = redact_document({"code": {"repo": {"patch": {"text": text}}}}, red)["code"]["repo"]["patch"]["text"]
    assert copy + "\n" in out and out == text


@pytest.mark.parametrize("line,copy", [
    ("+DB_PASSWORD = 'Tr0ub4dor&3'", "+connect('db', 'Tr0ub4dor&3')"),
    ('+DB_PASSWORD = 48151623', "+check('48151623')"),
    ('+conn = "host=db password=Tr0ub4dor&3 port=5432"', "+connect('db', 'Tr0ub4dor&3')"),
    ("+    # was password=Tr0ub4dor&3 (rotated)", "+connect('db', 'Tr0ub4dor&3')"),
    ("+// password = Tr0ub4dor&3", "+connect('db', 'Tr0ub4dor&3')"),
], ids=["quoted", "number", "inside-a-string", "in-a-comment", "in-a-c-comment"])
@pytest.mark.parametrize("name", ["train.py", "kernel.cu", "run.sh", "notes.txt"])
def test_a_value_source_code_writes_out_is_still_chased_through_the_patch(line: str, copy: str, name: str) -> None:
    # A literal, a number, text inside a string or in a comment: the value is text, and its copies are masked; in
    # a file that is not source code (a shell script, notes) so is any value a secret's name points at.
    red = Redactor(**MACHINE)
    text, _ = red.lines(_patch(_body(30) + [line] + _body(30) + [copy] + _body(10), name=name))
    out = redact_document({"code": {"repo": {"patch": {"text": text}}}}, red)["code"]["repo"]["patch"]["text"]
    assert "Tr0ub4dor&3" not in out and "48151623" not in out
    assert out.splitlines()[65] in ("+connect('db', '***')", "+check('***')")


def test_a_literal_on_the_line_after_its_name_is_still_chased_through_source_code() -> None:
    red = Redactor(**MACHINE)
    text, _ = red.lines(_patch(_body(30) + ["+    password = \\", "+        'Tr0ub4dor&3'"] + _body(30)
                               + ["+connect('db', 'Tr0ub4dor&3')"] + _body(10)))
    out = redact_document({"code": {"repo": {"patch": {"text": text}}}}, red)["code"]["repo"]["patch"]["text"]
    assert "Tr0ub4dor&3" not in out and "+connect('db', '***')\n" in out


@pytest.mark.parametrize("name", ["run.sh", "notes.txt", "config.yaml", "Makefile"])
def test_outside_source_code_a_bare_value_is_text_and_chased(name: str) -> None:
    # ``password = auth[2]`` in a shell script or a YAML file is the value itself, not code.
    red = Redactor(**MACHINE)
    text, _ = red.lines(_patch(_body(30) + ["+password = auth[2]"] + _body(30) + ["+echo auth[2]"] + _body(10),
                               name=name))
    out = redact_document({"code": {"repo": {"patch": {"text": text}}}}, red)["code"]["repo"]["patch"]["text"]
    assert "auth[2]" not in out and "+echo ***\n" in out


@pytest.mark.parametrize("n", [1, 8, 9, 40], ids=["one", "eight-found-one-by-one", "nine-in-one-scan", "forty"])
def test_every_remembered_value_is_masked_in_a_long_patch(n: int) -> None:
    # Up to eight values are looked for one by one, more in one scan anchored on their rarest characters: the
    # same lines come out either way.
    pws = [password("patches/many-%d" % i) + "%s(]^\\.%d" % ("x" * (i % 3), i) for i in range(n)]
    red = Redactor(**MACHINE)
    notes = ["+note_%d = 'reach it at %s, or %s'" % (i, pw, pw) for i, pw in enumerate(pws)]
    text, _ = red.lines(_patch(_body(300) + notes + _body(300)))
    argv = ["python", "x.py"] + [a for pw in pws for a in ("--db-password", pw)]
    out = redact_document({"code": {"repo": {"patch": {"text": text}}}, "command": {"argv": argv}}, red)
    patch = out["code"]["repo"]["patch"]["text"]
    assert not any(pw in patch for pw in pws)
    assert all("+note_%d = 'reach it at ***, or ***'\n" % i in patch for i in range(n))
    assert patch.count("\n") == text.count("\n")


@pytest.mark.parametrize("size", [10, 2000], ids=["inline-patch", "long-patch"])
def test_a_patch_scrub_changed_carries_the_digest_and_lines_of_what_is_stored(size: int) -> None:
    # restore checks stored_sha256 against the body it reads: a copy masked after the patch pass must not leave
    # the digest of the body before it (restore refused main's own manifest of bench/patch.py's change)
    import hashlib

    pw = password("patches/rehash")
    red = Redactor(**MACHINE)
    text, changed = red.lines(_patch(_body(size) + ["+note = 'the db is at %s'" % pw] + _body(10)))
    patch = {"text": text, "stored_sha256": hashlib.sha256(text.encode()).hexdigest(), "redacted_lines": changed,
             "restores_exactly": not changed}
    doc = {"code": {"repo": {"patch": patch}}, "command": {"argv": ["python", "x.py", "--db-password", pw]}}
    out = redact_document(doc, red)["code"]["repo"]["patch"]
    assert pw not in out["text"] and out["stored_sha256"] == hashlib.sha256(out["text"].encode()).hexdigest()
    assert out["redacted_lines"] == [size + 5] and out["restores_exactly"] is False
    assert patch["stored_sha256"] == hashlib.sha256(text.encode()).hexdigest()  # the input is left as it was


def _files_patch() -> str:
    """Several files, as git prints them: planted secrets, a .env file (each of its lines read), a PEM key across
    lines, Unicode, odd line breaks, a command continued up to the next file's header, no newline at the end of
    the last."""
    pw = password("patches/stream")
    parts = [_patch(_body(50) + ["+" + line for _, line, _ in PLANTED[::7]], "train.py"),
             _patch(["+DB_HOST=pg.prod.corp", "+DB_PASSWORD=" + pw, "+export A=1"], ".env"),
             _patch(_body(10) + ["+%s" % line for line in pem_key().splitlines()] + _body(3), "keys/k.py"),
             _patch(_body(5) + ["+name = 'Ünïcödé 日本語 \U0001f600 api_key=%s'" % pw, "+x = 1\u2028+token = " + pw],
                    "uni.py"),
             _patch(_body(4) + ["+curl -u bob:%s \\" % pw], "run.sh"),
             _patch(_body(20) + ["+HF_TOKEN=" + FAKES["huggingface"]], "last.py", end="")]
    return "".join(parts)


@pytest.mark.parametrize("size", [1, 7, 4096, 65536, 10 ** 7])
def test_a_patch_redacted_as_git_prints_it_is_the_whole_patch_redacted(size: int) -> None:
    from relaxrepro.collect.probes.git_patch import stream_for

    text = _files_patch()
    body = text.encode("utf-8", "surrogateescape")
    given, fast = Redactor(**MACHINE), Redactor(**MACHINE)
    stream = stream_for(given)
    for at in range(0, len(body), size):
        stream.feed(body[at:at + size])
    runs, changed, count = stream.redacted(body)
    assert ("".join(new for _n, _text, new in runs), changed) == fast.lines(text) and given.counts == fast.counts
    assert "".join(t for _n, t, _new in runs) == text and count == len(text.splitlines())
    assert stream.redacted(body + b"+more\n") is None  # not what was fed: the patch pass reads it itself
    every = Redactor(extra_patterns=[NEVER], **MACHINE)
    assert every.lines(text) == fast.lines(text)


def test_assignments_searched_from_the_word_of_a_trigger_are_those_searched_everywhere(monkeypatch) -> None:
    # mask_assignments tries its expression only from the word holding the next trigger word: the same masks,
    # counts and remembered values as trying it at every offset, on every planted line and look-alike.
    from relaxrepro.manifest.redact import assignments

    lines = [line for _, line, _ in PLANTED] + list(LOOK_ALIKES) + [
        "x = 1; --db-password=a1b2c3d4 and API_KEY: 'k-9f8e7d6c' then token x9y8z7w6v5u4t3s2r1q0",
        "a.b-c_token=v1 -pass=Zz9!xx secret_key=\"q1w2e3r4\" url=https://u:p4ss@h.example.com",
        "setdefault(\"HF_TOKEN\", \"hf_x1y2z3\") ; os.environ[\"DB_PASSWORD\"] = os.environ[\"X\"]",
        "name = 'Ünïcödé' api_key=%s" % password("patches/assign-uni"), "\u212aEY=%s" % password("patches/kelvin2"),
    ]
    fast = Redactor(**MACHINE)
    got = [fast.text(line) for line in lines]
    monkeypatch.setattr(assignments, "_word_of_trigger", lambda low, pos: pos)
    every = Redactor(**MACHINE)
    assert got == [every.text(line) for line in lines]
    assert fast.counts == every.counts and fast._secrets == every._secrets


def test_a_patch_the_redactor_gave_back_is_kept_as_it_is_met_again_or_read_back() -> None:
    # The document pass meets the patch lines() gave back (the same text) or, after a write, one read back (an
    # equal text): either is kept whole, no rule run over it again (its lines are redacted already).
    red = Redactor(**MACHINE)
    out, changed = red.lines(_patch(_body(30) + ["+token = 'Zx9Qw8Er7Ty6Ui5Op4As'"] + _body(10)))
    assert changed == [35]
    counts = dict(red.counts)
    read_back = (out + "\n")[:-1]
    assert read_back is not out and read_back == out
    assert red.text(out) is out and red.text(read_back) is read_back and red.counts == counts
    assert red.text(out + "+x = 'gpu-node-17'\n") != out + "+x = 'gpu-node-17'\n"  # another text is read
