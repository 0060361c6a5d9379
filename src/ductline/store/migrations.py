"""Numbered migrations per dialect, recorded in ``ductline_schema_version``.

``migrations/NNNN_name.sql`` are applied in order, each in its own transaction
together with the version it brings. ``schema.sql`` is the same schema written
out whole; a test proves that the two build identical databases.
"""

from __future__ import annotations

import re
from importlib import resources

from ductline.errors import SchemaError, StoreError
from ductline.store.session import Dialect

_VERSION_TABLE = {
    "sqlite": "CREATE TABLE IF NOT EXISTS ductline_schema_version (\n    version INTEGER NOT NULL\n);",
    "postgres": "CREATE TABLE IF NOT EXISTS ductline_schema_version (\n    version BIGINT NOT NULL\n);",
}
_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")


def available(dialect: str) -> list[tuple[int, str]]:
    """``[(version, sql), ...]`` in order."""
    folder = resources.files("ductline.store").joinpath(dialect, "migrations")
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    return sorted(found)


def current_version(dialect: Dialect) -> int:
    if not dialect.table_exists("ductline_schema_version"):
        return 0
    with dialect.reader() as session:
        row = session.fetch("schema_version")
    return int(row[0]["version"] or 0) if row else 0


def latest_version(dialect_name: str) -> int:
    steps = available(dialect_name)
    return steps[-1][0] if steps else 0


def migrate(dialect: Dialect) -> list[int]:
    """Apply every migration newer than the database; return the versions applied.

    Raises:
        SchemaError: if the database is newer than this version of ductline.
    """
    dialect.run_script(_VERSION_TABLE[dialect.name])
    have = current_version(dialect)
    latest = latest_version(dialect.name)
    if have > latest:
        raise SchemaError(f"database schema is version {have}; this ductline knows up to {latest}")
    applied = []
    for version, sql in available(dialect.name):
        if version <= have:
            continue
        # The version row goes in with the migration, so a crash between the two is impossible;
        # re-checking inside lets two processes migrate at once without applying a step twice.
        guarded = sql.rstrip() + f"\nINSERT INTO ductline_schema_version (version) VALUES ({version});\n"
        try:
            dialect.run_script(guarded)
        except StoreError:
            if current_version(dialect) >= version:
                continue  # another process applied it first
            raise
        applied.append(version)
    return applied
