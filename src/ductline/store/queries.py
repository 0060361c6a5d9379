"""Loads a dialect's ``queries.sql``: statements under ``-- name: NAME`` headers.

Statements are written with ``:name`` parameters in both dialects and converted
once, at load time, to the driver's own style, so values are always bound and
never formatted into SQL.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from ductline.codec import safe_text

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# ``:name`` but not the second colon of a ``::type`` cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def read(dialect: str, filename: str) -> str:
    return resources.files("ductline.store").joinpath(dialect, filename).read_text(encoding="utf-8")


def parse(text: str) -> dict[str, str]:
    """Split a queries file into ``{name: sql}``."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for i in range(1, len(parts), 2):
        name, body = parts[i], parts[i + 1]
        # Comment lines and indentation go: psycopg caches the parsing of statements of
        # up to 4 KiB only, and the longest claim passed that with them (it was parsed
        # again on every claim). No statement has a string literal spanning lines.
        lines = [ln.strip() for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        sql = "\n".join(ln for ln in lines if ln).rstrip(";")
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = sql
    return queries


def to_pyformat(sql: str) -> str:
    """``:name`` -> ``%(name)s`` for psycopg (a literal ``%`` becomes ``%%``)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


def files(dialect: str) -> list[str]:
    """The dialect's query files: ``queries.sql`` plus any ``*_queries.sql`` (one
    per area, e.g. ``web_queries.sql`` for the dashboard's read-only reads)."""
    folder = resources.files("ductline.store").joinpath(dialect)
    return sorted(e.name for e in folder.iterdir() if e.name.endswith("queries.sql"))


def load(dialect: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    for filename in files(dialect):
        for name, sql in parse(read(dialect, filename)).items():
            if name in queries:
                raise ValueError(f"query {name!r} is defined twice ({dialect}/{filename})")
            queries[name] = sql
    if dialect == "postgres":
        return {name: to_pyformat(sql) for name, sql in queries.items()}
    return {name: sql.replace("ductline_now_ms()", SQLITE_NOW_MS) for name, sql in queries.items()}


# SQLite's clock, in integer milliseconds; 'now' is read once per statement.
SQLITE_NOW_MS = "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"


def safe_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """Bound parameters with every string made storable (`ductline.codec.safe_text`):
    the one place text enters a table, whichever dialect and statement."""
    if not params:
        return {}
    return {k: safe_text(v) if type(v) is str else v for k, v in params.items()}
