"""``ls --where``: a small filter language over the facts of each run (:func:`runrow.gather_facts`).

One expression is ``KEY``, or ``KEY OP VALUE`` with OP one of ``=`` ``==`` ``!=`` ``>`` ``>=`` ``<`` ``<=``
``~`` (contains, any case). Several expressions are ANDed. Keys and what each operator means:

- text ``run`` ``group`` ``parent`` ``status`` ``algo``: ``=`` exact, ``!=``, ``~``; ``note`` ``gpu``: the same
  (``gpu~H100``);
- prefixes ``commit`` (any repo) and ``commit.REPO``, ``config`` (config hash), ``packages`` (package
  digest), ``data`` (a data input's digest, ``sha256:`` optional): ``=`` starts with, ``!=`` does not;
  ``repo=NAME``: a repo of that name is recorded;
- versions ``driver`` ``cuda`` ``nccl`` and ``pkg.NAME`` (normalised: ``Flash_Attn`` is ``flash-attn``):
  ``=``/``==`` exact or ``2.3.*`` (that release and its patches), ``!=``, ``>`` ``>=`` ``<`` ``<=`` by release
  numbers (a version that does not parse matches no comparison);
- numbers ``exit`` ``gpus`` ``world_size`` and ``metric.NAME`` (``results.metrics``): ``=`` ``!=`` ``>``
  ``>=`` ``<`` ``<=``;
- ``arg.NAME`` (``config.resolved_args``, named as ``compare`` names them: ``arg.optim.lr``): ``=`` the same
  value (as text, or as a number: ``arg.lr=3e-4`` matches ``0.0003`` and ``"3e-4"``), ``!=``, ``>`` ``>=`` ``<``
  ``<=`` by number, ``~`` contains (any case);
- ``dirty``: alone or ``=true``/``=false``.

``KEY`` alone: recorded (``pkg.deepspeed``, ``metric.auc``, ``data``) or true (``dirty``). An unknown key or
operator, or a value of the wrong kind, is a :class:`QueryError` naming the expression.

The run index answers a clause by index: each run's facts are stored as ``(path, key, value)`` terms
(:func:`terms`) and a clause's ``sql`` selects the paths that may match (every run that matches, perhaps a few
more); its ``test`` then decides on those alone, so the answer is the test's with the index and without. A run's
id, group and parent are the index's ``files`` columns already (:data:`COLUMNS`): they are terms only where the
fact is not that column's text.
"""

from __future__ import annotations

import json
import re

from .fields import norm_package, parse_version, version_order
from .numbers import ZERO_KEY

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Callable, Dict, List, Optional, Tuple

    Test = Callable[[Dict[str, Any], Optional[Dict[str, str]]], bool]


class QueryError(ValueError):
    """A filter that cannot be understood: the message says which and why, in one line."""


_EXPR = re.compile(r"^([A-Za-z0-9_.\-]+)\s*(==|!=|>=|<=|=|>|<|~)?(.*)$", re.S)
_TEXT = ("run", "group", "parent", "status", "algo", "note", "gpu")
_PREFIX = ("commit", "config", "packages", "data")
_VERSION = ("driver", "cuda", "nccl")
_NUMBER = ("exit", "gpus", "world_size")
COLUMNS = {"run": "run_id", "group": "grp", "parent": "parent"}
"""The text keys that are the run index's ``files`` columns too (their names there): see :func:`terms`."""
DIGEST_CHARS = 16
"""How much of a commit or digest (``commit.REPO``, ``config``, ``packages``, ``data``) a term holds: a query's
prefix selects by it (``sha256:`` and 9 hex digits, 16 of a commit: few runs share more by chance), the test
then by the whole value; 40 to 71 characters each were most of the bytes the cold build wrote and sorted."""
_ORDER = (">", ">=", "<", "<=")


class Clause:
    """One parsed expression: ``test(facts, packages)``; ``package``: the package name it asks about (a
    listing tests each package set once), else None; ``sql``: (condition on ``path``, parameters) that holds for
    every run the test passes (None: no such condition narrows it)."""

    def __init__(self, text: str, test: Test, package: Optional[str] = None,
                 sql: Optional[Tuple[str, List[Any]]] = None) -> None:
        self.text, self.test, self.package, self.sql = text, test, package, sql


def parse(text: str) -> Clause:
    """The clause of one ``--where`` expression; :class:`QueryError` when it is not one."""
    m = _EXPR.match(text.strip())
    if not m or (m.group(2) is None and m.group(3)):
        raise QueryError("--where %r: expected KEY, or KEY OP VALUE with OP one of = == != > >= < <= ~" % text)
    key, op, value = m.group(1), m.group(2), m.group(3).strip()
    if op is not None and not value:
        raise QueryError("--where %r: no value after %s" % (text, op))

    def bad(why: str) -> QueryError:
        return QueryError("--where %r: %s" % (text, why))

    head, _, name = key.partition(".")
    kind = _KIND.get(head if name and head in ("pkg", "metric", "commit", "arg") else key)
    if op is not None and kind is not None:
        why = value_error(kind, value)
        if why is not None:
            raise bad(why)
    if head == "pkg" and name:
        pkg = norm_package(name)
        test = _version_test(op, value, bad)
        return Clause(text, lambda f, p: test((p or {}).get(pkg)), package=pkg)
    if head == "metric" and name:
        ntest = _number_test(op, value, bad)
        return Clause(text, lambda f, p: ntest((f.get("metric") or {}).get(name)), sql=_number_sql(key, op, value))
    if head == "arg" and name:
        atest = _arg_test(op, value, bad)
        return Clause(text, lambda f, p: atest((f.get("arg") or {}).get(name)), sql=_arg_sql(key, op, value))
    if head == "commit" and name:
        return Clause(text, _prefix_test(op, value, bad, lambda f: [(f.get("commit") or {}).get(name)]),
                      sql=_prefix_sql(key, op, value))
    if name:
        raise bad("unknown key %s (keys: %s, %s)" % (key, ", ".join(KEYS), ", ".join(_DOTTED)))
    if key in COLUMNS:
        return Clause(text, _text_test(op, value, bad, key), sql=_column_sql(key, op, value))
    if key in _TEXT:
        return Clause(text, _text_test(op, value, bad, key),
                      sql=_term(key, "value = ?", value) if op in ("=", "==") else _term(key) if op != "!=" else None)
    if key in _PREFIX:
        if key == "commit":  # any repo's: the ``commit.REPO`` terms, one range of keys
            return Clause(text, _prefix_test(op, value, bad, lambda f: list((f.get("commit") or {}).values())),
                          sql=_prefix_sql(_REPOS, op, value))
        if key == "data":
            digest = value if value.startswith("sha256:") or op is None else "sha256:" + value
            return Clause(text, _prefix_test(op, digest, bad, lambda f: list(f.get("data") or [])),
                          sql=_prefix_sql(key, op, digest))
        return Clause(text, _prefix_test(op, value, bad, lambda f: [f.get(key)]), sql=_prefix_sql(key, op, value))
    if key == "repo":
        if op not in ("=", "==", "!="):
            raise bad("repo takes = or != and a name")
        # A repo recorded is one with a commit (gather_facts keeps no other): its ``commit.NAME`` term.
        return Clause(text, lambda f, p: (value in (f.get("commit") or {})) == (op != "!="),
                      sql=_term("commit." + value) if op != "!=" else None)
    if key in _VERSION:
        vtest = _version_test(op, value, bad)
        exact = op in ("=", "==") and not value.endswith(".*")
        return Clause(text, lambda f, p: vtest(f.get(key)),
                      sql=_term(key, "value = ?", value) if exact else _term(key) if op != "!=" else None)
    if key in _NUMBER:
        ntest = _number_test(op, value, bad)
        return Clause(text, lambda f, p: ntest(f.get(key)), sql=_number_sql(key, op, value))
    if key == "dirty":
        if op is None:
            return Clause(text, lambda f, p: bool(f.get("dirty")), sql=_term(key))
        truth = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(value.lower())
        if op not in ("=", "==", "!=") or truth is None:
            raise bad("dirty takes =true or =false")
        wanted = truth if op != "!=" else not truth
        return Clause(text, lambda f, p: bool(f.get("dirty")) == wanted, sql=_term(key) if wanted else None)
    raise bad("unknown key %s (keys: %s, %s)" % (key, ", ".join(KEYS), ", ".join(_DOTTED)))


KEYS = _TEXT + _PREFIX + ("repo",) + _VERSION + _NUMBER + ("dirty",)
_DOTTED = ("commit.REPO", "pkg.NAME", "metric.NAME", "arg.NAME")

_KIND = dict([(k, "text") for k in _TEXT + ("repo", "arg")] + [(k, "digest") for k in _PREFIX + ("commit",)] +
             [(k, "version") for k in _VERSION + ("pkg",)] + [(k, "number") for k in _NUMBER + ("metric",)])
"""The kind of value each key takes (``pkg``, ``metric``, ``commit``, ``arg``: of ``pkg.NAME`` and the like)."""

# The one rule for what a query value may be, by kind (and :func:`parse_date` for dates): a value that is
# not of its kind is refused with one line, whatever the operator, never read as far as it parses
# (``2.3;DROP`` is no version, ``2026-13-45`` no date).
_SHAPES = {
    # PEP 440 and local labels, CUDA and driver versions, git-describe strings; ``2.3.*`` a wildcard
    "version": (re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*(?:\.\*)?$"), "%r is not a version"),
    "number": (re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"), "%r is not a number"),
    "digest": (re.compile(r"^[A-Za-z0-9:._-]+$"), "%r is not a commit or digest (prefix)"),
    "text": (re.compile(r"^[^\x00-\x1f\x7f]+$"), "%r holds a control character"),
    "date": (re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?Z?)?$"),
             "%r: expected a date YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] (UTC)"),
}


def value_error(kind: str, value: str) -> Optional[str]:
    """Why ``value`` is not a query value of ``kind`` (``version``, ``number``, ``digest``, ``text``, ``date``),
    or None when it is one."""
    shape, why = _SHAPES[kind]
    m = shape.match(value)
    if m is None:
        return why % value
    if kind == "number" and not -_INF < float(value) < _INF:
        return "%r is not a finite number" % value
    if kind == "date":
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
        clock = [int(g) for g in m.groups()[3:] if g is not None]
        if not 1 <= month <= 12 or not 1 <= day <= _days(year, month) or not all(
                n < limit for n, limit in zip(clock, (24, 60, 60))):
            return "%r: no such date or time (UTC)" % value
    return None


_INF = float("inf")


def _days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _text_test(op: Optional[str], value: str, bad: Callable[[str], QueryError], key: str) -> Test:
    if op is None:
        return lambda f, p: f.get(key) not in (None, "")
    if op in _ORDER:
        raise bad("%s is text: use =, != or ~" % key)
    want = value.lower()
    if op == "~":
        return lambda f, p: isinstance(f.get(key), str) and want in f[key].lower()
    same = op != "!="
    return lambda f, p: (f.get(key) is not None and str(f.get(key)) == value) == same


def _prefix_test(op: Optional[str], value: str, bad: Callable[[str], QueryError],
                 values: Callable[[Dict[str, Any]], List[Any]]) -> Test:
    if op is None:
        return lambda f, p: any(isinstance(v, str) and v for v in values(f))
    if op not in ("=", "==", "!="):
        raise bad("a digest or commit takes = (starts with) or !=")
    hit = lambda f: any(isinstance(v, str) and v.startswith(value) for v in values(f))  # noqa: E731
    return (lambda f, p: hit(f)) if op != "!=" else (lambda f, p: not hit(f))


def _number_test(op: Optional[str], value: str, bad: Callable[[str], QueryError]) -> Callable[[Any], bool]:
    if op is None:
        return lambda v: v is not None
    if op == "~":
        raise bad("a number takes = != > >= < <=")
    try:
        want = float(value)
    except ValueError:
        raise bad("%r is not a number" % value) from None
    cmp = _COMPARE[op]

    def test(v: Any) -> bool:
        if isinstance(v, bool) or v is None:
            return False
        try:
            return cmp(float(v), want)
        except (TypeError, ValueError):
            return False
    return test


_COMPARE = {"=": lambda a, b: a == b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
            ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


def _version_test(op: Optional[str], value: str, bad: Callable[[str], QueryError]) -> Callable[[Any], bool]:
    if op is None:
        return lambda v: v is not None
    if op == "~":
        raise bad("a version takes = == != > >= < <=")
    if value.endswith(".*"):
        if op in _ORDER:
            raise bad("a wildcard takes == or !=")
        release = parse_version(value[:-2])
        if release is None or release[1] or release[2]:
            raise bad("%r is not a version wildcard such as 2.3.*" % value)
        head = release[0]

        def starts(v: Any) -> bool:
            got = parse_version(v)
            return got is not None and got[0][:len(head)] + (ZERO_KEY,) * (len(head) - len(got[0])) == head
        return starts if op != "!=" else (lambda v: v is not None and not starts(v))
    if op in _ORDER:
        if parse_version(value) is None:
            raise bad("%r is not a version" % value)
        cmp = _COMPARE[op]
        return lambda v: parse_version(v) is not None and cmp(version_order(value, v), 0)
    same = op != "!="
    return lambda v: v is not None and (str(v) == value) == same


def parse_date(text: str, flag: str, *, end: bool = False) -> str:
    """``--since``/``--until`` as the ``generated_at`` text to compare with: ``YYYY-MM-DD`` (``--until``: to the
    end of that day) or ``YYYY-MM-DDTHH:MM[:SS][Z]``, UTC as recorded."""
    value = text.strip()
    why = value_error("date", value)
    if why is not None:
        raise QueryError("%s %s" % (flag, why))
    day, clock = value[:10], value[11:].rstrip("Z")
    if not clock:
        return day + ("T\uffff" if end else "")
    return day + "T" + clock + ("\uffff" if end and len(clock) == 5 else "")


# -- the arguments: a value compared as text or as a number ------------------------------------------

_NUMBER_SHAPE = _SHAPES["number"][0]


def arg_text(v: Any) -> str:
    """An argument's value as text: a string as it is, anything else as JSON (``true``, ``0.0003``, ``[1, 2]``)."""
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def arg_number(v: Any) -> Optional[float]:
    """An argument's value as a finite number (an int, a float, or a string that spells one), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        if _NUMBER_SHAPE.match(v) is None:
            return None
    elif not isinstance(v, (int, float)):
        return None
    try:
        n = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if -_INF < n < _INF else None


def _arg_test(op: Optional[str], value: str, bad: Callable[[str], QueryError]) -> Callable[[Any], bool]:
    if op is None:
        return lambda v: v is not None
    want = arg_number(value)
    if op in ("=", "==", "!="):
        same = op != "!="

        def equal(v: Any) -> bool:
            if v is None:
                return False
            n = arg_number(v)
            return (arg_text(v) == value or (n is not None and n == want)) == same
        return equal
    if op == "~":
        low = value.lower()
        return lambda v: v is not None and low in arg_text(v).lower()
    if want is None:
        raise bad("%r is not a number: %s compares numbers" % (value, op))
    cmp = _COMPARE[op]

    def order(v: Any) -> bool:
        n = arg_number(v)
        return n is not None and cmp(n, want)
    return order


# -- what the run index stores, and the conditions over it -------------------------------------------

def terms(f: Dict[str, Any], columns: Dict[str, Any]) -> Tuple[List[str], List[Any]]:
    """The terms of one run's facts that a clause's ``sql`` asks for, as (keys, values): text as ``str``, numbers
    as ``float`` (NaN is stored as NULL, which no comparison passes, as none passes NaN), an argument as its
    :func:`arg_number` or else its :func:`arg_text`. Each condition below selects a superset of what its test
    passes over these. ``columns``: the run's values of the :data:`COLUMNS` keys as its ``files`` row holds them;
    a fact that is the same text is not a term (a cold build of 100,000 runs: 300,000 rows fewer to write and
    sort), any other is (a group recorded as a list, a parent id as a number)."""
    keys: List[str] = []
    values: List[Any] = []
    key_, value_ = keys.append, values.append
    for key in _TEXT + _VERSION:
        v = f.get(key)
        if v is not None and not (key in columns and isinstance(v, str) and columns[key] == v):
            key_(key)
            value_(str(v))
    for key in _NUMBER:
        if f.get(key) is not None:  # recorded, whether or not it reads as a number (then NULL)
            key_(key)
            value_(_float(f.get(key)))
    for key in ("config", "packages"):
        if isinstance(f.get(key), str):
            key_(key)
            value_(f[key][:DIGEST_CHARS])
    for repo, sha in (f.get("commit") or {}).items():  # ``repo=NAME`` asks ``commit.NAME``: a repo kept has one
        if isinstance(sha, str):
            key_("commit." + repo)
            value_(sha[:DIGEST_CHARS])
    for digest in f.get("data") or ():
        if isinstance(digest, str):
            key_("data")
            value_(digest[:DIGEST_CHARS])
    if f.get("dirty"):
        key_("dirty")
        value_(1)
    for name, v in (f.get("metric") or {}).items():
        key_("metric." + name)
        value_(_float(v))
    for name, v in (f.get("arg") or {}).items():
        if v is not None:
            n = arg_number(v)
            key_("arg." + name)
            value_(arg_text(v) if n is None else n)
    if f.get("same") is not None:
        key_("same")
        value_(f["same"])
    return keys, values


def _float(v: Any) -> Optional[float]:
    """``v`` as :func:`_number_test` reads it (a BigInt is infinite), or None where it reads none."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _term(key: str, cond: str = "", *params: Any) -> Tuple[str, List[Any]]:
    """The paths of the runs with a term ``key`` (whose ``value`` meets ``cond``); ``key`` :data:`_REPOS`: a term
    of any ``commit.REPO``."""
    keys, at = ("key >= ? AND key < ?", ["commit.", "commit/"]) if key == _REPOS else ("key = ?", [key])
    return ("path IN (SELECT path FROM terms WHERE %s%s)" % (keys, " AND " + cond if cond else ""), at + list(params))


_REPOS = "commit.*"
"""``commit`` (any repo) asks the ``commit.REPO`` terms (``.`` to ``/``: every key that starts ``commit.``), the
index's keys by name then each one's range of values: a commit is stored once, not again under ``commit``. No
query's key is this (a key has no ``*``)."""


def _column_sql(key: str, op: Optional[str], value: str) -> Optional[Tuple[str, List[Any]]]:
    """A run id, group or parent: its ``files`` column, or its term where the fact is not that text."""
    column = COLUMNS[key]
    if op == "!=":
        return None
    if op in ("=", "=="):
        sql, params = _term(key, "value = ?", value)
        return "(%s = ? OR %s)" % (column, sql), [value] + params
    sql, params = _term(key)
    return "(%s IS NOT NULL OR %s)" % (column, sql), params


def _number_sql(key: str, op: Optional[str], value: str) -> Optional[Tuple[str, List[Any]]]:
    if op is None or op == "!=":  # != passes a NaN, stored as NULL: every run with the term
        return _term(key)
    return _term(key, "value %s ?" % ("=" if op == "==" else op), float(value)) if op in _COMPARE else None


def _prefix_sql(key: str, op: Optional[str], value: str) -> Optional[Tuple[str, List[Any]]]:
    if op is None:
        return _term(key)
    if op == "!=" or not value:
        return None
    # The values that start with an ASCII prefix (a digest's shape) are those from it up to the prefix with its
    # last character one higher: a range of the index. The terms hold the digests' first DIGEST_CHARS: a value
    # that starts with the prefix starts with its first DIGEST_CHARS (the test decides on the whole value).
    cut = value[:DIGEST_CHARS]
    return _term(key, "value >= ? AND value < ?", cut, cut[:-1] + chr(ord(cut[-1]) + 1))


def _arg_sql(key: str, op: Optional[str], value: str) -> Optional[Tuple[str, List[Any]]]:
    if op in ("=", "=="):
        return _term(key, "value IN (?, ?)", value, arg_number(value))
    if op in _ORDER and arg_number(value) is not None:
        # Text sorts above every number in SQLite: > and >= also select the runs with a text value, which
        # the test then refuses.
        return _term(key, "value %s ?" % op, arg_number(value))
    return _term(key)  # alone, ~ and != pass only a run with the argument


def narrowing(clauses: List[Clause], sets: Dict[str, Dict[str, str]]) -> Tuple[str, List[Any]]:
    """(a condition over the index's ``files`` table, its parameters) that every run passing all ``clauses`` meets
    ("" when none narrows them): the package sets that pass the package clauses (``sets``: each known set by its
    key), then each clause's ``sql``."""
    conds: List[str] = []
    params: List[Any] = []
    by_pkg = [c for c in clauses if c.package is not None]
    if by_pkg:
        match = [k for k, p in sets.items() if all(c.test({}, p) for c in by_pkg)]
        if len(match) <= 500:  # SQLite's parameters are bounded; past a few hundred sets the test decides
            conds.append("pkgkey IN (%s)" % ", ".join("?" * len(match)))
            params.extend(match)
    for c in clauses:
        if c.sql is not None:
            conds.append(c.sql[0])
            params.extend(c.sql[1])
    return " AND ".join(conds), params
