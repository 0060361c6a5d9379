"""The run deadline and cancel under pressure: a 5,000-step chain, and cancel racing
a normal completion (exactly one outcome, never both)."""

from __future__ import annotations

import threading

import rt_app

from ductline import InvalidStateError
from ductline.runtime import record
from ductline.runtime.abort import cancel
from ductline.views import run_view


def test_a_5000_step_chain_runs_until_its_deadline_and_skips_the_rest(store, workers):
    workers()
    handle = rt_app.long_chain.trigger(0, database=store)
    assert handle.wait(60) == "failed"
    view = run_view(store, handle.id)
    assert view["metadata"]["timeout_exceeded"] is True
    statuses = [s["status"] for s in view["steps"]]
    assert len(statuses) == 5000  # every step recorded: done, failed, or skipped by the walk
    done = statuses.count("completed")
    assert done > 0
    assert statuses.count("skipped") == 5000 - done - statuses.count("failed")
    assert set(statuses) <= {"completed", "failed", "skipped"}


def test_cancel_racing_completion_has_exactly_one_outcome(store):
    definition = rt_app.chain.definition()
    runs = 1000
    outcomes = {"completed": 0, "cancelled": 0}
    for _ in range(runs):
        handle = rt_app.chain.trigger(1, database=store)
        [claimed] = store.claim("racer", ["rt_chain"], 1, 60_000)
        attempt = record.Attempt(claimed.job_id, claimed.run_id, claimed.step, claimed.scope,
                                 claimed.attempt, claimed.lease_token)
        barrier = threading.Barrier(2)
        results = {}

        def complete():
            barrier.wait()
            with store.transaction() as tx:
                results["complete"] = record.success(tx, definition, attempt, "2", 0).outcome

        def cancel_it():
            barrier.wait()
            try:
                with store.transaction() as tx:
                    cancel(tx, definition, handle.id)
                results["cancel"] = "cancelled"
            except InvalidStateError:
                results["cancel"] = "refused"

        threads = [threading.Thread(target=complete), threading.Thread(target=cancel_it)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        run = store.get_run(handle.id)
        [first] = [a for a in store.run_attempts(handle.id) if a["job_id"] == claimed.job_id]
        if results["complete"] == "completed":
            # the step's result was recorded first; the cancel then stopped the run
            assert first["result"] == "succeeded"
            assert run["status"] == "cancelled"
            outcomes["completed"] += 1
        else:
            assert results["complete"] == "lost"
            assert first["result"] == "cancelled"
            assert run["status"] == "cancelled"
            outcomes["cancelled"] += 1
        jobs = store.run_jobs(handle.id)
        assert all(j["status"] in ("completed", "cancelled", "skipped") for j in jobs)
        assert sum(j["step"] == "double" for j in jobs) <= 1
    assert sum(outcomes.values()) == runs
