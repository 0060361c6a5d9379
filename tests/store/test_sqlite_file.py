"""The SQLite file itself: a database locked by another process gives one clear
error; commands that only read never create or migrate a database; a database file
deleted or replaced under a running process is detected instead of written into."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from ductline import DatabaseReplaced, Pipeline
from ductline.store import open_store
from helpers import with_store

HERE = Path(__file__).parent
APP = str(HERE.parent / "apps" / "rt_app.py")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ductline", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def test_a_locked_database_gives_one_clear_error(tmp_path):
    url = f"sqlite:///{tmp_path}/locked.db"
    with_store(url, lambda s: s.migrate())
    holder = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
    try:
        done = cli("trigger", f"{APP}:chain", "--args", "[1]", "--database", url,
                   env={"DUCTLINE_SQLITE_BUSY_TIMEOUT": "0.2"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 2, done.stderr
    assert "is locked by another process for 0.2 s" in done.stderr
    assert "Traceback" not in done.stderr and "rollback" not in done.stderr.lower()
    assert with_store(url, lambda s: s.list_runs()) == []  # nothing was written


@pytest.mark.parametrize("command", [["runs"], ["show", "0" * 32], ["health"], ["workers"], ["schedules"],
                                     ["schedules", "disable", "nightly"], ["definitions"]])
def test_reading_commands_never_create_a_database(tmp_path, command):
    path = tmp_path / "absent.db"
    done = cli(*command, "--database", f"sqlite:///{path}")
    assert done.returncode != 0
    assert "no ductline database at" in done.stderr and "Traceback" not in done.stderr
    assert not path.exists()


def test_a_reading_command_does_not_migrate_an_old_database(tmp_path):
    path = tmp_path / "old.db"
    sqlite3.connect(path).close()  # a file without ductline's schema
    done = cli("runs", "--database", f"sqlite:///{path}")
    assert done.returncode == 2 and "run `ductline migrate` first" in done.stderr, done.stderr
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def size(text):
    return len(text)


pipeline = Pipeline("sqlite_file_identity").start(size)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_deleted_or_replaced_database_is_detected(tmp_path, how):
    path = tmp_path / "live.db"
    store = open_store(f"sqlite:///{path}")
    store.migrate()
    handle = pipeline.trigger("abc", database=store)
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.remove(f"{path}{suffix}")
    if how == "replaced":
        other = open_store(f"sqlite:///{tmp_path}/other.db")
        other.migrate()
        other.close()
        os.rename(tmp_path / "other.db", path)
    with pytest.raises(DatabaseReplaced, match=f"was {'deleted' if how == 'deleted' else 'replaced'}"):
        pipeline.trigger("abc", database=store)
    with pytest.raises(DatabaseReplaced):
        handle.status()
    assert (not path.exists()) if how == "deleted" else with_store(f"sqlite:///{path}", lambda s: s.list_runs()) == []
    store.close()


def test_a_malformed_database_is_refused_not_retried(tmp_path):
    """A file overwritten in place (same inode: the identity check cannot see it) or
    corrupt reads as malformed: that is `DatabaseReplaced` (workers stop), not an
    outage to wait out."""
    path = tmp_path / "live.db"
    store = open_store(f"sqlite:///{path}")
    store.migrate()
    for i in range(20):
        pipeline.trigger("x" * 2000 + str(i), database=store)
    with closing(sqlite3.connect(path)) as conn:  # the pages in the file, not only in the WAL
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(path, "r+b") as target:  # other bytes in place of its pages, the inode stays
        target.seek(4096)
        target.write(b"\xff" * (path.stat().st_size - 4096))
    with pytest.raises(DatabaseReplaced, match="malformed"):
        store.list_runs()
    store.close()


def test_a_worker_stops_when_its_database_file_is_deleted(tmp_path):
    from helpers import start_worker, wait_for

    path = tmp_path / "worker.db"
    url = f"sqlite:///{path}"
    with_store(url, lambda s: s.migrate())
    worker = start_worker(url, env={"DUCTLINE_HEALTH_CHECK_INTERVAL": "0.2"})
    worker_row = lambda: with_store(url, lambda s: s.list_workers(), create=False)  # noqa: E731
    wait_for(worker_row, 30)
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.remove(f"{path}{suffix}")
    assert worker.wait(90) != 0  # it stopped by itself, with an error
    assert not path.exists()  # and wrote nothing into a new file
