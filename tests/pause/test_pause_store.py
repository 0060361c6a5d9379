"""Pause and resume against a real database (both backends), driving the steps in
this process: one paused row without a lease, resume with and without an input,
racing resumes, cancel and bad input."""

from __future__ import annotations

import threading

import pause_app
import pytest
from pause_support import drive, jobs_by_step

from ductline import InvalidStateError, RunNotFound
from ductline.handle import RunHandle
from ductline.model.states import AttemptResult
from ductline.engine import stop as abort
from ductline.model.outcomes import Ended
from ductline.engine import record
from ductline.store import Store, open_store


def paused_run(store: Store, pipeline=pause_app.chain, arg: int = 7) -> RunHandle:
    handle = pipeline.trigger(arg, database=store)
    assert drive(store, pipeline) == ["prepare"]
    assert handle.status() == "paused"
    return handle


def test_a_pause_is_one_paused_row_without_a_lease_and_the_run_is_paused(store):
    handle = paused_run(store)
    jobs = jobs_by_step(store, handle.id)
    assert sorted(jobs) == ["approve", "prepare"]  # finish is not created
    approve = jobs["approve"]
    assert (approve["status"], approve["attempts"], approve["pause_expires_ms"]) == ("paused", 0, None)
    assert store.lease_state(approve["id"]) == {"status": "paused", "lease_token": None}
    assert store.run_progress(handle.id) == {"completed": 1, "paused": 1}
    assert [a["job_id"] for a in store.run_attempts(handle.id)] == [jobs["prepare"]["id"]]
    assert [r["id"] for r in store.list_runs(status="paused")] == [handle.id]
    assert drive(store, pause_app.chain) == []  # nothing is claimable while paused


def test_a_pause_with_a_timeout_stores_its_expiry_on_the_database_clock(store):
    handle = paused_run(store, pause_app.long)
    approve = jobs_by_step(store, handle.id)["approve"]
    assert 3_600_000 <= approve["pause_expires_ms"] - approve["created_ms"] < 3_601_000


def test_resume_without_an_input_runs_the_step_with_the_input_it_was_paused_with(store):
    handle = paused_run(store)
    before = store.now_ms()
    assert handle.resume() == ["approve"]
    approve = jobs_by_step(store, handle.id)["approve"]
    assert approve["status"] == "pending" and before <= approve["not_before_ms"] <= store.now_ms()
    assert handle.status() == "running"
    assert drive(store, pause_app.chain) == ["approve", "finish"]
    assert handle.status() == "completed"
    assert handle.output() == {"approved": {"order": 7}}


@pytest.mark.parametrize("value", [{"order": 8, "note": "checked by Ana"}, None, [1, "two"]])
def test_resume_with_an_input_gives_the_step_that_single_argument(store, value):
    handle = paused_run(store)
    handle.resume(input=value)
    drive(store, pause_app.chain)
    assert handle.output() == {"approved": value}


def test_resuming_a_run_that_is_not_paused_is_refused_and_changes_nothing(store):
    handle = pause_app.chain.trigger(7, database=store)
    with pytest.raises(InvalidStateError) as caught:
        handle.resume(input=1)
    assert str(caught.value) == f"run {handle.id} is pending; only a paused run can be resumed"
    drive(store, pause_app.chain)
    handle.resume()
    with pytest.raises(InvalidStateError) as again:
        handle.resume()
    assert str(again.value) == f"run {handle.id} is running; only a paused run can be resumed"
    with pytest.raises(RunNotFound) as missing:
        RunHandle("0" * 32, store).resume()
    assert str(missing.value) == f"run {'0' * 32!r} not found"


def test_an_input_that_does_not_round_trip_through_json_is_refused_and_changes_nothing(store):
    handle = paused_run(store)
    with pytest.raises(TypeError, match="resume input"):
        handle.resume(input={1, 2})
    assert handle.status() == "paused"
    assert jobs_by_step(store, handle.id)["approve"]["status"] == "paused"


def test_racing_resumes_exactly_one_wins(store, db_url):
    handle = paused_run(store)
    stores = [open_store(db_url) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    results: dict[int, object] = {}

    def racer(i: int) -> None:
        barrier.wait()
        try:
            results[i] = RunHandle(handle.id, stores[i]).resume(input={"winner": i})
        except InvalidStateError as exc:
            results[i] = exc

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in stores:
        s.close()
    winners = [i for i, r in results.items() if r == ["approve"]]
    assert len(results) == 6 and len(winners) == 1
    losers = [str(r) for i, r in results.items() if i not in winners]
    assert all(m in (f"run {handle.id} is running; only a paused run can be resumed",
                     f"run {handle.id} is no longer paused (resumed, cancelled or expired meanwhile)")
               for m in losers), losers
    drive(store, pause_app.chain)
    assert handle.output() == {"approved": {"winner": winners[0]}}


def test_cancel_during_a_pause_skips_the_paused_step_and_its_dependents(store):
    handle = paused_run(store)
    handle.cancel()
    assert handle.status() == "cancelled"
    jobs = jobs_by_step(store, handle.id)
    assert {s: (j["status"], j["skip_reason"]) for s, j in jobs.items()} == {
        "prepare": ("completed", None), "approve": ("skipped", "cancelled"), "finish": ("skipped", "cancelled")}
    with pytest.raises(InvalidStateError, match="only a paused run can be resumed"):
        handle.resume()


def test_a_divide_keeps_running_the_branch_that_is_not_paused(store):
    handle = pause_app.divided.trigger(3, database=store)
    assert drive(store, pause_app.divided) == ["prepare", "side"]
    assert handle.status() == "paused"
    jobs = jobs_by_step(store, handle.id)
    assert {s: j["status"] for s, j in jobs.items()} == {
        "prepare": "completed", "approve": "paused", "side": "completed"}  # collect waits for approve
    handle.resume()
    assert drive(store, pause_app.divided) == ["approve", "collect"]
    assert handle.output() == [{"approved": {"order": 3}}, {"side": 3}]


def test_an_input_cannot_go_to_several_paused_step_runs(store):
    pipeline = pause_app.paused_elements
    handle = pipeline.trigger([1, 2], database=store)
    drive(store, pipeline)
    assert handle.status() == "paused"
    with pytest.raises(InvalidStateError) as caught:
        handle.resume(input="x")
    assert str(caught.value) == (f"run {handle.id} has 2 paused step runs (approve[0], approve[1]); a new "
                                 "input replaces the input of one: resume without an input")
    assert handle.resume() == ["approve"]
    drive(store, pipeline)
    assert handle.output() == [{"approved": 1}, {"approved": 2}]


def test_a_halt_during_a_pause_keeps_the_pause_and_a_retry_returns_to_it(store):
    pipeline = pause_app.halting
    handle = pipeline.trigger(5, database=store)
    drive(store, pipeline, skip=("broken",))
    assert handle.status() == "paused"
    job = jobs_by_step(store, handle.id)["broken"]
    assert job["status"] == "running"  # claimed by drive, not recorded yet
    token = store.lease_state(job["id"])["lease_token"]
    with store.transaction() as tx:
        done = record.failure(tx, pipeline.definition(), record.Attempt(job["id"], handle.id, "broken", "", 1, token),
                              Ended(AttemptResult.ERRORED, "RuntimeError", "boom"), None)
    assert done.halted
    assert handle.status() == "halted"
    assert jobs_by_step(store, handle.id)["approve"]["status"] == "paused"
    with pytest.raises(InvalidStateError, match="is halted; only a paused run can be resumed"):
        handle.resume()
    assert store.revive_run(handle.id)
    assert handle.status() == "paused"
    abort.expire_due(store, {})  # nothing is due: the pause has no timeout
    assert handle.status() == "paused"
