"""A worker asked to stop exits within its shutdown grace whatever state its database
is in, and an outage is one warning, not one a second.

The database goes away under an idle worker: on PostgreSQL the worker reaches it
through a TCP proxy that the test stops (connections break, new ones are refused);
on SQLite another process holds the write lock (every write waits for the busy
timeout).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from helpers import APP, FAST_ENV, wait_for
from tcp_proxy_support import TcpProxy

GRACE_SECONDS = 3.0


def start(db_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **FAST_ENV, "DUCTLINE_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
           "DUCTLINE_SQLITE_BUSY_TIMEOUT": "30", "DUCTLINE_HEALTH_CHECK_INTERVAL": "0.5"}
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", APP, "--database", db_url,
                                 "--concurrency", "1"], env=env, stderr=out)


@pytest.fixture
def outage(backend: str, db_url: str, store: object, tmp_path: Path) -> Iterator[tuple[str, object]]:
    """``(url the worker uses, cut)``: calling ``cut()`` makes the database unusable."""
    if backend == "postgres":
        proxy, url = TcpProxy.for_url(db_url)
        yield url, proxy.stop
        proxy.stop()
        return
    holder: list[sqlite3.Connection] = []

    def lock() -> None:
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        holder.append(conn)

    yield db_url, lock
    for conn in holder:
        conn.rollback()
        conn.close()


def test_an_idle_worker_exits_within_its_grace_while_the_database_is_gone(outage, store, tmp_path):
    url, cut = outage
    log = tmp_path / "worker.log"
    proc = start(url, log)
    try:
        wait_for(lambda: any(w["pid"] == proc.pid for w in store.list_workers(10)))
        wait_for(lambda: b"Worker " in log.read_bytes() and b"started" in log.read_bytes())
        cut()
        # Several of the worker's turns (heartbeat, claims, maintenance every 0.5 s, the
        # LISTEN connection's reconnects) fail meanwhile.
        time.sleep(4)
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        took = time.monotonic() - asked
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text
    # The grace, and a second for an interpreter to end on a busy machine.
    assert took < GRACE_SECONDS + 1.5, (took, text)
    # One line per outage, not one per retry.
    for line in ("LISTEN connection lost", "Database unavailable during", "Maintenance skipped"):
        assert text.count(line) <= 1, text


@pytest.fixture
def startup_lock(backend: str, db_url: str, store: object) -> Iterator[None]:
    """Another session holds what a starting worker reads first (the schema version
    its migration checks): a long migration elsewhere, or a DBA's transaction."""
    if backend == "postgres":
        import psycopg

        with psycopg.connect(db_url) as conn:
            conn.execute("LOCK TABLE ductline_schema_version IN ACCESS EXCLUSIVE MODE")
            yield
            conn.rollback()
        return
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    yield
    conn.rollback()
    conn.close()


def _opened(pid: int, path: str) -> bool:
    """Whether process ``pid`` has ``path`` open."""
    folder = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(folder / fd) == path for fd in os.listdir(folder))
    except OSError:
        return False


def _waits_for_a_lock(db_url: str, pid: int) -> bool:
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND query LIKE %s", ("%ductline_schema_version%",)).fetchone()
    return bool(row and row[0])


def test_a_worker_stopped_while_its_start_waits_for_the_database_exits_within_its_grace(
        backend, db_url, startup_lock, tmp_path):
    log = tmp_path / "worker.log"
    proc = start(db_url, log)
    try:
        # It is opening its database: its exit guard listens from before that.
        if backend == "postgres":
            wait_for(lambda: _waits_for_a_lock(db_url, proc.pid))
        else:
            wait_for(lambda: _opened(proc.pid, db_url.removeprefix("sqlite:///")))
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        took = time.monotonic() - asked
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text
    assert took < GRACE_SECONDS + 1.5, (took, text)
