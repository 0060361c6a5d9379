"""Store contract: creating work and claiming it (both backends, real databases)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from contract_support import (LONG_LEASE_MS, PIPELINE, WORKER, claim_one, create_run, job, make_job,
                              make_run, pausing_store, run_threads, wait_for)
from ductline.errors import StoreError
from ductline.model.states import AttemptResult
from ductline.store import Store, open_store
from ductline.store.records import ClaimedJob


def test_run_and_first_job_in_one_transaction_then_claim(store: Store) -> None:
    run = make_run(args='["x", 2]')
    first = make_job(run.id, step="start", scope="", input='["x", 2]')
    with store.transaction() as tx:
        tx.insert_run(run)
        tx.insert_jobs([first])

    before = store.get_run(run.id)
    assert before is not None
    assert before["status"] == "pending" and before["started_ms"] is None
    assert store.run_attempts(run.id) == []

    t0 = store.now_ms()
    claimed = store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS)
    t1 = store.now_ms()

    assert len(claimed) == 1
    c = claimed[0]
    assert (c.job_id, c.run_id, c.pipeline, c.step, c.scope, c.input) == \
        (first.id, run.id, PIPELINE, "start", "", '["x", 2]')
    assert c.attempt == 1
    assert isinstance(c.lease_token, str) and len(c.lease_token) >= 16
    assert t0 <= c.started_ms <= t1, "started_ms must come from the database clock"
    assert c.timeout_seconds is None and c.deadline_ms is None and c.run_deadline_ms is None
    assert c.boundary is None

    after = store.get_run(run.id)
    assert after is not None
    assert after["status"] == "running"
    assert after["started_ms"] == c.started_ms
    assert store.lease_state(first.id) == {"status": "running", "lease_token": c.lease_token}
    attempts = store.run_attempts(run.id)
    assert len(attempts) == 1
    assert attempts[0]["job_id"] == first.id and attempts[0]["attempt"] == 1
    assert attempts[0]["started_ms"] == c.started_ms and attempts[0]["result"] is None
    assert attempts[0]["worker_id"] == WORKER
    assert job(store, run.id, first.id)["attempts"] == 1


def test_a_transaction_that_raises_writes_nothing(store: Store) -> None:
    run = make_run()
    with pytest.raises(RuntimeError, match="abandon"):
        with store.transaction() as tx:
            tx.insert_run(run)
            tx.insert_jobs([make_job(run.id)])
            raise RuntimeError("abandon")
    assert store.get_run(run.id) is None
    assert store.run_jobs(run.id) == []
    assert store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS) == []


def test_delayed_job_is_claimed_only_after_its_not_before(store: Store) -> None:
    created_after = store.now_ms()
    run_id, (job_id,) = create_run(store, {"delay_ms": 1000})
    not_before = job(store, run_id, job_id)["not_before_ms"]
    assert not_before >= created_after + 1000

    assert store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS) == [], "claimed before its not-before time"
    assert store.now_ms() < not_before, "the database took over a second to answer; test is void"

    claimed = wait_for(lambda: store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS), timeout=10)
    assert isinstance(claimed, list) and len(claimed) == 1
    assert claimed[0].job_id == job_id
    assert claimed[0].not_before_ms == not_before
    assert claimed[0].started_ms >= not_before


def test_absolute_not_before_is_kept(store: Store) -> None:
    now = store.now_ms()
    run = make_run()
    pinned = make_job(run.id, not_before_ms=now + 3_600_000, delay_ms=5)
    with store.transaction() as tx:
        tx.insert_run(run)
        tx.insert_jobs([pinned])
    assert job(store, run.id, pinned.id)["not_before_ms"] == now + 3_600_000
    assert store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS) == []


def test_only_listed_pipelines_are_claimed(store: Store) -> None:
    _, (a,) = create_run(store, pipeline="alpha")
    _, (b,) = create_run(store, pipeline="beta")
    assert store.claim(WORKER, ["gamma"], 10, LONG_LEASE_MS) == []
    assert [c.job_id for c in store.claim(WORKER, ["alpha"], 10, LONG_LEASE_MS)] == [a]
    assert store.claim(WORKER, ["alpha"], 10, LONG_LEASE_MS) == []
    assert [c.job_id for c in store.claim(WORKER, ["gamma", "beta"], 10, LONG_LEASE_MS)] == [b]
    assert store.claim(WORKER, [], 10, LONG_LEASE_MS) == []


def test_limit_is_respected(store: Store) -> None:
    _, job_ids = create_run(store, *[{} for _ in range(5)])
    assert store.claim(WORKER, [PIPELINE], 0, LONG_LEASE_MS) == []
    sizes = []
    seen: list[str] = []
    for _ in range(4):
        batch = store.claim(WORKER, [PIPELINE], 2, LONG_LEASE_MS)
        sizes.append(len(batch))
        seen += [c.job_id for c in batch]
    assert sizes == [2, 2, 1, 0]
    assert sorted(seen) == sorted(job_ids)


def test_a_claimed_job_is_not_claimed_again(store: Store) -> None:
    create_run(store)
    c = claim_one(store)
    assert store.claim("another-worker", [PIPELINE], 10, LONG_LEASE_MS) == []
    assert store.lease_state(c.job_id) == {"status": "running", "lease_token": c.lease_token}


def test_earliest_not_before_is_claimed_first(store: Store) -> None:
    now = store.now_ms()
    _, (late, early, middle) = create_run(store, {"not_before_ms": now - 1000},
                                          {"not_before_ms": now - 3000}, {"not_before_ms": now - 2000})
    order = [claim_one(store).job_id for _ in range(3)]
    assert order == [early, middle, late]


def test_held_jobs_are_not_claimed(store: Store) -> None:
    create_run(store, {"status": "held"})
    assert store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS) == []


def test_inserting_the_same_step_run_twice_creates_one_row(store: Store) -> None:
    run = make_run()
    first = make_job(run.id, step="s", scope="0.1", input='["first"]')
    with store.transaction() as tx:
        tx.insert_run(run)
        tx.insert_jobs([first, make_job(run.id, step="s", scope="0.1", input='["same batch"]')])
    with store.transaction() as tx:
        tx.insert_jobs([make_job(run.id, step="s", scope="0.1", input='["second"]'),
                        make_job(run.id, step="s", scope="0.2"),
                        make_job(run.id, step="t", scope="0.1")])
    rows = store.run_jobs(run.id)
    assert sorted((r["step"], r["scope"]) for r in rows) == [("s", "0.1"), ("s", "0.2"), ("t", "0.1")]
    kept = [r for r in rows if (r["step"], r["scope"]) == ("s", "0.1")]
    assert kept[0]["id"] == first.id
    claimed = {c.job_id: c for c in store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS)}
    assert claimed[first.id].input == '["first"]'


def test_every_job_is_claimed_exactly_once_by_concurrent_claimers(db_url: str, store: Store) -> None:
    job_ids: list[str] = []
    for _ in range(10):
        _, ids = create_run(store, *[{} for _ in range(20)], timeout_seconds=600)
        job_ids += ids
    assert len(job_ids) == 200
    start = threading.Barrier(4, timeout=10)

    def claimer(i: int) -> list[ClaimedJob]:
        own = open_store(db_url)
        try:
            got: list[ClaimedJob] = []
            start.wait()
            give_up = time.monotonic() + 20
            while time.monotonic() < give_up:
                batch = own.claim(f"worker-{i}", [PIPELINE], 3, LONG_LEASE_MS)
                got += batch
                # An empty batch can also mean "every ready row is locked by another
                # claimer right now" (SKIP LOCKED); stop only once nothing is pending.
                if not batch and own.next_not_before([PIPELINE]) is None:
                    return got
            raise AssertionError(f"worker-{i} still finds pending jobs after 20 s")
        finally:
            own.close()

    per_worker = run_threads(4, claimer, timeout=40)
    everything = [c for got in per_worker for c in got]
    claimed_ids = [c.job_id for c in everything]
    assert len(claimed_ids) == len(set(claimed_ids)), "a job was claimed twice"
    assert sorted(claimed_ids) == sorted(job_ids)
    assert {c.attempt for c in everything} == {1}
    assert len({c.lease_token for c in everything}) == 200
    assert store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS) == []
    # Each run starts at its earliest attempt; a job claimed by a later claim may carry
    # a run deadline later by at most the gap between the two claims.
    for c in everything:
        run = store.get_run(c.run_id)
        assert run is not None and run["status"] == "running"
        assert run["deadline_ms"] == run["started_ms"] + 600_000
        assert run["started_ms"] <= c.started_ms
        assert run["deadline_ms"] <= c.run_deadline_ms <= run["deadline_ms"] + (c.started_ms - run["started_ms"])
    assert sum(len(store.run_attempts(r)) for r in {c.run_id for c in everything}) == 200


def test_a_duplicate_run_id_is_a_store_error_and_writes_nothing(store: Store) -> None:
    run = make_run()
    with store.transaction() as tx:
        tx.insert_run(run)
    other = make_run(pipeline="other")
    with pytest.raises(StoreError):
        with store.transaction() as tx:
            tx.insert_run(other)
            tx.insert_jobs([make_job(other.id, pipeline="other")])
            tx.insert_run(run)
    assert store.get_run(other.id) is None
    assert store.claim(WORKER, ["other"], 10, LONG_LEASE_MS) == []
    assert store.get_run(run.id) is not None  # the store is still usable after the error


# -- deadlines ---------------------------------------------------------------------


def test_step_timeout_sets_deadline_from_the_claim(store: Store) -> None:
    run_id, (job_id,) = create_run(store, {"timeout_seconds": 5})
    c = claim_one(store)
    assert c.timeout_seconds == 5
    assert c.deadline_ms == c.started_ms + 5000
    assert c.run_deadline_ms is None
    assert store.run_attempts(run_id)[0]["deadline_ms"] == c.deadline_ms
    run = store.get_run(run_id)
    assert run is not None and run["deadline_ms"] is None


@pytest.mark.parametrize(("run_timeout", "step_timeout", "earlier"), [
    (60, 5, "step"),
    (2, 5, "run"),
    (7, None, "run"),
])
def test_run_deadline_starts_at_first_claim_and_bounds_the_job(
        store: Store, run_timeout: int, step_timeout: int | None, earlier: str) -> None:
    run_id, _ = create_run(store, {"timeout_seconds": step_timeout}, timeout_seconds=run_timeout)
    run = store.get_run(run_id)
    assert run is not None and run["timeout_seconds"] == run_timeout
    assert run["deadline_ms"] is None, "the run deadline must not count before the first attempt starts"

    c = claim_one(store)
    run = store.get_run(run_id)
    assert run is not None
    assert run["started_ms"] == c.started_ms
    assert run["deadline_ms"] == c.started_ms + run_timeout * 1000
    assert c.run_deadline_ms == run["deadline_ms"]
    step_deadline = None if step_timeout is None else c.started_ms + step_timeout * 1000
    assert c.deadline_ms == (step_deadline if earlier == "step" else run["deadline_ms"])
    assert store.run_attempts(run_id)[0]["deadline_ms"] == c.deadline_ms


def test_a_claim_that_runs_dry_says_when_to_wake_as_a_read_after_it_would(store: Store) -> None:
    """The claim that found fewer jobs than it asked for reads the next wake-ups with
    it (PostgreSQL: in the claim's statement): they must be what a read after the
    claim says -- not the job it just claimed, and the deadline of the run it started."""
    started_run, (due_now,) = create_run(store, {}, timeout_seconds=60)
    later_run, (later,) = create_run(store, {"delay_ms": 50_000})
    create_run(store, {"delay_ms": 90_000, "priority": 5})  # another queue, later still
    create_run(store, {"delay_ms": 70_000}, timeout_seconds=1)  # not started: no deadline yet
    with store.transaction() as tx:
        claimed = tx.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS)
        with_claim = tx.next_wakeups([PIPELINE])
        read_after = tx.next_wakeups([PIPELINE])  # asked again: a read of its own
    assert [c.job_id for c in claimed] == [due_now]
    assert with_claim == read_after
    run = store.get_run(started_run)
    assert run is not None and with_claim[1] == run["deadline_ms"] == claimed[0].run_deadline_ms
    assert with_claim[0] == job(store, later_run, later)["not_before_ms"]


def test_run_deadline_is_fixed_by_the_first_claim_only(store: Store) -> None:
    run_id, (first, second) = create_run(store, {}, {"delay_ms": 150}, timeout_seconds=60)
    c1 = claim_one(store)
    assert c1.job_id == first
    c2 = wait_for(lambda: store.claim(WORKER, [PIPELINE], 1, LONG_LEASE_MS), timeout=10)
    assert isinstance(c2, list) and c2[0].job_id == second
    assert c2[0].started_ms > c1.started_ms
    run = store.get_run(run_id)
    assert run is not None
    assert run["started_ms"] == c1.started_ms
    assert run["deadline_ms"] == c1.started_ms + 60_000
    assert c2[0].run_deadline_ms == c1.started_ms + 60_000
    assert c2[0].deadline_ms == c1.started_ms + 60_000


def test_run_deadline_counts_from_the_first_attempt_start_under_concurrent_claims(
        backend: str, db_url: str, store: Store, request: pytest.FixtureRequest) -> None:
    """Two workers claim the first two jobs of a run at nearly the same time. The first
    claim is held right after its claim statement (on SQLite, before it starts the run); the
    second claims and starts the run meanwhile. DESIGN: the run deadline is measured
    from the run's *first* attempt start, so no attempt of the run may start before it."""
    run_id, (a, b) = create_run(store, {}, {}, timeout_seconds=60)
    # PostgreSQL claims and starts the run in one statement (claim_start_jobs): the
    # first claim is held after it; SQLite's is held between claim_jobs and start_runs.
    slow, checkpoint = pausing_store(db_url, after="claim_start_jobs" if backend == "postgres" else "claim_jobs")

    def first_claim() -> list[ClaimedJob]:
        try:
            return slow.claim("worker-slow", [PIPELINE], 1, LONG_LEASE_MS)
        finally:
            slow.close()

    def second_claim() -> list[ClaimedJob]:
        own = open_store(db_url)
        try:
            return own.claim("worker-fast", [PIPELINE], 1, LONG_LEASE_MS)
        finally:
            own.close()

    results: dict[str, list[ClaimedJob]] = {}
    first = threading.Thread(target=lambda: results.__setitem__("first", first_claim()), daemon=True)
    second = threading.Thread(target=lambda: results.__setitem__("second", second_claim()), daemon=True)
    first.start()
    try:
        assert checkpoint.reached.wait(90), "the first claim never reached its checkpoint"
        paused_at = store.now_ms()
        wait_for(lambda: store.now_ms() >= paused_at + 20, timeout=5, interval=0.005)
        second.start()
        # On PostgreSQL the second claim (its snapshot saw the run pending) waits for
        # the run row the first one started, then finds it started (`stale`) and reads
        # its deadline again; give it time to get there before the first commits.
        second.join(0.5 if backend == "postgres" else 0)
    finally:
        checkpoint.go.set()  # on SQLite the second claim waits for this one (BEGIN IMMEDIATE)
    first.join(10)
    second.join(10)
    assert not first.is_alive() and not second.is_alive()
    assert set(results) == {"first", "second"}, "a claim raised (see the thread's traceback)"

    claimed = results["first"] + results["second"]
    assert sorted(c.job_id for c in claimed) == sorted([a, b])
    first_start = min(c.started_ms for c in claimed)
    run = store.get_run(run_id)
    assert run is not None
    assert run["started_ms"] == first_start
    assert run["deadline_ms"] == first_start + 60_000
    # A claim that started the run later may carry a deadline later by exactly that gap;
    # the run's durable deadline (which ends the run) is the earliest one.
    for c in claimed:
        assert run["deadline_ms"] <= c.run_deadline_ms <= run["deadline_ms"] + (c.started_ms - first_start)


def test_a_run_and_its_first_job_written_by_one_verb_and_a_held_key_writes_neither(store: Store) -> None:
    """`Tx.insert_run_with_job` (what a trigger writes): the job takes its run's clock
    read and its run's priority plus its own; a second run with the key of an active
    run writes no run and no job. On PostgreSQL all of it, with the wake-up, is one
    statement (a round trip less per trigger than run, job and notify apart)."""
    from dataclasses import replace

    from contract_support import NotingDialect

    run = replace(make_run(delay_ms=5_000), idempotency_key="order-7", priority=5)
    first = make_job(run.id, step="start", status="auto", delay_ms=5_000, priority=2)
    noting = NotingDialect(open_store(store.dialect.url).dialect)
    try:
        with Store(noting).transaction() as tx:
            assert tx.insert_run_with_job(run, first) is True
    finally:
        noting.close()
    assert noting.names == (["insert_run_with_job"] if store.dialect.name == "postgres"
                            else ["insert_run", "insert_job", "notify"])
    stored = store.get_run(run.id)
    assert stored is not None
    [job_row] = store.run_jobs(run.id)
    assert (job_row["id"], job_row["status"], job_row["priority"]) == (first.id, "pending", 7)
    assert stored["not_before_ms"] - stored["created_ms"] == 5_000
    assert job_row["not_before_ms"] - job_row["created_ms"] == 5_000
    if store.dialect.name == "postgres":  # one statement, one clock read
        assert job_row["created_ms"] == stored["created_ms"]

    again = replace(make_run(), idempotency_key="order-7")
    with store.transaction() as tx:
        assert tx.insert_run_with_job(again, make_job(again.id, step="start")) is False
    assert store.get_run(again.id) is None and store.run_jobs(again.id) == []
    assert [r["id"] for r in store.run_jobs(run.id)] == [first.id]


def test_a_claim_with_a_horizon_takes_unlimited_jobs_due_within_it(store: Store) -> None:
    """A worker claims delayed jobs shortly before their time (`Tx.claim`'s
    ``horizon_ms``) and starts them then: the claim takes the jobs of steps without
    limits due within the horizon, keeps their not-before times, and leaves the jobs
    due later, and those of limited steps, to whoever comes when they are due."""
    run_id, [ready, soon, later] = create_run(store, {}, {"delay_ms": 5_000}, {"delay_ms": 600_000})
    limited = replace(make_job(run_id, step="limited", scope="l", delay_ms=5_000), limit_key="k")
    with store.transaction() as tx:
        tx.insert_jobs([limited])
    with store.transaction() as tx:
        assert {c.job_id for c in tx.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS)} == {ready}
        claimed = tx.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS, horizon_ms=60_000)
    assert [c.job_id for c in claimed] == [soon]
    [c] = claimed
    assert c.not_before_ms == job(store, run_id, soon)["not_before_ms"] > c.started_ms
    assert job(store, run_id, soon)["status"] == "running"
    assert job(store, run_id, later)["status"] == "pending"
    assert job(store, run_id, limited.id)["status"] == "pending"
    assert store.claim("another-worker", [PIPELINE], 10, LONG_LEASE_MS) == []


def test_an_attempt_claimed_before_its_time_counts_its_deadline_from_that_time(store: Store) -> None:
    """A job claimed before its not-before time begins no earlier (its attempt's
    start is that time), and its step timeout counts from there: the recorded
    deadline is never its claim time plus the timeout, which fell short of it by as
    long as the claim came early. An attempt that began at that very millisecond
    keeps it."""
    run_id, [soon] = create_run(store, {"delay_ms": 5_000, "timeout_seconds": 10})
    with store.transaction() as tx:
        [c] = tx.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS, horizon_ms=60_000)
    assert c.not_before_ms > c.started_ms
    [attempt] = store.run_attempts(run_id)
    assert attempt["started_ms"] == c.not_before_ms
    assert attempt["deadline_ms"] == c.deadline_ms == c.not_before_ms + 10_000
    with store.transaction() as tx:
        tx.close_attempt(soon, c.attempt, c.lease_token, AttemptResult.SUCCEEDED, started_ms=c.not_before_ms,
                         deadline_ms=c.not_before_ms + 10_000)
    [attempt] = store.run_attempts(run_id)
    assert attempt["deadline_ms"] == c.not_before_ms + 10_000


@pytest.mark.parametrize("backend", ["postgres"])
def test_on_postgresql_a_claim_with_a_horizon_is_one_statement(backend: str, store: Store) -> None:
    """The claim ahead of a delayed job's time runs beside the recordings of a busy
    worker: on PostgreSQL it is the fused claim (claim, runs started, attempts), one
    round trip, not the candidate path's five. (SQLite claims in-process, statement
    by statement.)"""
    run_id, [soon] = create_run(store, {"delay_ms": 5_000})
    with store.transaction() as tx:
        names: list[str] = []
        fetch, execute = tx.s.fetch, tx.s.execute
        tx.s.fetch = lambda name, *a, **k: names.append(name) or fetch(name, *a, **k)  # type: ignore[method-assign]
        tx.s.execute = lambda name, *a, **k: names.append(name) or execute(name, *a, **k)  # type: ignore[method-assign]
        claimed = tx.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS, horizon_ms=60_000)
    assert [c.job_id for c in claimed] == [soon]
    assert names == ["claim_start_jobs"]
