"""The in-memory store: the SQLite dialect's own statements over a private
in-memory database, for `ductline.execute` and `ductline.testing`.

It is not a second implementation of the store: every verb runs the very
statement a SQLite worker runs, so the in-process executor and a worker cannot
drift apart on what a claim, a completion, a fan-in or a stop writes. What
differs is only where the rows live (one connection's memory, gone when the
store is closed) and, optionally, the clock: `open_memory_store` takes the
driver's clock so that delays, retry delays, rate limits and pause expiries pass
in a test's virtual time (`ductline.testing.FakeClock`).

One connection serves every thread (a thread step's requests arrive from its own
thread); a lock makes each transaction and each read whole.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from contextlib import contextmanager
from importlib import resources
from typing import Callable, Iterator

from ductline.errors import StoreError
from ductline.store import queries
from ductline.store.migrations import latest_version
from ductline.store.sqlite import _rollback, _Session, _statements
from ductline.store.store import Store

# The function the statements call for the database clock when a driver's clock
# is given (registered on the connection).
_CLOCK_FUNCTION = "ductline_clock_ms"
_BEGIN, _COMMIT = "BEGIN IMMEDIATE", "COMMIT"  # transaction control, not named statements


def _translate(exc: sqlite3.Error, what: str) -> StoreError:
    return StoreError(f"in-memory store {what}: {exc}")


class MemoryDialect:
    """A private in-memory SQLite database with the schema of the latest migration.

    Args:
        now_ms: the database clock in epoch milliseconds; default SQLite's own
            (wall-clock) time, read once per statement as on a file.
    """

    name = "sqlite"  # its statements, claims and transactions are SQLite's

    def __init__(self, now_ms: Callable[[], int] | None = None) -> None:
        self.url = f"memory:{uuid.uuid4().hex}"
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        sql = queries.load("sqlite")
        if now_ms is not None:
            self._conn.create_function(_CLOCK_FUNCTION, 0, now_ms)
            sql = {name: text.replace(queries.SQLITE_NOW_MS, f"{_CLOCK_FUNCTION}()") for name, text in sql.items()}
        self._sql = sql
        schema = resources.files("ductline.store").joinpath("sqlite", "schema.sql").read_text(encoding="utf-8")
        self.run_script(schema + f"\nINSERT INTO ductline_schema_version (version) VALUES "
                                 f"({latest_version('sqlite')});\n")

    @contextmanager
    def transaction(self) -> Iterator[_Session]:
        with self._lock:
            try:
                self._conn.execute(_BEGIN)
            except sqlite3.Error as exc:
                raise _translate(exc, "begin") from exc
            try:
                yield _Session(self._conn, self._sql, _translate)
            except BaseException:
                _rollback(self._conn)
                raise
            try:
                self._conn.execute(_COMMIT)
            except sqlite3.Error as exc:
                _rollback(self._conn)
                raise _translate(exc, "commit") from exc

    @contextmanager
    def reader(self) -> Iterator[_Session]:
        with self._lock:
            yield _Session(self._conn, self._sql, _translate)

    def run_script(self, sql: str) -> None:
        with self._lock:
            try:
                self._conn.execute(_BEGIN)
                for statement in _statements(sql):
                    self._conn.execute(statement)
                self._conn.execute(_COMMIT)
            except sqlite3.Error as exc:
                _rollback(self._conn)
                raise _translate(exc, "schema") from exc

    def table_exists(self, table: str) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                     (table,)).fetchone()
        return row is not None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def open_memory_store(now_ms: Callable[[], int] | None = None) -> Store:
    """A new, empty store in this process's memory (see the module docstring).

    Args:
        now_ms: the database clock (epoch milliseconds, an ``int``); default
            wall-clock time.
    """
    return Store(MemoryDialect(now_ms))
