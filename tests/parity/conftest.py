"""Drivers for the whole parity suite, started once per test process: one real
worker per backend serving ``parity_app`` with 8 slots (and one that serves the
held-job cases' queue, claiming far ahead of a delayed job's time), a thread per worker that
triggers the cases on it (as slots allow), and a few threads that run the same
cases through `ductline.execute`. In one process every selected case starts at
once and a case's test only compares the three records; under xdist each case
starts when its test asks for it."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Iterator

import psycopg
import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import helpers  # noqa: E402
import otlp_support  # noqa: E402
import parity_app  # noqa: E402
from helpers import start_worker, stop_worker  # noqa: E402
from parity_harness import EXECUTE_PARALLEL, SLOTS, WORKER_ENV, Case, Fleet, LocalRuns, exported_spans  # noqa: E402

from ductline.store import open_store  # noqa: E402

APP = str(HERE / "parity_app.py")
# How long before a delayed job's time the held-job cases' workers claim it (seconds;
# 50 ms by default): longer than the cases' delays (`parity_app.HOLD_DELAY`), so the
# job is claimed at once and held for seconds, long enough to be found held and to
# have its run stopped then, however slow the machine.
HOLDING_HORIZON_SECONDS = parity_app.HOLD_DELAY + 0.5
# The folder of the held-job cases' files (`parity_app.gate_path`), set before any
# worker or step child starts so that every one of them inherits it.
os.environ.setdefault(parity_app.GATES_ENV, tempfile.mkdtemp(prefix="parity-gates-"))


def _start_holding_worker(url: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A worker serving only the held-job cases' queue, with the horizon widened to
    `HOLDING_HORIZON_SECONDS` in the worker parent (which never imports the app:
    user code runs in its children only)."""
    code = (f"from ductline.runtime import horizon; horizon.HORIZON_SECONDS = {HOLDING_HORIZON_SECONDS}; "
            "import runpy, sys; sys.argv[0] = 'ductline'; runpy.run_module('ductline', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", code, "worker", "--app", APP, "--database", url,
                             "--concurrency", str(SLOTS)],
                            env={**os.environ, **helpers.FAST_ENV, **env, "DUCTLINE_QUEUES": parity_app.HELD})
    helpers.STARTED.append(proc)
    return proc


def _root_conftest() -> ModuleType:
    # Loaded by path: under pytest's default import mode ``import conftest`` returns
    # whichever conftest.py was imported last, not necessarily tests/conftest.py.
    name = "ductline_tests_root_conftest"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, HERE.parent / "conftest.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the workers side by side: each gets SIGTERM at once, then its shutdown
    grace (`helpers.stop_worker` kills one that outlives it)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            stop_worker(proc, signal.SIGKILL)


def _upfront_cases(session: pytest.Session) -> list[Case]:
    """The cases to start at once: every selected one when this process runs all
    the tests. Under xdist a process does not know which tests it will get, so it
    starts each case when its test asks (`Fleet.want`), instead of running every
    case in every process."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return []
    cases = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "case" in callspec.params and item.path.parent == HERE:
            cases.append(callspec.params["case"])
    return cases


@pytest.fixture(scope="session")
def fleets(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Fleet]]:
    """``{"sqlite": Fleet, "postgres": Fleet}``: a worker on a database of its own
    per backend (not the shared test database, which other tests truncate), each
    already driving the cases to start at once."""
    root = _root_conftest()
    pg_name = f"ductline_parity_{os.getpid()}"
    urls = {"sqlite": f"sqlite:///{tmp_path_factory.mktemp('parity') / 'ductline.db'}",
            "postgres": root.recreate_pg_database(pg_name)}
    cases = _upfront_cases(request.session)
    started: dict[str, Fleet] = {}
    holding: list[subprocess.Popen[bytes]] = []
    collectors = contextlib.ExitStack()
    try:
        for backend, url in urls.items():
            store = open_store(url)
            store.migrate()
            # Each worker exports its spans to a collector of its own (the run's spans
            # are compared with the ones execute records).
            receiver, endpoint = collectors.enter_context(otlp_support.serving())
            env = {**WORKER_ENV, "DUCTLINE_OTEL": "traces", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                   "OTEL_BSP_SCHEDULE_DELAY": "100"}
            proc = start_worker(url, concurrency=SLOTS, env=env, app=APP)
            holding.append(_start_holding_worker(url, env))  # its spans go to the same collector
            started[backend] = Fleet(backend, url, store, proc, cases, exported_spans(receiver))
        for fleet in started.values():
            fleet.start()
        yield started
    finally:
        for fleet in started.values():
            fleet.stop()
        _stop_workers([fleet.proc for fleet in started.values()] + holding)
        for fleet in started.values():
            fleet.store.close()
        collectors.close()
        with psycopg.connect(root.PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
        shutil.rmtree(os.environ[parity_app.GATES_ENV], ignore_errors=True)


@pytest.fixture(scope="session")
def local_runs(request: pytest.FixtureRequest, fleets: dict[str, Fleet]) -> Iterator[LocalRuns]:
    """The cases to start at once running through `ductline.execute`, a few at a
    time (started after the workers, so both kinds of drivers overlap)."""
    runs = LocalRuns(_upfront_cases(request.session), EXECUTE_PARALLEL)
    yield runs
    runs.close()
