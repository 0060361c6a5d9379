"""The whole-run deadline, cancel and fail-fast on real workers, both backends. The
tests that need a worker with the defaults and look only at their own runs share one
per backend (`shared_worker`); those that need other settings, or stop their worker,
start their own."""

from __future__ import annotations

import time

import pytest
import rt_app
from helpers import parent_pid, process_running, wait_for

from ductline import InvalidStateError, RunNotFound
from ductline.execution.descendants import descendants
from ductline.handle import RunHandle
from ductline.views import run_view


def steps_by_name(view):
    return {s["step"]: s for s in view["steps"]}


def assert_nothing_left(view):
    assert {s["status"] for s in view["steps"]} <= {"completed", "failed", "skipped", "cancelled"}
    for step in view["steps"]:
        assert all(a["result"] is not None for a in step["attempts"])


def test_deadline_inside_a_step_fails_the_run_and_skips_dependents(shared_store, shared_worker):
    handle = rt_app.deadline_chain.trigger(1, database=shared_store)
    assert handle.wait(90) == "failed"
    view = run_view(shared_store, handle.id)
    assert view["metadata"]["timeout_exceeded"] is True
    assert view["metadata"]["timeout_seconds"] == 2
    assert "deadline of 2 s" in view["metadata"]["error"]
    steps = steps_by_name(view)
    assert steps["quick"]["status"] == "completed"
    assert steps["stuck"]["status"] == "failed"
    attempt = steps["stuck"]["attempts"][-1]
    assert attempt["error_type"] == "TimeoutError" and "run deadline" in attempt["error"]
    assert steps["after"]["status"] == "skipped"
    assert steps["after"]["skip_reason"] == "workflow timeout"
    assert_nothing_left(view)
    # the deadline counts from the first attempt start, on the database clock
    run = shared_store.get_run(handle.id)
    assert run["deadline_ms"] == run["started_ms"] + 2000
    assert run["finished_ms"] >= run["deadline_ms"]


def test_a_run_deadline_counts_from_its_first_attempt_start_not_from_a_claim_ahead(store, workers):
    # One slot: after a few short attempts the worker claims jobs ahead, so the runs
    # after the long one wait in its queue while it runs into its own deadline (2 s).
    # Their deadlines count from when their attempts begin, not from their claim: a
    # queued one either starts (and its run's clock with it) or is given back unstarted
    # halfway to the deadline its claim started, and runs later in full.
    handles = rt_app.queued_deadline.trigger_many([0.01] * 10 + [30] + [0.01] * 10, database=store)
    workers(concurrency=1)
    assert [h.wait(90) for h in handles] == ["completed"] * 10 + ["failed"] + ["completed"] * 10
    for handle in handles[11:]:
        *given_back, last = run_view(store, handle.id)["steps"][0]["attempts"]
        assert last["result"] == "succeeded", last
        assert all(a["result"] == "released" and "given back" in a["error"] for a in given_back), given_back


def test_a_halted_run_past_its_deadline_is_not_retried_and_ends_failed(store, workers):
    """A halted run has not ended, but its deadline still bounds it: past the deadline
    a retry is refused (revived, it would be stopped at once), and the worker that
    notices the deadline ends it failed, keeping its halt reason."""
    from helpers import stop_worker

    from ductline.operations.revive import retry_run

    worker = workers()
    handle = rt_app.halts_before_deadline.trigger(1, database=store)
    assert handle.wait(90) == "halted"
    stop_worker(worker)
    deadline_ms = store.get_run(handle.id)["deadline_ms"]
    wait_for(lambda: store.now_ms() > deadline_ms)
    with pytest.raises(InvalidStateError, match="past its deadline"):
        retry_run(store, handle.id)
    assert handle.status() == "halted"
    workers()
    wait_for(lambda: handle.status() == "failed")
    view = run_view(store, handle.id)
    assert view["metadata"]["timeout_exceeded"] is True
    assert view["halt_reason"] == "job_retries_exhausted"
    steps = steps_by_name(view)
    assert steps["quick"]["status"] == "completed"
    assert [a["result"] for a in steps["fails_at_once"]["attempts"]] == ["errored"]
    assert_nothing_left(view)


def test_a_busy_worker_ends_a_run_with_nothing_running_at_its_deadline(store, workers):
    """A worker whose claims never run dry (a backlog keeps its one slot busy) still
    ends a run whose step waits out a delay at the run's deadline, not after the
    backlog or at its next maintenance round (60 s here)."""
    fillers = rt_app.busy.trigger_many([0.05] * 300, database=store)
    workers(concurrency=1, env={"DUCTLINE_HEALTH_CHECK_INTERVAL": "60"})
    wait_for(lambda: fillers[0].status() == "completed")
    handle = rt_app.deadline_in_delay.trigger(1, database=store, priority=10)
    assert handle.wait(90) == "failed"
    assert steps_by_name(run_view(store, handle.id))["after"]["status"] == "skipped"
    assert fillers[-1].status() != "completed"  # the backlog was still being worked off


def test_deadline_during_a_delay(shared_store, shared_worker):
    handle = rt_app.deadline_in_delay.trigger(1, database=shared_store)
    assert handle.wait(90) == "failed"
    steps = steps_by_name(run_view(shared_store, handle.id))
    assert steps["after"]["status"] == "skipped"
    assert steps["after"]["attempts"] == []


def test_deadline_keeps_a_finished_branch(store, workers):
    workers(concurrency=3)
    handle = rt_app.deadline_divide.trigger(1, database=store)
    assert handle.wait(90) == "failed"
    steps = steps_by_name(run_view(store, handle.id))
    assert steps["fast_branch"]["status"] == "completed"
    assert steps["stuck"]["status"] == "failed"
    assert steps["after"]["status"] == "skipped"


def test_cancel_kills_the_attempt_and_skips_the_rest(shared_store, shared_worker):
    handle = rt_app.cancellable.trigger(1, database=shared_store)
    wait_for(lambda: steps_by_name(run_view(shared_store, handle.id)).get("stuck", {}).get("status") == "running")
    started = time.monotonic()
    handle.cancel()
    assert handle.status() == "cancelled"
    view = run_view(shared_store, handle.id)
    steps = steps_by_name(view)
    assert steps["stuck"]["status"] == "cancelled"
    assert steps["stuck"]["attempts"][0]["result"] == "cancelled"
    assert steps["after"]["status"] == "skipped" and steps["after"]["skip_reason"] == "cancelled"
    assert_nothing_left(view)
    with pytest.raises(InvalidStateError):
        handle.cancel()
    with pytest.raises(RunNotFound):
        RunHandle("0" * 32, shared_store).cancel()
    # the worker is free again: another run completes (its slot was not kept by the killed child)
    other = rt_app.chain.trigger(1, database=shared_store)
    assert other.wait(90) == "completed"
    assert time.monotonic() - started < 25


def test_a_cancel_from_another_process_kills_the_attempt_within_a_poll(store, workers):
    # A lease of 600 s: the worker renews every 200 s, so only its poll for lost leases
    # (SQLite cannot notify it) or a notification (PostgreSQL) can stop the child in time.
    worker = workers(concurrency=1, env={"DUCTLINE_LEASE_SECONDS": "600"})
    handle = rt_app.cancellable.trigger(1, database=store)
    wait_for(lambda: steps_by_name(run_view(store, handle.id)).get("stuck", {}).get("status") == "running")
    [child] = wait_for(lambda: [p for p in descendants(worker.pid)
                                if process_running(p) and parent_pid(p) == worker.pid],
                       timeout=30)  # the slot's child (its guardian is the child's own child)
    handle.cancel()
    wait_for(lambda: not process_running(child), timeout=30)
    assert steps_by_name(run_view(store, handle.id))["stuck"]["attempts"][0]["result"] == "cancelled"
    assert rt_app.chain.trigger(1, database=store).wait(90) == "completed"  # the slot serves again


def test_fail_fast_cancels_running_siblings(store, workers):
    workers(concurrency=3)
    handle = rt_app.fail_fast.trigger(1, database=store)
    assert handle.wait(90) == "halted"
    # A sibling that was running is cancelled at once; one not yet started is held for
    # `ductline retry` (it shows as held, with no attempt).
    wait_for(lambda: steps_by_name(run_view(store, handle.id))["stuck"]["status"] in ("cancelled", "held"))
    steps = steps_by_name(run_view(store, handle.id))
    assert steps["fails_at_once"]["status"] == "failed"
    stuck = steps["stuck"]
    if stuck["status"] == "cancelled":
        assert "fail_fast" in stuck["attempts"][0]["error"]
    else:
        assert stuck["attempts"] == []
