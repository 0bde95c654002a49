"""The redaction pass: a pure function over the finished document, applied before any write or print.

Foundation version: home paths and this machine's hostname. The full rule set (secrets by name and
by shape, URLs, private addresses, internal hosts) is issue 7 and plugs in behind the same interface.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any, Dict, Iterable, Mapping, Optional

HOME = "<HOME>"
INTERNAL_HOST = "<internal-host>"


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
        self.extra = [re.compile(p) for p in extra_patterns]
        self.counts: Dict[str, int] = {}
        home_alts = [r"/home/[^/\s\"'<>]+", r"/lustre/home/[^/\s\"'<>]+", r"/Users/[^/\s\"'<>]+", r"/root"]
        if self.home and self.home not in ("/",):
            home_alts.insert(0, re.escape(self.home))
        self._home_re = re.compile(r"(?<![\w.-])(?:%s)(?=/|$|[\s\"',;:])" % "|".join(home_alts))
        short = (hostname or "").split(".")[0]
        names = sorted({h for h in (hostname, short) if h and len(h) > 1 and h != "localhost"}, key=len, reverse=True)
        self._host_re = re.compile(r"(?<![\w-])(?:%s)(?![\w-])" % "|".join(map(re.escape, names))) if names else None

    @classmethod
    def for_environment(
        cls, env: Mapping[str, str], *, extra_patterns: Iterable[str] = (), keep_paths: bool = False
    ) -> "Redactor":
        """Rules for this machine: its $HOME, hostname and user."""
        try:
            hostname = socket.gethostname()
        except OSError:
            hostname = None
        return cls(
            home=env.get("HOME") or os.path.expanduser("~"),
            hostname=hostname,
            user=env.get("USER") or env.get("LOGNAME"),
            extra_patterns=extra_patterns,
            keep_paths=keep_paths,
        )

    def _count(self, rule: str, n: int = 1) -> None:
        self.counts[rule] = self.counts.get(rule, 0) + n

    def text(self, value: str, key: Optional[str] = None) -> str:
        """Redact one string. ``key`` is the name it stands under (a dict key or a flag), if any."""
        out = value
        for pat in self.extra:
            out, n = pat.subn("<redacted>", out)
            if n:
                self._count("user-pattern", n)
        if not self.keep_paths:
            out, n = self._home_re.subn(HOME, out)
            if n:
                self._count("home-path", n)
        if self._host_re is not None:
            out, n = self._host_re.subn(INTERNAL_HOST, out)
            if n:
                self._count("hostname", n)
        return out

    def value(self, obj: Any, key: Optional[str] = None) -> Any:
        """Redact every string inside ``obj`` (keys included), recursively."""
        if isinstance(obj, str):
            return self.text(obj, key)
        if isinstance(obj, dict):
            out: Dict[Any, Any] = {}
            for k, v in obj.items():
                nk = self.text(k) if isinstance(k, str) else k
                out[nk] = self.value(v, k if isinstance(k, str) else None)
            return out
        if isinstance(obj, (list, tuple)):
            return [self.value(v, key) for v in obj]
        return obj


def redact_document(doc: Dict[str, Any], redactor: Redactor) -> Dict[str, Any]:
    """Return the redacted copy of ``doc`` with the rule counts under ``collection.redactions``."""
    before = dict(redactor.counts)
    out = redactor.value(doc)
    fired = {k: v - before.get(k, 0) for k, v in redactor.counts.items() if v - before.get(k, 0)}
    collection = out.setdefault("collection", {})
    if isinstance(collection, dict):
        counts = dict(collection.get("redactions") or {})
        for rule, n in fired.items():
            counts[rule] = counts.get(rule, 0) + n
        collection["redactions"] = counts
    return out
