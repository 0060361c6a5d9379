"""Seeding a store for the dashboard tests through the public API: trigger runs,
claim their jobs with `Store.claim`, record outcomes with `ductline.engine.record`
inside `Store.transaction()` (import as `web_support`)."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from typing import Any

import psycopg

import rt_app

from ductline import codec
from ductline import Pipeline
from ductline.model.states import AttemptResult
from ductline.model.outcomes import Ended
from ductline.engine import record
from ductline.store import Store
from ductline.store.records import ClaimedJob

TOKEN = "test-dashboard-token"
WORKER = "web-test-worker"
LEASE_MS = 60_000


def claim(store: Store, pipeline: Pipeline, limit: int = 1) -> list[ClaimedJob]:
    return store.claim(WORKER, [pipeline.name], limit, LEASE_MS)


def _attempt(job: ClaimedJob) -> record.Attempt:
    return record.Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token)


def succeed(store: Store, pipeline: Pipeline, job: ClaimedJob, output: Any) -> None:
    with store.transaction() as tx:
        done = record.success(tx, pipeline.definition(), _attempt(job), codec.dumps(output), 0)
    assert done.outcome == "completed", done


def fail(store: Store, pipeline: Pipeline, job: ClaimedJob, error: str = "bad input") -> record.Recorded:
    with store.transaction() as tx:
        return record.failure(tx, pipeline.definition(), _attempt(job), Ended(AttemptResult.ERRORED, "ValueError",
                              error), f'Traceback (most recent call last):\n  File "app.py", line 1\nValueError: {error}')


def halted_after_a_boundary(store: Store) -> Any:
    """A run of rt_app.unsafe whose step crossed its boundary ("charged the card") and
    then failed until the run halted (``unsafe_to_retry``); returns its handle."""
    handle = rt_app.unsafe.trigger(1, database=store)
    for _ in range(3):
        jobs = claim(store, rt_app.unsafe)
        if not jobs:
            break
        store.mark_boundary(jobs[0].job_id, jobs[0].lease_token, "charged the card")
        fail(store, rt_app.unsafe, jobs[0], "failed after paying")
    return handle


def complete_run(store: Store, pipeline: Pipeline, *args: Any) -> str:
    """Trigger and drive a run of a chain-like pipeline to completion (each step doubles its input)."""
    handle = pipeline.trigger(*args, database=store)
    while True:
        jobs = claim(store, pipeline, 10)
        if not jobs:
            break
        for job in jobs:
            next_millisecond(store)  # each step created at its own time: creation order is clear
            succeed(store, pipeline, job, codec.loads(job.input)[0])
    assert handle.status() == "completed", handle.status()
    return handle.id


def halted_run(store: Store) -> str:
    """A run of ``rt_failing`` whose first step failed on both attempts it may have."""
    handle = rt_app.failing.trigger(1, database=store)
    for _ in range(2):
        (job,) = claim(store, rt_app.failing)
        fail(store, rt_app.failing, job)
    assert handle.status() == "halted"
    return handle.id


def expanding_run(store: Store) -> str:
    """A running ``rt_fan`` run: make_list done, element 0 done, 1 running, 2 waiting."""
    handle = rt_app.fan.trigger(3, database=store)
    (first,) = claim(store, rt_app.fan)
    succeed(store, rt_app.fan, first, [0, 1, 2])
    jobs = claim(store, rt_app.fan, 2)
    assert [j.step for j in jobs] == ["slow_square", "slow_square"]
    succeed(store, rt_app.fan, jobs[0], 0)
    return handle.id


def next_millisecond(store: Store) -> None:
    """Wait until the database clock passed the current millisecond, so the next run
    gets a later ``created_ms`` (newest-first order is then unambiguous)."""
    start = store.now_ms()
    while store.now_ms() <= start:
        time.sleep(0.001)


def seed(store: Store) -> dict[str, str]:
    """One run in each interesting state (created in this order), plus a live worker."""
    ids = {}
    for name, make in (("completed", lambda: complete_run(store, rt_app.chain, 2)),
                       ("halted", lambda: halted_run(store)), ("running", lambda: expanding_run(store)),
                       ("delayed", lambda: rt_app.chain.trigger(5, delay=3600, database=store).id)):
        next_millisecond(store)
        ids[name] = make()
    store.register_worker(WORKER, "test-host", 4242, 2)
    store.renew_leases(WORKER, [], LEASE_MS, busy=1)
    return ids


class Raw:
    """Writes rows behind the store's back (the test plays a hostile database)."""

    def __init__(self, backend: str, db_url: str) -> None:
        self.backend, self.db_url = backend, db_url

    def run(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        if self.backend == "sqlite":
            with closing(sqlite3.connect(self.db_url.removeprefix("sqlite:///"))) as conn:
                for sql, params in statements:
                    conn.execute(sql, params)
                conn.commit()
            return
        with psycopg.connect(self.db_url, autocommit=False) as conn:
            for sql, params in statements:
                conn.execute(sql.replace("?", "%s"), params)
