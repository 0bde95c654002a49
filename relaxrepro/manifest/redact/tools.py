"""Client-tool option tables: the passwords given to client tools as options (``curl -u user:PW``, ``mysql -pPW``,
``sshpass -p PW``, ``wandb login KEY``...), in a string (lines continued with a backslash too) and in an argv."""

from __future__ import annotations

from ...std.lazy_re import LazyPattern
from .names import is_inert, looks_credential
from .placeholders import MASK

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Dict, List, Optional, Sequence, Tuple

    from .protocol import Rules

_TOOLS = (r"curl|wget|https?|xhs?|(?:mysql|mariadb)[\w-]*|(?:redis|valkey|keydb)-cli|mongo\w*|sshpass"
          r"|smbclient|rpcclient|lftp|ldap\w+|twine[ \t]+upload"
          r"|(?:docker|podman|nerdctl|buildah|skopeo|oras|az|helm[ \t]+registry|wandb)[ \t]+login"
          r"|zip|unzip|zipcloak|7z[arz]?|(?:un)?rar|ssh-keygen|openssl|keytool|mosquitto_\w+|cqlsh"
          r"|sqlcmd|bcp|vsql|rabbitmqadmin")
_TOOL_RE = LazyPattern(r"(?m)(?:^[+-]?|(?<![\w.+-]))(?P<tool>%s)(?=[ \t]|\\\r?\n)" % _TOOLS)
TOOL_HINTS = ("curl", "wget", "http", "xh", "mysql", "mariadb", "-cli", "mongo", "sshpass", "smbclient", "rpcclient",
               "lftp", "ldap", "login", "twine", "zip", "7z", "rar", "ssh-keygen", "openssl", "keytool", "mosquitto",
               "cqlsh", "sqlcmd", "bcp", "vsql", "rabbitmqadmin")  # a substring test is ~10x faster than _TOOL_RE
_TOOL_NAME_RE = LazyPattern(r"(?:%s)" % _TOOLS)
# A shell word (quotes kept), or a backslash-newline that continues the command on the next line.
_KEY_WORD_RE = LazyPattern(r"[\w-]+")  # wandb login KEY: a key is one run of word characters
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
    if not v or is_inert(v) or v.startswith(_REF_PREFIXES):
        return None
    if mode in (":", "%", ","):
        k = v.find(mode)
        if k < 0:  # a bare user name stays; a key given as the user (httpie -A bearer -a KEY) does not
            return (a, b) if looks_credential(v) else None
        if k == len(v) - 1:  # curl -u KEY: (Stripe-style: the key is the user, the password empty)
            return (a, a + k) if looks_credential(v[:k]) else None
        return None if is_inert(v[k + 1:]) else (a + k + 1, b)
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
            if "*" in opts and looks_credential(w.strip("\"'")) and _KEY_WORD_RE.fullmatch(w.strip("\"'")):
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


def mask_commands(red: Rules, s: str) -> str:
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
            red.remember(words[i][a:b])
    if not edits:
        return s
    out: List[str] = []
    last = 0
    for a, b in sorted(edits):
        if a >= last:
            out += [s[last:a], MASK]
            last = b
            red.count("secret-name")
    out.append(s[last:])
    return "".join(out)

def argv_options(red: Rules, args: Sequence[Any]) -> Dict[int, str]:
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
            red.count("secret-name")
            red.remember(word[x:y])
    return out
