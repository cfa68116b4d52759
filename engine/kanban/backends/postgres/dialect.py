"""The board's SQL is written once, in SQLite's spelling, by the transitions, the
dispatcher and the store's reads. :func:`to_postgres` maps the handful of spellings
PostgreSQL writes differently; every other statement passes through as it is.

Why a translation and not two sets of SQL: the rules live in those statements
(compare-and-set WHERE clauses, the order of events, the breaker's counting); two
copies would drift apart. The mapping is small, pure and cached, and its tests pin
each spelling.
"""

from __future__ import annotations

import re
from functools import lru_cache

# ``x IS ?`` (SQLite's null-safe equality) is ``x IS NOT DISTINCT FROM $n`` in PostgreSQL.
_IS_PARAM = re.compile(r"\bIS\s+\?", re.IGNORECASE)
_GROUP_CONCAT = re.compile(r"\bgroup_concat\(([^()]*)\)", re.IGNORECASE)
_INSERT_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_WHERE_ONE = re.compile(r"\bWHERE\s+1\s+(?=ORDER\b|GROUP\b|LIMIT\b|$)", re.IGNORECASE)


def _number_placeholders(sql: str) -> str:
    """``?`` -> ``$1``, ``$2``, ... outside quoted literals and identifiers."""
    out: list[str] = []
    n = 0
    quote: str | None = None
    for ch in sql:
        if quote:
            if ch == quote:
                quote = None
            out.append(ch)
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out)


_QUOTED = re.compile(r"""('(?:[^']|'')*'|"[^"]*")""")


def _respell(code: str) -> str:
    """The spellings, in a stretch of SQL that holds no quoted text."""
    code = _IS_PARAM.sub("IS NOT DISTINCT FROM ?", code)
    code = _GROUP_CONCAT.sub(r"string_agg(\1, ',')", code)
    return _WHERE_ONE.sub("WHERE TRUE ", code)


@lru_cache(maxsize=512)
def to_postgres(sql: str) -> str:
    """One statement in SQLite's spelling, in PostgreSQL's (quoted text left as it is)."""
    pieces = _QUOTED.split(sql)
    sql = "".join(piece if i % 2 else _respell(piece) for i, piece in enumerate(pieces))
    if _INSERT_OR_IGNORE.match(sql):
        sql = _INSERT_OR_IGNORE.sub("INSERT INTO", sql) + " ON CONFLICT DO NOTHING"
    return _number_placeholders(sql)


def rowcount_of(status: str) -> int:
    """The rows a statement touched, from asyncpg's status tag (``UPDATE 3``, ``INSERT 0 1``)."""
    last = status.rsplit(" ", 1)[-1] if status else ""
    return int(last) if last.isdigit() else -1
