"""The redaction pass: a pure function over the finished document, applied before any write or print.

A manifest is meant to be pasted into a ticket, so every string in it (dict keys included) goes
through :class:`Redactor` just before it is written or printed. Rules, in the order they run:

- by name: values of keys and flags whose name says secret (``HF_TOKEN``, ``--wandb-key X``,
  ``api_key: X`` inside config text or a patch, a service account's ``private_key_id``) are masked whole,
  whatever they hold, to the end of their word or line or their closing quote;
- client tools' password options (``curl -u user:X``, ``mysql -pX``, ``sshpass -p X``...), in text (lines
  continued with a backslash too) and in argv; any other copy of a value masked by name is masked as well;
- by shape: token formats listed in the project's SECRETS.md brief (GitHub, GitLab, HF, OpenAI, Anthropic, AWS,
  Google, Azure, Slack, JWT, npm, PyPI, Databricks, Perplexity, W&B v1, PEM private keys) anywhere;
- URLs and headers: ``user:password@`` after a URL scheme (also with an empty user), token query parameters,
  ``Authorization: ...`` and bare ``Bearer ...``;
- infrastructure: values of address-bearing keys (``MASTER_ADDR``, ``ray_address``, ``nodelist``...)
  that are neither loopback nor a public domain, private/CGNAT/link-local IPv4 and IPv6 ULA
  addresses, ``*.internal|corp|local|lan|intranet`` names, this machine's hostname, home directories
  and the user name where it stands alone.

The pass is idempotent (its placeholders and masks never match a rule again) and never raises: a
string that trips an unexpected error becomes ``<redacted>``, it never aborts the manifest.
"""

from __future__ import annotations

import os
import re

from ..std.lazy_re import LazyPattern
from .fields import HOME_PLACEHOLDERS, PLACEHOLDERS

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Pattern, Sequence, Tuple

HOME = "<HOME>"
INTERNAL_HOST = "<internal-host>"
INTERNAL_ADDRESS = "<internal-address>"
USER = "<user>"
REDACTED = "<redacted>"
PRIVATE_KEY = "<private-key>"
MASK = "***"

RULES = (
    "secret-name", "secret-shape", "private-key", "url-credentials", "url-token", "authorization",
    "internal-address", "internal-host", "hostname", "home-path", "user-name", "user-pattern", "error",
)
"""Every rule name that can appear under ``collection.redactions``."""

_PLACEHOLDERS = PLACEHOLDERS
"""Ours and Relax's (fields.PLACEHOLDERS, the one list): a value already redacted by either tool stays as it is."""


def machine_hostname() -> Optional[str]:
    """``socket.gethostname()`` without importing ``socket`` (~3.5 ms with ``selectors``): on Linux and
    macOS gethostname(2) is ``uname().nodename``."""
    try:
        return os.uname().nodename
    except AttributeError:  # no os.uname (Windows)
        pass
    import socket

    try:
        return socket.gethostname()
    except OSError:
        return None


def _login_name() -> Optional[str]:
    """``getpass.getuser()`` without importing ``getpass`` and ``termios``: the login variables, else the
    passwd entry of our uid; None when there is none (containers run as an arbitrary uid)."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import pwd

        return pwd.getpwuid(os.getuid())[0]
    except Exception:  # KeyError: no passwd entry; ImportError/AttributeError: not POSIX
        return None


# -- names ------------------------------------------------------------------------------------

_NONE, _SECRET, _WEAK, _ADDRESS, _URL, _USER = range(6)

# Words that, as the last word of a name, make it a name *about* a secret rather than one holding it:
# ``password_file``, ``secret_name``, ``auth_type``, ``key_column``, ``tokenizer_path``.
_BENIGN_LAST = frozenset(
    "path paths file files dir dirs directory name names type types kind column columns col cols field fields "
    "length len size count limit limits id ids env var vars mode method scheme format fmt provider location "
    "prefix suffix enabled enable disable disabled required ttl expiry expires expiration timeout version "
    "algorithm alg index idx strategy policy backend style template header headers rotation source sources "
    "command cmd helper store manager mapping map config cfg set list num max min budget stdin database db "
    "mechanism realm".split())

# Qualifiers that make ``<x>_key`` a credential (``--openai-key``, ``AccountKey``); a bare ``key`` or
# ``text_key: text`` (dataset column mapping in every HF config) is only masked when its value looks
# like a credential.
_KEY_QUALIFIERS = frozenset(
    "api access secret private ssh signing encryption encrypt account master wandb openai hf huggingface "
    "anthropic comet neptune kaggle aws gcp gcs google azure license licence client auth session service deploy "
    "storage github gitlab slack pypi npm databricks pplx perplexity together cohere mistral groq replicate "
    "pinecone mongo redis db database app bot webhook shared sas subscription consumer user admin".split())

# Tokenizer vocabulary, not credentials: ``eos_token: "</s>"``, ``pad_token``.
_SPECIAL_TOKEN_WORDS = frozenset(
    "pad eos bos unk sep cls mask start end special additional chat image audio video sot eot eod bot eom "
    "stop decoder begin boundary placeholder".split())

_STRONG_WORDS = frozenset(
    "password passwd passphrase pass pwd secret secrets credential credentials creds cred cookie cookies "
    "apikey authorization bearer privatekey secretkey accesskey sig signature sas dsn sshpass".split())
_NOT_PWD = frozenset(("pwd", "oldpwd"))  # PWD is the shell's working directory, not a password

_ADDRESS_LAST = frozenset("addr address ip ipaddr host hostname hosts nodelist nodename".split())
_NOT_ADDRESS = frozenset("mac email mail e web ether hw bluetooth wallet".split())
_URL_LAST = frozenset("url uri endpoint urls uris".split())
_USER_NAMES = frozenset("user username logname login".split())

_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_kind_cache: Dict[str, int] = {}


def _words(name: str) -> List[str]:
    return [w.lower() for w in _WORD_RE.findall(name)]


def name_kind(name: str) -> int:
    """Classify a key or flag name: none, secret, weak secret (``*_key``), address, URL or user."""
    kind = _kind_cache.get(name)
    if kind is None:
        kind = _classify(name)
        if len(_kind_cache) < 4096:
            _kind_cache[name] = kind
    return kind


def _classify(name: str) -> int:
    words = _words(name)
    if not words or len(name) > 80:
        return _NONE
    last = words[-1]
    joined = "".join(words)
    if joined in _NOT_PWD:
        return _NONE
    if joined in ("slurmjobuser", "user", "username", "logname", "sudouser", "pbsologname") or (
            last in _USER_NAMES and len(words) <= 3):
        return _USER
    if words[-3:-1] in (["private", "key"], ["access", "key"]) and last == "id":
        return _SECRET  # a service account's private_key_id: an id that only its owner should hold
    if last in _URL_LAST and not _NOT_ADDRESS.intersection(words):
        return _URL  # token_uri, auth_provider_x509_cert_url: where to ask, not what to show
    if last in _BENIGN_LAST:
        if len(words) >= 2 and words[-2] == "host" and last == "name":  # host_name
            return _ADDRESS
        if len(words) >= 2 and words[-2] == "node" and last in ("name", "list"):  # NodeName, node_list
            return _ADDRESS
        return _NONE
    for w in words:
        if w == "pass" and w != last:
            continue  # DB_PASS and --pass are passwords; pass@1 / pass_at_k are eval metrics
        if w in _STRONG_WORDS or (w.startswith("pass") and w[4:] in ("word", "wd", "phrase", "words")):
            return _SECRET
        if w.startswith("auth") and not w.startswith("author"):  # auth, authtoken, oauth below
            return _SECRET
        if w.endswith("token") or w == "oauth":  # hf_token, HFTOKEN; not tokens / tokenizer
            if len(words) >= 2 and words[-1] == "token" and words[-2] in _SPECIAL_TOKEN_WORDS:
                return _NONE
            return _SECRET
        if w.endswith(("password", "passwd", "secret", "apikey", "accesskey", "secretkey", "privatekey", "storepass",
                       "keypass")):
            return _SECRET
    if last in ("key", "keys"):
        if len(words) >= 2 and words[-2] in _KEY_QUALIFIERS:
            return _SECRET
        return _WEAK
    if not _NOT_ADDRESS.intersection(words):
        if last in _ADDRESS_LAST:
            return _ADDRESS
        if joined.endswith(("nodelist", "hostname", "nodename", "ipaddr", "masteraddr")):
            return _ADDRESS
    return _NONE


_BENIGN_VALUES = frozenset(
    "true false yes no none null nil auto local required optional on off env file prompt bearer basic token "
    "digest default unset disabled enabled".split())
_MASKED_RE = re.compile(r"[^\s*]{0,4}\*\*\*")
_REFERENCE_RE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}?|%\([A-Za-z_]\w*\)s|\{\{[^{}]*\}\}")


def _is_inert(value: str) -> bool:
    """A value that holds nothing to hide: empty, a flag word, a placeholder, a mask, an env reference."""
    v = value.strip().strip("\"'")
    if not v or v.lower() in _BENIGN_VALUES:
        return True
    if v[0] == "<" and v[-1] == ">" and len(v) < 40:  # <HOME>, <redacted>, tokenizer <pad>
        return True
    if _REFERENCE_RE.fullmatch(v) or _MASKED_RE.fullmatch(v):  # ${WANDB_API_KEY}, $HF_TOKEN, %(pw)s: a reference
        return True
    return " " in v and all(map(_is_inert, v.split()))  # "Bearer ***", "${A} ${B}"


_HOME_DIRS = tuple(mark + "/" for mark in HOME_PLACEHOLDERS)


def _is_path(value: str) -> bool:
    # ``--ssh-key ~/.ssh/id_ed25519``, ``credentials: /etc/creds.json``: where a secret lives, not the secret.
    return " " not in value and value.startswith(("/", "~/", "./", "../") + _HOME_DIRS) and "://" not in value


def _looks_credential(value: str) -> bool:
    """Long, unspaced, letters and digits: how a key looks when only a vague name points at it."""
    if len(value) < 16 or any(c.isspace() for c in value) or _is_path(value) or "://" in value:
        return False
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def mask(value: str) -> str:
    """``wandb_v1_...`` -> ``wand***``: at most 4 characters kept, none of a short value."""
    head = value[:4] if len(value) >= 16 else ""
    if any(c.isspace() or c == "*" for c in head):
        head = ""  # a mask must read as a mask on the next pass (idempotence)
    return head + MASK


def _name_mask(value: str) -> str:
    """A value found by its name is masked whole: the name already says which key it was.

    Prefixes are kept only for shapes found in free text (``ghp_***``). Under a name, even a vendor
    prefix (``"api_key": "sk-p***"``) reads to scanners such as detect-secrets' keyword rule as a
    live assignment, and a password's first characters would tell a reader nothing but part of it.
    """
    return MASK


# -- shapes -------------------------------------------------------------------------------------

_SHAPES = [
    r"gh[pousr]_[A-Za-z0-9]{30,255}",
    r"github_pat_[A-Za-z0-9_]{60,255}",
    r"gl(?:pat|dt|rt|cbt|ft|soat|ptt)-[\w-]{20,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"api_org_[A-Za-z0-9]{30,}",
    r"sk-ant-(?:api|admin)\d\d-[\w-]{80,}",
    r"sk-(?:proj|svcacct|admin)-[\w-]{40,}",
    r"sk-[\w-]{0,80}T3BlbkFJ[\w-]{10,}",
    r"sk-[A-Za-z0-9]{32,}",
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{20,}",
    r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
    r"AIza[\w-]{35}",
    r"GOCSPX-[\w-]{20,}",
    r"ya29\.[\w-]{20,}",
    r"1//0[\w-]{30,}",
    r"[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}",
    r"xox[abposr]-[0-9A-Za-z-]{10,}",
    r"eyJ[\w-]{5,}\.eyJ[\w-]{5,}\.[\w-]*",
    r"eyJhcGlfYWRkcmVzcyI6[A-Za-z0-9+/=_-]+",
    r"npm_[A-Za-z0-9]{36}",
    r"pypi-AgEIcHlwaS5vcmc[\w-]{50,}",
    r"dapi[0-9a-f]{32}(?:-\d)?",
    r"pplx-[A-Za-z0-9]{48}",
    r"wandb_v1_[A-Za-z0-9_]{60,}",
    r"local-[0-9a-f]{40,}",
]
# The rules guarded by a substring test below (``PRIVATE KEY``, ``://`` with ``@``, ``uthorization``...)
# rarely run: they compile on first use (~2 ms off every start). The hot ones are compiled here.
_SHAPE_RE = re.compile(r"(?<![A-Za-z0-9])(?:%s)" % "|".join(_SHAPES))
_SLACK_HOOK_RE = LazyPattern(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]{8,}")
_PEM_RE = LazyPattern(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)")

# -- URLs and headers ---------------------------------------------------------------------------

_URL_CRED_RE = LazyPattern(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)[^\s/@:\"'<>]*:[^\s/@\"'<>]+@")
_URL_TOKEN_USER_RE = LazyPattern(r"(?i)\b(https?://)([^\s/@:\"'<>]{20,})@")
_AUTH_RE = LazyPattern(
    r"(?i)\b((?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"(?:(basic|bearer|token|digest|negotiate)[ \t]+)?([^\s\"',;]+)")
_BEARER_RE = LazyPattern(r"(?<![\w-])(Bearer|bearer|BEARER)([ \t]+)([^\s\"',;)}\]<>]{8,})")

# -- name = value inside text ---------------------------------------------------------------------

_TRIGGERS = r"pass|secret|token|cred|auth|key|cookie|sig|sas|dsn|addr|host|ip|node|user|login|url|uri|endpoint|pwd"
_TRIGGER_LOW_RE = re.compile(_TRIGGERS)  # searched in the lower-cased string: faster than (?i)
_VALUE_END = r"\s,;'\"&)}\]<>"
_NOT_FIRST = frozenset(",;&)}]<>|")  # a value that starts so is only a secret's (``PASS=&x``), never an address's
# ``name = value``, ``name: value``, ``"name": "value"``, ``--flag value``. The name must contain a trigger
# word (the lookahead), so prose without one is never consumed. A quote left open runs to the end of the line.
_ASSIGN_RE = LazyPattern(
    r"(?<![\w./-])(?P<name>-{0,2}(?=[\w.-]{0,79}?(?i:%s))[A-Za-z_][\w.-]{0,79}?)(?P<nq>[\"']?)"
    r"(?:(?P<sep>[ \t]*[:=]=?[ \t]*)(?:\"(?P<dq>[^\"\\\n]*(?:\\.[^\"\\\n]*)*)\"?|'(?P<sq>[^'\n]*(?:''[^'\n]*)*)'?"
    r"|(?P<v>[^\s\"'][^%s]*))"
    r"|(?P<sp>[ \t]+)(?:\"(?P<dq2>[^\"\\\n]*(?:\\.[^\"\\\n]*)*)\"?|'(?P<sq2>[^'\n]*)'?|(?P<w>[^\s\"'=:][^%s=:]*)))"
    % (_TRIGGERS, _VALUE_END, _VALUE_END))
_WS_RE = LazyPattern(r"\s")
_CLOSER_RE = LazyPattern(r"[,)\]}]")
_NEXT_PAIR_RE = LazyPattern(r"[;&,][ \t]*[A-Za-z_][\w.-]*=")
_COMMENT_RE = LazyPattern(r"[ \t]#")
_LIST_ITEM_RE = LazyPattern(r"[+ -]?[ \t]*-[ \t]+")  # ``- DB_PASSWORD=x y`` (a compose environment list)
_BLOCK_RE = LazyPattern(r"[|>][1-9+-]{0,2}")  # YAML ``password: |``: the value is on the lines below
_BLOCK_KEY_RE = LazyPattern(r"([ \t]*(?:- )?)[\"']?([\w.-]+)[\"']?[ \t]*:[ \t]*[|>][1-9+-]{0,2}[ \t]*(?:#.*)?")
_NETRC_RE = LazyPattern(r"[+ -]?[ \t]*(?:machine|default)\b")
_PGPASS_RE = LazyPattern(r"(?m)^((?![+ -]?#)[+ -]?(?:(?:[^:\\\n]|\\.)*:){4})(.+)$")


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
    return "=" not in word and ":" not in word and _looks_credential(word)


def _file_mode(header: str) -> Optional[str]:
    """How the values of a patched file are written, from its ``diff --git`` line: ``env`` (``.env``, INI:
    a value runs to the end of its line), ``netrc`` (``password X``), ``pgpass`` (``host:port:db:user:X``)."""
    name = header.rsplit("/", 1)[-1].strip('"').lower()
    if name in (".netrc", "_netrc"):
        return "netrc"
    if name == ".pgpass" or name == "pgpass.conf":
        return "pgpass"
    if name.startswith(".env") or name.endswith((".env", ".ini", ".cfg", ".conf", ".cnf", ".properties")) or (
            name[:1] == "." and name.endswith("rc")):  # .npmrc, .pypirc
        return "env"
    return None


# -- credentials given to client tools as options -------------------------------------------------------

_TOOLS = (r"curl|wget|https?|xhs?|(?:mysql|mariadb)[\w-]*|(?:redis|valkey|keydb)-cli|mongo\w*|sshpass"
          r"|smbclient|rpcclient|lftp|ldap\w+|twine[ \t]+upload"
          r"|(?:docker|podman|nerdctl|buildah|skopeo|oras|az|helm[ \t]+registry|wandb)[ \t]+login"
          r"|zip|unzip|zipcloak|7z[arz]?|(?:un)?rar|ssh-keygen|openssl|keytool|mosquitto_\w+|cqlsh"
          r"|sqlcmd|bcp|vsql|rabbitmqadmin")
_TOOL_RE = LazyPattern(r"(?m)(?:^[+-]?|(?<![\w.+-]))(?P<tool>%s)(?=[ \t]|\\\r?\n)" % _TOOLS)
_TOOL_HINTS = ("curl", "wget", "http", "xh", "mysql", "mariadb", "-cli", "mongo", "sshpass", "smbclient", "rpcclient",
               "lftp", "ldap", "login", "twine", "zip", "7z", "rar", "ssh-keygen", "openssl", "keytool", "mosquitto",
               "cqlsh", "sqlcmd", "bcp", "vsql", "rabbitmqadmin")  # a substring test is ~10x faster than _TOOL_RE
_TOOL_NAME_RE = LazyPattern(r"(?:%s)" % _TOOLS)
# A shell word (quotes kept), or a backslash-newline that continues the command on the next line.
_KEY_WORD_RE = LazyPattern(r"[\w-]+")  # wandb login KEY: a key is one run of word characters
_PASSWORDISH_RE = LazyPattern(r"[^A-Za-z_.\s-]")
_SHELL_WORD_RE = LazyPattern(r"""\\\r?\n|(?:"(?:[^"\\\n]|\\.)*"?|'[^'\n]*'?|\\.|[^\s"'\\])+""")
_SEPARATORS = frozenset(("|", "||", "&&", ";", "&", "|&", ")", ";;", "`"))
_REF_PREFIXES = ("env:", "file:", "fd:", "stdin")  # openssl -passin env:VAR names where the password is

# Per tool, the options whose value is a secret: ``-p`` attached (``-pPW``) or the next word; ``-p=`` attached
# only (``mysql -p`` alone prompts, and the next word is the database); ``-u:`` a ``user:password`` pair (``%``
# and ``,``: smbclient's and lftp's separators). ``!``: options end at the first operand (``sshpass -p PW ssh
# -p 22``); ``*``: an operand that looks like a key (``wandb login KEY``); ``L``: single-dash long options.
_TOOL_OPTIONS = {
    "curl": "-u: --user: -U: --proxy-user: -E: --cert: --proxy-cert: --pass --proxy-pass --oauth2-bearer "
            "--tlspassword --proxy-tlspassword",
    "wget": "--password --http-password --ftp-password --proxy-password",
    "http": "-a: --auth:", "mysql": "-p= --password=", "redis-cli": "-a --pass", "mongo": "-p --password",
    "sshpass": "! -p", "smbclient": "-U% --user% --password", "lftp": "-u,", "ldap": "-w", "zip": "-P --password",
    "login": "-p --password", "7z": "-p=", "ssh-keygen": "-N -P", "openssl": "L -k -pass -passin -passout",
    "keytool": "L -storepass -keypass -srcstorepass -deststorepass -srckeypass -destkeypass",
    "mosquitto": "-P --pw", "cqlsh": "-p --password", "sqlcmd": "-P", "vsql": "-w", "rabbitmqadmin": "-p --password",
    "wandb login": "*",
}
_TOOL_ALIASES = {"https": "http", "xh": "http", "xhs": "http", "valkey-cli": "redis-cli", "keydb-cli": "redis-cli",
                 "rpcclient": "smbclient", "unzip": "zip", "zipcloak": "zip", "7za": "7z", "7zr": "7z", "7zz": "7z",
                 "rar": "7z", "unrar": "7z", "bcp": "sqlcmd", "twine upload": "login"}
_parsed_options: Dict[str, Dict[str, str]] = {}


def _tool_options(tool: str) -> Dict[str, str]:
    """``{option: mode}`` for a tool as written (``/usr/bin/mysqldump``, ``docker  login``)."""
    t = " ".join(tool.split())
    for head, family in (("mysql", "mysql"), ("mariadb", "mysql"), ("mongo", "mongo"), ("ldap", "ldap"),
                         ("mosquitto", "mosquitto")):
        if t.startswith(head):
            t = family
    if t.endswith(" login") and t != "wandb login":
        t = "login"
    t = _TOOL_ALIASES.get(t, t)
    opts = _parsed_options.get(t)
    if opts is None:
        opts = {}
        for o in _TOOL_OPTIONS.get(t, "").split():
            mode = o[-1] if len(o) > 1 and o[-1] in "=:%," else ""
            opts[o[:-1] if mode else o] = mode
        _parsed_options[t] = opts
    return opts


def _secret_span(word: str, a: int, mode: str) -> Optional[Tuple[int, int]]:
    """The part of ``word`` from ``a`` on that is a secret, quotes left out; None for a reference or a user."""
    b = len(word)
    if b - a >= 2 and word[a] in "\"'" and word[b - 1] == word[a]:  # a quote left open goes with the value
        a, b = a + 1, b - 1
    v = word[a:b]
    if not v or _is_inert(v) or v.startswith(_REF_PREFIXES):
        return None
    if mode in (":", "%", ","):
        k = v.find(mode)
        if k < 0:  # a bare user name stays; a key given as the user (httpie -A bearer -a KEY) does not
            return (a, b) if _looks_credential(v) else None
        if k == len(v) - 1:  # curl -u KEY: (Stripe-style: the key is the user, the password empty)
            return (a, a + k) if _looks_credential(v[:k]) else None
        return None if _is_inert(v[k + 1:]) else (a + k + 1, b)
    return a, b


def _option_spans(opts: Dict[str, str], words: Sequence[str]) -> List[Tuple[int, int, int]]:
    """``(word index, start, end)`` of each secret among a tool's arguments ``words``."""
    out: List[Tuple[int, int, int]] = []
    attached = "L" not in opts
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        i += 1
        if len(w) < 2 or w[0] != "-":  # an operand
            if "!" in opts:
                break
            if "*" in opts and _looks_credential(w.strip("\"'")) and _KEY_WORD_RE.fullmatch(w.strip("\"'")):
                out.append((i - 1, 0, len(w)))
            continue
        mode = opts.get(w)
        short = w[1] != "-" and w[1:].isalpha()
        if mode is None and attached and short and len(w) > 2 and opts.get("-" + w[-1], "=") != "=" and \
                w[:2] not in opts:
            mode = opts["-" + w[-1]]  # curl -su user:pw: a cluster of flags, the last one takes the value
        if mode is not None:
            if mode != "=" and i < n and words[i][:1] != "-":
                found = _secret_span(words[i], 0, mode)
                if found:
                    out.append((i,) + found)
                i += 1
            continue
        name, eq, _ = w.partition("=")
        if eq and name in opts:
            found = _secret_span(w, len(name) + 1, opts[name])
        elif attached and w[1] != "-" and len(w) > 2 and w[:2] in opts:
            found = _secret_span(w, 2, opts[w[:2]])  # mysql -pPW, sshpass -pPW
        else:
            continue
        if found:
            out.append((i - 1,) + found)
    return out


_FILE_NAME_RE = LazyPattern(r"(?i)\.(?:ya?ml|json|toml|txt|py|cfg|ini|conf|md|csv|log|sh)$")

# -- infrastructure ---------------------------------------------------------------------------------

_IPV4_RE = re.compile(r"(?<![\w.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?::\d{1,5}(?!\d))?(?!\w|\.\d)")
_IPV6_ULA_RE = LazyPattern(
    r"(?i)(?<![\w:.\[])\[?f[cd][0-9a-f]{0,2}(?::[0-9a-f]{0,4}){2,7}(?![\w:])\]?(?::\d{1,5}(?!\d))?")
_INTERNAL_TLDS = ("internal", "corp", "local", "lan", "intranet")
_INTERNAL_NAME_RE = LazyPattern(
    r"(?i)(?<![\w.-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:%s)(?::\d{1,5}(?!\d))?(?![\w-]|\.\w)"
    % "|".join(_INTERNAL_TLDS))
# Under an address key, Kubernetes service names (ray-head.default.svc) are internal too.
_PRIVATE_SUFFIXES = frozenset(_INTERNAL_TLDS + ("svc", "localdomain", "cluster", "home", "arpa"))
_LOOPBACK = frozenset(("localhost", "ip6-localhost", "ip6-loopback", "::1", "::", "0.0.0.0", "*"))
_ITEM_SPLIT_RE = re.compile(r"[\s,]+")
_URL_HOST_RE = LazyPattern(r"^([a-zA-Z][a-zA-Z0-9+.-]{0,30}://)(?:[^/@\s]*@)?(\[[^\]]*\]|[^/:?#\s]*)(:\d+)?")
_USER_SKIP = frozenset("root user admin nobody ubuntu runner jovyan docker app test home host key internal "
                       "redacted private address ec2-user centos vagrant".split())


def _private_v4(a: int, b: int) -> Optional[bool]:
    """True private/CGNAT/link-local, False public or loopback, None not an address."""
    if a > 255 or b > 255:
        return None
    return a == 10 or (a == 172 and 16 <= b <= 31) or (a == 192 and b == 168) or (a == 100 and 64 <= b <= 127) or (
        a == 169 and b == 254)


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
        home_alts = [r"/lustre/home/[^/\s\"'<>:;,)\]}]+", r"/home/[^/\s\"'<>:;,)\]}]+",
                     r"/Users/[^/\s\"'<>:;,)\]}]+", r"/root"]
        if self.home and self.home.count("/") >= 1 and len(self.home) > 1:
            home_alts.insert(0, re.escape(self.home))
        self._home_re = re.compile(r"(?<![\w.-])(?:%s)(?![\w.-])" % "|".join(home_alts))
        self._home_probe = tuple(p for p in ("/home/", "/Users/", "/root", self.home) if p)
        short = (hostname or "").split(".")[0]
        names = sorted({h.lower() for h in (hostname, short) if h and len(h) > 2 and h.lower() not in _LOOPBACK
                        and h.lower() not in _USER_SKIP}, key=len, reverse=True)
        self._host_names = tuple(names)
        self._host_re = (re.compile(r"(?i)(?<![\w-])(?:%s)(?![\w-])" % "|".join(map(re.escape, names)))
                         if names else None)
        u = (user or "").strip()
        self._user = u if len(u) >= 3 and u.lower() not in _USER_SKIP else None
        self._user_re = re.compile(r"(?<![\w.-])%s(?![\w-])" % re.escape(self._user)) if self._user else None

    @classmethod
    def for_environment(
        cls, env: Mapping[str, str], *, extra_patterns: Iterable[str] = (), keep_paths: bool = False
    ) -> "Redactor":
        """Rules for this machine: its $HOME, hostname and user."""
        hostname = machine_hostname()
        user = env.get("USER") or env.get("LOGNAME") or _login_name()
        return cls(
            home=env.get("HOME") or os.path.expanduser("~"),
            hostname=hostname,
            user=user,
            extra_patterns=extra_patterns,
            keep_paths=keep_paths,
        )

    def _remember(self, value: str) -> None:
        """Note a value masked by its name, so that ``scrub`` hides its copies that no name points at
        (``config.resolved_args`` parsed from ``sshpass -p PW``: ``{"p": PW}``)."""
        v = value.strip().strip("\"'")
        # Only what reads as a password (a digit or a symbol, not all digits): an identifier such as
        # "service_account" under a "credentials" object must not be masked everywhere else.
        if 6 <= len(v) <= 512 and not v.isdigit() and _PASSWORDISH_RE.search(v) and "://" not in v \
                and not _is_path(v) and not _is_inert(v) and len(self._secrets) < 1000:
            self._secrets.add(v)

    def scrub(self, obj: Any) -> Any:
        """``obj`` with every copy of a remembered secret masked, dict keys included."""
        if not self._secrets:
            return obj
        rx = re.compile("|".join(map(re.escape, sorted(self._secrets, key=len, reverse=True))))

        def walk(o: Any) -> Any:
            if isinstance(o, str):
                new, n = rx.subn(MASK, o)
                if n:
                    self._count("secret-name", n)
                return new
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

    def _count(self, rule: str, n: int = 1) -> None:
        self.counts[rule] = self.counts.get(rule, 0) + n
        self._fired += n

    # -- strings ----------------------------------------------------------------------------------
    def text(self, value: str, key: Optional[str] = None) -> str:
        """Redact one string. ``key`` is the name it stands under (a dict key or a flag), if any."""
        if not isinstance(value, str):
            return value
        try:
            if key:
                kind = name_kind(key)
                if kind:
                    value, done = self._by_kind(kind, value)
                    if done:
                        return value
            return self._scan(value)
        except Exception:  # never let one odd string abort the manifest
            self._count("error")
            return REDACTED

    def _by_kind(self, kind: int, value: str, rule: str = "secret-name") -> Tuple[str, bool]:
        """Apply what a name says about its value; ``done`` when nothing more is left to scan."""
        if _is_inert(value):
            return value, False  # still scanned: ${TOKEN:-<a real token>} must not pass by its name
        if kind == _SECRET:
            if _is_path(value):
                return value, False
            self._count(rule)
            self._remember(value)
            return _name_mask(value), True
        if kind == _WEAK:
            if _looks_credential(value):
                self._count(rule)
                self._remember(value)
                return _name_mask(value), True
            return value, False
        if kind == _USER:
            user, colon, pw = value.partition(":")
            if pw == MASK and user in (USER, "root"):
                return value, True
            if colon and pw and not pw.isdigit() and not _is_inert(pw):  # --user bob:PW (uid:gid stays)
                self._count(rule)
                self._remember(pw)
                if user != "root":
                    self._count("user-name")
                return (user if user == "root" else USER) + ":" + MASK, True
            if value.lower() in ("root",):
                return value, True
            self._count("user-name")
            return USER, True
        if kind == _ADDRESS:
            return self._address(value), False
        if kind == _URL:
            return self._url_host(value), False
        return value, False

    def _scan(self, s: str, mode: Optional[str] = None) -> str:
        """``mode``: how the file holding ``s`` writes its values (see ``_file_mode``); None when unknown."""
        if (s in self._clean and mode is None) or (len(s) < 3 and not self.extra):
            return s
        original = s
        before = self._fired
        s = self._rules(s, mode)
        # Strings that went through untouched are remembered: manifest.build and manifest.write pass the
        # same document through the same Redactor, and most strings (versions, names) repeat.
        if s == original and self._fired == before and len(self._clean) < 50000 and mode is None:
            self._clean.add(s)
        return s

    def _rules(self, s: str, mode: Optional[str] = None) -> str:
        for pat in self.extra:
            s = pat.sub(self._user_pattern_sub, s)
        if "PRIVATE KEY" in s:
            s, n = _PEM_RE.subn(PRIVATE_KEY, s)
            if n:
                self._count("private-key", n)
        if "://" in s and "@" in s:
            s, n = _URL_CRED_RE.subn(r"\1" + MASK + "@", s)
            if n:
                self._count("url-credentials", n)
            s = _URL_TOKEN_USER_RE.sub(self._url_token_user_sub, s)
        low = s.lower()
        if "uthorization" in low:
            s = _AUTH_RE.sub(self._auth_sub, s)
        if "bearer" in low:
            s = _BEARER_RE.sub(self._bearer_sub, s)
        if len(s) >= 20:
            s = _SHAPE_RE.sub(self._shape_sub, s)
            if "hooks.slack.com" in s:
                s, n = _SLACK_HOOK_RE.subn(r"\1" + MASK, s)
                if n:
                    self._count("secret-shape", n)
        tools = (" -" in s or "\n-" in s or "\t-" in s or " login" in s) and any(map(s.__contains__, _TOOL_HINTS))
        if tools:
            s = self._commands(s)
        if mode == "pgpass":
            s = _PGPASS_RE.sub(self._pgpass_sub, s)
        if ("=" in s or ":" in s or " " in s or "\t" in s) and _TRIGGER_LOW_RE.search(low):
            masked = self._assignments(s, mode)
            if tools and masked != s:  # a value masked whole may take an open quote that hid an option
                masked = self._commands(masked)
            s = masked
        if s.count(".") >= 3:
            s = _IPV4_RE.sub(self._ipv4_sub, s)
        if ":" in s and ("fc" in low or "fd" in low):
            s, n = _IPV6_ULA_RE.subn(INTERNAL_ADDRESS, s)
            if n:
                self._count("internal-address", n)
        if ".int" in low or ".lan" in low or ".loc" in low or ".corp" in low:  # cheaper than a search
            s, n = _INTERNAL_NAME_RE.subn(INTERNAL_HOST, s)
            if n:
                self._count("internal-host", n)
        if self._host_re is not None and self._host_names[-1] in low:
            s, n = self._host_re.subn(INTERNAL_HOST, s)
            if n:
                self._count("hostname", n)
        if not self.keep_paths:
            if "/" in s and any(p in s for p in self._home_probe):
                s, n = self._home_re.subn(HOME, s)
                if n:
                    self._count("home-path", n)
            if self._user_re is not None and self._user in s:
                s, n = self._user_re.subn(USER, s)
                if n:
                    self._count("user-name", n)
        return s

    # -- substitution callbacks ---------------------------------------------------------------------
    def _user_pattern_sub(self, m: "re.Match[str]") -> str:
        found = m.group(0)
        if not found or any(found in p for p in _PLACEHOLDERS):
            return found  # keeps a pattern like 'redacted' from nesting <<redacted>> on a second pass
        self._count("user-pattern")
        return REDACTED

    def _url_token_user_sub(self, m: "re.Match[str]") -> str:
        # https://<token>@github.com: a long user part with no password is the token itself.
        if not _looks_credential(m.group(2)):
            return m.group(0)
        self._count("url-credentials")
        return m.group(1) + MASK + "@"

    def _auth_sub(self, m: "re.Match[str]") -> str:
        token = m.group(3)
        if _is_inert(token):
            return m.group(0)
        self._count("authorization")
        return m.group(1) + ((m.group(2) + " ") if m.group(2) else "") + MASK

    def _pgpass_sub(self, m: "re.Match[str]") -> str:
        if _is_inert(m.group(2)):
            return m.group(0)
        self._count("secret-name")
        self._remember(m.group(2))
        return m.group(1) + MASK

    def _bearer_sub(self, m: "re.Match[str]") -> str:
        self._count("authorization")
        return m.group(1) + m.group(2) + MASK

    def _shape_sub(self, m: "re.Match[str]") -> str:
        self._count("secret-shape")
        return mask(m.group(0))

    def _assignments(self, s: str, mode: Optional[str] = None) -> str:
        """Mask the values of ``name=value`` pairs whose name says what the value is."""
        out: List[str] = []
        last = pos = 0
        while True:
            m = _ASSIGN_RE.search(s, pos)
            if m is None:
                break
            edit = self._assignment(m, mode)
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

    def _assignment(self, m: "re.Match[str]", mode: Optional[str]) -> Optional[Tuple[int, int, str]]:
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
        secret = kind in (_SECRET, _WEAK)
        bare = group in ("v", "w")
        if bare and ((not secret and value[0] in _NOT_FIRST) or (group == "w" and value[0] in "|<>")):
            return None  # "--user | tee": a pipe, not a value
        nstart = m.start("name")
        if m.group("sp") is not None:
            if name.startswith("-"):
                if value.startswith("-"):
                    return None  # "--api-key --lr 3e-4": the flag took no value here
            elif m.group("nq") or not secret or not (_looks_credential(value) or _prose_credential(
                    s, nstart, m.start(group)) or mode == "netrc" or (
                    kind == _SECRET and _NETRC_RE.match(s, s.rfind("\n", 0, nstart) + 1))):
                # Prose ("token X" in --wandb-notes): only a credential-looking word after a secret word,
                # or a .netrc's "machine h login u password X".
                return None
            elif kind == _WEAK:
                kind = _SECRET
        start, end = m.start(group), m.end(group)
        query = secret and s[nstart - 1:nstart] in ("?", "&")
        if bare and not query and not m.group("nq") and (secret or (kind == _USER and group == "w")):
            # A value found by its name goes whole: '&', '#', ';' and quotes are part of a password.
            sep = m.group("sep") or ""
            line = group == "v" and (":" in sep or sep != sep.strip() or mode == "env"
                                     or _LIST_ITEM_RE.fullmatch(s, s.rfind("\n", 0, nstart) + 1, nstart) is not None)
            end = _value_end(s, nstart, start, line)
            value = s[start:end]
            if not value:
                return None
            if line and kind == _SECRET and _BLOCK_RE.fullmatch(value):
                return self._block(s, nstart, end)
        if kind in (_ADDRESS, _URL) and group == "w" and s.startswith("://", end):
            end = _value_end(s, nstart, start, False)  # --host https://wandb.example.com: the whole URL
            value = s[start:end]
        if kind == _ADDRESS and any(c.isspace() for c in value):
            return None
        new, _ = self._by_kind(kind, value, rule="url-token" if query else "secret-name")
        if new == value:
            return None
        return start, end, new

    def _block(self, s: str, nstart: int, start: int) -> Optional[Tuple[int, int, str]]:
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
            if body and not _is_inert(body):
                self._remember(body)
                line = line[:len(line) - len(body)] + MASK
            out.append(line)
        if not out or out == s[pos + 1:end].split("\n"):
            return None
        self._count("secret-name")
        return pos + 1, end, "\n".join(out)

    def _commands(self, s: str) -> str:
        """Mask the passwords given to client tools as options (``curl -u user:PW``, ``mysql -pPW``)."""
        edits: List[Tuple[int, int]] = []
        for m in _TOOL_RE.finditer(s):
            words: List[str] = []
            starts: List[int] = []
            cont = False
            pos = m.end()
            for w in _SHELL_WORD_RE.finditer(s, pos):
                if "\n" in s[pos:w.start()] or len(words) > 200:
                    break
                pos = w.end()
                word, at = w.group(), w.start()
                if word[0] == "\\" and word[1:2] in ("\r", "\n"):
                    cont = True
                    continue
                if word in _SEPARATORS:
                    break
                if cont and word[0] == "+":  # an added line of a patch continues the command
                    word, at = word[1:], at + 1
                cont = False
                if word:
                    words.append(word.rstrip(";"))
                    starts.append(at)
                if word.endswith(";"):
                    break
            for i, a, b in _option_spans(_tool_options(m.group("tool")), words):
                edits.append((starts[i] + a, starts[i] + b))
                self._remember(words[i][a:b])
        if not edits:
            return s
        out: List[str] = []
        last = 0
        for a, b in sorted(edits):
            if a >= last:
                out += [s[last:a], MASK]
                last = b
                self._count("secret-name")
        out.append(s[last:])
        return "".join(out)

    def _ipv4_sub(self, m: "re.Match[str]") -> str:
        parts = [int(g) for g in m.groups()]
        if max(parts) > 255 or not _private_v4(parts[0], parts[1]):
            return m.group(0)
        self._count("internal-address")
        return INTERNAL_ADDRESS

    # -- addresses ----------------------------------------------------------------------------------
    def _host_is_internal(self, host: str) -> Optional[str]:
        """The placeholder a host (no port) deserves, or None when it may stay."""
        h = host.strip("[]").lower()
        if not h or h in _LOOPBACK or h.startswith("127.") or h.isdigit() or h.startswith("<"):
            return None
        m = re.fullmatch(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})", h)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            return INTERNAL_ADDRESS if _private_v4(a, b) else None
        if ":" in h:  # IPv6 literal: ULA and link-local are internal
            return INTERNAL_ADDRESS if h.startswith(("fc", "fd", "fe8", "fe9", "fea", "feb")) else None
        if h in self._host_names or h.split(".")[0] in self._host_names:
            return INTERNAL_HOST
        labels = h.split(".")
        if len(labels) >= 2 and labels[-1].isalpha() and len(labels[-1]) >= 2 and labels[-1] not in _PRIVATE_SUFFIXES:
            return None  # a public domain name: api.wandb.ai, github.com
        return INTERNAL_HOST

    def _address(self, value: str) -> str:
        """The value of an address-bearing key: ``ray-head:6379`` and ``gpu-node-[01-04]`` are internal."""
        v = value.strip()
        if "://" in v:
            return self._url_host(value)
        worst = None
        for item in _ITEM_SPLIT_RE.split(v):
            if not item:
                continue
            host = item
            if host.startswith("["):
                host = host[1:].split("]", 1)[0]
            elif host.count(":") == 1:
                host = host.split(":", 1)[0]
            verdict = self._host_is_internal(host)
            if verdict == INTERNAL_HOST or (verdict and worst is None):
                worst = verdict
        if worst is None:
            return value
        self._count("internal-address" if worst == INTERNAL_ADDRESS else "internal-host")
        return worst

    def _url_host(self, value: str) -> str:
        m = _URL_HOST_RE.match(value.strip())
        if not m:
            return value
        verdict = self._host_is_internal(m.group(2))
        if verdict is None:
            return value
        self._count("internal-address" if verdict == INTERNAL_ADDRESS else "internal-host")
        return m.group(1) + verdict + value.strip()[m.end():]

    # -- structures ---------------------------------------------------------------------------------
    def argv(self, args: Sequence[str]) -> List[str]:
        """Redact a command line: ``--k=v`` and ``--k v`` by the flag's name, a client tool's password options
        (``mysql -pPW``, ``curl -u user:PW``), every word by shape."""
        out: List[str] = []
        prev_kind = _NONE
        tools = self._argv_options(args) if "login" in args or any(
            isinstance(a, str) and a[:1] == "-" for a in args) else {}
        for i, a in enumerate(args):
            if not isinstance(a, str):
                out.append(self.value(a))
                prev_kind = _NONE
                continue
            if i in tools:
                out.append(self.text(tools[i]))
            elif prev_kind and not a.startswith("-"):
                new, done = self._by_kind_safe(prev_kind, a)
                out.append(new if done else self.text(new))
            elif a[:1] == "-" and "=" in a and name_kind(a.split("=", 1)[0].lstrip("-")) in (_SECRET, _WEAK):
                name, value = a.split("=", 1)  # one word: '--password=a b&c' holds the whole of 'a b&c'
                new, done = self._by_kind_safe(name_kind(name.lstrip("-")), value)
                out.append(name + "=" + (new if done else self.text(new)))
            else:
                out.append(self.text(a))
            prev_kind = _flag_kind(a)
        return out

    def _argv_options(self, args: Sequence[Any]) -> Dict[int, str]:
        """``{index: masked word}`` for the password options of client tools named in ``args``."""
        out: Dict[int, str] = {}
        n = len(args)
        for i, a in enumerate(args):
            if not isinstance(a, str) or not a[:1].isalnum() and a[:1] not in "./~":
                continue
            for k in (3, 2, 1):  # helm registry login, docker login, curl
                tool = " ".join([a.rsplit("/", 1)[-1]] + [str(x) for x in args[i + 1:i + k]])
                if i + k <= n and _TOOL_NAME_RE.fullmatch(tool):
                    break
            else:
                continue
            j = e = i + k
            while e < n and isinstance(args[e], str) and args[e] not in _SEPARATORS:
                e += 1
            for w, x, y in _option_spans(_tool_options(tool), args[j:e]):
                word = args[j + w]
                out[j + w] = word[:x] + MASK + word[y:]
                self._count("secret-name")
                self._remember(word[x:y])
        return out

    def _by_kind_safe(self, kind: int, value: str) -> Tuple[str, bool]:
        try:
            return self._by_kind(kind, value)
        except Exception:
            self._count("error")
            return REDACTED, True

    def lines(self, text: str) -> Tuple[str, List[int]]:
        """Redact a patch line by line.

        Returns the text and the 1-based numbers of the lines that changed; the line count is kept, so
        a patch stays a patch. A PEM private key spanning lines is masked on every line it covers, so is a
        secret's YAML block scalar (``password: |``); a command continued with backslashes is read whole;
        each file's values are read as its kind writes them (``.env``, ``.netrc``, ``.pgpass``).
        """
        if not isinstance(text, str):
            return text, []
        out: List[str] = []
        changed: List[int] = []
        in_key = False
        block = -1  # inside a secret's block scalar: the indentation of its key
        run: List[int] = []  # the lines of a command continued with backslashes
        mode = None
        for i, line in enumerate(text.splitlines(True), 1):
            body = line.rstrip("\r\n")
            if in_key:
                lead = body[:1] if body[:1] in ("+", "-", " ") and not body.startswith("-----") else ""
                if "PRIVATE KEY" in body and "-----END" in body:
                    in_key = False
                new = lead + PRIVATE_KEY
            elif block >= 0 and (not body[1:].strip() or len(body) - 1 - len(body[1:].lstrip(" ")) > block):
                rest = body[1:].lstrip(" ")
                new = body if not rest.strip() or _is_inert(rest) else body[:len(body) - len(rest)] + MASK
                if new != body:
                    self._count("secret-name")
                    self._remember(rest)
            else:
                block = -1
                if body.startswith("diff --git "):
                    mode, in_key = _file_mode(body), False
                if "PRIVATE KEY" in body and "-----BEGIN" in body and "-----END" not in body.split("-----BEGIN", 1)[1]:
                    in_key = True
                new = self.text(body) if mode is None else self._text_in(body, mode)
                if ("|" in body or ">" in body) and ":" in body:
                    k = _BLOCK_KEY_RE.fullmatch(body, 1)
                    if k and name_kind(k.group(2)) == _SECRET:
                        block = len(k.group(1))
            if new != body:
                changed.append(i)
            out.append(new + line[len(body):])
            if run or body[-1:] == "\\":
                run.append(i - 1)
                if body[-1:] != "\\":
                    self._continued(out, run, changed)
                    run = []
        if len(run) > 1:
            self._continued(out, run, changed)
        return "".join(out), sorted(set(changed))

    def _text_in(self, line: str, mode: str) -> str:
        """``text`` for a line of a file of the given mode. Never raises."""
        try:
            return self._scan(line, mode)
        except Exception:
            self._count("error")
            return REDACTED

    def _continued(self, out: List[str], run: List[int], changed: List[int]) -> None:
        """Read the lines ``run`` of a patch, a command continued with backslashes, as one (``curl \\ -u u:PW``)."""
        bodies = [out[k].rstrip("\r\n") for k in run]
        leads = [b[:1] if b[:1] in ("+", "-", " ") else "" for b in bodies]
        joined = "\n".join(b[len(lead):] for b, lead in zip(bodies, leads))
        try:
            new = self._commands(joined)
        except Exception:
            self._count("error")
            new = "\n".join(REDACTED for _ in run)
        for k, b, lead, nb in zip(run, bodies, leads, new.split("\n")):
            if lead + nb != b:
                out[k] = lead + nb + out[k][len(b):]
                changed.append(k + 1)

    def value(self, obj: Any, key: Optional[str] = None) -> Any:
        """Redact every string inside ``obj`` (keys included), recursively. Never raises."""
        return self._value(obj, key, set(), False)

    def _value(self, obj: Any, key: Optional[str], seen: set, secret: bool) -> Any:
        if isinstance(obj, str):
            if secret and not _is_inert(obj):  # everything under "credentials": {...}
                self._count("secret-name")
                self._remember(obj)
                return _name_mask(obj)
            return self.text(obj, key)
        if obj is None or isinstance(obj, (bool, int, float)):
            return obj
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
                    child_secret = secret or (skey is not None and name_kind(skey) == _SECRET)
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
            self._count("error")
            return REDACTED
        except Exception:
            self._count("error")
            return REDACTED


def _flag_kind(arg: str) -> int:
    if len(arg) < 2 or arg[0] != "-" or "=" in arg or arg[1:2].isdigit():
        return _NONE
    return name_kind(arg.lstrip("-"))


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


def policy_of(doc: Any, env: Optional[Mapping[str, str]] = None) -> Redactor:
    """The policy ``doc`` was collected with (a ``Manifest``'s ``redacted_by``: ``--keep-paths``,
    ``--redact-pattern`` and the collecting environment's $HOME), else the default of ``env``
    (``os.environ`` when None). A later write of a changed document redacts it again with this."""
    red = getattr(doc, "redacted_by", None)
    if isinstance(red, Redactor):
        return red
    return Redactor.for_environment(os.environ if env is None else env)


_PATH_KEYED = ("files", "file_details", "file_contents")
"""The maps under ``config`` keyed by a file's path (``model.CONFIG_FILE_MAPS``): there a key is a path,
never a name, so ``token.json``'s digest is not masked as a token's value (its content is still scanned)."""


def _path_map(redactor: Redactor, node: Dict[Any, Any]) -> Dict[Any, Any]:
    out: Dict[Any, Any] = {}
    for k, v in node.items():
        nk = redactor.text(k) if isinstance(k, str) else k
        if nk in out:  # two paths redacted to the same text: keep both
            n = 2
            while "%s#%d" % (nk, n) in out:
                n += 1
            nk = "%s#%d" % (nk, n)
        out[nk] = redactor.value(v)
    return out


def _argv_for_relax(doc: Dict[str, Any]) -> None:
    """The recorded command line with each mask spelled ``<redacted>`` (``--key=wand***`` becomes
    ``--key=wand<redacted>``): the Relax trainer's ``rerun`` refuses an argument holding ``<redacted>`` but
    would replay ``***`` literally. Our readers take both spellings as redacted."""
    command = doc.get("command")
    argv = command.get("argv") if isinstance(command, dict) else None
    if isinstance(argv, list) and any(isinstance(a, str) and MASK in a for a in argv):
        command["argv"] = [a.replace(MASK, REDACTED) if isinstance(a, str) else a for a in argv]


def redact_document(doc: Dict[str, Any], redactor: Redactor) -> Dict[str, Any]:
    """Return the redacted copy of ``doc`` with the rule counts under ``collection.redactions``."""
    before = dict(redactor.counts)
    config = doc.get("config") if isinstance(doc, dict) else None
    held = {k: config[k] for k in _PATH_KEYED if isinstance(config, dict) and isinstance(config.get(k), dict)}
    if held:
        doc = dict(doc)
        doc["config"] = {k: v for k, v in config.items() if k not in held}  # type: ignore[union-attr]
    out = redactor.value(doc)
    if held and isinstance(out, dict) and isinstance(out.get("config"), dict):
        out["config"].update((k, _path_map(redactor, v)) for k, v in held.items())
    out = redactor.scrub(out)
    if not isinstance(out, dict):
        out = {}
    _argv_for_relax(out)
    fired = {k: v - before.get(k, 0) for k, v in redactor.counts.items() if v - before.get(k, 0)}
    collection = out.setdefault("collection", {})
    if isinstance(collection, dict):
        counts = dict(collection.get("redactions") or {})
        for rule, n in fired.items():
            counts[rule] = counts.get(rule, 0) + n
        collection["redactions"] = counts
    return out
