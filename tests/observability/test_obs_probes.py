"""``/healthz`` and ``/readyz`` on a worker's metrics endpoint and on the dashboard;
the database-derived run gauges every worker exports; the connection pool's raw
warnings folded into one line. Real databases, a real worker process."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest
import rt_app
from helpers import APP, FAST_ENV, stop_worker, wait_for
from prometheus_client.parser import text_string_to_metric_families

from ductline.errors import StoreUnavailable
from ductline.observability import probes
from ductline.store import open_store
from ductline.store.postgres import PostgresDialect, poolwarnings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url):
    """``(status, body)``, also for an error status."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(text):
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@contextmanager
def _outdated(store):
    """The database claims the schema version before the current one while the
    block runs (the PostgreSQL test database is shared by the session's tests)."""
    def shift(by):
        with store.dialect.transaction() as s:
            getattr(s, "_conn").execute(f"UPDATE ductline_schema_version SET version = version + ({by})")

    shift(-1)
    try:
        yield
    finally:
        shift(+1)


def test_worker_probes_and_run_gauges(store, db_url):
    # Runs triggered here, not by the worker: it exports them from the database.
    done = rt_app.chain.trigger(1, database=store)
    waiting = rt_app.chain.trigger(2, database=store, delay=3600)
    port = _free_port()
    worker = subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", APP, "--database", db_url,
                               "--concurrency", "1", "--metrics-port", str(port)],
                              env={**os.environ, **FAST_ENV})
    try:
        base = f"http://127.0.0.1:{port}"
        assert done.wait(60) == "completed"

        def served():
            try:
                return _get(base + "/healthz")
            except OSError:
                return None

        assert wait_for(served, timeout=60) == (200, '{"status": "ok"}')
        status, body = _get(base + "/readyz")
        assert status == 200 and json.loads(body)["status"] == "ok"

        def gauges():
            samples = _samples(_get(base + "/metrics")[1])
            key = ("ductline_runs", frozenset({"pipeline": "rt_chain", "status": "completed"}.items()))
            return samples if samples.get(key) == 1 else None

        samples = wait_for(gauges, timeout=60)
        assert samples[("ductline_runs", frozenset({"pipeline": "rt_chain", "status": "pending"}.items()))] == 1
        assert samples[("ductline_runs_triggered", frozenset({"pipeline": "rt_chain"}.items()))] == 2

        with _outdated(store):
            status, body = _get(base + "/readyz")
            assert _get(base + "/healthz")[0] == 200  # liveness does not read the database
        assert status == 503
        reason = json.loads(body)["reason"]
        assert "older than this ductline's" in reason and "run 'ductline migrate'" in reason
    finally:
        stop_worker(worker)
    assert waiting.status() == "pending"


def test_dashboard_probes(store, db_url):
    from starlette.testclient import TestClient

    from ductline.web import create_app

    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ok"
        # Probes answer whatever Host a prober uses.
        assert client.get("/healthz", headers={"host": "10.1.2.3:8080"}).status_code == 200
        with _outdated(store):
            ready = client.get("/readyz")
        assert ready.status_code == 503 and "run 'ductline migrate'" in ready.json()["reason"]


def test_an_unreachable_database_is_not_ready_and_says_why_without_a_pool(caplog):
    """A database unreachable when a process first needs it fails with the server's
    reason after one direct attempt: no pool is made to retry it in the background for
    15 s (a one-shot command given a wrong URL used to wait that long)."""
    caplog.set_level(logging.INFO, logger="ductline.store")
    caplog.set_level(logging.WARNING, logger="psycopg.pool")
    store = open_store("postgresql://postgres@127.0.0.1:1/test", create=False)
    try:
        probe = wait_for(lambda: (p := probes.readiness(store, timeout_seconds=1)).body["reason"].startswith(
            "database unreachable:") and p, timeout=60)
        assert probe.status_code == 503
        assert "PostgreSQL connection: connection failed" in probe.body["reason"]
        assert "refused" in probe.body["reason"]
        with pytest.raises(StoreUnavailable, match="refused"):
            store.now_ms()
        assert getattr(store.dialect, "_pool") is None
        assert [r for r in caplog.records if r.name.startswith("psycopg")] == []
    finally:
        store.close()
    try:
        PostgresDialect("postgresql://postgres@127.0.0.1:1/test")  # installing twice adds no second filter
        assert logging.getLogger("psycopg.pool").filters.count(poolwarnings.FOLD) == 1
    except StoreUnavailable:
        pass


def test_the_fold_ends_when_a_connection_works(pg_base_url, caplog):
    caplog.set_level(logging.INFO, logger="ductline.store")
    fold = poolwarnings.PoolWarnings()
    record = logging.LogRecord("psycopg.pool", logging.WARNING, "", 0, "error connecting in %r: %s",
                               ("ductline", "refused"), None)
    assert [fold.filter(record) for _ in range(3)] == [False, False, False]
    fold.connected()
    fold.connected()
    assert [r.getMessage() for r in caplog.records] == [
        "PostgreSQL connection pool: error connecting in 'ductline': refused; it keeps retrying in the background "
        "(its further warnings are folded into this line until a connection works again)",
        "PostgreSQL connection pool connected again (3 pool warning(s) folded)"]
