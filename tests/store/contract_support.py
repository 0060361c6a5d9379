"""Builders and checks shared by the store contract tests (import as `contract_support`).

The root ``tests/conftest.py`` is loaded here by its path: under pytest's default
import mode every ``conftest.py`` is imported as the module ``conftest``, so a plain
``import conftest`` returns whichever conftest was imported last (for instance
``tests/runtime/conftest.py``) and breaks depending on which tests are collected.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator

from ductline.model.claim_order import UNDER_WAY
from ductline.store import Store, open_store
from ductline.store.records import ClaimedJob, NewJob, NewRun
from ductline.store.session import Dialect, Session

PIPELINE = "contract"
WORKER = "worker-contract"
LONG_LEASE_MS = 60_000


def _root_conftest() -> ModuleType:
    name = "ductline_tests_root_conftest"
    module = sys.modules.get(name)
    if module is None:
        path = Path(__file__).resolve().parents[1] / "conftest.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


conftest = _root_conftest()
wait_for: Callable[..., object] = conftest.wait_for
recreate_pg_database: Callable[[str], str] = conftest.recreate_pg_database
pg_url: Callable[[str], str] = conftest.pg_url


def new_id() -> str:
    return uuid.uuid4().hex


def make_run(run_id: str | None = None, *, pipeline: str = PIPELINE, args: str = "[1]",
             timeout_seconds: int | None = None, delay_ms: int = 0,
             not_before_ms: int | None = None) -> NewRun:
    return NewRun(id=run_id or new_id(), pipeline=pipeline, args=args, timeout_seconds=timeout_seconds,
                  delay_ms=delay_ms, not_before_ms=not_before_ms)


def make_job(run_id: str, *, step: str = "first", scope: str = "", pipeline: str = PIPELINE,
             job_id: str | None = None, parent_scope: str | None = None, elem_index: int | None = None,
             status: str = "pending", input: str = "[1]", delay_ms: int = 0,
             not_before_ms: int | None = None, max_retry: int = 3, max_crash: int = 10,
             retry_delay_seconds: int = 10, timeout_seconds: int | None = None, priority: int = 0,
             phase: int = UNDER_WAY) -> NewJob:
    return NewJob(id=job_id or new_id(), run_id=run_id, pipeline=pipeline, step=step, scope=scope,
                  parent_scope=parent_scope, elem_index=elem_index, status=status, input=input,
                  delay_ms=delay_ms, max_retry=max_retry, max_crash=max_crash,
                  retry_delay_seconds=retry_delay_seconds, timeout_seconds=timeout_seconds,
                  not_before_ms=not_before_ms, priority=priority, phase=phase)


def create_run(store: Store, *jobs: dict[str, Any], pipeline: str = PIPELINE,
               timeout_seconds: int | None = None, delay_ms: int = 0) -> tuple[str, list[str]]:
    """Insert a run and its jobs (keyword sets for `make_job`; one default job if none)
    in one transaction; returns ``(run_id, job_ids)``."""
    run = make_run(pipeline=pipeline, timeout_seconds=timeout_seconds, delay_ms=delay_ms)
    specs = list(jobs) or [{}]
    new_jobs = [make_job(run.id, **{"pipeline": pipeline, "scope": str(i), **spec})
                for i, spec in enumerate(specs)]
    with store.transaction() as tx:
        tx.insert_run(run)
        tx.insert_jobs(new_jobs)
    return run.id, [j.id for j in new_jobs]


def claim_one(store: Store, pipeline: str = PIPELINE, lease_ms: int = LONG_LEASE_MS,
              worker_id: str = WORKER) -> ClaimedJob:
    claimed = store.claim(worker_id, [pipeline], 1, lease_ms)
    assert len(claimed) == 1, claimed
    return claimed[0]


def job(store: Store, run_id: str, job_id: str) -> dict[str, Any]:
    rows = [r for r in store.run_jobs(run_id) if r["id"] == job_id]
    assert len(rows) == 1, rows
    return rows[0]


def snapshot(store: Store, run_id: str) -> tuple[Any, ...]:
    """Everything the store exposes about one run, to assert that a call changed nothing."""
    jobs = store.run_jobs(run_id)
    return (store.get_run(run_id), jobs, store.run_attempts(run_id),
            [store.lease_state(j["id"]) for j in jobs])


def attempt_row(store: Store, run_id: str, job_id: str, attempt: int) -> dict[str, Any]:
    rows = [a for a in store.run_attempts(run_id) if a["job_id"] == job_id and a["attempt"] == attempt]
    assert len(rows) == 1, rows
    return rows[0]


def run_threads(count: int, target: Callable[[int], Any], timeout: float = 30.0) -> list[Any]:
    """Run ``target(i)`` in ``count`` threads; return their results in order and
    re-raise the first exception a thread raised. The threads are daemons, and a
    target that loops should stop at its own deadline, so a hung test fails instead
    of keeping the interpreter alive."""
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            results[i] = target(i)
        except BaseException as exc:  # re-raised in the test's thread below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,), name=f"contract-{i}", daemon=True)
               for i in range(count)]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
        assert not t.is_alive(), f"{t.name} did not finish within {timeout} s"
    if errors:
        raise errors[0]
    return results


class PausingDialect:
    """A real dialect that stops inside a write transaction right after one named
    statement ran, until the test says go: a checkpoint that forces one exact
    interleaving of two transactions on the real database. Nothing is faked."""

    def __init__(self, inner: Dialect, after: str, when: Callable[[], bool] | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.url = inner.url
        self.after = after
        self.when = when  # pause only a run of the statement that finds this true
        self.reached = threading.Event()
        self.go = threading.Event()

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with self.inner.transaction() as session:
            yield _PausingSession(session, self)

    def reader(self) -> Any:
        return self.inner.reader()

    def run_script(self, sql: str) -> None:
        self.inner.run_script(sql)

    def table_exists(self, table: str) -> bool:
        return self.inner.table_exists(table)

    def close(self) -> None:
        self.inner.close()


class _PausingSession:
    def __init__(self, inner: Session, owner: PausingDialect) -> None:
        self.inner = inner
        self.owner = owner

    def _checkpoint(self, name: str) -> None:
        if name == self.owner.after and not self.owner.reached.is_set():
            if self.owner.when is not None and not self.owner.when():
                return
            self.owner.reached.set()
            assert self.owner.go.wait(90), "the test never released the paused transaction"

    def fetch(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        rows = self.inner.fetch(name, params)
        self._checkpoint(name)
        return rows

    def execute(self, name: str, params: dict[str, Any] | None = None) -> int:
        changed = self.inner.execute(name, params)
        self._checkpoint(name)
        return changed

    def execute_many(self, name: str, params: Iterable[dict[str, Any]]) -> None:
        self.inner.execute_many(name, params)
        self._checkpoint(name)


def pausing_store(db_url: str, after: str,
                  when: Callable[[], bool] | None = None) -> tuple[Store, PausingDialect]:
    """A store whose first write transaction to run ``after`` (while ``when()`` is true,
    if given) pauses right after it."""
    dialect = PausingDialect(open_store(db_url).dialect, after, when)
    return Store(dialect), dialect


class NotingDialect:
    """A real dialect whose write transactions note the names of the statements they run."""

    def __init__(self, inner):
        self.inner, self.name, self.url = inner, inner.name, inner.url
        self.names: list[str] = []

    @contextmanager
    def transaction(self):
        with self.inner.transaction() as session:
            yield NotingSession(session, self.names)

    def reader(self):
        return self.inner.reader()

    def close(self):
        self.inner.close()


class NotingSession:
    def __init__(self, inner, names):
        self.inner, self.names = inner, names

    def fetch(self, name, params=None):
        self.names.append(name)
        return self.inner.fetch(name, params)

    def execute(self, name, params=None):
        self.names.append(name)
        return self.inner.execute(name, params)

    def execute_many(self, name, params):
        self.names.append(name)
        self.inner.execute_many(name, params)
