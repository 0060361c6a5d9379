"""Connection economy: how many PostgreSQL connections each component holds, idle
and busy, counted in ``pg_stat_activity`` by ``application_name`` (docs/scaling.md,
"Connection budget").

- a worker process: one pooled connection and one LISTEN connection when idle (the
  pool shrinks back after ``pool_idle_seconds``); at most ``pool_max_connections``
  pooled ones when busy;
- a ``--processes N`` supervisor: none of its own, N times a worker's;
- the dashboard and an application that triggers runs: one pooled connection when
  idle, at most ``pool_max_connections`` when busy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter

import psycopg
import pytest
import rt_app
from helpers import APP, FAST_ENV, start_worker, stop_worker, wait_for

from pgbouncer_support import free_port

from ductline import stores

pytestmark = pytest.mark.parametrize("backend", ["postgres"])


# Connections opened before the test began are not the components' under test: pools
# that earlier tests of this process left on the same database (runs triggered by URL),
# or a PgBouncer's server connections (it keeps them, with its clients' names).
_SINCE: list[object] = [None]


@pytest.fixture(autouse=True)
def count_from_now(db_url):
    stores.close_all()
    with psycopg.connect(db_url, autocommit=True) as conn:
        _SINCE[0] = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    yield
    stores.close_all()


def connections(db_url: str) -> Counter[str]:
    database = db_url.rpartition("/")[2]
    with psycopg.connect(db_url, autocommit=True, application_name="connection-counter") as conn:
        rows = conn.execute("SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = %s "
                            "AND application_name LIKE 'ductline%%' AND backend_start >= %s "
                            "GROUP BY application_name", (database, _SINCE[0])).fetchall()
    return Counter({name: int(n) for name, n in rows})


class Sampler:
    """Samples the counts in a thread; keeps the most seen of each name."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self.most: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, n in connections(self.db_url).items():
                self.most[name] = max(self.most[name], n)
            self.samples += 1
            self._stop.wait(0.02)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def settles(db_url: str, expected: dict[str, int], *, timeout: float = 60.0) -> None:
    """Wait until the counts of these names are at most ``expected`` (and the
    LISTEN counts exactly so) for five samples in a row over at least a second.
    One sample is never enough: a pool may open a second connection for a moment
    (a maintenance pass) and close it again."""
    streak: list[float] = []

    def ok() -> bool:
        seen = connections(db_url)
        good = all(seen[name] <= n and (not name.endswith("-listen") or seen[name] == n)
                   for name, n in expected.items())
        if not good:
            streak.clear()
            return False
        streak.append(time.monotonic())
        return len(streak) >= 5 and streak[-1] - streak[0] >= 1.0

    wait_for(ok, timeout=timeout, interval=0.25)


POOL_ENV = {"DUCTLINE_POOL_IDLE_SECONDS": "0.5"}


def test_a_worker_holds_two_connections_idle_and_its_pool_size_busy(store, db_url):
    worker = start_worker(db_url, concurrency=4, env={**POOL_ENV, "DUCTLINE_POOL_MAX_CONNECTIONS": "3"})
    try:
        settles(db_url, {"ductline-worker": 1, "ductline-worker-listen": 1})
        with Sampler(db_url) as sampler:
            handles = [rt_app.fan.trigger(8, database=store) for _ in range(20)]
            for handle in handles:
                assert handle.wait(120) == "completed"
        assert sampler.samples > 0
        assert 1 <= sampler.most["ductline-worker"] <= 3, sampler.most
        assert sampler.most["ductline-worker-listen"] == 1, sampler.most
        settles(db_url, {"ductline-worker": 1, "ductline-worker-listen": 1})
    finally:
        stop_worker(worker)
    wait_for(lambda: connections(db_url)["ductline-worker"] + connections(db_url)["ductline-worker-listen"] == 0)


def test_a_smaller_pool_bounds_a_busy_worker(store, db_url):
    worker = start_worker(db_url, concurrency=4, env={**POOL_ENV, "DUCTLINE_POOL_MAX_CONNECTIONS": "1"})
    try:
        with Sampler(db_url) as sampler:
            handles = [rt_app.fan.trigger(8, database=store) for _ in range(10)]
            for handle in handles:
                assert handle.wait(120) == "completed"
        assert sampler.most["ductline-worker"] == 1, sampler.most
    finally:
        stop_worker(worker)


def test_a_supervisor_holds_none_of_its_own(store, db_url):
    env = {**os.environ, **FAST_ENV, **POOL_ENV}
    supervisor = subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", APP, "--database", db_url,
                                   "--concurrency", "1", "--processes", "3"], env=env)
    try:
        wait_for(lambda: connections(db_url)["ductline-worker-listen"] == 3, timeout=60)
        # each worker keeps one pooled connection and its LISTEN one; a connection of the
        # supervisor's (it would be named as they are) would be a fourth, held all the time
        settles(db_url, {"ductline-worker": 3, "ductline-worker-listen": 3})
    finally:
        stop_worker(supervisor)


def test_the_dashboard_and_a_triggering_app(store, db_url, tmp_path):
    port = free_port()
    env = {**os.environ, **POOL_ENV, "DUCTLINE_POOL_MAX_CONNECTIONS": "3"}
    dashboard = subprocess.Popen([sys.executable, "-m", "ductline", "dashboard", "--port", str(port),
                                  "--database", db_url], env=env)
    script = tmp_path / "app.py"
    script.write_text(
        "import sys, threading\n"
        "sys.path.insert(0, %r)\n"
        "import rt_app\n"
        "def burst():\n"
        "    for i in range(25):\n"
        "        rt_app.chain.trigger(i, database=%r)\n"
        "threads = [threading.Thread(target=burst) for _ in range(6)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print('triggered', flush=True)\n"
        "sys.stdin.read()  # stay alive, idle, until the test closes stdin\n"
        % (os.path.dirname(APP), db_url))
    app = subprocess.Popen([sys.executable, str(script)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    try:
        def page(path: str) -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
                    return int(response.status)
            except OSError:
                return 0

        wait_for(lambda: page("/") == 200, timeout=60)
        with Sampler(db_url) as sampler:
            readers = [threading.Thread(target=lambda: [page(p) for _ in range(10) for p in ("/", "/runs")])
                       for _ in range(6)]
            for reader in readers:
                reader.start()
            assert app.stdout is not None and app.stdout.readline().strip() == "triggered"
            for reader in readers:
                reader.join()
        assert 1 <= sampler.most["ductline-dashboard"] <= 3, sampler.most
        assert 1 <= sampler.most["ductline-app"] <= 3, sampler.most
        assert sampler.most["ductline-app-listen"] == 0  # it never waited for a run
        settles(db_url, {"ductline-dashboard": 1, "ductline-app": 1})
    finally:
        if app.stdin is not None:
            app.stdin.close()
        app.wait(30)
        if app.stdout is not None:
            app.stdout.close()
        os.kill(dashboard.pid, signal.SIGTERM)
        dashboard.wait(30)
