"""URLs and headers: credentials in a URL's user part or query, ``Authorization:`` and ``Bearer`` tokens.

The patterns the Redactor runs over every string, and :func:`strip_credentials`, the one function that takes
the credentials out of a URL a probe or a tracker records (a git remote, a package's direct URL, a tracking URI).
"""

from __future__ import annotations

from ...std.lazy_re import LazyPattern

URL_CRED_RE = LazyPattern(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)[^\s/@:\"'<>]*:[^\s/@\"'<>]+@")
URL_TOKEN_USER_RE = LazyPattern(r"(?i)\b(https?://)([^\s/@:\"'<>]{20,})@")
AUTH_RE = LazyPattern(
    r"(?i)\b((?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"(?:(basic|bearer|token|digest|negotiate)[ \t]+)?([^\s\"',;]+)")
BEARER_RE = LazyPattern(r"(?<![\w-])(Bearer|bearer|BEARER)([ \t]+)([^\s\"',;)}\]<>]{8,})")

_USERINFO_RE = LazyPattern(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s@]*@")
_SECRET_PARAM_RE = LazyPattern(r"(?i)token|sig|secret|key|pass|auth|cred")
_WEB_SCHEMES = ("http", "https", "ftp", "ftps")

USERS = ("secret", "not-git", "any")
"""The ``users`` options of :func:`strip_credentials`."""

QUERIES = ("secrets", "keep", "drop")
"""The ``query`` options of :func:`strip_credentials`."""


def strip_credentials(url: str, *, users: str = "secret", query: str = "secrets") -> str:
    """``url`` without the credentials it carries. Each source of URLs says what it may hold:

    ``users`` says which user parts go:

    - ``"secret"`` (a git remote): ``user:password@``, and on http(s) and ftp a user alone too
      (``https://ghp_…@github.com``: the token is the user); an ssh user (``ssh://git@host``) stays. A text
      without ``://`` (``git@host:o/r``, a local path) is no URL and stays whole; a URL is put back together
      by ``urllib`` (a lower-case scheme, no empty ``?``).
    - ``"not-git"`` (a package's PEP 610 direct URL): every user part but ssh's plain ``git@``; a URL with
      nothing to drop is returned as given.
    - ``"any"`` (a tracker's URI, or an error message quoting one): every ``scheme://…@`` in the text,
      found by a pattern, not by parsing.

    ``query``: ``"secrets"`` drops the parameters named like a secret (``?private_token=``, ``sig=``),
    ``"keep"`` keeps the query, ``"drop"`` drops the query and the fragment (``?token=`` and ``#...``).
    With ``users="any"`` the query is kept or dropped, not sifted. ValueError for an unknown option.
    """
    if users not in USERS or query not in QUERIES or (users == "any" and query == "secrets"):
        raise ValueError("strip_credentials: users=%r with query=%r is not an option" % (users, query))
    if users == "any":
        url = _USERINFO_RE.sub(r"\1", url)
        return url.split("#", 1)[0].split("?", 1)[0] if query == "drop" else url
    if ("://" not in url) if users == "secret" else ("@" not in url):
        return url  # no user part to drop, without urllib's ~6 ms import
    from urllib.parse import urlsplit, urlunsplit  # lazy: ~6 ms with ipaddress, only for a URL that may hold one

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        if users == "secret":
            if parts.scheme.lower() in _WEB_SCHEMES or ":" in user:
                netloc = host
        elif user != "git":
            netloc = host
    if users == "not-git" and netloc == parts.netloc and query == "keep":
        return url  # nothing dropped: the URL as given
    kept, fragment = parts.query, parts.fragment
    if query == "drop":
        kept = fragment = ""
    elif query == "secrets" and kept:
        kept = "&".join(p for p in kept.split("&") if not _SECRET_PARAM_RE.search(p.partition("=")[0]))
    return urlunsplit((parts.scheme, netloc, parts.path, kept, fragment))
