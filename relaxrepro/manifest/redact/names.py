"""Name classification: what a key or flag name says about its value, and what a value looks like.

``name_kind("HF_TOKEN")`` is a secret, ``name_kind("MASTER_ADDR")`` an address, ``name_kind("tokenizer_path")``
nothing; ``is_inert``, ``is_path`` and ``looks_credential`` judge the value a name points at.
"""

from __future__ import annotations

import re

from ..fields import HOME_PLACEHOLDERS

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Dict, List

KIND_NONE, KIND_SECRET, KIND_WEAK, KIND_ADDRESS, KIND_URL, KIND_USER = range(6)

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
        return KIND_NONE
    last = words[-1]
    joined = "".join(words)
    if joined in _NOT_PWD:
        return KIND_NONE
    if joined in ("slurmjobuser", "user", "username", "logname", "sudouser", "pbsologname") or (
            last in _USER_NAMES and len(words) <= 3):
        return KIND_USER
    if words[-3:-1] in (["private", "key"], ["access", "key"]) and last == "id":
        return KIND_SECRET  # a service account's private_key_id: an id that only its owner should hold
    if last in _URL_LAST and not _NOT_ADDRESS.intersection(words):
        return KIND_URL  # token_uri, auth_provider_x509_cert_url: where to ask, not what to show
    if last in _BENIGN_LAST:
        if len(words) >= 2 and words[-2] == "host" and last == "name":  # host_name
            return KIND_ADDRESS
        if len(words) >= 2 and words[-2] == "node" and last in ("name", "list"):  # NodeName, node_list
            return KIND_ADDRESS
        return KIND_NONE
    for w in words:
        if w == "pass" and w != last:
            continue  # DB_PASS and --pass are passwords; pass@1 / pass_at_k are eval metrics
        if w in _STRONG_WORDS or (w.startswith("pass") and w[4:] in ("word", "wd", "phrase", "words")):
            return KIND_SECRET
        if w.startswith("auth") and not w.startswith("author"):  # auth, authtoken, oauth below
            return KIND_SECRET
        if w.endswith("token") or w == "oauth":  # hf_token, HFTOKEN; not tokens / tokenizer
            if len(words) >= 2 and words[-1] == "token" and words[-2] in _SPECIAL_TOKEN_WORDS:
                return KIND_NONE
            return KIND_SECRET
        if w.endswith(("password", "passwd", "secret", "apikey", "accesskey", "secretkey", "privatekey", "storepass",
                       "keypass")):
            return KIND_SECRET
    if last in ("key", "keys"):
        if len(words) >= 2 and words[-2] in _KEY_QUALIFIERS:
            return KIND_SECRET
        return KIND_WEAK
    if not _NOT_ADDRESS.intersection(words):
        if last in _ADDRESS_LAST:
            return KIND_ADDRESS
        if joined.endswith(("nodelist", "hostname", "nodename", "ipaddr", "masteraddr")):
            return KIND_ADDRESS
    return KIND_NONE


def sequence_kind(name: str) -> int:
    """The kind of each item of a list under ``name`` (a YAML ``tokens:`` with ``- X`` lines below it): the name's
    own, or for a plural ``tokens`` (``hf_tokens``, not ``special_tokens``) a weak secret: only an item that looks
    like a credential is one (``- 300B`` and ``- <pad>`` stay)."""
    kind = name_kind(name)
    if kind:
        return kind
    words = _words(name)
    if words and words[-1] == "tokens" and not (len(words) >= 2 and words[-2] in _SPECIAL_TOKEN_WORDS):
        return KIND_WEAK
    return KIND_NONE


_BENIGN_VALUES = frozenset(
    "true false yes no none null nil auto local required optional on off env file prompt bearer basic token "
    "digest default unset disabled enabled".split())
_MASKED_RE = re.compile(r"[^\s*]{0,4}\*\*\*")
_REFERENCE_RE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}?|%\([A-Za-z_]\w*\)s|\{\{[^{}]*\}\}")


def is_inert(value: str) -> bool:
    """A value that holds nothing to hide: empty, a flag word, a placeholder, a mask, an env reference."""
    v = value.strip().strip("\"'")
    if not v or v.lower() in _BENIGN_VALUES:
        return True
    if v[0] == "<" and v[-1] == ">" and len(v) < 40:  # <HOME>, <redacted>, tokenizer <pad>
        return True
    if _REFERENCE_RE.fullmatch(v) or _MASKED_RE.fullmatch(v):  # ${WANDB_API_KEY}, $HF_TOKEN, %(pw)s: a reference
        return True
    return " " in v and all(map(is_inert, v.split()))  # "Bearer ***", "${A} ${B}"


_HOME_DIRS = tuple(mark + "/" for mark in HOME_PLACEHOLDERS)


def is_path(value: str) -> bool:
    # ``--ssh-key ~/.ssh/id_ed25519``, ``credentials: /etc/creds.json``: where a secret lives, not the secret.
    return " " not in value and value.startswith(("/", "~/", "./", "../") + _HOME_DIRS) and "://" not in value


def looks_credential(value: str) -> bool:
    """Long, unspaced, letters and digits: how a key looks when only a vague name points at it."""
    if len(value) < 16 or any(c.isspace() for c in value) or is_path(value) or "://" in value:
        return False
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def flag_kind(arg: str) -> int:
    """The kind of a command-line flag (``--wandb-key``) whose value is the next word; none for ``--k=v``."""
    if len(arg) < 2 or arg[0] != "-" or "=" in arg or arg[1:2].isdigit():
        return KIND_NONE
    return name_kind(arg.lstrip("-"))
