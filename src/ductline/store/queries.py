"""Loads a dialect's named statements: ``-- name: NAME`` headers in ``*queries.sql`` files.

A statement both dialects run as written lives once, in ``store/shared/``; each
dialect's folder (``store/sqlite/``, ``store/postgres/``) holds only the statements
it writes its own way. Both are loaded into one ``{name: sql}`` map per dialect, and
a name defined twice is an error.

Statements are written with ``:name`` parameters in both dialects and converted
once, at load time, to the driver's own style, so values are always bound and
never formatted into SQL.

Sets of states are never spelled out in SQL: a statement names the rulebook's set,
``status IN ({UNFINISHED_RUN})``, and the loader renders it from
`ductline.model.states` as the quoted statuses (``'pending', 'running', 'paused',
'halted'``), so the SQL and the drivers cannot disagree about what "unfinished"
means. A brace outside a string literal is always such a placeholder; an unknown
name is refused at load.
"""

from __future__ import annotations

import re
from enum import StrEnum
from importlib import resources
from typing import Any

from ductline.codec import safe_text
from ductline.model import states

SHARED = "shared"
DIALECTS = ("sqlite", "postgres")

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# ``:name`` but not the second colon of a ``::type`` cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
# What rendering looks at: a string literal or a comment is kept as it is (a brace
# there is text), a ``{NAME}`` is a set to render, any other brace is a mistake.
_TOKEN = re.compile(r"(?P<keep>'(?:[^']|'')*'|--[^\n]*)|\{(?P<name>[^{}]*)\}|(?P<stray>[{}])")
_STATUS_VALUE = re.compile(r"[a-z_]+")


def state_sets() -> dict[str, frozenset[StrEnum]]:
    """The rulebook's named sets of states (`ductline.model.states`), by name: every
    upper-case module attribute that is a frozenset, e.g. ``UNFINISHED_RUN``."""
    return {name: value for name, value in vars(states).items()
            if name.isupper() and isinstance(value, frozenset)}


def literal_list(members: frozenset[StrEnum]) -> str:
    """A set of states as SQL literals, ``'pending', 'running'``, in the order its enum
    declares them (so a rendered list reads, and compares, as a hand-written one).

    Raises:
        ValueError: the set is empty (``IN ()`` is no SQL), mixes enums, or holds a
            value that is not a plain lower-case word.
    """
    if not members:
        raise ValueError("an empty set of states cannot be rendered")
    kinds = {type(m) for m in members}
    if len(kinds) != 1:
        raise ValueError(f"a set of states mixes {sorted(k.__name__ for k in kinds)}")
    (kind,) = kinds
    ordered = [m for m in kind if m in members]
    for m in ordered:
        if not _STATUS_VALUE.fullmatch(m.value):
            raise ValueError(f"state {m.value!r} cannot be written as a SQL literal")
    return ", ".join(f"'{m.value}'" for m in ordered)


_RENDERED = {name: literal_list(members) for name, members in state_sets().items()}


def render(sql: str, where: str = "a statement") -> str:
    """Fill each ``{NAME}`` of ``sql`` with the rendered set ``NAME`` of
    `ductline.model.states` (see `literal_list`).

    Raises:
        ValueError: a placeholder names no set of states, or a brace outside a
            string literal or comment is no placeholder (``where`` says which
            statement).
    """
    def fill(m: re.Match[str]) -> str:
        if m.group("keep") is not None:
            return m.group("keep")
        name = m.group("name")
        if name is None:
            raise ValueError(f"{where}: a stray {m.group('stray')!r} (only {{SET_NAME}} placeholders take braces)")
        if name not in _RENDERED:
            raise ValueError(f"{where}: {{{name}}} names no set of ductline.model.states "
                             f"(known: {', '.join(sorted(_RENDERED))})")
        return _RENDERED[name]

    return _TOKEN.sub(fill, sql)


def read(folder: str, filename: str) -> str:
    """The text of ``filename`` in ``store/<folder>/`` (a dialect, or `SHARED`)."""
    return resources.files("ductline.store").joinpath(folder, filename).read_text(encoding="utf-8")


def parse(text: str) -> dict[str, str]:
    """Split a queries file into ``{name: sql}`` (placeholders not yet rendered)."""
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


def files(folder: str) -> list[str]:
    """The query files of a dialect's folder or of `SHARED`: ``queries.sql`` plus any
    ``*_queries.sql`` (one per area, e.g. ``web_queries.sql`` for the dashboard's
    read-only reads)."""
    directory = resources.files("ductline.store").joinpath(folder)
    return sorted(e.name for e in directory.iterdir() if e.name.endswith("queries.sql"))


def sources(dialect: str) -> list[tuple[str, str]]:
    """``(folder, filename)`` of every file ``dialect`` loads: the shared ones first."""
    return [(SHARED, f) for f in files(SHARED)] + [(dialect, f) for f in files(dialect)]


def load(dialect: str) -> dict[str, str]:
    """Every statement ``dialect`` runs, rendered and in the driver's parameter style.

    Raises:
        ValueError: a name is defined twice (in one file, or in a shared file and the
            dialect's), or a placeholder does not render (`render`).
    """
    queries: dict[str, str] = {}
    origin: dict[str, str] = {}
    for folder, filename in sources(dialect):
        for name, sql in parse(read(folder, filename)).items():
            if name in queries:
                raise ValueError(f"query {name!r} is defined twice ({origin[name]} and {folder}/{filename})")
            origin[name] = f"{folder}/{filename}"
            queries[name] = render(sql, f"{folder}/{filename} {name}")
    if dialect == "postgres":
        return {name: to_pyformat(sql) for name, sql in queries.items()}
    return {name: sql.replace("ductline_now_ms()", SQLITE_NOW_MS) for name, sql in queries.items()}


# SQLite's clock, in integer milliseconds; 'now' is read once per statement.
SQLITE_NOW_MS = "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"


def safe_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """Bound parameters with every string made storable (`ductline.codec.safe_text`):
    the one place text enters a table, whichever dialect and statement. ``params``
    itself when every string already is."""
    if not params:
        return {}
    # Nearly always every string is already storable: then the dict is bound as it is
    # (a copy and a call per string were a twentieth of a trigger's Python).
    for v in params.values():
        if type(v) is str and not (v.isascii() and "\x00" not in v):
            return {k: safe_text(v) if type(v) is str else v for k, v in params.items()}
    return params
