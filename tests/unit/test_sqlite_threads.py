"""A SQLite store closes the connection of every thread that used it: on Python 3.13
and later a connection left to the garbage collector warns (and fails a test run with
warnings as errors), whichever test happens to be running when it is collected."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from ductline.store import open_store


def _connection_of_a_thread(store: object) -> sqlite3.Connection:
    got: list[sqlite3.Connection] = []
    thread = threading.Thread(target=lambda: got.append(store.dialect._connection()))  # type: ignore[attr-defined]
    thread.start()
    thread.join()
    return got[0]


def test_close_closes_the_connections_of_other_threads(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/threads.db")
    store.migrate()
    other = _connection_of_a_thread(store)
    store.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        other.execute("SELECT 1")
    assert store.list_runs(None, None, 1) == []  # a closed store opens a new connection when used again
    store.close()


def test_the_connection_of_an_ended_thread_is_closed_when_another_opens(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/threads.db")
    store.migrate()
    first = _connection_of_a_thread(store)
    second = _connection_of_a_thread(store)
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        first.execute("SELECT 1")
    assert second.execute("SELECT 1").fetchone() == (1,)
    store.close()
