"""Internal addresses: private, CGNAT and link-local IPv4, IPv6 ULA, ``*.internal|corp|local|lan|intranet`` names,
and the verdict on the host an address-bearing key (``MASTER_ADDR``, ``ray_address``, ``nodelist``) holds."""

from __future__ import annotations

import re

from ...std.lazy_re import LazyPattern
from .placeholders import INTERNAL_ADDRESS, INTERNAL_HOST

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Optional, Sequence, Tuple

IPV4_RE = re.compile(r"(?<![\w.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?::\d{1,5}(?!\d))?(?!\w|\.\d)")
IPV6_ULA_RE = LazyPattern(
    r"(?i)(?<![\w:.\[])\[?f[cd][0-9a-f]{0,2}(?::[0-9a-f]{0,4}){2,7}(?![\w:])\]?(?::\d{1,5}(?!\d))?")
_INTERNAL_TLDS = ("internal", "corp", "local", "lan", "intranet")
INTERNAL_NAME_RE = LazyPattern(
    r"(?i)(?<![\w.-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:%s)(?::\d{1,5}(?!\d))?(?![\w-]|\.\w)"
    % "|".join(_INTERNAL_TLDS))
# Under an address key, Kubernetes service names (ray-head.default.svc) are internal too.
_PRIVATE_SUFFIXES = frozenset(_INTERNAL_TLDS + ("svc", "localdomain", "cluster", "home", "arpa"))
LOOPBACK = frozenset(("localhost", "ip6-localhost", "ip6-loopback", "::1", "::", "0.0.0.0", "*"))
_ITEM_SPLIT_RE = re.compile(r"[\s,]+")
_URL_HOST_RE = LazyPattern(r"^([a-zA-Z][a-zA-Z0-9+.-]{0,30}://)(?:[^/@\s]*@)?(\[[^\]]*\]|[^/:?#\s]*)(:\d+)?")
COMMON_NAMES = frozenset("root user admin nobody ubuntu runner jovyan docker app test home host key internal "
                         "redacted private address ec2-user centos vagrant".split())
"""Host and user names too common to be this machine's own: redacting them would garble ordinary words."""


def private_v4(a: int, b: int) -> Optional[bool]:
    """True private/CGNAT/link-local, False public or loopback, None not an address."""
    if a > 255 or b > 255:
        return None
    return a == 10 or (a == 172 and 16 <= b <= 31) or (a == 192 and b == 168) or (a == 100 and 64 <= b <= 127) or (
        a == 169 and b == 254)


def host_verdict(host: str, host_names: Sequence[str]) -> Optional[str]:
    """The placeholder a host (no port) deserves, or None when it may stay; ``host_names``: this machine's."""
    h = host.strip("[]").lower()
    if not h or h in LOOPBACK or h.startswith("127.") or h.isdigit() or h.startswith("<"):
        return None
    m = re.fullmatch(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})", h)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        return INTERNAL_ADDRESS if private_v4(a, b) else None
    if ":" in h:  # IPv6 literal: ULA and link-local are internal
        return INTERNAL_ADDRESS if h.startswith(("fc", "fd", "fe8", "fe9", "fea", "feb")) else None
    if h in host_names or h.split(".")[0] in host_names:
        return INTERNAL_HOST
    labels = h.split(".")
    if len(labels) >= 2 and labels[-1].isalpha() and len(labels[-1]) >= 2 and labels[-1] not in _PRIVATE_SUFFIXES:
        return None  # a public domain name: api.wandb.ai, github.com
    return INTERNAL_HOST


def address_value(value: str, host_names: Sequence[str]) -> Tuple[str, Optional[str]]:
    """The value of an address-bearing key and the placeholder it became (None: it stays):
    ``ray-head:6379`` and ``gpu-node-[01-04]`` are internal."""
    v = value.strip()
    if "://" in v:
        return url_host(value, host_names)
    worst = None
    for item in _ITEM_SPLIT_RE.split(v):
        if not item:
            continue
        host = item
        if host.startswith("["):
            host = host[1:].split("]", 1)[0]
        elif host.count(":") == 1:
            host = host.split(":", 1)[0]
        verdict = host_verdict(host, host_names)
        if verdict == INTERNAL_HOST or (verdict and worst is None):
            worst = verdict
    if worst is None:
        return value, None
    return worst, worst


def url_host(value: str, host_names: Sequence[str]) -> Tuple[str, Optional[str]]:
    """A URL (``http://ray-head:8265/api``) with an internal host replaced, and the placeholder (None: it stays)."""
    m = _URL_HOST_RE.match(value.strip())
    if not m:
        return value, None
    verdict = host_verdict(m.group(2), host_names)
    if verdict is None:
        return value, None
    return m.group(1) + verdict + value.strip()[m.end():], verdict
