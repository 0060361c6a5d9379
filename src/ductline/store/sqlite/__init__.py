"""The SQLite dialect: WAL, a busy timeout, immediate write transactions.

Each thread gets its own connection (sqlite3 connections are not shared across
threads), and `close` closes every thread's: from Python 3.13 on a connection left to
the garbage collector warns (ResourceWarning), and one of a thread that has ended is
closed when the next thread opens its own. Writers take the database lock at ``BEGIN IMMEDIATE``, so a transaction
never fails half-way on a lock upgrade; readers are never blocked in WAL mode.

The file's identity (device and inode) is recorded when it is first opened and
checked before every transaction: a database deleted or replaced under a running
process raises `DatabaseReplaced` instead of writing on into the orphaned file. A file
overwritten in place keeps its identity; once SQLite finds its pages malformed, that
is `DatabaseReplaced` too (not an outage to retry).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import quote

from ductline.errors import DatabaseReplaced, StoreError, StoreUnavailable
from ductline.store import queries

DEFAULT_BUSY_TIMEOUT_SECONDS = 30.0


def _translator(path: str, busy_timeout: float) -> "Callable[[sqlite3.Error, str], StoreError]":
    def translate(exc: sqlite3.Error, what: str) -> StoreError:
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
            return StoreUnavailable(f"SQLite database {path} is locked by another process for {busy_timeout:g} s "
                                    f"(the busy timeout, sqlite_busy_timeout) during {what}; another program or "
                                    "a long transaction holds it")
        if isinstance(exc, sqlite3.OperationalError) and ("unable to open" in text or "disk I/O" in text):
            return StoreUnavailable(f"SQLite {what} on {path}: {text}")
        if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
            # Overwritten in place (same file, other bytes) or corrupt: no retry can
            # help, and writing on would build on pages that are not ours.
            return DatabaseReplaced(f"SQLite database {path} is malformed during {what} ({text}): it was "
                                    "overwritten in place or is corrupt")
        return StoreError(f"SQLite {what} on {path}: {text}")
    return translate


class _Session:
    def __init__(self, conn: sqlite3.Connection, sql: dict[str, str],
                 translate: Callable[[sqlite3.Error, str], StoreError]) -> None:
        self._conn = conn
        self._sql = sql
        self._translate = translate

    def fetch(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        try:
            cur = self._conn.execute(self._sql[name], queries.safe_params(params))
            cols = [d[0] for d in cur.description or ()]
            return [dict(zip(cols, row)) for row in cur.fetchall()]
        except sqlite3.Error as exc:
            raise self._translate(exc, name) from exc

    def execute(self, name: str, params: dict[str, Any] | None = None) -> int:
        try:
            return self._conn.execute(self._sql[name], queries.safe_params(params)).rowcount
        except sqlite3.Error as exc:
            raise self._translate(exc, name) from exc

    def execute_many(self, name: str, params: Iterable[dict[str, Any]]) -> None:
        try:
            self._conn.executemany(self._sql[name], [queries.safe_params(p) for p in params])
        except sqlite3.Error as exc:
            raise self._translate(exc, name) from exc


def absolute_hint(url: str, path: str) -> str:
    """`` (sqlite:///tmp/x.db names tmp/x.db under the working directory; an absolute
    path needs four slashes: sqlite:////tmp/x.db)``, for a three-slash URL whose
    relative path reads as an absolute one that was meant (its first folder exists
    at the root, as /tmp or /var does); empty otherwise. SQLAlchemy's rule: three
    slashes and a relative path, four for an absolute one."""
    if os.path.isabs(path) or not url.startswith("sqlite:///"):
        return ""
    first = path.replace(os.sep, "/").split("/", 1)[0]
    if not first or first in (".", "..") or not os.path.isdir(os.sep + first):
        return ""
    return (f" ({url} names {path} under the working directory; an absolute path needs four slashes: "
            f"sqlite:////{path})")


class SqliteDialect:
    name = "sqlite"

    def __init__(self, url: str, path: str, *, create: bool = True,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT_SECONDS) -> None:
        """Args:
            create: create the file if it does not exist (commands that only read
                refuse a missing database instead).
            busy_timeout: seconds to wait for another process's write lock.
        """
        self.url = url
        self.path = path
        self._create = create
        self._busy_timeout = busy_timeout
        self._translate = _translator(path, busy_timeout)
        self._sql = queries.load("sqlite")
        self._local = threading.local()
        # Every thread's connection, with its thread and the process that opened it.
        self._opened: list[tuple[weakref.ref[threading.Thread], int, sqlite3.Connection]] = []
        self._opened_lock = threading.Lock()
        self._pid = os.getpid()
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file first opened
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            # Waiting does not create it: a worker starting up exits at once.
            raise StoreUnavailable(f"SQLite: directory {directory!r} does not exist{absolute_hint(url, path)}",
                                   permanent=True)

    def _check_identity(self) -> None:
        """Raise `DatabaseReplaced` if the file is gone or is another file now."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        identity = None if st is None else (st.st_dev, st.st_ino)
        if self._identity is None:
            self._identity = identity
        elif identity != self._identity:
            what = "deleted" if identity is None else "replaced by another file"
            raise DatabaseReplaced(f"the SQLite database {self.path} was {what} while this process had it "
                                   "open; nothing more is written to it (restart against the database "
                                   "you mean to use)")

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if self._identity is not None:
            self._check_identity()
        # A connection must never cross a fork: open a new one in a child process.
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            if not self._create and not os.path.exists(self.path):
                raise StoreUnavailable(f"no ductline database at {self.path}{absolute_hint(self.url, self.path)}: "
                                       "trigger or run a pipeline, or run `ductline migrate`, to create it")
            try:
                conn = sqlite3.connect(self.path, timeout=self._busy_timeout,
                                       isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise self._translate(exc, "open") from exc
            self._local.conn = conn
            self._local.pid = os.getpid()
            self._remember(conn)
            self._check_identity()
        return conn

    def _remember(self, conn: sqlite3.Connection) -> None:
        """Keep ``conn`` for `close`; close those of threads that have ended."""
        pid = os.getpid()
        with self._opened_lock:
            ended = [entry for entry in self._opened if entry[1] == pid and not _alive(entry[0])]
            self._opened = [entry for entry in self._opened if entry not in ended]
            self._opened.append((weakref.ref(threading.current_thread()), pid, conn))
        for _, _, old in ended:
            old.close()

    @contextmanager
    def transaction(self) -> Iterator[_Session]:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._translate(exc, "begin") from exc
        try:
            yield _Session(conn, self._sql, self._translate)
        except BaseException:
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise self._translate(exc, "commit") from exc

    @contextmanager
    def reader(self) -> Iterator[_Session]:
        yield _Session(self._connection(), self._sql, self._translate)

    def run_script(self, sql: str) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise self._translate(exc, "migration") from exc

    def table_exists(self, table: str) -> bool:
        row = self._connection().execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        return row is not None

    def close(self) -> None:
        """Close the connection of every thread of this process (a connection
        inherited across a fork is the parent's: left alone). The next use opens a
        new one."""
        pid = os.getpid()
        with self._opened_lock:
            mine = [entry for entry in self._opened if entry[1] == pid]
            self._opened = [entry for entry in self._opened if entry[1] != pid]
        for _, _, conn in mine:
            conn.close()
        self._local = threading.local()


def _alive(thread: "weakref.ref[threading.Thread]") -> bool:
    found = thread()
    return found is not None and found.is_alive()


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is open: a failed BEGIN opened none, and a ROLLBACK
    then would raise an error of its own and hide the one that matters."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _statements(script: str) -> list[str]:
    """Split a schema script on ``;`` at line ends (our scripts have no triggers)."""
    body = "\n".join(ln for ln in script.splitlines() if not ln.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";\n") if s.strip().rstrip(";")]
