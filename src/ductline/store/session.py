"""What every dialect provides: sessions that run named statements.

A `Session` is one connection inside one transaction (or autocommit for reads).
Dialects translate driver errors into `StoreError` / `StoreUnavailable` here, at
the edge, so nothing above the store ever sees a driver exception.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Iterable, Protocol


class Session(Protocol):
    def fetch(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a named statement and return its rows as dicts."""
        ...

    def execute(self, name: str, params: dict[str, Any] | None = None) -> int:
        """Run a named statement and return the number of rows it changed."""
        ...

    def execute_many(self, name: str, params: Iterable[dict[str, Any]]) -> None:
        ...


class Dialect(Protocol):
    name: str
    url: str

    def transaction(self) -> AbstractContextManager[Session]:
        """A write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: READ COMMITTED)."""
        ...

    def reader(self) -> AbstractContextManager[Session]:
        """An autocommit session for reads."""
        ...

    def run_script(self, sql: str) -> None:
        """Run a multi-statement script in one transaction (migrations)."""
        ...

    def table_exists(self, table: str) -> bool:
        ...

    def close(self) -> None:
        ...
