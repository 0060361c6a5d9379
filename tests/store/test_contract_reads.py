"""Store contract: read verbs and the database clock."""

from __future__ import annotations

import time

from contract_support import (LONG_LEASE_MS, PIPELINE, WORKER, claim_one, create_run, job, make_job,
                              wait_for)
from ductline.model.states import AttemptResult
from ductline.store import Store


def next_millisecond(store: Store) -> None:
    """Wait until the database clock has moved past the current millisecond, so the
    next row created gets a later ``created_ms`` (newest-first needs distinct times)."""
    start = store.now_ms()
    wait_for(lambda: store.now_ms() > start, timeout=5, interval=0.001)


def test_get_run(store: Store) -> None:
    assert store.get_run("no-such-run") is None
    before = store.now_ms()
    run_id, _ = create_run(store, delay_ms=2500, timeout_seconds=30)
    after = store.now_ms()
    run = store.get_run(run_id)
    assert run is not None
    assert (run["id"], run["pipeline"], run["status"], run["args"]) == (run_id, PIPELINE, "pending", "[1]")
    assert (run["output"], run["halt_reason"], run["metadata"]) == (None, None, "{}")
    assert (run["timeout_seconds"], run["deadline_ms"], run["started_ms"], run["finished_ms"]) == \
        (30, None, None, None)
    assert before <= run["created_ms"] <= after
    assert before + 2500 <= run["not_before_ms"] <= after + 2500


def test_list_runs_newest_first_with_filters(store: Store) -> None:
    assert store.list_runs() == []
    ids = []
    for pipeline in ("p1", "p2", "p1", "p2"):
        next_millisecond(store)
        run_id, _ = create_run(store, pipeline=pipeline)
        ids.append(run_id)
    oldest_p1, oldest_p2, newest_p1, newest_p2 = ids
    claim_one(store, pipeline="p1")  # starts oldest_p1 (its job is the earliest ready one)

    assert [r["id"] for r in store.list_runs()] == list(reversed(ids))
    assert [r["id"] for r in store.list_runs(limit=2)] == [newest_p2, newest_p1]
    assert [r["id"] for r in store.list_runs(pipeline="p1")] == [newest_p1, oldest_p1]
    assert [r["id"] for r in store.list_runs(status="pending")] == [newest_p2, newest_p1, oldest_p2]
    assert [r["id"] for r in store.list_runs(status="running")] == [oldest_p1]
    assert [r["id"] for r in store.list_runs(status="pending", pipeline="p2")] == [newest_p2, oldest_p2]
    assert store.list_runs(status="halted") == []
    assert store.list_runs(pipeline="p3") == []
    listed = store.list_runs(status="running")[0]
    assert set(listed) >= {"id", "pipeline", "status", "halt_reason", "created_ms", "started_ms", "finished_ms"}
    assert (listed["pipeline"], listed["status"]) == ("p1", "running")
    assert listed["started_ms"] is not None


def test_run_jobs_lists_every_job_of_the_run(store: Store) -> None:
    run_id, (a, b) = create_run(store, {"step": "a", "scope": ""},
                                {"step": "b", "scope": "0.3", "parent_scope": "0", "elem_index": 3,
                                 "delay_ms": 600_000})
    other_run, _ = create_run(store)
    rows = store.run_jobs(run_id)
    assert [r["id"] for r in rows] == [a, b]  # same created_ms or not, ordered by creation then scope
    first, second = rows
    assert (first["step"], first["scope"], first["parent_scope"], first["elem_index"]) == ("a", "", None, None)
    assert (second["step"], second["scope"], second["parent_scope"], second["elem_index"]) == \
        ("b", "0.3", "0", 3)
    assert (second["status"], second["attempts"], second["failures"], second["crashes"]) == ("pending", 0, 0, 0)
    assert second["not_before_ms"] >= second["created_ms"] + 600_000
    assert (second["output"], second["boundary"], second["skip_reason"], second["finished_ms"]) == \
        (None, None, None, None)
    assert len(store.run_jobs(other_run)) == 1
    assert store.run_jobs("no-such-run") == []


def test_run_attempts_in_order(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    first = claim_one(store)
    with store.transaction() as tx:
        assert tx.retry_job(job_id, first.lease_token, 0)
        tx.close_attempt(job_id, 1, first.lease_token, AttemptResult.TIMED_OUT, "TimeoutError", "too slow")
    second = claim_one(store, worker_id="worker-2")
    with store.transaction() as tx:
        assert tx.complete_job(job_id, second.lease_token, "42")
        tx.close_attempt(job_id, 2, second.lease_token, AttemptResult.SUCCEEDED)
    attempts = store.run_attempts(run_id)
    assert [(a["job_id"], a["attempt"], a["result"], a["worker_id"]) for a in attempts] == \
        [(job_id, 1, "timed_out", WORKER), (job_id, 2, "succeeded", "worker-2")]
    assert attempts[0]["started_ms"] == first.started_ms and attempts[1]["started_ms"] == second.started_ms
    assert (attempts[0]["error_type"], attempts[0]["error"]) == ("TimeoutError", "too slow")
    assert attempts[0]["finished_ms"] <= attempts[1]["started_ms"]
    assert job(store, run_id, job_id)["output"] == "42"


def test_get_attempt_reads_one_attempt_by_its_key(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    first = claim_one(store)
    assert store.get_attempt(job_id, 1)["result"] is None  # open
    with store.transaction() as tx:
        assert tx.retry_job(job_id, first.lease_token, 0)
        tx.close_attempt(job_id, 1, first.lease_token, AttemptResult.TIMED_OUT, "TimeoutError", "too slow")
    claim_one(store, worker_id="worker-2")
    assert store.get_attempt(job_id, 1) == store.run_attempts(run_id)[0]
    assert (store.get_attempt(job_id, 2)["worker_id"], store.get_attempt(job_id, 2)["result"]) == ("worker-2", None)
    assert store.get_attempt(job_id, 3) is None and store.get_attempt("no-such-job", 1) is None


def test_run_progress_counts_jobs_by_status(store: Store) -> None:
    run_id, job_ids = create_run(store, *[{} for _ in range(5)], {"delay_ms": 600_000})
    assert store.run_progress(run_id) == {"pending": 6}
    claims = store.claim(WORKER, [PIPELINE], 3, LONG_LEASE_MS)
    with store.transaction() as tx:
        assert tx.complete_job(claims[0].job_id, claims[0].lease_token, "0")
        assert tx.fail_job(claims[1].job_id, claims[1].lease_token)
    assert store.run_progress(run_id) == {"pending": 3, "running": 1, "completed": 1, "failed": 1}
    assert store.run_progress("no-such-run") == {}


def test_running_steps_and_lease_state(store: Store) -> None:
    run_id, (a, b, c) = create_run(store, {"step": "beta"}, {"step": "alpha"}, {"step": "beta"})
    assert store.running_steps(run_id) == []
    claims = store.claim(WORKER, [PIPELINE], 3, LONG_LEASE_MS)
    assert store.running_steps(run_id) == ["alpha", "beta"]
    token = {x.job_id: x.lease_token for x in claims}
    assert store.lease_state(b) == {"status": "running", "lease_token": token[b]}
    assert store.lease_state("no-such-job") is None


# -- the database clock --------------------------------------------------------------


def test_database_clock_is_close_to_wall_time(store: Store) -> None:
    db = store.now_ms()
    wall = time.time() * 1000
    assert abs(db - wall) < 2000
    with store.transaction() as tx:
        assert abs(tx.now_ms() - time.time() * 1000) < 2000


def test_database_clock_is_read_when_the_statement_runs(store: Store) -> None:
    """Inside one transaction the clock keeps moving (``clock_timestamp()``, not the
    transaction's start time), so not-before times are set at commit, not at BEGIN."""
    with store.transaction() as tx:
        first = tx.now_ms()
        start = time.monotonic()
        wait_for(lambda: time.monotonic() - start >= 0.1, timeout=5, interval=0.01)
        second = tx.now_ms()
    assert second - first >= 90


def test_job_not_before_is_read_at_insert_time_not_transaction_start(store: Store) -> None:
    run_id, _ = create_run(store)
    with store.transaction() as tx:
        begun = tx.now_ms()
        start = time.monotonic()
        wait_for(lambda: time.monotonic() - start >= 0.1, timeout=5, interval=0.01)
        late = make_job(run_id, step="later", delay_ms=1000)
        tx.insert_jobs([late])
    assert job(store, run_id, late.id)["not_before_ms"] >= begun + 90 + 1000
