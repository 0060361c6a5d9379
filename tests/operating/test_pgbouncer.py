"""Everything works through a real PgBouncer in transaction pooling mode: triggers
from an application, workers, the CLI and the dashboard; waiting for a run with
LISTEN on a direct connection and with the polling fallback; retention's fleet-wide
turn (a transaction-scoped lock). Without ``database_pooling`` the pooler is found
and worked with; said to be ``"session"``, psycopg's prepared statements break
behind it, and the error names the setting."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request

import pgbouncer_support
import psycopg
import pytest
import rt_app
from helpers import APP, start_worker, stop_worker, wait_for
from pgbouncer_support import free_port

from ductline.errors import StoreError
from ductline.operations.prune import prune
from ductline.store import open_store
from ductline.store import notices

pytestmark = pytest.mark.parametrize("backend", ["postgres"])


def cli(*args):
    return subprocess.run([sys.executable, "-m", "ductline", *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))


@pytest.mark.parametrize("listen", [True, False], ids=["listen", "poll"])
def test_workers_triggers_cli_and_dashboard_through_pgbouncer(db_url, pgbouncer, monkeypatch, listen):
    url = pgbouncer_support.route(pgbouncer, db_url, monkeypatch, listen=listen)
    store = open_store(url)
    worker = start_worker(url, concurrency=2)
    port = free_port()
    dashboard = subprocess.Popen([sys.executable, "-m", "ductline", "dashboard", "--port", str(port),
                                  "--database", url, "--app", APP], env=dict(os.environ))
    try:
        # An application triggering from several threads (one pool, many transactions).
        handles = []
        lock = threading.Lock()

        def burst():
            for i in range(10):
                handle = rt_app.fan.trigger(5, database=store)
                with lock:
                    handles.append(handle)

        threads = [threading.Thread(target=burst) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for handle in handles:
            assert handle.wait(120) == "completed"  # LISTEN on the direct URL, or polling
            assert handle.output() == [x * x for x in range(5)]

        done = cli("trigger", f"{APP}:chain", "--args", "[4]", "--json", "--database", url)
        assert done.returncode == 0, done.stderr
        run_id = json.loads(done.stdout)["run_id"]
        wait_for(lambda: store.get_run(run_id)["status"] == "completed", timeout=60)
        listed = cli("runs", "--json", "--limit", "100", "--database", url)
        assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
        shown = cli("show", run_id, "--json", "--database", url)
        assert shown.returncode == 0 and '"completed"' in shown.stdout, shown.stderr

        def page(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
                    return response.status, response.read().decode()
            except OSError:
                return 0, ""

        wait_for(lambda: page("/")[0] == 200, timeout=60)
        for path in ("/", "/runs", f"/runs/{run_id}"):
            for _ in range(8):  # repeated: psycopg would prepare these after five
                status, body = page(path)
                assert status == 200, (path, status)
        assert run_id in page("/runs")[1]

        pruned = cli("prune", "--older-than", "0s", "--database", url)
        assert pruned.returncode == 0 and f"deleted {len(handles) + 1} run(s)" in pruned.stdout, pruned.stderr
    finally:
        stop_worker(worker)
        os.kill(dashboard.pid, signal.SIGTERM)
        dashboard.wait(30)
        store.close()
    # PgBouncer really carried the traffic.
    stats = {row[0]: row for row in pgbouncer.admin("SHOW STATS")}
    assert stats[db_url.rpartition("/")[2]][1] > 100  # total transactions


def test_retention_turn_is_transaction_scoped_through_pgbouncer(store, db_url, pgbouncer, monkeypatch):
    import prune_app
    from helpers import drive
    from test_prune import past_the_last_finish

    url = pgbouncer_support.route(pgbouncer, db_url, monkeypatch)
    through = open_store(url)
    try:
        for _ in range(3):
            prune_app.large.trigger(10, database=through)
        drive(through, prune_app.large)
        past_the_last_finish(through)
        # Many exclusive prunes in a row through shared server connections: a lock that
        # outlived its transaction would make every later one yield.
        for _ in range(5):
            report = prune(through, 3600, exclusive=True)
            assert report.complete and not report.yielded
        assert prune(through, 0, exclusive=True).runs == 3
    finally:
        through.close()


def _hammer(store):
    """Statements from four threads, each repeated past psycopg's preparing threshold;
    returns the errors they raised."""
    errors = []

    def hammer():
        try:
            for _ in range(100):
                store.now_ms()
                store.list_runs()
        except StoreError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def fresh_notices(monkeypatch, *, one_shot=False):
    """No setting, and this process as yet unwarned (a process that stays up, unless
    ``one_shot``): what a new process finds."""
    monkeypatch.delenv("DUCTLINE_DATABASE_POOLING", raising=False)
    monkeypatch.delenv("DUCTLINE_LISTEN_DATABASE_URL", raising=False)
    monkeypatch.setattr(notices, "_said", set())
    monkeypatch.setattr(notices, "_one_shot", one_shot)


def told(records):
    return [r for r in records if "connection pooler" in r.getMessage()]


def test_without_the_setting_a_pooler_is_found_and_worked_with(db_url, pgbouncer, monkeypatch, caplog):
    fresh_notices(monkeypatch)
    store = open_store(pgbouncer.url(db_url.rpartition("/")[2]), max_connections=4)
    try:
        with caplog.at_level("WARNING", logger="ductline.store"):
            assert _hammer(store) == []
            # Nothing listens through the pooler (a lent session would lose it): callers poll.
            assert store.dialect.listens is False
        warned = told(caplog.records)
        assert len(warned) == 1 and warned[0].levelname == "WARNING"
        assert "Set DUCTLINE_DATABASE_POOLING=transaction" in warned[0].getMessage()
    finally:
        store.close()


def test_the_pooler_notice_is_said_once_per_process_and_quietly_by_a_one_shot_command(db_url, pgbouncer,
                                                                                         monkeypatch, caplog):
    url = pgbouncer.url(db_url.rpartition("/")[2])
    fresh_notices(monkeypatch)
    with caplog.at_level("DEBUG", logger="ductline.store"):
        for _ in range(2):  # a second store of the process (another pool) does not say it again
            store = open_store(url, max_connections=2)
            try:
                store.list_runs()
            finally:
                store.close()
    assert [r.levelname for r in told(caplog.records)] == ["WARNING"]
    caplog.clear()
    fresh_notices(monkeypatch, one_shot=True)
    with caplog.at_level("DEBUG", logger="ductline.store"):
        store = open_store(url, max_connections=2)
        try:
            store.list_runs()
        finally:
            store.close()
    assert [r.levelname for r in told(caplog.records)] == ["DEBUG"]


def test_one_shot_commands_through_a_pooler_do_not_nag_and_a_worker_says_it_once(db_url, pgbouncer, monkeypatch,
                                                                                 tmp_path):
    url = pgbouncer.url(db_url.rpartition("/")[2])
    fresh_notices(monkeypatch)
    for args in (["runs", "--json"], ["trigger", f"{APP}:chain", "--args", "[3]"]):
        done = cli(*args, "--database", url)
        assert done.returncode == 0, done.stderr
        assert "connection pooler" not in done.stderr, done.stderr
    debug = cli("--log-level", "DEBUG", "runs", "--database", url)
    assert debug.returncode == 0 and debug.stderr.count("connection pooler") == 1, debug.stderr

    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log_file:
        worker = start_worker(url, concurrency=2, stderr=log_file)
        try:
            store = open_store(url)
            try:
                handle = rt_app.fan.trigger(4, database=store)
                assert handle.wait(120) == "completed"  # the worker claimed, ran and recorded through it
            finally:
                store.close()
        finally:
            stop_worker(worker)
    said = log_path.read_text(errors="replace")
    assert said.count("connection pooler") == 1 and "WARNING" in said, said


PROGRAM_THROUGH_A_POOLER = """
import logging, sys
from ductline.store import open_store
if sys.argv[2] == "logging":
    logging.basicConfig(level=logging.INFO)
for _ in range(2):  # a second store of the process does not say it again
    store = open_store(sys.argv[1], max_connections=1)
    try:
        store.list_runs()
    finally:
        store.close()
"""


@pytest.mark.parametrize("configured", ["no-logging", "logging"])
def test_an_application_through_a_pooler_is_told_once_whether_or_not_it_configured_logging(db_url, pgbouncer,
                                                                                           configured):
    """A program that stays up says the notice at WARNING where its operator reads it:
    in its log if it configured logging, else as a Python warning on stderr (ductline's
    own handler drops records where no logging is configured; the notice was lost)."""
    url = pgbouncer.url(db_url.rpartition("/")[2])
    done = subprocess.run([sys.executable, "-c", PROGRAM_THROUGH_A_POOLER, url, configured],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("leads through a connection pooler") == 1, done.stderr
    assert ("UserWarning" in done.stderr) is (configured == "no-logging"), done.stderr
    assert "Set DUCTLINE_DATABASE_POOLING=transaction" in done.stderr


def test_a_direct_url_without_the_setting_keeps_listen_and_prepared_statements(db_url, monkeypatch, caplog):
    fresh_notices(monkeypatch)
    store = open_store(db_url, max_connections=1)
    try:
        with caplog.at_level("WARNING", logger="ductline.store"):
            for _ in range(10):  # past psycopg's threshold: the statement is prepared
                store.list_runs()
            assert store.dialect.listens is True and store.dialect.listen_url == db_url
        with store.dialect.reader() as session:  # the pool's one connection
            prepared = session._conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()
        assert prepared["n"] > 0
        assert not told(caplog.records)
    finally:
        store.close()


def test_session_said_of_a_transaction_pooler_breaks_and_names_the_setting(db_url, pgbouncer, monkeypatch):
    # The setting is believed: "session" keeps psycopg's prepared statements, which a
    # transaction pooler hands to other clients' sessions.
    monkeypatch.setenv("DUCTLINE_DATABASE_POOLING", "session")
    store = open_store(pgbouncer.url(db_url.rpartition("/")[2]), max_connections=4)
    try:
        errors = _hammer(store)
    finally:
        store.close()
    assert errors and "prepared statement" in str(errors[0])
    # The error says what to set: a worker's log shows it with each failed recording.
    assert "set DUCTLINE_DATABASE_POOLING=transaction" in str(errors[0])


def test_migrate_through_pgbouncer(backend, pgbouncer, monkeypatch):
    # The suite's administrative database (tests/conftest.py reads the same variable;
    # its module is not importable by name from here: several conftest.py files exist).
    admin_url = os.environ.get("DUCTLINE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

    name = f"ductline_migrate_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        monkeypatch.setenv("DUCTLINE_DATABASE_POOLING", "transaction")
        for expected in ("applied [1,", "schema at version"):  # a second run applies nothing
            done = cli("migrate", "--database", pgbouncer.url(name))
            assert done.returncode == 0 and expected in done.stdout, done.stderr
        assert "applied" not in done.stdout
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
