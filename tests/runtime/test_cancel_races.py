"""Cancel racing completion, serialized per run: whichever commits first wins, the
other sees the result. A completion recorded after the cancel is dropped; no job is
``completed`` with a ``cancelled`` attempt; nothing is left pending or running; and
a cancel that meets an uncommitted claim waits for it and ends the attempt it made.

1,000 races per backend for a one-step run (the completion completes the run) and
for a two-step run (the completion creates the next job), raced in batches of
independent runs on a thread pool."""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import psycopg
import pytest
import rt_app

from helpers import drive, wait_for

from ductline import InvalidStateError
from ductline.engine.stop import cancel, sweep_orphans
from ductline.engine import record

RACES = 1000
BATCH = 50


def _complete(store, definition, claimed) -> str:
    attempt = record.Attempt(claimed.job_id, claimed.run_id, claimed.step, claimed.scope, claimed.attempt,
                             claimed.lease_token)
    with store.transaction() as tx:
        return record.success(tx, definition, attempt, "2", 0).outcome


def _cancel(store, definition, run_id) -> str:
    try:
        with store.transaction() as tx:
            cancel(tx, definition, run_id)
        return "cancelled"
    except InvalidStateError:
        return "refused"


def _check(store, run_id: str, completed: str, cancelled: str, single: bool) -> None:
    run = store.get_run(run_id)
    jobs = store.run_jobs(run_id)
    attempts = {a["job_id"]: a for a in store.run_attempts(run_id)}
    first = next(j for j in jobs if j["step"] == ("quick" if single else "add_one"))
    attempt = attempts[first["id"]]
    for job in jobs:  # nothing is left waiting or running, and no state contradicts another
        assert job["status"] in ("completed", "cancelled", "skipped"), job
        if job["id"] in attempts:
            result = attempts[job["id"]]["result"]
            assert result is not None
            assert (job["status"] == "completed") == (result == "succeeded"), (job, result)
    if completed == "completed":  # the completion committed first
        assert attempt["result"] == "succeeded" and first["status"] == "completed"
        if single:
            assert run["status"] == "completed" and cancelled == "refused"
        else:
            assert run["status"] == "cancelled" and cancelled == "cancelled"
            assert first["finished_ms"] <= run["finished_ms"]
    else:  # the cancel committed first: the result that came after it was dropped
        assert completed == "lost" and cancelled == "cancelled"
        assert attempt["result"] == "cancelled" and first["status"] == "cancelled"
        assert run["status"] == "cancelled"
        # the next step was never created: the cancel's walk records it skipped
        assert [j["status"] for j in jobs if j["step"] != first["step"]] in ([], ["skipped"] * (len(jobs) - 1))


@pytest.mark.parametrize("single", [True, False], ids=["one_step", "two_steps"])
def test_cancel_racing_completion_has_one_consistent_outcome(store, single):
    pipeline = rt_app.single if single else rt_app.chain
    definition = pipeline.definition()
    outcomes = {"completed": 0, "lost": 0}
    rng = random.Random(7)
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(RACES // BATCH):
            handles = [pipeline.trigger(1, database=store) for _ in range(BATCH)]
            claimed = {c.run_id: c for c in store.claim("racer", [pipeline.name], BATCH, 60_000)}
            assert len(claimed) == BATCH
            tasks = [("complete", h.id) for h in handles] + [("cancel", h.id) for h in handles]
            rng.shuffle(tasks)
            futures = {(kind, run_id): pool.submit(
                _complete if kind == "complete" else _cancel, store, definition,
                claimed[run_id] if kind == "complete" else run_id) for kind, run_id in tasks}
            for h in handles:
                completed = futures[("complete", h.id)].result()
                _check(store, h.id, completed, futures[("cancel", h.id)].result(), single)
                outcomes[completed] += 1
    assert sum(outcomes.values()) == RACES


def _waiting_on_a_lock(pg_url: str) -> bool:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                 "AND datname = current_database()").fetchone()[0])


def test_a_cancel_waits_for_an_uncommitted_claim_and_ends_its_attempt(store, backend, db_url):
    definition = rt_app.single.definition()
    for _ in range(3):
        handle = rt_app.single.trigger(1, database=store)
        claimed, release = threading.Event(), threading.Event()
        got = []

        def claim_and_hold():
            with store.transaction() as tx:
                got.extend(tx.claim("racer", ["rt_single"], 1, 60_000))
                claimed.set()
                release.wait(90)

        holder = threading.Thread(target=claim_and_hold)
        holder.start()
        assert claimed.wait(90) and len(got) == 1
        outcome = []
        canceller = threading.Thread(target=lambda: outcome.append(_cancel(store, definition, handle.id)))
        canceller.start()
        if backend == "postgres":  # the cancel is blocked by the claim's lock on the run
            wait_for(lambda: _waiting_on_a_lock(db_url), 30)
        release.set()
        holder.join(30)
        canceller.join(30)
        assert outcome == ["cancelled"]
        [job] = store.run_jobs(handle.id)
        [attempt] = store.run_attempts(handle.id)
        assert (job["status"], attempt["result"]) == ("cancelled", "cancelled")
        assert store.get_run(handle.id)["status"] == "cancelled"
        # The worker's completion arriving now is dropped: the run ended.
        assert _complete(store, definition, got[0]) == "lost"


def _end_run_behind_the_claim(db_url: str, run_id: str, status: str, metadata: dict) -> None:
    """End the run as a stop that looked before a claim of it committed leaves it:
    the run ended, the claimed job still running (its own connection, like that stop)."""
    query = "UPDATE ductline_runs SET status = %s, metadata = %s WHERE id = %s"
    params = (status, json.dumps(metadata), run_id)
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url[len("sqlite:///"):], timeout=30)
        with closing(conn), conn:  # committed, then closed
            conn.execute(query.replace("%s", "?"), params)
        return
    with psycopg.connect(db_url, autocommit=True) as pg:
        pg.execute(query, params)


@pytest.mark.parametrize(("status", "metadata", "job_status", "result", "error_type", "error"), [
    pytest.param("cancelled", {"cancelled": True}, "cancelled", "cancelled", "Cancelled", "the run was cancelled",
                 id="cancelled"),
    pytest.param("failed", {"timeout_exceeded": True}, "failed", "timed_out", "TimeoutError",
                 "stopped at the run deadline: the run exceeded its deadline of 2 s", id="deadline"),
    pytest.param("failed", {"pause_expired": True, "paused_step": "approve", "pause_timeout_seconds": 30},
                 "cancelled", "cancelled", "PauseExpired",
                 "cancelled because the pause before step 'approve' expired after 30 s without a resume",
                 id="pause-expired"),
])
def test_the_sweep_ends_a_job_claimed_behind_a_stop_as_that_stop_would_have(
        store, db_url, status, metadata, job_status, result, error_type, error):
    handle = rt_app.deadline_chain.trigger(1, database=store)
    assert drive(store, rt_app.deadline_chain, skip=("stuck",)) == ["quick"]  # stuck: claimed, left running
    _end_run_behind_the_claim(db_url, handle.id, status, metadata)
    assert sweep_orphans(store) == 1
    stuck = next(j for j in store.run_jobs(handle.id) if j["step"] == "stuck")
    attempt = next(a for a in store.run_attempts(handle.id) if a["job_id"] == stuck["id"])
    assert stuck["status"] == job_status
    assert (attempt["result"], attempt["error_type"], attempt["error"]) == (result, error_type, error)
    assert store.get_run(handle.id)["status"] == status
    assert sweep_orphans(store) == 0  # nothing is left running or waiting in an ended run
