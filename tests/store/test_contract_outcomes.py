"""Store contract: ending attempts under fencing, leases, retries, halting and reviving."""

from __future__ import annotations

import json
from typing import Callable

import pytest

from contract_support import (LONG_LEASE_MS, PIPELINE, WORKER, attempt_row, claim_one, create_run, job,
                              snapshot, wait_for)
from ductline.model.states import AttemptResult
from ductline.store import Store, Tx

WRONG_TOKEN = "0" * 32

# Each fenced verb, called with a job id and a token.
VERBS: dict[str, Callable[[Tx, str, str], bool]] = {
    "complete_job": lambda tx, j, t: tx.complete_job(j, t, '{"done": true}'),
    "retry_job": lambda tx, j, t: tx.retry_job(j, t, 0),
    "fail_job": lambda tx, j, t: tx.fail_job(j, t),
    "release_job": lambda tx, j, t: tx.release_job(j, t),
}
# What the job looks like after the verb won: (status, output, failures, crashes, finished).
AFTER = {
    "complete_job": ("completed", '{"done": true}', 0, 0, True),
    "retry_job": ("pending", None, 1, 0, False),
    "fail_job": ("failed", None, 1, 0, True),
    "release_job": ("pending", None, 0, 0, False),
}


def call(store: Store, verb: str, job_id: str, token: str) -> bool:
    with store.transaction() as tx:
        return VERBS[verb](tx, job_id, token)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_fenced_verb_with_a_wrong_token_changes_nothing(store: Store, verb: str) -> None:
    run_id, (job_id,) = create_run(store)
    c = claim_one(store)
    before = snapshot(store, run_id)
    assert call(store, verb, job_id, WRONG_TOKEN) is False
    assert snapshot(store, run_id) == before
    assert store.lease_state(job_id) == {"status": "running", "lease_token": c.lease_token}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_fenced_verb_with_the_right_token_wins_once(store: Store, verb: str) -> None:
    run_id, (job_id,) = create_run(store)
    c = claim_one(store)
    assert call(store, verb, job_id, c.lease_token) is True
    row = job(store, run_id, job_id)
    status, output, failures, crashes, finished = AFTER[verb]
    assert (row["status"], row["output"], row["failures"], row["crashes"]) == (status, output, failures, crashes)
    assert (row["finished_ms"] is not None) is finished
    assert store.lease_state(job_id) == {"status": status, "lease_token": None}

    after_first = snapshot(store, run_id)
    for again in sorted(VERBS):  # the same token is dead for every verb now
        assert call(store, again, job_id, c.lease_token) is False, again
    assert snapshot(store, run_id) == after_first


def test_a_token_from_an_earlier_attempt_is_rejected(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    first = claim_one(store)
    assert call(store, "release_job", job_id, first.lease_token)
    second = claim_one(store)
    assert second.job_id == job_id and second.attempt == 2
    assert second.lease_token != first.lease_token
    before = snapshot(store, run_id)
    for verb in sorted(VERBS):
        assert call(store, verb, job_id, first.lease_token) is False, verb
    assert snapshot(store, run_id) == before
    assert call(store, "complete_job", job_id, second.lease_token) is True


def test_close_attempt_records_the_result(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    c = claim_one(store)
    with store.transaction() as tx:
        assert tx.retry_job(job_id, c.lease_token, 0)
        tx.close_attempt(job_id, c.attempt, c.lease_token, AttemptResult.ERRORED, "ValueError", "boom",
                         "Traceback ...")
    row = attempt_row(store, run_id, job_id, 1)
    assert (row["result"], row["error_type"], row["error"], row["traceback"]) == \
        ("errored", "ValueError", "boom", "Traceback ...")
    assert row["finished_ms"] is not None and row["finished_ms"] >= row["started_ms"]


@pytest.mark.parametrize("close", ["close_attempt", "complete_and_close"])
def test_an_attempt_that_started_after_its_claim_records_that_start_and_its_deadline(
        store: Store, close: str) -> None:
    """A job claimed ahead starts later than its claim, and its timeout counts from that
    start: the row gets both (the claim's deadline would be the queue's wait short).
    An attempt that started at its claim keeps the claim's values."""
    _, (later, at_claim) = create_run(store, {"timeout_seconds": 60}, {"timeout_seconds": 60})
    claims = {c.job_id: c for c in store.claim(WORKER, [PIPELINE], 2, LONG_LEASE_MS)}
    run_id = claims[later].run_id
    started = {later: claims[later].started_ms + 250, at_claim: claims[at_claim].started_ms}
    deadline = {later: started[later] + 2_000, at_claim: 5}  # 5: ignored, the start did not move
    # An attempt ends after it started: a start still ahead would be recorded as the end
    # (an attempt given back before it started, its start at its not-before time).
    wait_for(lambda: store.now_ms() >= started[later])
    with store.transaction() as tx:
        for job_id, c in claims.items():
            if close == "close_attempt":
                assert tx.complete_job(job_id, c.lease_token, "null")
                tx.close_attempt(job_id, c.attempt, c.lease_token, AttemptResult.SUCCEEDED,
                                 started_ms=started[job_id], deadline_ms=deadline[job_id])
            else:
                assert tx.complete_and_close([(job_id, c.attempt, c.lease_token, "null", started[job_id],
                                               deadline[job_id])]) == {job_id}
    moved = attempt_row(store, run_id, later, 1)
    assert (moved["started_ms"], moved["deadline_ms"]) == (started[later], started[later] + 2_000)
    kept = attempt_row(store, run_id, at_claim, 1)
    assert (kept["started_ms"], kept["deadline_ms"]) == (claims[at_claim].started_ms, claims[at_claim].deadline_ms)


def test_close_attempt_after_the_lease_was_lost_changes_nothing(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    owner = claim_one(store, lease_ms=1)
    wait_for(lambda: [e for e in store.expired_leases() if e.lease_token == owner.lease_token], timeout=10)
    # A rescuer takes the expired lease: the job is re-queued and attempt 1 recorded crashed.
    with store.transaction() as tx:
        assert tx.retry_job(job_id, owner.lease_token, 0, crashed=True)
        tx.close_attempt(job_id, 1, owner.lease_token, AttemptResult.CRASHED, "WorkerLost", "lease expired")
    successor = claim_one(store)
    assert successor.attempt == 2
    before = snapshot(store, run_id)

    # The slow owner comes back with its result.
    with store.transaction() as tx:
        assert tx.complete_job(job_id, owner.lease_token, '"late"') is False
        tx.close_attempt(job_id, 1, owner.lease_token, AttemptResult.SUCCEEDED)
        tx.close_attempt(job_id, 2, owner.lease_token, AttemptResult.SUCCEEDED)
    assert snapshot(store, run_id) == before
    assert attempt_row(store, run_id, job_id, 1)["result"] == "crashed"
    assert attempt_row(store, run_id, job_id, 2)["result"] is None

    with store.transaction() as tx:  # the current owner still can
        assert tx.complete_job(job_id, successor.lease_token, '"on time"')
        tx.close_attempt(job_id, 2, successor.lease_token, AttemptResult.SUCCEEDED)
    assert attempt_row(store, run_id, job_id, 2)["result"] == "succeeded"
    assert job(store, run_id, job_id)["output"] == '"on time"'


def test_mark_boundary_is_fenced(store: Store) -> None:
    _, (job_id,) = create_run(store)
    c = claim_one(store)
    assert store.mark_boundary(job_id, WRONG_TOKEN, "charge card") is False
    with store.transaction() as tx:
        assert tx.job_budget(job_id).boundary is None
    assert store.mark_boundary(job_id, c.lease_token, "charge card") is True
    with store.transaction() as tx:
        assert tx.job_budget(job_id).boundary == "charge card"
    assert store.claim(WORKER, [PIPELINE], 1, LONG_LEASE_MS) == []


# -- leases ------------------------------------------------------------------------


def test_renew_leases_returns_db_now_and_the_tokens_still_held(store: Store) -> None:
    run_id, (a, b) = create_run(store, {}, {})
    claims = {c.job_id: c for c in store.claim(WORKER, [PIPELINE], 2, LONG_LEASE_MS)}
    with store.transaction() as tx:
        assert tx.complete_job(a, claims[a].lease_token, "1")
    before = store.now_ms()
    now, held, _ = store.renew_leases(WORKER, [claims[a].lease_token, claims[b].lease_token, WRONG_TOKEN],
                                   LONG_LEASE_MS)
    after = store.now_ms()
    assert before <= now <= after
    assert held == {claims[b].lease_token}

    now, held, _ = store.renew_leases(WORKER, [], LONG_LEASE_MS)
    assert held == set() and now >= after


def test_renew_leases_beats_the_registered_worker(store: Store) -> None:
    store.register_worker(WORKER, "host-a", 4242, 3)
    now, _, _ = store.renew_leases(WORKER, [], LONG_LEASE_MS, busy=2, undead=1)
    (worker,) = [w for w in store.list_workers() if w["id"] == WORKER]
    assert worker["heartbeat_ms"] == now
    assert (worker["host"], worker["pid"], worker["concurrency"]) == ("host-a", 4242, 3)
    assert (worker["busy"], worker["undead"], worker["status"]) == (2, 1, "running")
    store.worker_stopped(WORKER)
    (worker,) = [w for w in store.list_workers() if w["id"] == WORKER]
    assert worker["status"] == "stopped" and worker["busy"] == 0


def test_expired_leases_lists_only_leases_past_their_time(store: Store) -> None:
    _, (short, long_) = create_run(store, {}, {})
    s = claim_one(store, lease_ms=1)
    lg = claim_one(store, lease_ms=LONG_LEASE_MS)
    assert (s.job_id, lg.job_id) == (short, long_)

    expired = wait_for(lambda: store.expired_leases(), timeout=10)
    assert isinstance(expired, list)
    assert [(e.job_id, e.run_id, e.pipeline, e.step, e.attempt, e.lease_token) for e in expired] == \
        [(short, s.run_id, PIPELINE, s.step, 1, s.lease_token)]


def test_a_renewed_lease_outlives_its_first_term(store: Store) -> None:
    create_run(store)
    c = claim_one(store, lease_ms=1200)
    now, held, _ = store.renew_leases(WORKER, [c.lease_token], LONG_LEASE_MS)
    assert now < c.started_ms + 1200, "the renewal came after the first term ended; test is void"
    assert held == {c.lease_token}
    wait_for(lambda: store.now_ms() > c.started_ms + 1250, timeout=10)
    assert store.expired_leases() == []


def test_an_expired_lease_cannot_be_both_renewed_and_rescued(store: Store) -> None:
    _, (job_id,) = create_run(store)
    owner = claim_one(store, lease_ms=1)
    # A rescuer reads the expired lease (maintenance.rescue_expired) ...
    expired = wait_for(lambda: store.expired_leases(), timeout=10)
    assert isinstance(expired, list) and expired[0].lease_token == owner.lease_token
    # ... the owner's late heartbeat comes in ...
    _, held, _ = store.renew_leases(WORKER, [owner.lease_token], LONG_LEASE_MS)
    # ... and the rescuer re-queues the job under the token it read.
    with store.transaction() as tx:
        rescued = tx.retry_job(job_id, owner.lease_token, 0, crashed=True)
    assert not (owner.lease_token in held and rescued), \
        "the owner was told it still holds the lease, and the rescuer took the job anyway"


def test_an_ended_attempt_is_not_an_expired_lease(store: Store) -> None:
    _, (job_id,) = create_run(store)
    c = claim_one(store, lease_ms=1)
    wait_for(lambda: store.expired_leases(), timeout=10)
    assert call(store, "complete_job", job_id, c.lease_token)
    assert store.expired_leases() == []


# -- retry and failure -------------------------------------------------------------


@pytest.mark.parametrize("crashed", [False, True], ids=["error", "crash"])
def test_retry_job_requeues_after_the_delay_and_charges_one_budget(store: Store, crashed: bool) -> None:
    run_id, (job_id,) = create_run(store)
    c = claim_one(store)
    before = store.now_ms()
    with store.transaction() as tx:
        assert tx.retry_job(job_id, c.lease_token, 1500, crashed=crashed)
    after = store.now_ms()

    row = job(store, run_id, job_id)
    assert row["status"] == "pending"
    assert before + 1500 <= row["not_before_ms"] <= after + 1500
    assert (row["failures"], row["crashes"]) == ((0, 1) if crashed else (1, 0))
    assert store.lease_state(job_id) == {"status": "pending", "lease_token": None}
    assert store.next_not_before([PIPELINE]) == row["not_before_ms"]
    assert store.claim(WORKER, [PIPELINE], 1, LONG_LEASE_MS) == [], "retried job claimed before its delay"

    with store.transaction() as tx:
        budget = tx.job_budget(job_id)
    assert (budget.failures, budget.crashes) == ((0, 1) if crashed else (1, 0))
    assert (budget.max_retry, budget.max_crash, budget.retry_delay_seconds) == (3, 10, 10)
    assert (budget.run_id, budget.step, budget.pipeline) == (run_id, c.step, PIPELINE)


def test_failures_accumulate_across_attempts(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    for expected_attempt in (1, 2, 3):
        c = claim_one(store)
        assert c.attempt == expected_attempt
        with store.transaction() as tx:
            assert tx.retry_job(job_id, c.lease_token, 0, crashed=expected_attempt == 2)
    row = job(store, run_id, job_id)
    assert (row["attempts"], row["failures"], row["crashes"]) == (3, 2, 1)


@pytest.mark.parametrize("crashed", [False, True], ids=["error", "crash"])
def test_fail_job_sets_failed(store: Store, crashed: bool) -> None:
    run_id, (job_id,) = create_run(store)
    c = claim_one(store)
    with store.transaction() as tx:
        assert tx.fail_job(job_id, c.lease_token, crashed=crashed)
    row = job(store, run_id, job_id)
    assert row["status"] == "failed" and row["finished_ms"] is not None
    assert (row["failures"], row["crashes"]) == ((0, 1) if crashed else (1, 0))
    assert store.claim(WORKER, [PIPELINE], 1, LONG_LEASE_MS) == []


def test_release_job_is_claimable_again_at_once_without_charge(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    c = claim_one(store)
    assert call(store, "release_job", job_id, c.lease_token)
    again = claim_one(store)
    assert (again.job_id, again.attempt) == (job_id, 2)
    row = job(store, run_id, job_id)
    assert (row["failures"], row["crashes"]) == (0, 0)


# -- runs: complete, halt, revive --------------------------------------------------


def test_complete_run_only_once_and_only_when_running(store: Store) -> None:
    run_id, _ = create_run(store)
    with store.transaction() as tx:
        assert tx.complete_run(run_id, '"out"') is False, "a pending run cannot complete"
    claim_one(store)
    with store.transaction() as tx:
        assert tx.complete_run(run_id, '"out"') is True
        assert tx.run_status(run_id) == "completed"
    with store.transaction() as tx:
        assert tx.complete_run(run_id, '"again"') is False
        assert tx.halt_run(run_id, "job_retries_exhausted", {}) is False, "a completed run cannot halt"
        assert tx.run_status("no-such-run") is None
    run = store.get_run(run_id)
    assert run is not None and run["output"] == '"out"' and run["finished_ms"] is not None


def test_halt_run_once_holds_pending_jobs(store: Store) -> None:
    run_id, (running, pending, delayed) = create_run(store, {}, {"delay_ms": 600_000},
                                                     {"delay_ms": 600_000})
    c = claim_one(store)
    assert c.job_id == running
    meta = {"halted_step": "first", "reasons": [{"reason": "job_retries_exhausted"}]}
    with store.transaction() as tx:
        assert tx.halt_run(run_id, "job_retries_exhausted", meta) is True
    run = store.get_run(run_id)
    assert run is not None
    assert (run["status"], run["halt_reason"]) == ("halted", "job_retries_exhausted")
    assert json.loads(run["metadata"]) == meta
    assert run["finished_ms"] is not None
    statuses = {r["id"]: r["status"] for r in store.run_jobs(run_id)}
    assert statuses == {running: "running", pending: "held", delayed: "held"}
    assert store.next_not_before([PIPELINE]) is None

    before = snapshot(store, run_id)
    with store.transaction() as tx:
        assert tx.halt_run(run_id, "job_crashes_exhausted", {"other": 1}) is False
    assert snapshot(store, run_id) == before


def test_a_pending_run_can_halt(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    with store.transaction() as tx:
        assert tx.halt_run(run_id, "unsafe_to_retry", {})
    assert job(store, run_id, job_id)["status"] == "held"
    assert store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS) == []


@pytest.mark.parametrize("force", [False, True], ids=["keep-boundary", "force"])
def test_revive_run_makes_failed_and_held_jobs_pending(store: Store, force: bool) -> None:
    now = store.now_ms()
    run_id, (failed, held, done) = create_run(
        store, {"not_before_ms": now - 3000}, {"not_before_ms": now - 1000}, {"not_before_ms": now - 2000})
    claims = {c.job_id: c for c in store.claim(WORKER, [PIPELINE], 2, LONG_LEASE_MS)}
    assert set(claims) == {failed, done}
    assert store.mark_boundary(failed, claims[failed].lease_token, "sent email")
    with store.transaction() as tx:
        assert tx.complete_job(done, claims[done].lease_token, "1")
        assert tx.fail_job(failed, claims[failed].lease_token)
        assert tx.halt_run(run_id, "unsafe_to_retry", {"halted_step": "first"})
    assert job(store, run_id, held)["status"] == "held"

    failed_step = job(store, run_id, failed)["step"]
    assert store.revive_run(run_id, force_steps=[failed_step] if force else []) is True
    run = store.get_run(run_id)
    assert run is not None
    assert (run["status"], run["halt_reason"], run["finished_ms"]) == ("running", None, None)
    rows = {r["id"]: r for r in store.run_jobs(run_id)}
    assert {k: r["status"] for k, r in rows.items()} == {failed: "pending", held: "pending", done: "completed"}
    assert (rows[failed]["failures"], rows[failed]["crashes"]) == (0, 0)
    assert rows[failed]["boundary"] == (None if force else "sent email")
    assert rows[done]["output"] == "1"

    claimed = {c.job_id for c in store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS)}
    assert claimed == {failed, held}

    assert store.revive_run(run_id) is False, "a running run cannot be revived"


def test_revive_run_resets_crashes_too(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    c = claim_one(store)
    with store.transaction() as tx:
        assert tx.retry_job(job_id, c.lease_token, 0)
    c = claim_one(store)
    with store.transaction() as tx:
        assert tx.fail_job(job_id, c.lease_token, crashed=True)
        assert tx.halt_run(run_id, "job_crashes_exhausted", {})
    assert (job(store, run_id, job_id)["failures"], job(store, run_id, job_id)["crashes"]) == (1, 1)
    assert store.revive_run(run_id)
    row = job(store, run_id, job_id)
    assert (row["status"], row["failures"], row["crashes"]) == ("pending", 0, 0)
    with store.transaction() as tx:
        budget = tx.job_budget(job_id)
    assert (budget.failures, budget.crashes) == (0, 0)


def test_revive_run_keeps_the_remaining_delay_of_held_jobs(store: Store) -> None:
    run_id, (failing, delayed) = create_run(store, {}, {"delay_ms": 600_000})
    c = claim_one(store)
    assert c.job_id == failing
    not_before = job(store, run_id, delayed)["not_before_ms"]
    with store.transaction() as tx:
        assert tx.fail_job(failing, c.lease_token)
        assert tx.halt_run(run_id, "job_retries_exhausted", {})
    assert store.revive_run(run_id)
    assert job(store, run_id, delayed)["not_before_ms"] >= not_before
    assert {c.job_id for c in store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS)} == {failing}


def test_a_run_halted_before_it_started_gets_its_deadline_at_the_first_claim_after_revive(
        store: Store) -> None:
    run_id, _ = create_run(store, timeout_seconds=60)
    with store.transaction() as tx:
        assert tx.halt_run(run_id, "unsafe_to_retry", {})
    assert store.revive_run(run_id)
    c = claim_one(store)
    run = store.get_run(run_id)
    assert run is not None
    assert run["started_ms"] == c.started_ms
    assert run["deadline_ms"] == c.started_ms + 60_000 == c.run_deadline_ms


@pytest.mark.parametrize("requeue", ["retry_job", "retry_job_crashed", "release_job"])
def test_a_job_requeued_after_its_run_halted_is_held(store: Store, requeue: str) -> None:
    run_id, (failing, in_flight) = create_run(store, {}, {})
    claims = {c.job_id: c for c in store.claim(WORKER, [PIPELINE], 2, LONG_LEASE_MS)}
    with store.transaction() as tx:
        assert tx.fail_job(failing, claims[failing].lease_token)
        assert tx.halt_run(run_id, "job_retries_exhausted", {})
    token = claims[in_flight].lease_token
    with store.transaction() as tx:
        if requeue == "release_job":
            assert tx.release_job(in_flight, token)
        else:
            assert tx.retry_job(in_flight, token, 0, crashed=requeue == "retry_job_crashed")
    assert store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS) == [], "a new attempt started in a halted run"
    assert job(store, run_id, in_flight)["status"] == "held"


def test_revive_run_refuses_runs_that_are_not_halted(store: Store) -> None:
    run_id, (job_id,) = create_run(store)
    assert store.revive_run(run_id) is False  # pending
    c = claim_one(store)
    with store.transaction() as tx:
        assert tx.fail_job(job_id, c.lease_token)
    before = snapshot(store, run_id)
    assert store.revive_run(run_id) is False  # running, with a failed job
    assert snapshot(store, run_id) == before
    assert store.revive_run("no-such-run") is False


def test_a_batch_of_ended_attempts_locks_its_runs_once_and_reads_each_job_once(store: Store, db_url: str) -> None:
    """A batch locks all its runs in its first statement; an outcome of a run the batch
    locked does not lock it again, and a failure reads its job's budget and lease in one
    statement (jobs given back after a long wait used to cost five statements each)."""
    from contract_support import NotingDialect

    from ductline.engine.batch import Outcome, record_batch
    from ductline.engine.record import Attempt
    from ductline.store import open_store

    for _ in range(3):
        create_run(store)
    claimed = [claim_one(store) for _ in range(3)]
    noting = NotingDialect(open_store(db_url).dialect)
    try:
        outcomes = [Outcome(Attempt(c.job_id, c.run_id, c.step, c.scope, c.attempt, c.lease_token, c.started_ms),
                            c.pipeline, AttemptResult.CANCELLED, release=True, error="given back")
                    for c in claimed[:2]]
        last = claimed[2]
        outcomes.append(Outcome(Attempt(last.job_id, last.run_id, last.step, last.scope, last.attempt,
                                        last.lease_token, last.started_ms),
                                last.pipeline, AttemptResult.TIMED_OUT, error_type="StepTimeout", error="too slow"))
        record_batch(Store(noting), outcomes, {}, 0, now_ms=lambda: 0)
    finally:
        noting.close()
    assert noting.names.count("lock_runs") == 1
    assert noting.names.count("job_budget") == 3
    assert "lease_state" not in noting.names
    assert [job(store, c.run_id, c.job_id)["status"] for c in claimed] == ["pending", "pending", "pending"]
    assert [job(store, c.run_id, c.job_id)["failures"] for c in claimed] == [0, 0, 1]


def _first(x):
    return x


def _second(x):
    return x


@pytest.mark.parametrize("claim_next", [True, False])
def test_a_recording_that_claims_every_job_it_created_wakes_no_worker(store: Store, db_url: str,
                                                                       claim_next: bool) -> None:
    """A completion creates the chain's next job; the claim in the same transaction
    takes it: no other worker can get it, so no notification is sent (one round trip
    less per hop, and no claim by every other worker for nothing). A job the
    transaction did not claim still wakes the workers."""
    from contract_support import NotingDialect

    from ductline import Pipeline
    from ductline.engine.batch import Outcome, record_batch
    from ductline.engine.record import Attempt
    from ductline.store import open_store

    pipeline = Pipeline("contract_notify_chain").start(_first).chain(to=_second)
    definitions = {pipeline.name: pipeline.definition()}
    handle = pipeline.trigger(1, database=store)
    [first] = store.claim(WORKER, [pipeline.name], 1, LONG_LEASE_MS)
    claimed: list[str] = []

    def claim(tx: Tx) -> None:
        claimed.extend(j.step for j in tx.claim(WORKER, [pipeline.name], 1, LONG_LEASE_MS))

    noting = NotingDialect(open_store(db_url).dialect)
    try:
        attempt = Attempt(first.job_id, first.run_id, first.step, first.scope, first.attempt, first.lease_token,
                          first.started_ms)
        record_batch(Store(noting), [Outcome(attempt, first.pipeline, AttemptResult.SUCCEEDED, output="1")],
                     definitions, 0, now_ms=lambda: 0, then=claim if claim_next else None)
    finally:
        noting.close()
    statuses = {j["step"]: j["status"] for j in store.run_jobs(handle.id)}
    assert statuses == {"_first": "completed", "_second": "running" if claim_next else "pending"}
    assert claimed == (["_second"] if claim_next else [])
    assert noting.names.count("notify") == (0 if claim_next else 1)


def test_a_batch_of_successes_locks_its_runs_before_its_jobs_and_a_stop_first_wins(
        store: Store, db_url: str) -> None:
    """A batch of plain successes locks its runs in its first statement (PostgreSQL:
    the statement that completes the jobs; SQLite: the write lock its BEGIN took). A stop
    holding the run makes it wait; once the stop ended the run's attempt and
    committed, the success is dropped as a lost lease, not recorded into the
    cancelled run."""
    import threading

    from contract_support import NotingDialect

    from ductline import Pipeline
    from ductline.engine.stop import cancel
    from ductline.engine import record
    from ductline.engine.batch import Outcome, record_batch
    from ductline.engine.record import Attempt
    from ductline.store import open_store

    pipeline = Pipeline("contract_lock_first").start(_first).chain(to=_second)
    definitions = {pipeline.name: pipeline.definition()}
    handle = pipeline.trigger(1, database=store)
    [first] = store.claim(WORKER, [pipeline.name], 1, LONG_LEASE_MS)
    attempt = Attempt(first.job_id, first.run_id, first.step, first.scope, first.attempt, first.lease_token,
                      first.started_ms)
    noting = NotingDialect(open_store(db_url).dialect)
    results: list[list[record.Recorded]] = []
    try:
        with store.transaction() as tx:
            tx.run_metadata(first.run_id, for_stop=True)  # the stop's lock on the run
            recorder = threading.Thread(target=lambda: results.append(record_batch(
                Store(noting), [Outcome(attempt, first.pipeline, AttemptResult.SUCCEEDED, output="1")],
                definitions, 0, now_ms=lambda: 0)))
            recorder.start()
            if store.dialect.name == "postgres":  # SQLite: the stop holds the one writer lock
                wait_for(lambda: _waiting_on_a_lock(db_url), timeout=30)
            cancel(tx, pipeline.definition(), first.run_id)
        recorder.join(30)
    finally:
        noting.close()
    assert [r.outcome for r in results[0]] == [record.Outcome.LOST]
    statuses = {j["step"]: j["status"] for j in store.run_jobs(handle.id)}
    assert statuses == {"_first": "cancelled", "_second": "skipped"}
    run = store.get_run(handle.id)
    assert run is not None and run["status"] == "cancelled"
    # No statement reads the runs first: PostgreSQL locks them in the statement that
    # completes the jobs, SQLite's one writer lock (taken at BEGIN) holds them already.
    first_statement = "complete_close_jobs" if store.dialect.name == "postgres" else "complete_jobs"
    assert "lock_runs" not in noting.names and noting.names[0] == first_statement


def _waiting_on_a_lock(db_url: str) -> bool:
    """Whether a session of this database waits on a row lock of a run."""
    import psycopg

    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock' AND query LIKE '%FOR NO KEY UPDATE%'").fetchone() is not None


def _numbers(n):
    return list(range(n))


def _double(x):
    return 2 * x


def _total(xs):
    return xs


def test_a_batch_of_elements_counts_its_fanin_arrivals_in_one_statement(store: Store, db_url: str) -> None:
    """Elements of one collapse recorded together: one statement counts their
    arrivals. A batch that does not bring the last one creates no collapse job; the
    batch that does creates exactly one, with every element's output in element order."""
    from contract_support import NotingDialect

    from ductline import Pipeline
    from ductline.engine.batch import Outcome, record_batch
    from ductline.engine.record import Attempt
    from ductline.store import open_store

    pipeline = Pipeline("contract_batched_fanin").start(_numbers).expand(to=_double).collapse(into=_total)
    definitions = {pipeline.name: pipeline.definition()}
    handle = pipeline.trigger(5, database=store)

    def record(claimed, outputs) -> list[str]:
        noting = NotingDialect(open_store(db_url).dialect)
        try:
            record_batch(Store(noting), [
                Outcome(Attempt(c.job_id, c.run_id, c.step, c.scope, c.attempt, c.lease_token, c.started_ms),
                        c.pipeline, AttemptResult.SUCCEEDED, output=json.dumps(out))
                for c, out in zip(claimed, outputs)], definitions, 0, now_ms=lambda: 0)
        finally:
            noting.close()
        return noting.names

    [source] = store.claim(WORKER, [pipeline.name], 1, LONG_LEASE_MS)
    record([source], [[0, 1, 2, 3, 4]])
    elements = sorted(store.claim(WORKER, [pipeline.name], 10, LONG_LEASE_MS), key=lambda c: c.scope)
    assert len(elements) == 5
    # Out of element order on purpose: the gathered input is in element order all the same.
    names = record([elements[3], elements[0]], [6, 0])
    assert names.count("arrive_fanins") == 1
    assert {j["step"] for j in store.run_jobs(handle.id)} == {"_numbers", "_double"}
    names = record([elements[4], elements[1], elements[2]], [8, 2, 4])
    assert names.count("arrive_fanins") == 1
    assert [j["step"] for j in store.run_jobs(handle.id)].count("_total") == 1
    [collapse] = store.claim(WORKER, [pipeline.name], 10, LONG_LEASE_MS)
    assert collapse.step == "_total"
    assert json.loads(collapse.input) == [[0, 2, 4, 6, 8]]


def _give_back(store: Store, c, *, begun: bool) -> None:
    """Record ``c`` released, as a worker does: given back unstarted from its queue
    (``begun=False``), or stopped by its shutdown after it began."""
    from ductline.model.outcomes import GIVEN_BACK
    from ductline.engine.batch import Outcome, record_batch
    from ductline.engine.record import Attempt

    attempt = Attempt(c.job_id, c.run_id, c.step, c.scope, c.attempt, c.lease_token, c.started_ms, begun=begun)
    error = "worker shut down before the attempt finished" if begun else f"{GIVEN_BACK}: worker shut down"
    record_batch(store, [Outcome(attempt, c.pipeline, AttemptResult.CANCELLED, release=True, error=error)],
                 {}, 0, now_ms=lambda: 0)


def test_a_job_given_back_before_it_started_leaves_its_run_unstarted(store: Store) -> None:
    """A run's deadline counts from its first attempt's start: a job claimed ahead and
    given back before it started leaves its run pending, without start or deadline,
    and the claim that takes it again starts both."""
    run_id, (job_id,) = create_run(store, timeout_seconds=60)
    first = claim_one(store)
    assert store.get_run(run_id)["status"] == "running"
    _give_back(store, first, begun=False)
    run = store.get_run(run_id)
    assert (run["status"], run["started_ms"], run["deadline_ms"]) == ("pending", None, None)
    again = claim_one(store)
    run = store.get_run(run_id)
    assert again.attempt == first.attempt + 1
    assert run["status"] == "running" and run["started_ms"] == again.started_ms >= first.started_ms
    assert run["deadline_ms"] == again.run_deadline_ms == again.started_ms + 60_000


def test_a_job_released_after_it_began_keeps_its_run_started(store: Store) -> None:
    """A worker's shutdown gives back an attempt that ran: the run's start stands."""
    run_id, _ = create_run(store, timeout_seconds=60)
    c = claim_one(store)
    before = store.get_run(run_id)
    _give_back(store, c, begun=True)
    after = store.get_run(run_id)
    assert (after["status"], after["started_ms"], after["deadline_ms"]) == \
        ("running", before["started_ms"], before["deadline_ms"])


def test_a_first_attempt_that_waited_in_the_queue_moves_its_run_deadline(store: Store) -> None:
    """`Store.restart_run_deadline`: the run's start and deadline move to when its only
    attempt began; a second call (or a run with another attempt) moves nothing."""
    run_id, _ = create_run(store, timeout_seconds=60)
    c = claim_one(store)
    began = c.started_ms + 5_000
    assert store.restart_run_deadline(run_id, c.job_id, c.attempt, began) == began + 60_000
    run = store.get_run(run_id)
    assert (run["started_ms"], run["deadline_ms"]) == (began, began + 60_000)
    assert store.restart_run_deadline(run_id, c.job_id, c.attempt, began) is None  # never earlier or again
    other_run, _ = create_run(store, {}, {}, timeout_seconds=60)
    one, two = claim_one(store), claim_one(store)
    assert store.restart_run_deadline(other_run, one.job_id, one.attempt, one.started_ms + 5_000) is None
    assert store.get_run(other_run)["deadline_ms"] == two.run_deadline_ms


def test_a_run_without_a_deadline_is_not_moved(store: Store) -> None:
    run_id, _ = create_run(store)
    c = claim_one(store)
    assert store.restart_run_deadline(run_id, c.job_id, c.attempt, c.started_ms + 5_000) is None
    assert store.get_run(run_id)["started_ms"] == c.started_ms


def test_a_revived_job_no_longer_carries_why_it_was_cancelled(store: Store) -> None:
    """A sibling cancelled by a fail-fast halt keeps that reason while the run is
    halted; a retry revives it, and what it shows afterwards is its new run, not the
    old reason."""
    from ductline.model.states import HaltReason, JobStatus

    run_id, (failed_id, cancelled_id) = create_run(store, {}, {})
    failed, cancelled = claim_one(store), claim_one(store)
    reason = "cancelled because step 's' failed (fail_fast)"
    with store.transaction() as tx:
        tx.lock_runs([run_id])
        assert tx.fail_job(failed.job_id, failed.lease_token)
        tx.halt_run(run_id, HaltReason.JOB_RETRIES_EXHAUSTED.value, {})
        tx.abort_running(run_id, JobStatus.CANCELLED, AttemptResult.CANCELLED, "Cancelled", reason)
    assert job(store, run_id, cancelled.job_id)["skip_reason"] == reason
    assert store.revive_run(run_id)
    for job_id in (failed_id, cancelled_id):
        row = job(store, run_id, job_id)
        assert (row["status"], row["skip_reason"], row["skip_root"]) == ("pending", None, None)


def test_a_run_whose_first_attempt_began_is_never_unstarted(store: Store) -> None:
    """An attempt a worker's shutdown released had begun: when the job is later given
    back unstarted from another worker's queue, the run keeps its start and deadline."""
    run_id, _ = create_run(store, timeout_seconds=60)
    began = claim_one(store)
    _give_back(store, began, begun=True)
    queued = claim_one(store)
    _give_back(store, queued, begun=False)
    run = store.get_run(run_id)
    assert (run["status"], run["started_ms"], run["deadline_ms"]) == \
        ("running", began.started_ms, began.started_ms + 60_000)
    again = claim_one(store)
    assert store.restart_run_deadline(run_id, again.job_id, again.attempt, again.started_ms + 5_000) is None


def test_a_first_step_given_back_then_queued_again_moves_its_deadline_when_it_starts(store: Store) -> None:
    """Given back unstarted (the run back to pending), claimed ahead again, then begun:
    the run's clock starts when it began, the given-back attempt not counted."""
    run_id, _ = create_run(store, timeout_seconds=60)
    _give_back(store, claim_one(store), begun=False)
    again = claim_one(store)
    began = again.started_ms + 5_000
    assert store.restart_run_deadline(run_id, again.job_id, again.attempt, began) == began + 60_000
    run = store.get_run(run_id)
    assert (run["status"], run["started_ms"], run["deadline_ms"]) == ("running", began, began + 60_000)


def test_a_halt_tells_clients_waiting_for_the_run_once_at_commit(store: Store) -> None:
    """Clients waiting for a run (`RunHandle.wait`: LISTEN on PostgreSQL) hear of its
    halt when the transaction commits, and a second halt that changes nothing says
    nothing. SQLite has no notifications: its waiting clients poll."""
    if store.dialect.name != "postgresql":
        pytest.skip("notifications are PostgreSQL's (SQLite's waiting clients poll)")
    import psycopg

    run_id, _ = create_run(store)
    with psycopg.connect(store.url, autocommit=True) as listener:
        listener.execute("LISTEN ductline_runs")
        with store.transaction() as tx:
            assert tx.halt_run(run_id, "unsafe_to_retry", {})
            assert list(listener.notifies(timeout=0.2, stop_after=1)) == []  # not before the commit
        [heard] = list(listener.notifies(timeout=30, stop_after=1))
        assert heard.payload == run_id
        with store.transaction() as tx:
            assert tx.halt_run(run_id, "unsafe_to_retry", {}) is False
        assert list(listener.notifies(timeout=0.5, stop_after=1)) == []


def test_the_parents_of_runs_a_transaction_ended_need_no_query(store: Store, db_url: str) -> None:
    """The statement that completes runs (and, on PostgreSQL, the one that halts a run)
    reads their parents as it ends them: the engine's look for parents to wake
    (`ductline.store.children.parents_of`) queries only runs it did not end."""
    from contract_support import NotingDialect

    from ductline.store import children, open_store

    done, _ = create_run(store)
    other, _ = create_run(store)
    claim_one(store)
    noting = NotingDialect(open_store(db_url).dialect)
    try:
        with Store(noting).transaction() as tx:
            assert tx.complete_runs([(done, '"out"')]) == {done}
            assert children.parents_of(tx, [done]) == []
            assert "parents_of_runs" not in noting.names
            assert children.parents_of(tx, [done, other]) == []  # one it did not end: asked
            assert noting.names.count("parents_of_runs") == 1
    finally:
        noting.close()


def test_a_rescued_attempt_finished_when_its_lease_expired_not_when_it_was_rescued(store: Store) -> None:
    """The rescue comes a health-check interval (or a worker's start) after the lease
    ran out; the attempt ended by then: its worker kills its children before its
    leases can expire. Its finish is the expiry (ductline.model.outcomes.lease_expired)."""
    _rescued_late(store)


def test_the_in_memory_store_of_execute_records_a_rescue_alike() -> None:
    from ductline.store.memory import open_memory_store

    store = open_memory_store()
    try:
        _rescued_late(store)
    finally:
        store.close()


def _rescued_late(store: Store) -> None:
    from ductline.runtime.maintenance import rescue_expired

    run_id, (job_id,) = create_run(store)
    c = claim_one(store, lease_ms=1)
    [lease] = wait_for(lambda: store.expired_leases(), timeout=10)
    assert lease.lease_expires_ms is not None and lease.lease_expires_ms >= c.started_ms
    wait_for(lambda: store.now_ms() > lease.lease_expires_ms + 500, timeout=10)  # a late rescuer
    assert rescue_expired(store, {}) == 1
    row = attempt_row(store, run_id, job_id, 1)
    assert row["result"] == AttemptResult.CRASHED and row["error_type"] == "WorkerLost"
    assert row["finished_ms"] == lease.lease_expires_ms
    assert row["started_ms"] <= row["finished_ms"]
