"""Store contract: handing a run's next steps to the recording worker as they are
inserted (`Tx.insert_claimed`), both backends, real databases."""

from __future__ import annotations

from dataclasses import replace

from contract_support import LONG_LEASE_MS, PIPELINE, WORKER, claim_one, create_run, job, make_job
from ductline.store import Store
from ductline.store.records import AUTO_STATUS

SERVED = frozenset({PIPELINE})


def _under_way(store: Store, timeout_seconds: int | None = None) -> tuple[str, int | None]:
    """A run whose first job was claimed (so it is running); returns its id and deadline."""
    run_id, _ = create_run(store, timeout_seconds=timeout_seconds)
    first = claim_one(store)
    return run_id, first.run_deadline_ms


def test_a_ready_next_step_is_inserted_claimed_with_its_attempt(store: Store) -> None:
    run_id, run_deadline = _under_way(store, timeout_seconds=600)
    nxt = make_job(run_id, step="second", status=AUTO_STATUS, timeout_seconds=30, input='["a"]')
    t0 = store.now_ms()
    with store.transaction() as tx:
        claimed = tx.insert_claimed([nxt], WORKER, LONG_LEASE_MS, 2, SERVED)
        assert tx.readied_only_claimed()
    t1 = store.now_ms()
    assert [c.job_id for c in claimed] == [nxt.id]
    c = claimed[0]
    assert (c.run_id, c.pipeline, c.step, c.input, c.attempt) == (run_id, PIPELINE, "second", '["a"]', 1)
    assert t0 <= c.started_ms <= t1
    assert run_deadline is not None and c.run_deadline_ms == run_deadline
    assert c.deadline_ms == min(c.started_ms + 30_000, run_deadline)
    assert store.lease_state(nxt.id) == {"status": "running", "lease_token": c.lease_token}
    row = job(store, run_id, nxt.id)
    assert row["attempts"] == 1
    attempts = [a for a in store.run_attempts(run_id) if a["job_id"] == nxt.id]
    assert len(attempts) == 1
    assert attempts[0]["started_ms"] == c.started_ms and attempts[0]["deadline_ms"] == c.deadline_ms
    assert attempts[0]["worker_id"] == WORKER and attempts[0]["result"] is None
    # what was handed over is no longer ready for anyone else
    assert store.claim("another-worker", [PIPELINE], 10, LONG_LEASE_MS) == []


def test_only_ready_unlimited_jobs_of_served_pipelines_up_to_the_free_slots_are_handed_over(store: Store) -> None:
    run_id, _ = _under_way(store)
    ready = [make_job(run_id, step="e", scope=str(i), status=AUTO_STATUS) for i in range(3)]
    delayed = make_job(run_id, step="later", status=AUTO_STATUS, delay_ms=60_000)
    paused = make_job(run_id, step="held_back", status="paused")
    limited = replace(make_job(run_id, step="limited", status=AUTO_STATUS), limit_key="k")
    other = make_job(run_id, step="other", status=AUTO_STATUS, pipeline="not-served")
    with store.transaction() as tx:
        claimed = tx.insert_claimed([delayed, paused, limited, other, *ready], WORKER, LONG_LEASE_MS, 2, SERVED)
        assert not tx.readied_only_claimed(), "jobs were inserted that it did not claim"
    assert [c.job_id for c in claimed] == [ready[0].id, ready[1].id]
    statuses = {r["id"]: r["status"] for r in store.run_jobs(run_id)}
    assert statuses[ready[2].id] == "pending" and statuses[delayed.id] == "pending"
    assert statuses[paused.id] == "paused" and statuses[limited.id] == "pending"
    assert statuses[other.id] == "pending"
    assert statuses[ready[0].id] == statuses[ready[1].id] == "running"


def test_nothing_is_claimed_in_a_run_that_halted(store: Store) -> None:
    run_id, _ = _under_way(store)
    with store.transaction() as tx:
        assert tx.halt_run(run_id, "step_failed", {})
    nxt = make_job(run_id, step="second", status=AUTO_STATUS)
    with store.transaction() as tx:
        assert tx.insert_claimed([nxt], WORKER, LONG_LEASE_MS, 2, SERVED) == []
    assert job(store, run_id, nxt.id)["status"] == "held"


def test_an_existing_job_is_left_as_it_is_and_not_claimed(store: Store) -> None:
    run_id, _ = _under_way(store)
    first = make_job(run_id, step="second", status=AUTO_STATUS)
    with store.transaction() as tx:
        tx.insert_jobs([first], notify=False)
    again = make_job(run_id, step="second", status=AUTO_STATUS)  # same run, step and scope
    with store.transaction() as tx:
        assert tx.insert_claimed([again], WORKER, LONG_LEASE_MS, 2, SERVED) == []
    rows = [r for r in store.run_jobs(run_id) if r["step"] == "second"]
    assert [(r["id"], r["status"]) for r in rows] == [(first.id, "pending")]
