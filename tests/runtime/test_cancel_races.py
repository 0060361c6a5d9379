"""Cancel racing completion, serialized per run: whichever commits first wins, the
other sees the result. A completion recorded after the cancel is dropped; no job is
``completed`` with a ``cancelled`` attempt; nothing is left pending or running; and
a cancel that meets an uncommitted claim waits for it and ends the attempt it made.

1,000 races per backend for a one-step run (the completion completes the run) and
for a two-step run (the completion creates the next job), raced in batches of
independent runs on a thread pool."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import rt_app

from helpers import wait_for

from ductline import InvalidStateError
from ductline.operations.stop import cancel
from ductline.runtime import record

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
