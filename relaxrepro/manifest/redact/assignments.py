"""In-text assignments: ``name = value``, ``name: value``, ``"name": "value"``, ``--flag value`` inside a string
(config text, a patch, an error message), masked by what the name says; a ``.pgpass`` line's password field."""

from __future__ import annotations

import re

from ...std.lazy_re import LazyPattern
from .names import (
    KIND_ADDRESS,
    KIND_SECRET,
    KIND_URL,
    KIND_USER,
    KIND_WEAK,
    is_inert,
    looks_credential,
    name_kind,
    sequence_kind,
)
from .placeholders import MASK

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import List, Optional, Tuple

    from .protocol import Rules

_TRIGGERS = r"pass|secret|token|cred|auth|key|cookie|sig|sas|dsn|addr|host|ip|node|user|login|url|uri|endpoint|pwd"
TRIGGER_LOW_RE = re.compile(_TRIGGERS)  # searched in the lower-cased string: faster than (?i)
TRIGGERS = tuple(_TRIGGERS.split("|"))
"""The words one of which a name must hold for its value to be judged by it (prefilter.py looks for them)."""
_VALUE_END = r"\s,;'\"&)}\]<>"
_NOT_FIRST = frozenset(",;&)}]<>|")  # a value that starts so is only a secret's (``PASS=&x``), never an address's
# ``name = value``, ``name: value``, ``"name": "value"``, ``--flag value``. The name must contain a trigger
# word (the lookahead), so prose without one is never consumed. A quote left open runs to the end of the line.
_ASSIGN_RE = LazyPattern(
    r"(?<![\w./-])(?P<name>-{0,2}(?=[\w.-]{0,79}?(?i:%s))[A-Za-z_][\w.-]{0,79}?)(?P<nq>[\"']?\]?)"
    r"(?:(?P<sep>[ \t]*[:=]=?[ \t]*|[ \t]*,[ \t]*(?=[\"']))"
    r"(?:\"(?P<dq>[^\"\\\n]*(?:\\.[^\"\\\n]*)*)\"?|'(?P<sq>[^'\n]*(?:''[^'\n]*)*)'?"
    r"|(?P<v>[^\s\"'][^%s]*))"
    r"|(?P<sp>[ \t]+)(?:\"(?P<dq2>[^\"\\\n]*(?:\\.[^\"\\\n]*)*)\"?|'(?P<sq2>[^'\n]*)'?|(?P<w>[^\s\"'=:][^%s=:]*)))"
    % (_TRIGGERS, _VALUE_END, _VALUE_END))
_WS_RE = LazyPattern(r"\s")
_CLOSER_RE = LazyPattern(r"[,)\]}]")
_NEXT_PAIR_RE = LazyPattern(r"[;&,][ \t]*[A-Za-z_][\w.-]*=")
_COMMENT_RE = LazyPattern(r"[ \t]#")
_LIST_ITEM_RE = LazyPattern(r"[+ -]?[ \t]*-[ \t]+")  # ``- DB_PASSWORD=x y`` (a compose environment list)
_BLOCK_RE = LazyPattern(r"[|>][1-9+-]{0,2}")  # YAML ``password: |``: the value is on the lines below
BLOCK_KEY_RE = LazyPattern(r"([ \t]*(?:- )?)[\"']?([\w.-]+)[\"']?[ \t]*:[ \t]*[|>][1-9+-]{0,2}[ \t]*(?:#.*)?")
# The calls that set or default an environment variable: setdefault("HF_TOKEN", "X"), putenv('DB_PASSWORD', 'X')
_CALL_RE = LazyPattern(r"\b(?:setdefault|putenv|setenv|getenv|get|pop)\([ \t]*[\"']$")
_EXPRESSION_RE = LazyPattern(r"[A-Za-z_][\w.]*(?:[\[(]|$)")  # os.environ["X"] = os.environ["Y"]: code, no value
_SEQ_KEY_RE = LazyPattern(r"([ \t]*(?:- )?)[\"']?([\w.-]+)[\"']?[ \t]*:[ \t]*(?:#.*)?")
_SEQ_ITEM_RE = LazyPattern(r"([ \t]*)-[ \t]+(.*?)[ \t]*")
_NETRC_RE = LazyPattern(r"[+ -]?[ \t]*(?:machine|default)\b")
PGPASS_RE = LazyPattern(r"(?m)^((?![+ -]?#)[+ -]?(?:(?:[^:\\\n]|\\.)*:){4})(.+)$")


def _value_end(s: str, nstart: int, start: int, line: bool) -> int:
    """Where an unquoted value found by its name ends: the end of the line (``line``: YAML, INI, a .env file;
    less a `` #`` comment) or of the word, but never past the quote or bracket that encloses the assignment."""
    ls = s.rfind("\n", 0, nstart) + 1
    limit = s.find("\n", start)
    if limit < 0:
        limit = len(s)
    pre = s[ls:nstart]
    q = '"' if (pre.count('"') - pre.count('\\"')) % 2 else "'" if pre.count("'") % 2 else ""
    if q:  # "--password=X --lr 1" inside a JSON string: the string's quote closes the value
        i = s.find(q, start, limit)
        while i > start and q == '"' and s[i - 1] == "\\":
            i = s.find(q, i + 1, limit)
        if i >= 0:
            limit = i
    if sum(map(pre.count, "([{")) > sum(map(pre.count, ")]}")):  # connect(password=pw, host=h)
        c = _CLOSER_RE.search(s, start, limit)
        if c:
            limit = c.start()
    c = _NEXT_PAIR_RE.search(s, start, limit)  # AccountKey=X;EndpointSuffix=..., user=u&password=X&grant=...
    if c:
        limit = c.start()
    if not line:
        w = _WS_RE.search(s, start, limit)
        return w.start() if w else limit
    c = _COMMENT_RE.search(s, start, limit)
    if c:
        limit = c.start()
    while limit > start and s[limit - 1] in " \t\r":
        limit -= 1
    return limit


def _prose_credential(s: str, nstart: int, start: int) -> bool:
    """Whether the word after a secret's name in prose is a credential (``token Tr0ub&4dor...``): not the
    next assignment (``token api_key=X``)."""
    word = s[start:_value_end(s, nstart, start, False)]
    return "=" not in word and ":" not in word and looks_credential(word)


_CODE_SUFFIXES = (".py", ".pyi", ".pyx", ".pxd", ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".cu", ".cuh",
                  ".go", ".rs", ".java", ".kt", ".scala", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".cs", ".swift",
                  ".jl")
"""Source files of languages that write a text value only as a quoted literal: a bare word after ``=`` is code."""
LINE_MODES = frozenset(("env", "netrc", "pgpass"))
"""The modes of :func:`file_mode` whose every line goes through the rules (a value runs on, or stands after a
blank): the patch's prefilter reads no needle into them."""


def file_mode(header: str) -> Optional[str]:
    """How the values of a patched file are written, from its ``diff --git`` line: ``env`` (``.env``, INI:
    a value runs to the end of its line), ``netrc`` (``password X``), ``pgpass`` (``host:port:db:user:X``),
    ``code`` (a source file: a value is a quoted literal or a number, anything else is an expression)."""
    name = header.rsplit("/", 1)[-1].strip('"').lower()
    if name in (".netrc", "_netrc"):
        return "netrc"
    if name == ".pgpass" or name == "pgpass.conf":
        return "pgpass"
    if name.startswith(".env") or name.endswith((".env", ".ini", ".cfg", ".conf", ".cnf", ".properties")) or (
            name[:1] == "." and name.endswith("rc")):  # .npmrc, .pypirc
        return "env"
    if name.endswith(_CODE_SUFFIXES):
        return "code"
    return None


def _literal_in_code(s: str, m: "re.Match[str]", group: str, nstart: int, value: str) -> bool:
    """Whether a value a secret's name points at in a source file is text the file writes out: a quoted literal
    closed on its line, a number, or a word after a name standing in a comment or inside a string
    (``# password=X``, ``"host=db password=X"``). Else it is an expression (``password = auth[2]``,
    ``= user, password``, ``token == self.eof``), a quote that closes a string (``"token=" + repr(t)``), or
    a comment's prose (``# Signature: the former always returns``): masked where it stands all the same, but not
    chased through the rest of the document, where its copies are more code or prose."""
    if group in ("dq", "sq", "dq2", "sq2"):
        return s.startswith('"' if group[0] == "d" else "'", m.end(group))
    value = value.strip()
    if value.isdigit() or (len(value) > 1 and value[0] in "\"'" and value[-1] == value[0]):
        return True  # a number, or a literal whose quotes a bare read took along (the word after ``= \``)
    if not value or any(c.isspace() for c in value):
        return False
    pre = s[s.rfind("\n", 0, nstart) + 1:nstart]
    code = (pre[1:] if pre[:1] in ("+", "-") else pre).lstrip()
    return code.startswith(("#", "//", "/*", "*")) or bool(
        (pre.count('"') - pre.count('\\"')) % 2 or pre.count("'") % 2)



_FILE_NAME_RE = LazyPattern(r"(?i)\.(?:ya?ml|json|toml|txt|py|cfg|ini|conf|md|csv|log|sh)$")


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")


def _word_of_trigger(low: str, pos: int) -> int:
    """Where the run of name characters holding the first trigger word at or after ``pos`` of the lower-cased
    ASCII ``low`` starts (not before ``pos``); -1 when there is none."""
    t = TRIGGER_LOW_RE.search(low, pos)
    if t is None:
        return -1
    a = t.start()
    while a > pos and low[a - 1] in _NAME_CHARS:
        a -= 1
    return a


def mask_assignments(red: Rules, s: str, mode: Optional[str] = None) -> str:
    """Mask the values of ``name=value`` pairs whose name says what the value is."""
    out: List[str] = []
    last = pos = 0
    # A name holds a trigger word, so no match starts before the word of the next one: the expression, which
    # has no literal to skip to, is tried from there (a line of code: ~3 us a search -> ~1). An ASCII text only,
    # where lower-casing keeps every offset and (?i) folds nothing else into a trigger word.
    low = s.lower() if s.isascii() else None
    while True:
        if low is not None:
            pos = _word_of_trigger(low, pos)
            if pos < 0:
                break
        m = _ASSIGN_RE.search(s, pos)
        if m is None:
            break
        edit = _assignment(red, m, mode)
        if edit is None:
            pos = m.end("name")  # only the name is consumed: "token api_key=X" still finds api_key
            continue
        start, end, new = edit
        out.append(s[last:start])
        out.append(new)
        last = pos = end
    if not out:
        return s
    out.append(s[last:])
    return "".join(out)

def _assignment(red: Rules, m: "re.Match[str]", mode: Optional[str]) -> Optional[Tuple[int, int, str]]:
    name = m.group("name")
    if _FILE_NAME_RE.search(name):
        return None  # "secret.yaml: permission denied" names a file, it doesn't assign one
    kind = name_kind(name.lstrip("-"))
    if not kind:
        return None
    group = next(g for g in ("dq", "sq", "v", "dq2", "sq2", "w") if m.group(g) is not None)
    value = m.group(group)
    if not value:
        return None
    s = m.string
    secret = kind in (KIND_SECRET, KIND_WEAK)
    bare = group in ("v", "w")
    if bare and ((not secret and value[0] in _NOT_FIRST) or (group == "w" and value[0] in "|<>")):
        return None  # "--user | tee": a pipe, not a value
    nstart = m.start("name")
    sep = m.group("sep") or ""
    if "," in sep and not (m.group("nq")[:1] in ("'", '"') and (name.startswith("-") or _CALL_RE.search(
            s, max(0, nstart - 40), nstart))):
        return None  # only a call's ("HF_TOKEN", "X") or a list's ["--api-key", "X"]: not any pair of strings
    if "," in sep and value.startswith("-"):
        return None  # add_argument("--hf-token", "-t"): the flag's other name
    if m.group("nq").endswith("]") and group == "v" and _EXPRESSION_RE.match(value):
        return None  # os.environ["HF_TOKEN"] = token: a variable, not the value
    if m.group("sp") is not None:
        if name.startswith("-"):
            if value.startswith("-"):
                return None  # "--api-key --lr 3e-4": the flag took no value here
        elif m.group("nq") or not secret or not (looks_credential(value) or _prose_credential(
                s, nstart, m.start(group)) or mode == "netrc" or (
                kind == KIND_SECRET and _NETRC_RE.match(s, s.rfind("\n", 0, nstart) + 1))):
            # Prose ("token X" in --wandb-notes): only a credential-looking word after a secret word,
            # or a .netrc's "machine h login u password X".
            return None
        elif kind == KIND_WEAK:
            kind = KIND_SECRET
    start, end = m.start(group), m.end(group)
    query = secret and s[nstart - 1:nstart] in ("?", "&")
    if bare and not query and not m.group("nq") and (secret or (kind == KIND_USER and group == "w")):
        # A value found by its name goes whole: '&', '#', ';' and quotes are part of a password.
        sep = m.group("sep") or ""
        line = group == "v" and (":" in sep or sep != sep.strip() or mode == "env"
                                 or _LIST_ITEM_RE.fullmatch(s, s.rfind("\n", 0, nstart) + 1, nstart) is not None)
        end = _value_end(s, nstart, start, line)
        value = s[start:end]
        if not value:
            return None
        if line and kind == KIND_SECRET and _BLOCK_RE.fullmatch(value):
            return _block(red, s, nstart, end)
        if value == "\\":  # 'export HF_TOKEN=\' or '--token \': the value is the next line's first word
            if not s.startswith("\n", end):
                return None  # the line alone: the lines it continues are read together (patches.py)
            start = end + 1
            while s[start:start + 1] in (" ", "\t"):
                start += 1
            w = _WS_RE.search(s, start)
            end = w.start() if w else len(s)
            value = s[start:end]
            if not value or value.startswith("-"):
                return None
    elif group in ("dq", "sq") and secret and mode == "env" and s.startswith("\n", end):
        return _quoted_lines(red, kind, s, start, end, '"' if group == "dq" else "'")
    if kind in (KIND_ADDRESS, KIND_URL) and group == "w" and s.startswith("://", end):
        end = _value_end(s, nstart, start, False)  # --host https://wandb.example.com: the whole URL
        value = s[start:end]
    if kind == KIND_ADDRESS and any(c.isspace() for c in value):
        return None
    chase = mode != "code" or _literal_in_code(s, m, group, nstart, value)
    new, _ = red.judge(kind, value, rule="url-token" if query else "secret-name", chase=chase)
    if new == value:
        return None
    return start, end, new

def _quoted_lines(red: Rules, kind: int, s: str, start: int, end: int, quote: str) -> Optional[Tuple[int, int, str]]:
    """A ``.env`` value whose quote closes on a later line (``DB_PASSWORD="a`` ... ``b"``): each of its lines masked,
    so the text keeps its line count. Unclosed within 64 lines, only the first line is the value."""
    pos = end
    for _ in range(64):
        close = s.find(quote, pos + 1)
        nl = s.find("\n", pos + 1)
        if close >= 0 and (nl < 0 or close < nl):
            end = close
            break
        if nl < 0:
            break
        pos = nl
    value = s[start:end]
    parts = value.split("\n")
    if all(is_inert(p) for p in parts):
        return None
    new, _ = red.judge(kind, "".join(parts))
    if new == "".join(parts):
        return None
    for p in parts:
        red.remember(p)
    return start, end, "\n".join(MASK if p.strip() else p for p in parts)


def mask_sequences(red: Rules, s: str) -> str:
    """The items of a YAML list under a name that says secret (``api_keys:`` then ``- X`` lines; ``tokens:``
    then ``- X`` where X looks like a credential), each masked as a value under that name."""
    lines = s.split("\n")
    seq: Optional[Tuple[int, int]] = None
    changed = False
    for i, line in enumerate(lines):
        new, seq = sequence_line(red, line, seq)
        if new != line:
            lines[i], changed = new, True
    return "\n".join(lines) if changed else s


def sequence_line(red: Rules, line: str, seq: Optional[Tuple[int, int]]) -> Tuple[str, Optional[Tuple[int, int]]]:
    """One line of a YAML text read for :func:`mask_sequences`: the line as masked, and ``(indent, kind)`` of the
    secret's list that the next line may continue (None outside one)."""
    if seq is not None:
        if not line.strip() or line.lstrip().startswith("#"):
            return line, seq
        item = _SEQ_ITEM_RE.fullmatch(line)
        if item and len(item.group(1)) >= seq[0]:
            value = item.group(2)
            if value and not is_inert(value):
                new, _ = red.judge(seq[1], value)
                if new != value:
                    return line[:item.start(2)] + new + line[item.end(2):], seq
            return line, seq
    key = _SEQ_KEY_RE.fullmatch(line) if ":" in line else None
    if key:
        kind = sequence_kind(key.group(2))
        if kind in (KIND_SECRET, KIND_WEAK):
            return line, (len(key.group(1)), kind)
    return line, None


def _block(red: Rules, s: str, nstart: int, start: int) -> Optional[Tuple[int, int, str]]:
    """The lines of a secret's YAML block scalar (``password: |``) below its key: each masked."""
    ls = s.rfind("\n", 0, nstart) + 1
    indent = len(s[ls:nstart]) - len(s[ls:nstart].lstrip(" "))
    pos = s.find("\n", start)
    if pos < 0:
        return None
    out: List[str] = []
    end = pos
    for line in s[pos + 1:].split("\n"):
        body = line.lstrip(" ")
        if body and len(line) - len(body) <= indent:
            break
        end += len(line) + 1
        if body and not is_inert(body):
            red.remember(body)
            line = line[:len(line) - len(body)] + MASK
        out.append(line)
    if not out or out == s[pos + 1:end].split("\n"):
        return None
    red.count("secret-name")
    return pos + 1, end, "\n".join(out)

def _pgpass_sub(red: Rules, m: "re.Match[str]") -> str:
    if is_inert(m.group(2)):
        return m.group(0)
    red.count("secret-name")
    red.remember(m.group(2))
    return m.group(1) + MASK


def mask_pgpass(red: Rules, s: str) -> str:
    """The password field of each ``host:port:db:user:password`` line of a ``.pgpass`` file, masked."""
    return PGPASS_RE.sub(lambda m: _pgpass_sub(red, m), s)
