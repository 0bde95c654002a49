"""The lines of a patch that a rule may change, found in one scan of its whole text.

Every rule of :meth:`Redactor.scan <relaxrepro.manifest.redact.redactor.Redactor.scan>` fires only on a line
holding some literal string (its *needle*): a name's trigger word (``token``, ``host``...), a shape's prefix
(``ghp_``, ``AKIA``, ``eyJ``), ``://``, ``private key``, a client tool's name, a digit before a dot, the
machine's hostname, home and login... A line holding none of them comes out of the rules as it went in. So the
patch pass (patches.py) runs the rules only on the lines found here (and on the lines a state it is in carries
over: a key's block, a list under a secret's name, a command continued with a backslash), and copies the rest.

The needles are searched in a lower-cased ASCII copy of the text (a superset of the case-sensitive rules; a
line holding any other character goes through the rules whatever it holds): those with a rare character in
one regular expression per character they are anchored on, which the engine skips to in C (~0.3 ns a
character, ~0.05 us a stop), the few of common letters only each with an expression that starts with its
letters from its rarest one on (the engine skips to where they all stand, ~0.5 ns a character); running the
rules themselves over the text costs ~0.1 us a character. A trigger word counts only when an assignment could
follow its name (looked at in the expression) and the name says something (``api_key`` does, ``skip`` does not;
``tokens`` only as a list's key). Lines are never split out of the text: :class:`Lines` finds the line of a hit
with ``str.rfind``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

from .assignments import LINE_MODES, TRIGGERS, file_mode
from .names import KIND_SECRET, KIND_WEAK, name_kind, sequence_kind

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Callable, Dict, Iterable, Iterator, List, Optional, Pattern, Sequence, Set, Tuple

    _Common = Tuple[Pattern[str], Tuple[Tuple[str, int, Optional[Pattern[str]], int], ...]]
    """Needles of common letters only: the expression that finds them (:func:`_common`), and for each
    ``(needle, how far into it the expression's hit starts, what must follow it, what a hit is)``."""

# Characters from the rarest to the most common in source code (measured over CPython's standard library,
# lower-cased): a needle is anchored on the first of its characters in this order.
_RARITY = "~$^&?|;!7@`{}6945<3\\8q%z/2j*>[]01-k#xvwy:=b\"g',().hum_pcfdl+oianrste "

_SHAPES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-", "glcbt-", "glft-",
           "glsoat-", "glptt-", "hf_", "api_org_", "sk-", "k_live_", "k_test_", "akia", "aiza", "gocspx-", "ya29.",
           "1//0", "q~", "xox", "eyj", "npm_", "pypi-", "dapi", "pplx-", "wandb_v1_", "local-", "hooks.slack",
           "private key")
"""The literal part every shape of shapes.py starts with (and the PEM and Slack rules'), lower-cased."""
_CASED = ("ASIA", "ABIA", "ACCA")
"""AWS key ids' prefixes, looked for as written (the shape is upper-case): their letters are too common to
anchor on in the lower-cased text, but an upper-case ``A`` is rare (one scan, ~1 ms for 3.5 MB)."""
_CASED_RE = re.compile("A(?=%s)" % "|".join(c[1:] for c in _CASED))

_TOOLS = ("curl", "wget", "mysql", "mariadb", "-cli", "mongo", "sshpass", "smbclient", "rpcclient", "lftp", "ldap",
          "twine", "zipcloak", "7z", "ssh-keygen", "openssl", "keytool", "mosquitto", "cqlsh", "sqlcmd", "bcp",
          "vsql", "rabbitmqadmin")
"""Client tools' names (tools.py); the ones below are words of ordinary text too, and count only as a command,
followed by a blank or a backslash (``zip a.zip``, not ``zip(a, b)``; ``http POST``, not ``http://``)."""
_TOOL_WORDS = ("http", "https", "xh", "xhs", "zip", "rar", "login")

_OTHER = ("uthorization", "bearer", "diff --git ")
"""Headers, a file's header (its mode)."""
_INTERNAL = (".internal", ".intranet", ".local", ".lan", ".corp")
"""Internal names' last parts (addresses.py), each where a name may end after it: ``x.lan``, not ``.lang`` or
``value.int`` (the standard library's 3.5 MB: 190 lines of ``.int`` alone)."""

_cache: Dict[Tuple[str, ...], Tuple[Tuple[Pattern[str], ...], Tuple[_Common, ...]]] = {}


_RARE = frozenset(_RARITY[:_RARITY.index("c")])
"""The characters a needle may be anchored on (each under ~1.7% of source code): a position the scan stops at
costs ~0.05-0.15 us, a character it skips ~0.3 ns. A needle of commoner letters only (``secret``, ``node``) is
found by an expression of its own (:func:`_common`)."""


_SHARED = frozenset(_RARITY[_RARITY.index("c"):_RARITY.index("n")])
"""The letters a needle of common letters shares an expression on: the needles whose rarest letter is one of them
are found by one scan that stops there (``d`` for ``dsn``, ``ddr(?<=addr)``, ``de(?<=node)``: ~2.7 ms against ~4.8
for three; ``a`` for ``sas`` and ``rar``: ~3.3 ms against ~4.5 for two), each of the others by its own."""


def _common(needles: Sequence[str]) -> List[Tuple[Pattern[str], List[Tuple[str, int]]]]:
    """Expressions that find ``needles`` from each one's rarest letter on (``cred``, ``ddr(?<=addr)``), each with
    its needles and how far that letter stands into each: the engine skips to the first letter an expression starts
    with in a tight loop and checks the next ones in place, entering it only where they all stand (3.5 MB: ~1.5-2 ms
    an expression, against ~2.5-3 ms for ``str.find`` of one needle, which tries more of its windows on these
    letters). Needles whose rarest letter is in ``_SHARED`` share one expression (``cre(?:t(?<=secret)|d)``) when
    their rests differ from the first letter on, so that at most one of them matches at a place; the group ``c<k>``
    of the hit says which."""
    rank = {c: k for k, c in enumerate(_RARITY)}
    groups: Dict[str, List[Tuple[str, int]]] = {}
    for needle in needles:
        back = needle.index(min(needle, key=lambda c: rank.get(c, len(_RARITY))))
        groups.setdefault(needle[back] if needle[back] in _SHARED else needle, []).append((needle, back))
    out = []
    for members in groups.values():
        rests = [needle[back:] for needle, back in members]
        shared = 1
        while all(len(r) > shared and r[shared] == rests[0][shared] for r in rests):
            shared += 1
        nexts = {r[shared:shared + 1] for r in rests}  # what each has after the letters they share
        if len(members) > 1 and (len(nexts) < len(members) or "" in nexts):
            out += [(_expression([m], len(m[0]) - m[1]), [m]) for m in members]  # two could match at one place
        else:
            out.append((_expression(members, shared), members))
    return out


def _expression(members: List[Tuple[str, int]], shared: int) -> Pattern[str]:
    """One expression for ``members`` (each ``(needle, where its rarest letter stands)``), whose rests from there
    have their first ``shared`` letters in common: those letters, then each rest's own, then what stands before
    (a look behind), then the empty group ``c<k>`` of the ``k``-th."""
    head = members[0][0][members[0][1]:][:shared]
    alts = ["%s%s(?P<c%d>)" % (re.escape(needle[back + shared:]), "(?<=%s)" % re.escape(needle) if back else "", k)
            for k, (needle, back) in enumerate(members)]
    return re.compile(re.escape(head) + "(?:%s)" % "|".join(alts))


def _occurrences(low: str, finder: Pattern[str], backs: Sequence[int]) -> Iterator[Tuple[int, int]]:
    """``(which needle, where it starts)`` for each occurrence in ``low`` of the needles of ``finder``
    (:func:`_common`; ``backs``: how far into each its hit starts), overlapping ones too, as ``str.find`` from
    one past the last would find them."""
    hit = finder.search(low)
    while hit is not None:
        k = int(hit.lastgroup[1:])  # type: ignore[index]
        yield k, hit.start() - backs[k]
        hit = finder.search(low, hit.start() + 1)


# What must follow a trigger word for its name to hold a value (:func:`_may_assign`, looked at in C): the rest of
# the name, then ``=``, ``:``, ``, "`` or a word of 16 characters or more after blanks (``_STRICT``); or any
# word after blanks (``_BLANK``), which counts only after a flag's name or on a .netrc line: a flag is its own
# needle (``_FLAG``, from the ``-`` that starts its name), so a word after blanks is followed up only on a
# line that starts as a .netrc one. Most trigger words in code stop here (``key)``, ``pass`` alone on its line,
# ``for key in``), before any Python runs for them.
_STRICT = r"[\w.-]*(?:[\"']?\]?[ \t]*(?:[:=]|,[ \t]*[\"'])|[ \t]+[\"']?\S{16})"
_BLANK = r"[\w.-]*[ \t]+[^\s=:]"
_FOLLOW = r"[\w.-]*(?:(?:[\"']?\]?[ \t]*(?:[:=]|,[ \t]*[\"'])|[ \t]+[\"']?\S{16})(?P<s%d>)|[ \t]+[^\s=:](?P<b%d>))"
"""``_STRICT`` or ``_BLANK`` in one look ahead, its group saying which."""
_FLAG = r"(?<![\w.-]-)(?=[\w.-]*?(?:%s)%s)" % ("|".join(TRIGGERS), _BLANK)
"""After the ``-`` that starts a word: a flag's name holding a trigger word, then a word after blanks."""
_OUTRIGHT, _WORD, _FLAG_NAME, _NAME = range(4)
"""What a needle's hit is: its line goes through the rules; a trigger word (``s`` group: its name is judged;
``b``: only on a .netrc line); a flag's name (judged); a trigger word of the names of addresses, URLs and users
(``s`` only: a word after blanks is a value only after a secret's name on a .netrc line, or after a flag)."""
_SECRET_WORDS = frozenset(("pass", "secret", "token", "cred", "auth", "key", "cookie", "sig", "sas", "dsn", "pwd"))
"""The trigger words one of which every name of a secret or a key holds (names.py; ``bearer`` is a needle of its
own): the others' names (``host``, ``ip``, ``user``...) never take a word after blanks but as a flag, whose ``-``
is a needle of its own. So only these are followed up before blanks (in the standard library's 3.5 MB, ``ip`` in
``description of``, ``multiple values``: ~2,000 hits of ~6,000)."""


def _branches(needles: Sequence[Tuple[str, str, int]], together: bool = False) -> List[str]:
    """The expressions for ``(needle, what must follow it, what a hit is)``: one per anchor character, each
    needle anchored on its rarest character; the hit of a name to judge ends in an empty group named ``s<k>``
    (``b<k>``: a trigger word followed by a word after blanks, see ``_BLANK``).
    Each expression starts with its anchor, a literal the engine skips to in a tight loop (~0.3 ns a character;
    one expression with a branch per anchor starts with a class, which it tests at every character, ~3.5 ns);
    where it stops, what it tries must fail fast: the rest of a needle is matched (consumed: it holds no other
    stop of its expression, so none is lost) where the engine skips an alternative on its first character, and
    the needles that look behind the anchor are tried only behind one of their characters. ``together``: for
    one alternation of them, where a needle's rest is consumed only when it holds no anchor of any of them; the
    hits of the expressions apart are those of their alternation together, at the same places with the same
    groups (a position is tried by the one expression of its character)."""
    rank = {c: k for k, c in enumerate(_RARITY)}
    rarest = [min(n, key=lambda c: rank.get(c, len(_RARITY))) for n, _after, _kind in needles]
    used: Dict[str, int] = {}
    for c in rarest:
        used[c] = used.get(c, 0) + 1
    chosen = []
    for (needle, _after, _kind), own in zip(needles, rarest):
        # an anchor the other needles stop at already costs nothing more (``npm_`` on their ``p``, not its ``m``)
        shared = [c for c in needle if c != own and used.get(c, 0) > 0 and c in _RARE]
        c = own if used[own] > 1 or not shared else max(shared, key=lambda x: used[x])
        if c != own:
            used[own] -= 1
            used[c] += 1
        chosen.append(c)
    stops = set(chosen)
    # per anchor: (what a hit is, looks behind, the alternative); the first that matches wins, so a needle that
    # makes its line hot outright comes before every other
    anchors: Dict[str, List[Tuple[int, bool, str]]] = {}
    for k, ((needle, after, kind), c) in enumerate(zip(needles, chosen)):
        j = needle.index(c)
        rest = needle[j + 1:]
        consumed = bool(rest) and not (stops.intersection(rest) if together else c in rest)
        ahead = "" if consumed else re.escape(rest)
        if kind == _WORD:
            tail = "(?=%s%s)" % (ahead, _FOLLOW % (k, k))
        elif kind == _NAME:
            tail = "(?=%s%s(?P<s%d>))" % (ahead, _STRICT, k)
        else:
            tail = ("(?=%s%s)" % (ahead, after) if ahead or after else "") + ("(?P<s%d>)" % k if kind else "")
        if consumed:
            alt = re.escape(rest) + ("(?<=%s)" % re.escape(needle) if j else "") + tail
        else:
            alt = ("(?<=%s)" % re.escape(needle[:j + 1]) if j else "") + tail
        anchors.setdefault(c, []).append((kind, j > 0 and not consumed, alt))
    out = []
    # the most common anchors first: most positions tried find their branch at once
    for c in sorted(anchors, key=lambda c: -rank.get(c, len(_RARITY))):
        parts = []
        for judged in (False, True):
            parts += [alt for kind, behind, alt in anchors[c] if bool(kind) == judged and not behind]
            behind = [alt for kind, b, alt in anchors[c] if bool(kind) == judged and b]
            if behind:
                before = sorted({needle[needle.index(c) - 1] for (needle, _a, kind), a in zip(needles, chosen)
                                 if a == c and bool(kind) == judged and needle.index(c) > 0})
                parts.append("(?<=[%s]%s)(?:%s)" % ("".join(map(re.escape, before)), re.escape(c), "|".join(behind)))
        out.append("%s(?:%s)" % (re.escape(c), "|".join(parts)))
    return out


def anchored(literals: Sequence[str]) -> List[str]:
    """Expressions that together find each of ``literals`` (case-sensitive, none empty), one per character they
    are anchored on (each one's rarest): where one of them may be is where one matches (at its anchor, not at
    its start)."""
    return _branches([(v, "", _OUTRIGHT) for v in literals])


_ULA = "(?:%s)[0-9a-f]{0,4}:" % "|".join("(?<=f[cd]%s:)(?<![\\w:.]f[cd]%s:)" % (h, h)
                                        for h in ("", "[0-9a-f]", "[0-9a-f]{2}"))
"""What an IPv6 ULA address (addresses.py) has around its first ``:``: ``fd12:`` starting a word, then another ``:``
(not ``closefd:`` or ``aifc:``)."""


def _listed(machine: Sequence[str]) -> Tuple[List[Tuple[str, str, int]], List[Tuple[str, str, int]]]:
    """``(needle, what must follow it, what a hit is)`` of every needle (``machine``: this machine's own ones):
    those that have a rare character, with the expressions of an IPv4 address, an IPv6 ULA one, a continued
    command and a flag's name; and the others."""
    needles = [(t, "", _WORD if t in _SECRET_WORDS else _NAME) for t in TRIGGERS]
    needles += [(n, "", _OUTRIGHT) for n in tuple(_SHAPES + _TOOLS + _OTHER) + tuple(machine) if n]
    needles += [(n, r"s?[ \t\\]", _OUTRIGHT) for n in _TOOL_WORDS]
    needles += [(n, r"(?![\w-])", _OUTRIGHT) for n in _INTERNAL]
    needles.append(("://", r"[^\s/@\"'<>]*@", _OUTRIGHT))  # a URL with credentials: urls.py's user part, then @
    rare = [n for n in needles if _RARE.intersection(n[0])]
    rare += [(".", r"(?<=\d\.)\d{1,3}\.\d{1,3}\.\d", _OUTRIGHT),  # an IPv4 address
             (":", _ULA, _OUTRIGHT),  # an IPv6 ULA one
             ("\\", "[\r\n]", _OUTRIGHT),  # a command continued on the next line
             ("-", _FLAG, _FLAG_NAME)]
    return rare, [n for n in needles if not _RARE.intersection(n[0])]


def _needles(machine: Sequence[str]) -> Tuple[Tuple[Pattern[str], ...], Tuple[_Common, ...]]:
    """The expressions of every needle that has a rare character (``machine``: this machine's own needles), and
    ``(needle, its expression, how far into it that starts, what must follow it, what a hit is)`` for the others
    (a trigger word: what follows it strictly, see ``_STRICT``); cached."""
    key = tuple(machine)
    found = _cache.get(key)
    if found is None:
        rare, others = _listed(key)
        follow = {n: (re.compile(_STRICT if kind in (_WORD, _NAME) else after) if after or kind else None, kind)
                  for n, after, kind in others}
        common = tuple((finder, tuple((n, back) + follow[n] for n, back in members))
                       for finder, members in _common([n for n, _after, _kind in others]))
        found = (tuple(map(re.compile, _branches(rare))), common)
        if len(_cache) < 16:
            _cache[key] = found
    return found


_WORD_END = re.compile(r"[\w.-]*")


def _word_at(text: str, at: int, end: int) -> Tuple[int, int]:
    """Where the run of ``[\\w.-]`` characters of ``text`` around ``text[at:end]`` starts and ends: a name as the
    assignment rule reads it."""
    a = at
    while a > 0 and (text[a - 1].isalnum() or text[a - 1] in "_.-"):
        a -= 1
    return a, _WORD_END.match(text, end).end()  # type: ignore[union-attr]


# What follows the key of a YAML list (``api_keys:`` alone on its line), as assignments.sequence_line reads it.
_BREAK = "\\n\\r\\x0b\\x0c\\x1c-\\x1e\\x85\\u2028\\u2029"  # where str.splitlines ends a line
_LIST_KEY_END = re.compile(r"[\"']?[ \t]*:[ \t]*(?:#[^%s]*)?(?:[%s]|\Z)" % (_BREAK, _BREAK))


# What must follow a name for the assignment rule to read a value under it (assignments._ASSIGN_RE and
# _assignment): ``=`` or ``:`` (``api_key = X``, ``"token": X``), ``, "`` (``setdefault("HF_TOKEN", "X")``), or
# blanks then a word -- only after a flag (``--api-key X``), or when the word may be a credential (16 characters
# or more: ``token X`` in prose), or on a .netrc line (``machine h login u password X``).
_SEPARATOR = re.compile(r"[\"']?\]?[ \t]*(?:[:=]|,[ \t]*[\"'])")
_CREDENTIAL = re.compile(r"=?[ \t]*[\"']?(?=\S{16})\S*?\d")
"""After a separator: a value as a weak secret's name must have for a rule to mask it (``names.looks_credential``:
16 characters or more, unspaced, a digit among them): ``key = next(iter(self))`` has none (the standard library's
3.5 MB: 284 lines of ``key``, none of them masked)."""
_CREDENTIAL_WORD = re.compile(r"[ \t]+[\"']?(?=\S{16})\S*?\d")
_BLANK_WORD = re.compile(r"[ \t]+[^\s=:]")
_LONG_WORD = re.compile(r"[ \t]+[\"']?\S{16}")
_NETRC_LINE = re.compile(r"[+ -]?[ \t]*(?:machine|default)\b")
_BLANK_RE = re.compile(_BLANK)


def _may_assign(text: str, a: int, b: int, kinds: Tuple[int, int], line: int) -> bool:
    """Whether the name ``text[a:b]`` (its ``name_kind`` and ``sequence_kind``; ``line``: where its line starts)
    may have a value a rule reads: an assignment, a list below it (``tokens:`` alone on its line), a block
    (``password: |``)."""
    kind, seq = kinds
    if kind == KIND_WEAK:  # a key's name masks only what looks like a credential, or a .netrc line's word
        sep = _SEPARATOR.match(text, b)
        if (sep and _CREDENTIAL.match(text, sep.end())) or _CREDENTIAL_WORD.match(text, b) or (
                _BLANK_WORD.match(text, b) and _NETRC_LINE.match(text, line)):
            return True
    elif kind:
        if _SEPARATOR.match(text, b):
            return True
        if _BLANK_WORD.match(text, b) and (text[a] == "-" or (kind == KIND_SECRET and (
                _LONG_WORD.match(text, b) or _NETRC_LINE.match(text, line)))):
            return True
    return bool(seq) and _LIST_KEY_END.match(text, b) is not None


_BREAKS_ASCII = "\x0b\x0c\x1c\x1d\x1e"
"""Where ``str.splitlines`` also ends a line, besides ``\\n``, ``\\r`` and the non-ASCII ones."""


class Lines:
    """Where the lines of ``text`` start and end, as :meth:`str.splitlines` cuts them, without a list of them: a text
    whose only line breaks are ``\\n`` (and ``\\r\\n``) is cut with ``str.find`` at the lines asked for; one with
    another separator (a lone ``\\r``, ``\\x0b``, ``\\x85``, ``\\u2028``...) from its ``splitlines``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.size = len(text)
        odd = ("\r" in text and text.count("\r") != text.count("\r\n")) or any(
            map(text.__contains__, _BREAKS_ASCII if text.isascii() else _BREAKS_ASCII + "\x85\u2028\u2029"))
        self.starts: Optional[List[int]] = list(accumulate(map(len, text.splitlines(True)), initial=0)) if odd \
            else None

    def start(self, at: int) -> int:
        """Where the line holding the offset ``at`` starts."""
        if self.starts is None:
            return self.text.rfind("\n", 0, at) + 1
        return self.starts[bisect_right(self.starts, at) - 1]

    def end(self, start: int) -> int:
        """Where the line starting at ``start`` ends (after its line break)."""
        if self.starts is None:
            end = self.text.find("\n", start)
            return self.size if end < 0 else end + 1
        return self.starts[bisect_right(self.starts, start)] if start < self.size else self.size

    def count(self) -> int:
        """How many lines the text has."""
        if self.starts is not None:
            return len(self.starts) - 1
        return self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)

    def numbers(self, starts: Iterable[int]) -> List[int]:
        """The 1-based numbers of the lines starting at ``starts`` (ascending)."""
        if self.starts is not None:
            return [bisect_right(self.starts, s) for s in starts]
        out, line, last = [], 1, 0
        for s in starts:
            line += self.text.count("\n", last, s)
            out.append(line)
            last = s
        return out


def hot_lines(text: str, lines: Lines, machine: Optional[Iterable[str]]) -> Optional[List[int]]:
    """Where the lines of ``text`` that hold a needle start (offsets, ascending); None when there is no telling
    (``machine`` None: a ``--redact-pattern`` may match anything). ``machine``: the lower-case needles of this
    machine's rules (hostname, home, login).

    The needles are looked for in an ASCII copy of the text, each other character a ``?`` (so that an offset
    there is one in ``text`` and lower-casing keeps every length): a line holding such a character goes through
    the rules whatever it holds (``\\u212a`` lower-cases to an ASCII ``k``)."""
    if machine is None:
        return None
    hot: Set[int] = set()
    if text.isascii():
        plain = text
    else:
        plain = text.encode("ascii", "replace").decode("ascii")
        at = plain.find("?")
        while at >= 0:
            if text[at] != "?":
                line = lines.start(at)
                hot.add(line)
                at = lines.end(line) - 1
            at = plain.find("?", at + 1)
    low = plain.lower()
    seen: Dict[str, Tuple[int, int]] = {}

    def found(at: int, end: int, trigger: bool) -> None:
        line = lines.start(at)
        if line in hot:
            return
        if trigger:
            a, b = _word_at(plain, at, end)
            word = plain[a:b]
            kinds = seen.get(word)
            if kinds is None:
                name = word.lstrip("-")
                kinds = seen[word] = (KIND_SECRET, KIND_SECRET) if len(name) > 80 else (
                    name_kind(name), sequence_kind(name))
            if not _may_assign(plain, a, b, kinds, line):
                return
        hot.add(line)

    def blank(at: int, end: int) -> None:  # a trigger word, then a word after blanks: only on a .netrc line
        if _NETRC_LINE.match(plain, lines.start(at)):
            found(at, end, True)

    rare, common = _needles(sorted(set(machine)))
    for rx in rare:
        for m in rx.finditer(low):
            group = m.lastgroup
            if group is None:
                found(m.start(), m.end(), False)
            elif group[0] == "s":
                found(m.start(), m.end(), True)
            else:
                blank(m.start(), m.end())
    for finder, members in common:
        for k, at in _occurrences(low, finder, [back for _n, back, _a, _k in members]):
            needle, _back, after, kind = members[k]
            end = at + len(needle)
            if after is None or after.match(low, end):
                found(at, end, bool(kind))
            elif kind == _WORD and _BLANK_RE.match(low, end):
                blank(at, end)
    for m in _CASED_RE.finditer(plain):
        found(m.start(), m.start(), False)
    # A file whose values run to the end of their line, or on below (``.env``, ``.netrc``, ``.pgpass``): each
    # of its lines goes through the rules. Every header holds the needle "diff --git ".
    headers = sorted(s for s in hot if text.startswith("diff --git ", s))
    for k, s in enumerate(headers):
        if file_mode(text[s:lines.end(s)].rstrip("\r\n")) in LINE_MODES:
            stop = headers[k + 1] if k + 1 < len(headers) else len(text)
            while s < stop:
                hot.add(s)
                s = lines.end(s)
    return sorted(hot)


_HEADER = b"\ndiff --git "


class Stream:
    """A patch redacted as git prints it (:meth:`feed`, given to ``proc.run``'s ``on_stdout``): each run of whole
    files (up to the last ``diff --git `` header seen) is decoded, its hot lines found (:func:`hot_lines`) and
    redacted (``redact``: ``(text, hot) -> (text, changed lines)``, ``Redactor.lines`` of a part) while git writes
    the next, so that the work overlaps git's diff instead of following it, and no pass over the whole patch
    follows git. Each file's lines are hot or not by what the file holds, and what a file leaves open ends with it
    (patches.redact_lines), so the runs redacted are the whole patch redacted; an ASCII header between two runs is
    never inside a UTF-8 character, so their texts joined are the whole one's. A run nothing changed is the very
    text decoded, whose bytes are git's own (git_patch hashes them as they are)."""

    def __init__(self, machine: Iterable[str], redact: Callable[[str, List[int]], Tuple[str, List[int]]]) -> None:
        self.machine = list(machine)
        self._redact = redact
        self._runs: List[Tuple[int, str, str]] = []  # each run's bytes, its text, that redacted
        self._changed: List[int] = []  # the changed lines' numbers
        self._lines = 0  # the lines scanned
        self.size = 0  # bytes fed
        self._tail = bytearray()  # fed, not yet scanned: the file still being printed
        self.failed = False

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.failed:
            return
        seen = len(self._tail)
        self._tail += chunk
        cut = self._tail.rfind(_HEADER, max(seen - len(_HEADER), 0))
        if cut >= 0:
            with memoryview(self._tail) as view, view[:cut + 1] as done:
                self._scan(done)  # decoded in place: no copy of the file's bytes
            del self._tail[:cut + 1]

    def _scan(self, data: "bytes | bytearray | memoryview") -> None:
        try:
            text = str(data, "utf-8", "surrogateescape")
            lines = Lines(text)
            new, changed = self._redact(text, hot_lines(text, lines, self.machine) or [])
        except Exception:  # the patch pass reads the whole text itself
            self.failed = True
            return
        self._changed += [self._lines + n for n in changed]
        self._lines += lines.count()
        self._runs.append((len(data), text, new))

    def redacted(self, body: bytes) -> Optional[Tuple[List[Tuple[int, str, str]], List[int], int]]:
        """The runs of files (how many bytes of ``body``, their text, that redacted), the 1-based numbers of the
        lines that changed and how many lines there are, when ``body`` is what was fed; else None."""
        if self.failed or self.size != len(body):
            return None
        if self._tail:
            self._scan(self._tail)
            self._tail = bytearray()
        return None if self.failed else (self._runs, self._changed, self._lines)
