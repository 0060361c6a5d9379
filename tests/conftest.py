"""Shared fixtures: a fresh real database per test, on SQLite and on PostgreSQL.

PostgreSQL is required: set DUCTLINE_TEST_PG_URL to point elsewhere; if it cannot
be reached the PostgreSQL tests fail (they are never skipped).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
import subprocess
from typing import Callable, Iterator

import psycopg
import pytest

from ductline.store import Store, open_store

PG_ADMIN_URL = os.environ.get("DUCTLINE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
# One database per pytest process, so test runs side by side never share state.
PG_TEST_DB = f"ductline_test_{os.getpid()}"
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "apps"))
sys.path.insert(0, str(HERE))

from helpers import (shared_worker_fixture, start_worker, stop_worker, stop_workers,  # noqa: E402,F401
                     truncate as _truncate, wait_for)


def pg_url(database: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{database}"


def recreate_pg_database(name: str) -> str:
    """An empty database ``name`` on the test server; its URL.

    Its sessions commit without waiting for the WAL flush (``synchronous_commit =
    off``): a commit is as visible, as atomic and as isolated as with the default,
    and is lost only if the server itself crashes, which no test does to the shared
    server (the outage tests run a cluster of their own). The suite's PostgreSQL
    tests commit thousands of small transactions; waiting on the disk for each made
    them several times slower (a 2,482-job drive: 15-18 s, 4-6 s without the wait).
    """
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit TO off')
    return pg_url(name)


def _migrated_pg_database(name: str) -> Iterator[str]:
    """An empty database ``name`` (`recreate_pg_database`), migrated; dropped after."""
    url = recreate_pg_database(name)
    store = open_store(url)
    store.migrate()
    store.close()
    yield url
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_base_url() -> Iterator[str]:
    """A PostgreSQL database migrated once per session; tests truncate it."""
    yield from _migrated_pg_database(PG_TEST_DB)


@pytest.fixture(scope="session")
def pg_shared_url() -> Iterator[str]:
    """A second PostgreSQL database of this test process, migrated once, for tests
    that share one worker across a module (`shared_backend_url`): the per-test
    truncation of `pg_base_url` by tests that run meanwhile cannot reach it."""
    yield from _migrated_pg_database(f"{PG_TEST_DB}_shared")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_backend_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A URL of an empty, migrated database of each backend, one per module: for
    tests that share a worker (`shared_worker`) and look only at their own runs."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("shared") / "ductline.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url = str(request.getfixturevalue("pg_shared_url"))
    _truncate(url)
    return url


@pytest.fixture(scope="module")
def shared_store(shared_backend_url: str) -> Iterator[Store]:
    s = open_store(shared_backend_url)
    yield s
    s.close()


# One real worker (the defaults of `start_worker`, the app tests/apps/rt_app.py) for
# every test of a module on `shared_backend_url`; a module binds its own app with
# ``shared_worker = helpers.shared_worker_fixture(APP)``.
shared_worker = shared_worker_fixture()


# The longest tests (each tens of seconds: fleets, kills, pages run as scripts) go
# first, longest first, so the test processes share them out instead of one of them
# finishing them alone after the rest of the suite is done.
LONG_FIRST = ("fleet/", "durability/", "docs/", "operating/test_pgbouncer.py",
              "operating/test_connections.py", "limits/test_limits.py", "isolation/test_watchdog.py",
              "runtime/test_isolation_and_undead.py", "examples/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        relative = item.path.relative_to(HERE).as_posix()
        return next((i for i, prefix in enumerate(LONG_FIRST) if relative.startswith(prefix)), len(LONG_FIRST))

    items.sort(key=rank)  # stable: in the order of LONG_FIRST, then in collection order


@pytest.fixture(autouse=True)
def _no_leaked_workers() -> Iterator[None]:
    """Workers a test started and did not stop (it failed first) are stopped after it.
    Workers of module- and session-scoped fixtures started before this fixture, so
    they are left to their fixtures."""
    import helpers

    since = len(helpers.STARTED)
    yield
    helpers.stop_leaked(since)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per test process, closed (its WAL checkpointed into
    it): a copy of it is a freshly migrated database, byte for byte, at the cost of a
    file copy instead of a migration (about 0.2 s per test on a loaded machine)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "ductline.db"
    store = open_store(f"sqlite:///{path}")
    store.migrate()
    store.close()
    leftovers = [p.name for p in path.parent.iterdir() if p != path]
    assert not leftovers, f"the closed template left {leftovers}: a copy of the file alone would be incomplete"
    return path


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL of an empty, migrated database of the parametrized backend."""
    if backend == "sqlite":
        path = tmp_path / "ductline.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url = request.getfixturevalue("pg_base_url")
    _truncate(url)
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = open_store(db_url)
    yield s
    s.close()


@pytest.fixture
def workers(db_url: str, store: object) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """``workers(concurrency=2, env=None)`` starts a real worker process; all are
    stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(**kwargs: object) -> subprocess.Popen[bytes]:
        proc = start_worker(db_url, **kwargs)  # type: ignore[arg-type]
        started.append(proc)
        return proc

    yield start
    stop_workers(started)


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[object]:
    """A real PgBouncer (transaction pooling) in front of the test server, one per
    test process; stopped by its PID at the end of the session."""
    import pgbouncer_support

    bouncer = pgbouncer_support.start(PG_ADMIN_URL)
    yield bouncer
    bouncer.stop()

