"""Durability: SIGKILL a real worker at named points of its loop (and in the middle
of a step); a fresh worker finishes every run with each step succeeded once.

Every checkpoint runs on SQLite and on PostgreSQL; PostgreSQL through a real PgBouncer
in transaction pooling mode -- with LISTEN on a direct connection (``pgbouncer``) and
without one, polling (``pgbouncer-poll``) -- runs the kill in the middle of a step and
the SIGTERM on both routes, and a share of the checkpoints (`THROUGH_PGBOUNCER`)."""

from __future__ import annotations

import os
import signal

import pgbouncer_support
import pytest
import rt_app
from helpers import start_worker, stop_worker, wait_for

from ductline.views import run_view

RUNS = 4
CHECKPOINTS = ["after_claim", "after_dispatch", "before_record", "after_record"]
BATCH_CHECKPOINTS = ["after_record", "after_claim"]
# Every checkpoint sits between two committed transactions, so what a kill there
# loses is the worker's own state (claimed jobs not started, a result not recorded),
# the same whichever way its connections reach PostgreSQL: the store's SQL is the
# same, and a killed client of PgBouncer holds no transaction the pooler must roll
# back. What the routes through PgBouncer add is that a second worker behind it
# finds and finishes the dead worker's jobs, woken by LISTEN or by polling: each
# route runs one checkpoint of each test (a dispatched attempt and an unrecorded
# result; an outcome recorded together with a claim and a claim alone), and a kill
# at any moment, in the middle of a step, where it may hold a transaction.
THROUGH_PGBOUNCER = [("pgbouncer", "after_dispatch"), ("pgbouncer-poll", "before_record")]
BATCH_THROUGH_PGBOUNCER = [("pgbouncer", "after_record"), ("pgbouncer-poll", "after_claim")]


def _cases(checkpoints, through_pgbouncer):
    """``(backend, checkpoint)`` pairs: every checkpoint on both backends, then the
    ones through PgBouncer."""
    return [(backend, checkpoint) for backend in ("sqlite", "postgres") for checkpoint in checkpoints] \
        + through_pgbouncer


@pytest.fixture(params=["sqlite", "postgres", "pgbouncer", "pgbouncer-poll"])
def backend(request):
    return request.param


@pytest.fixture
def db_url(db_url, backend, request, monkeypatch):
    """The shared fixture's database; for the PgBouncer routes, the same PostgreSQL
    database reached through PgBouncer (the test's store and its workers alike)."""
    if not backend.startswith("pgbouncer"):
        return db_url
    bouncer = request.getfixturevalue("pgbouncer")
    return pgbouncer_support.route(bouncer, db_url, monkeypatch, listen=backend == "pgbouncer")


def assert_each_step_succeeded_once(store, handles):
    for handle in handles:
        view = run_view(store, handle.id)
        assert view["status"] == "completed", view
        assert handle.output() == 2 * handle_input(view)
        assert [s["step"] for s in view["steps"]] == ["slow_step", "double"]
        for step in view["steps"]:
            results = [a["result"] for a in step["attempts"]]
            assert results.count("succeeded") == 1, (step["step"], results)
            assert set(results) <= {"succeeded", "crashed"}


def handle_input(view):
    return view["args"][0]


@pytest.mark.parametrize(("backend", "checkpoint"), _cases(CHECKPOINTS, THROUGH_PGBOUNCER))
def test_sigkill_at_checkpoint_loses_nothing(store, db_url, checkpoint):
    env = {"DUCTLINE_LEASE_SECONDS": "2", "DUCTLINE_FAULT": checkpoint}
    first = start_worker(db_url, env=env)
    handles = [rt_app.slow_chain.trigger(i, database=store) for i in range(RUNS)]
    assert first.wait(90) == -signal.SIGKILL
    second = start_worker(db_url, env={"DUCTLINE_LEASE_SECONDS": "2"})
    try:
        for handle in handles:
            assert handle.wait(60) == "completed"
    finally:
        stop_worker(second)
    assert_each_step_succeeded_once(store, handles)


@pytest.mark.parametrize(("backend", "checkpoint"), _cases(BATCH_CHECKPOINTS, BATCH_THROUGH_PGBOUNCER))
def test_sigkill_after_a_batch_that_recorded_and_claimed_together_loses_nothing(store, db_url, checkpoint):
    # The worker claims its next jobs inside the transaction that records outcomes:
    # killed after that commit, before the claimed attempts start, the claimed jobs
    # wait for their leases to expire and run once on the next worker (each step
    # succeeds once; the claimed-but-unstarted attempts are recorded crashed). The
    # runs come from one trigger_many transaction.
    env = {"DUCTLINE_LEASE_SECONDS": "2", "DUCTLINE_FAULT": checkpoint}
    handles = rt_app.slow_chain.trigger_many(list(range(RUNS)), database=store)
    first = start_worker(db_url, env=env, concurrency=RUNS)
    assert first.wait(30) == -signal.SIGKILL
    # What the killed worker committed is consistent: every running job has its open
    # attempt (the claim and its attempt row commit together), every completed job
    # its succeeded attempt.
    for handle in handles:
        for step in run_view(store, handle.id)["steps"]:
            results = [a["result"] for a in step["attempts"]]
            if step["status"] == "running":
                assert results and results[-1] is None, step
            if step["status"] == "completed":
                assert results.count("succeeded") == 1, step
    second = start_worker(db_url, env={"DUCTLINE_LEASE_SECONDS": "2"})
    try:
        for handle in handles:
            assert handle.wait(60) == "completed"
    finally:
        stop_worker(second)
    assert_each_step_succeeded_once(store, handles)


def test_sigkill_in_the_middle_of_a_step(store, db_url):
    first = start_worker(db_url, env={"DUCTLINE_LEASE_SECONDS": "2"})
    handles = [rt_app.slow_chain.trigger(i, database=store) for i in range(RUNS)]
    wait_for(lambda: any(s["status"] == "running" for h in handles for s in run_view(store, h.id)["steps"]))
    os.kill(first.pid, signal.SIGKILL)
    first.wait(90)
    second = start_worker(db_url, env={"DUCTLINE_LEASE_SECONDS": "2"})
    try:
        for handle in handles:
            assert handle.wait(60) == "completed"
    finally:
        stop_worker(second)
    assert_each_step_succeeded_once(store, handles)


def test_sigterm_lets_running_attempts_finish(store, db_url):
    worker = start_worker(db_url)
    handle = rt_app.slow_chain.trigger(5, database=store)
    wait_for(lambda: run_view(store, handle.id)["steps"][0]["status"] == "running")
    assert stop_worker(worker, signal.SIGTERM) == 0
    step = run_view(store, handle.id)["steps"][0]
    assert [a["result"] for a in step["attempts"]] == ["succeeded"]
    # the next step was created but nobody claimed it: it waits, nothing is lost
    second = start_worker(db_url)
    try:
        assert handle.wait(90) == "completed"
    finally:
        stop_worker(second)
    assert handle.output() == 10
