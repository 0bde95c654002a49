"""The Redactor: one document's rules and counts, and the pass over strings, command lines and structures.

Every string goes through :meth:`Redactor.text`; the rules run in the order :meth:`Redactor.scan` lists them, each
from the module of its concern (names, shapes, urls, tools, assignments, addresses); :meth:`Redactor.value` walks
a structure, :meth:`Redactor.argv` a command line, :meth:`Redactor.lines` a patch (patches.py).
"""

from __future__ import annotations

import re

from ...std.lazy_re import LazyPattern
from .addresses import (
    COMMON_NAMES,
    INTERNAL_NAME_RE,
    IPV4_RE,
    IPV6_ULA_RE,
    LOOPBACK,
    address_value,
    private_v4,
    url_host,
)
from .assignments import TRIGGER_LOW_RE, mask_assignments, mask_pgpass, mask_sequences
from .names import (
    KIND_ADDRESS,
    KIND_NONE,
    KIND_SECRET,
    KIND_URL,
    KIND_USER,
    KIND_WEAK,
    flag_kind,
    is_inert,
    is_path,
    looks_credential,
    name_kind,
)
from .patches import redact_lines
from .placeholders import (
    HOME,
    INTERNAL_ADDRESS,
    INTERNAL_HOST,
    KNOWN_PLACEHOLDERS,
    MASK,
    PRIVATE_KEY,
    REDACTED,
    USER,
    mask,
    name_mask,
)
from .prefilter import Lines, anchored
from .shapes import PEM_RE, SHAPE_RE, SLACK_HOOK_RE
from .tools import TOOL_HINTS, argv_options, mask_commands
from .urls import AUTH_RE, BEARER_RE, URL_CRED_RE, URL_TOKEN_USER_RE

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Optional, Pattern, Sequence, Tuple

_PASSWORDISH_RE = LazyPattern(r"[^A-Za-z_.\s-]")
# A call: a dotted name, its first part without a digit (``Tr0ub4dor(3`` reads as a password), then ``(``.
_CALL_RE = LazyPattern(r"[A-Za-z_]+(?:\.[A-Za-z_]\w*)*\(")


class Redactor:
    """Holds the rules for one document; ``counts`` says how often each rule fired."""

    def __init__(
        self,
        *,
        home: Optional[str] = None,
        hostname: Optional[str] = None,
        user: Optional[str] = None,
        extra_patterns: Iterable[str] = (),
        keep_paths: bool = False,
    ) -> None:
        self.home = (home or "").rstrip("/") or None
        self.hostname = hostname
        self.user = user
        self.keep_paths = keep_paths
        self.extra: List[Pattern[str]] = compile_patterns(extra_patterns)
        self.counts: Dict[str, int] = {}
        self._clean: set = set()
        self._fired = 0
        self._secrets: set = set()  # the values masked by their name: hidden wherever else they appear too
        self._numbers: set = set()  # those of them that are all digits
        self._patches: List[str] = []  # the patches lines() gave back: their lines are redacted already
        self._scrubbed: Dict[int, Tuple[str, List[int]]] = {}  # a long text scrub changed: the lines it changed
        home_alts = [r"/lustre/home/[^/\s\"'<>:;,)\]}]+", r"/home/[^/\s\"'<>:;,)\]}]+",
                     r"/Users/[^/\s\"'<>:;,)\]}]+", r"/root"]
        if self.home and self.home.count("/") >= 1 and len(self.home) > 1:
            home_alts.insert(0, re.escape(self.home))
        self._home_re = re.compile(r"(?<![\w.-])(?:%s)(?![\w.-])" % "|".join(home_alts))
        self._home_probe = tuple(p for p in ("/home/", "/Users/", "/root", self.home) if p)
        short = (hostname or "").split(".")[0]
        names = sorted({h.lower() for h in (hostname, short) if h and len(h) > 2 and h.lower() not in LOOPBACK
                        and h.lower() not in COMMON_NAMES}, key=len, reverse=True)
        self._host_names = tuple(names)
        self._host_re = (re.compile(r"(?i)(?<![\w-])(?:%s)(?![\w-])" % "|".join(map(re.escape, names)))
                         if names else None)
        u = (user or "").strip()
        self._user = u if len(u) >= 3 and u.lower() not in COMMON_NAMES else None
        self._user_re = re.compile(r"(?<![\w.-])%s(?![\w-])" % re.escape(self._user)) if self._user else None

    def remember(self, value: str) -> None:
        """Note a value masked by its name, so that ``scrub`` hides its copies that no name points at
        (``config.resolved_args`` parsed from ``sshpass -p PW``: ``{"p": PW}``)."""
        v = value.strip().strip("\"'")
        # Only what reads as a password (a digit or a symbol, not all digits): an identifier such as
        # "service_account" under a "credentials" object must not be masked everywhere else. Nor a call in code
        # ("password = getpass.getpass(...)", "_re = re.compile(r"...", "key = jax.random.PRNGKey(0)"): the
        # secret, if any, is what it returns at run time; its text is code, and its copies are more code (the
        # standard library's 3.5 MB had 41 lines of "re.compile(r" masked for one such name), each a pass
        # over every patch.
        if 6 <= len(v) <= 512 and not v.isdigit() and _PASSWORDISH_RE.search(v) and "://" not in v \
                and not is_path(v) and not is_inert(v) and not _CALL_RE.match(v) and len(self._secrets) < 1000:
            self._secrets.add(v)
        elif 6 <= len(v) <= 64 and v.isdigit() and len(self._numbers) < 1000:
            # A PIN-like password ('sshpass -p 48151623'): its parsed copy is the number 48151623, and the text
            # 'p48151623' a flag's name; digits next to it make another number, not a copy.
            self._numbers.add(v)

    def scrub(self, obj: Any) -> Any:
        """``obj`` with every copy of a remembered secret masked, dict keys included."""
        if not self._secrets and not self._numbers:
            return obj
        alts = [re.escape(v) for v in sorted(self._secrets, key=len, reverse=True)]
        alts += [r"(?<!\d)%s(?!\d)" % v for v in sorted(self._numbers, key=len, reverse=True)]
        rx = re.compile("|".join(alts))
        numbers = {int(v) for v in self._numbers}

        def walk(o: Any) -> Any:
            if isinstance(o, str):
                if len(o) <= 4096:
                    new, n = rx.subn(MASK, o)
                else:
                    new, n, lines = _scrub_lines(rx, o, self._secrets | self._numbers)
                    if n and len(self._scrubbed) < 64:
                        self._scrubbed[id(new)] = (new, lines)
                if n:
                    self.count("secret-name", n)
                return new
            if type(o) is int and o in numbers:
                self.count("secret-name")
                return MASK
            if isinstance(o, dict):
                out: Dict[Any, Any] = {}
                for k, v in o.items():
                    k = walk(k)
                    while isinstance(k, str) and k in out:  # two keys masked to the same text: keep both
                        k += "#"
                    out[k] = walk(v)
                return out
            if isinstance(o, list):
                return [walk(v) for v in o]
            return o

        return walk(obj)

    def scrubbed_lines(self, before: str, after: str) -> List[int]:
        """The 1-based numbers of the lines of ``before`` that :meth:`scrub` changed into ``after``."""
        known = self._scrubbed.get(id(after))
        if known is not None and known[0] is after:
            return known[1]
        return [i + 1 for i, (a, b) in enumerate(zip(before.splitlines(), after.splitlines())) if a != b]

    def count(self, rule: str, n: int = 1) -> None:
        """Note that ``rule`` fired ``n`` times."""
        self.counts[rule] = self.counts.get(rule, 0) + n
        self._fired += n

    # -- strings ----------------------------------------------------------------------------------
    def text(self, value: str, key: Optional[str] = None) -> str:
        """Redact one string. ``key`` is the name it stands under (a dict key or a flag), if any."""
        if not isinstance(value, str):
            return value
        if self._patches and self._owned(value) and not (key and name_kind(key)):
            # A patch this Redactor gave back from lines() (the git probe's, met again in the document
            # pass): its lines are redacted, by rules a pass over it as one string would only repeat.
            return value
        try:
            if key:
                kind = name_kind(key)
                if kind:
                    value, done = self.judge(kind, value)
                    if done:
                        return value
            return self.scan(value)
        except Exception:  # never let one odd string abort the manifest
            self.count("error")
            return REDACTED

    def judge(self, kind: int, value: str, rule: str = "secret-name", chase: bool = True) -> Tuple[str, bool]:
        """Apply what a name says about its value; ``done`` when nothing more is left to scan. ``chase``: a value
        masked here is remembered, so that :meth:`scrub` masks its copies elsewhere; False for one that is no
        text a copy could repeat (an expression in code, see :func:`~.assignments.mask_assignments`)."""
        if is_inert(value):
            return value, False  # still scanned: ${TOKEN:-<a real token>} must not pass by its name
        if kind == KIND_SECRET:
            if is_path(value):
                return value, False
            self.count(rule)
            if chase:
                self.remember(value)
            return name_mask(value), True
        if kind == KIND_WEAK:
            if looks_credential(value):
                self.count(rule)
                if chase:
                    self.remember(value)
                return name_mask(value), True
            return value, False
        if kind == KIND_USER:
            user, colon, pw = value.partition(":")
            if pw == MASK and user in (USER, "root"):
                return value, True
            if colon and pw and not pw.isdigit() and not is_inert(pw):  # --user bob:PW (uid:gid stays)
                self.count(rule)
                if chase:
                    self.remember(pw)
                if user != "root":
                    self.count("user-name")
                return (user if user == "root" else USER) + ":" + MASK, True
            if value.lower() in ("root",):
                return value, True
            self.count("user-name")
            return USER, True
        if kind == KIND_ADDRESS:
            return self._address(value), False
        if kind == KIND_URL:
            return self._url_host(value), False
        return value, False

    def scan(self, s: str, mode: Optional[str] = None) -> str:
        """Run every rule over ``s``. ``mode``: how the file holding ``s`` writes its values (see
        :func:`~.assignments.file_mode`); None when unknown."""
        if (s in self._clean and mode is None) or (len(s) < 3 and not self.extra):
            return s
        original = s
        before = self._fired
        s = self._rules(s, mode)
        # Strings that went through untouched are remembered: assemble.build and writer.write pass the
        # same document through the same Redactor, and most strings (versions, names) repeat.
        if s == original and self._fired == before and len(self._clean) < 50000 and mode is None:
            self._clean.add(s)
        return s

    def _rules(self, s: str, mode: Optional[str] = None) -> str:
        for pat in self.extra:
            s = pat.sub(self._user_pattern_sub, s)
        if "PRIVATE KEY" in s:
            s, n = PEM_RE.subn(PRIVATE_KEY, s)
            if n:
                self.count("private-key", n)
        if "://" in s and "@" in s:
            s, n = URL_CRED_RE.subn(r"\1" + MASK + "@", s)
            if n:
                self.count("url-credentials", n)
            s = URL_TOKEN_USER_RE.sub(self._url_token_user_sub, s)
        low = s.lower()
        if "uthorization" in low:
            s = AUTH_RE.sub(self._auth_sub, s)
        if "bearer" in low:
            s = BEARER_RE.sub(self._bearer_sub, s)
        if len(s) >= 20:
            s = SHAPE_RE.sub(self._shape_sub, s)
            if "hooks.slack.com" in s:
                s, n = SLACK_HOOK_RE.subn(r"\1" + MASK, s)
                if n:
                    self.count("secret-shape", n)
        tools = (" -" in s or "\n-" in s or "\t-" in s or " login" in s) and any(map(s.__contains__, TOOL_HINTS))
        if tools:
            s = mask_commands(self, s)
        if mode == "pgpass":
            s = mask_pgpass(self, s)
        if ("=" in s or ":" in s or " " in s or "\t" in s) and TRIGGER_LOW_RE.search(low):
            masked = mask_assignments(self, s, mode)
            if tools and masked != s:  # a value masked whole may take an open quote that hid an option
                masked = mask_commands(self, masked)
            s = mask_sequences(self, masked) if "\n" in masked and "-" in masked else masked
        if s.count(".") >= 3:
            s = IPV4_RE.sub(self._ipv4_sub, s)
        if ":" in s and ("fc" in low or "fd" in low):
            s, n = IPV6_ULA_RE.subn(INTERNAL_ADDRESS, s)
            if n:
                self.count("internal-address", n)
        if ".int" in low or ".lan" in low or ".loc" in low or ".corp" in low:  # cheaper than a search
            s, n = INTERNAL_NAME_RE.subn(INTERNAL_HOST, s)
            if n:
                self.count("internal-host", n)
        if self._host_re is not None and self._host_names[-1] in low:
            s, n = self._host_re.subn(INTERNAL_HOST, s)
            if n:
                self.count("hostname", n)
        if not self.keep_paths:
            if "/" in s and any(p in s for p in self._home_probe):
                s, n = self._home_re.subn(HOME, s)
                if n:
                    self.count("home-path", n)
            if self._user_re is not None and self._user in s:
                s, n = self._user_re.subn(USER, s)
                if n:
                    self.count("user-name", n)
        return s

    # -- substitution callbacks ---------------------------------------------------------------------
    def _user_pattern_sub(self, m: "re.Match[str]") -> str:
        found = m.group(0)
        if not found or any(found in p for p in KNOWN_PLACEHOLDERS):
            return found  # keeps a pattern like 'redacted' from nesting <<redacted>> on a second pass
        self.count("user-pattern")
        return REDACTED

    def _url_token_user_sub(self, m: "re.Match[str]") -> str:
        # https://<token>@github.com: a long user part with no password is the token itself.
        if not looks_credential(m.group(2)):
            return m.group(0)
        self.count("url-credentials")
        return m.group(1) + MASK + "@"

    def _auth_sub(self, m: "re.Match[str]") -> str:
        token = m.group(3)
        if is_inert(token):
            return m.group(0)
        self.count("authorization")
        return m.group(1) + ((m.group(2) + " ") if m.group(2) else "") + MASK

    def _bearer_sub(self, m: "re.Match[str]") -> str:
        self.count("authorization")
        return m.group(1) + m.group(2) + MASK

    def _shape_sub(self, m: "re.Match[str]") -> str:
        self.count("secret-shape")
        return mask(m.group(0))

    def _ipv4_sub(self, m: "re.Match[str]") -> str:
        parts = [int(g) for g in m.groups()]
        if max(parts) > 255 or not private_v4(parts[0], parts[1]):
            return m.group(0)
        self.count("internal-address")
        return INTERNAL_ADDRESS

    def _address(self, value: str) -> str:
        new, verdict = address_value(value, self._host_names)
        if verdict is not None:
            self.count("internal-address" if verdict == INTERNAL_ADDRESS else "internal-host")
        return new

    def _url_host(self, value: str) -> str:
        new, verdict = url_host(value, self._host_names)
        if verdict is not None:
            self.count("internal-address" if verdict == INTERNAL_ADDRESS else "internal-host")
        return new

    # -- structures ---------------------------------------------------------------------------------
    def argv(self, args: Sequence[str]) -> List[str]:
        """Redact a command line: ``--k=v`` and ``--k v`` by the flag's name, a client tool's password options
        (``mysql -pPW``, ``curl -u user:PW``), every word by shape."""
        out: List[str] = []
        prev_kind = KIND_NONE
        tools = argv_options(self, args) if "login" in args or any(
            isinstance(a, str) and a[:1] == "-" for a in args) else {}
        for i, a in enumerate(args):
            if not isinstance(a, str):
                out.append(self.value(a))
                prev_kind = KIND_NONE
                continue
            if i in tools:
                out.append(self.text(tools[i]))
            elif prev_kind and not a.startswith("-"):
                new, done = self._judge_safe(prev_kind, a)
                out.append(new if done else self.text(new))
            elif a[:1] == "-" and "=" in a and name_kind(a.split("=", 1)[0].lstrip("-")) in (KIND_SECRET, KIND_WEAK):
                name, value = a.split("=", 1)  # one word: '--password=a b&c' holds the whole of 'a b&c'
                new, done = self._judge_safe(name_kind(name.lstrip("-")), value)
                out.append(name + "=" + (new if done else self.text(new)))
            else:
                out.append(self.text(a))
            prev_kind = flag_kind(a)
        return out

    def _number(self, obj: Any, key: Optional[str], secret: bool) -> Any:
        """A number judged by its name as its text would be: ``--password 48151623`` on a command line and
        ``"password": 48151623`` in its parsed copy are the same secret; ``"key": 42`` stays (a vague name
        masks only what looks like a credential, and no number does)."""
        if secret:
            self.count("secret-name")
            return MASK
        kind = name_kind(key) if key else KIND_NONE
        if kind not in (KIND_SECRET, KIND_WEAK):
            return obj
        new, done = self._judge_safe(kind, str(obj))
        return new if done else obj

    def _judge_safe(self, kind: int, value: str) -> Tuple[str, bool]:
        try:
            return self.judge(kind, value)
        except Exception:
            self.count("error")
            return REDACTED, True

    def needles(self) -> Optional[List[str]]:
        """What this machine's own rules look for, lower-cased (its hostname, homes, login), for the patch pass's
        prefilter (prefilter.py); None when a ``--redact-pattern`` may match anything, so that every line is read."""
        if self.extra:
            return None
        found = list(self._home_probe) + list(self._host_names[-1:])
        if self._user:
            found.append(self._user)
        return [p.lower() for p in found]

    def lines(self, text: str, hot: Optional[List[int]] = None, part: bool = False) -> Tuple[str, List[int]]:
        """Redact a patch line by line.

        Returns the text and the 1-based numbers of the lines that changed; the line count is kept, so
        a patch stays a patch. A PEM private key spanning lines is masked on every line it covers, so is a
        secret's YAML block scalar (``password: |``); a command continued with backslashes is read whole;
        each file's values are read as its kind writes them (``.env``, ``.netrc``, ``.pgpass``). ``hot``: where
        the lines that hold what a rule looks for start, when already found for :meth:`needles`
        (:class:`~.prefilter.Stream`). ``part``: ``text`` is a run of a patch's files (each file's state ends with
        it); the patch they make is given to :meth:`own` whole.
        """
        out, changed = redact_lines(self, text, hot)
        if not part:
            self.own(out)
        return out, changed

    def own(self, patch: str) -> None:
        """Note ``patch`` as one this Redactor redacted line by line (:meth:`lines`): met again in the document
        pass, it is kept as it is."""
        if isinstance(patch, str) and len(self._patches) < 64:
            self._patches.append(patch)

    def _owned(self, value: str) -> bool:
        """Whether ``value`` is one of the patches :meth:`own` noted: the same text, found by identity first (a
        set would hash megabytes of it), else by length and content (a document read back)."""
        return any(value is p for p in self._patches) or any(
            len(value) == len(p) and value == p for p in self._patches)

    def value(self, obj: Any, key: Optional[str] = None) -> Any:
        """Redact every string inside ``obj`` (keys included), recursively. Never raises."""
        return self._value(obj, key, set(), False)

    def _value(self, obj: Any, key: Optional[str], seen: set, secret: bool) -> Any:
        if isinstance(obj, str):
            if secret and not is_inert(obj):  # everything under "credentials": {...}
                self.count("secret-name")
                self.remember(obj)
                return name_mask(obj)
            return self.text(obj, key)
        if obj is None or isinstance(obj, bool):
            return obj
        if isinstance(obj, (int, float)):
            return self._number(obj, key, secret)
        if id(obj) in seen:
            return "<recursive>"
        try:
            if isinstance(obj, dict):
                seen.add(id(obj))
                out: Dict[Any, Any] = {}
                for k, v in obj.items():
                    skey = k if isinstance(k, str) else None
                    nk: Any = self.text(k) if skey is not None else k
                    if nk in out:  # two keys redacted to the same text: keep both
                        n = 2
                        while "%s#%d" % (nk, n) in out:
                            n += 1
                        nk = "%s#%d" % (nk, n)
                    if isinstance(v, str) and not secret:
                        out[nk] = self.text(v, skey)  # the common case, without another call level
                        continue
                    # A string under a secret key is judged by text(v, k) (paths and flags survive);
                    # everything below a secret key that holds a structure is masked.
                    child_secret = secret or (skey is not None and name_kind(skey) == KIND_SECRET)
                    out[nk] = self._value(v, skey, seen, secret or (child_secret and not isinstance(v, str)))
                seen.discard(id(obj))
                return out
            if isinstance(obj, (list, tuple)):
                seen.add(id(obj))
                if not secret and all(isinstance(a, str) for a in obj):
                    res: List[Any] = self.argv(obj) if key is None or not name_kind(key) else [
                        self.text(a, key) for a in obj]
                else:
                    res = [self._value(a, key, seen, secret) for a in obj]
                seen.discard(id(obj))
                return res
            if isinstance(obj, (set, frozenset)):
                return self._value(sorted(obj, key=repr), key, seen, secret)
            if isinstance(obj, bytes):
                return self._value(obj.decode("utf-8", "replace"), key, seen, secret)
            # The writer would str() it; redact that text now so nothing slips through unseen.
            return self._value(str(obj), key, seen, secret)
        except RecursionError:
            self.count("error")
            return REDACTED
        except Exception:
            self.count("error")
            return REDACTED


_FIND_MAX = 8
"""Up to this many remembered values, each is looked for with ``str.find`` (~0.5 ns a character); beyond, a
scan per character they are anchored on (each one's rarest) finds them all (prefilter.py's expressions)."""


def _scrub_lines(rx: Pattern[str], text: str, values: Iterable[str]) -> Tuple[str, int, List[int]]:
    """``rx.subn(MASK, text)`` for a text of megabytes (a patch), and the 1-based numbers of the lines it changed:
    the pattern runs only over the lines that hold one of ``values`` (its own pass costs ~100 ns a character)."""
    values = sorted(values)
    if any("\n" in v for v in values):
        new, n = rx.subn(MASK, text)
        return new, n, [i + 1 for i, (a, b) in enumerate(zip(text.splitlines(), new.splitlines())) if a != b]
    starts = set()
    if len(values) > _FIND_MAX:
        for branch in anchored(values):
            for m in re.finditer(branch, text):
                starts.add(text.rfind("\n", 0, m.start()) + 1)
    else:
        for v in values:
            at = text.find(v)
            while at >= 0:  # a line holding it, then on from the next line
                starts.add(text.rfind("\n", 0, at) + 1)
                at = text.find("\n", at + len(v))
                at = -1 if at < 0 else text.find(v, at + 1)
    out: List[str] = []
    changed: List[int] = []
    last = count = 0
    for a in sorted(starts):
        b = text.find("\n", a)
        b = len(text) if b < 0 else b
        new, n = rx.subn(MASK, text[a:b])
        if n:
            out += [text[last:a], new]
            last, count = b, count + n
            changed.append(a)
    if not count:
        return text, 0, []
    return "".join(out + [text[last:]]), count, Lines(text).numbers(changed)


def compile_patterns(patterns: Iterable[str]) -> List[Pattern[str]]:
    """Compile ``--redact-pattern`` expressions; ValueError names the bad one and why."""
    out = []
    for p in patterns or ():
        try:
            rx = re.compile(p)
        except (re.error, TypeError) as exc:
            raise ValueError("--redact-pattern %r: not a valid regular expression: %s" % (p, exc)) from None
        if rx.fullmatch("") is not None or rx.search("") is not None:
            raise ValueError("--redact-pattern %r: matches the empty string, so it would match everywhere" % p)
        out.append(rx)
    return out
