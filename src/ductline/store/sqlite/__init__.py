"""The SQLite dialect: WAL, a busy timeout, immediate write transactions.

Each thread gets its own connection (sqlite3 connections are not shared across
threads). Writers take the database lock at ``BEGIN IMMEDIATE``, so a transaction
never fails half-way on a lock upgrade; readers are never blocked in WAL mode.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from ductline.errors import StoreError, StoreUnavailable
from ductline.store import queries

BUSY_TIMEOUT_MS = 30_000


def _translate(exc: sqlite3.Error, what: str) -> StoreError:
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "unable to open" in text
                                                      or "disk I/O" in text):
        return StoreUnavailable(f"SQLite {what}: {text}")
    return StoreError(f"SQLite {what}: {text}")


class _Session:
    def __init__(self, conn: sqlite3.Connection, sql: dict[str, str]) -> None:
        self._conn = conn
        self._sql = sql

    def fetch(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        try:
            cur = self._conn.execute(self._sql[name], params or {})
            cols = [d[0] for d in cur.description or ()]
            return [dict(zip(cols, row)) for row in cur.fetchall()]
        except sqlite3.Error as exc:
            raise _translate(exc, name) from exc

    def execute(self, name: str, params: dict[str, Any] | None = None) -> int:
        try:
            return self._conn.execute(self._sql[name], params or {}).rowcount
        except sqlite3.Error as exc:
            raise _translate(exc, name) from exc

    def execute_many(self, name: str, params: Iterable[dict[str, Any]]) -> None:
        try:
            self._conn.executemany(self._sql[name], list(params))
        except sqlite3.Error as exc:
            raise _translate(exc, name) from exc


class SqliteDialect:
    name = "sqlite"

    def __init__(self, url: str, path: str) -> None:
        self.url = url
        self.path = path
        self._sql = queries.load("sqlite")
        self._local = threading.local()
        self._pid = os.getpid()
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise StoreUnavailable(f"SQLite: directory {directory!r} does not exist")

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        # A connection must never cross a fork: open a new one in a child process.
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            try:
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000,
                                       isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise _translate(exc, f"open {self.path}") from exc
            self._local.conn = conn
            self._local.pid = os.getpid()
        return conn

    @contextmanager
    def transaction(self) -> Iterator[_Session]:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _translate(exc, "begin") from exc
        try:
            yield _Session(conn, self._sql)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise _translate(exc, "commit") from exc

    @contextmanager
    def reader(self) -> Iterator[_Session]:
        yield _Session(self._connection(), self._sql)

    def run_script(self, sql: str) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise _translate(exc, "migration") from exc

    def table_exists(self, table: str) -> bool:
        row = self._connection().execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        return row is not None

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            conn.close()
        self._local = threading.local()


def _statements(script: str) -> list[str]:
    """Split a schema script on ``;`` at line ends (our scripts have no triggers)."""
    body = "\n".join(ln for ln in script.splitlines() if not ln.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";\n") if s.strip().rstrip(";")]
