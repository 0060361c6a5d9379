"""No attempt starts after its run's deadline: a job claimed once that deadline has
passed (given back and claimed again, or queued behind long attempts) is recorded as
stopped by it -- skipped, without an attempt, as it never began -- and its step never
runs (a real worker and child, both backends)."""

from __future__ import annotations

import rt_app
from ductline.config import load_settings
from ductline.engine.batch import Outcome
from ductline.runtime.launch import build_worker
from ductline.views import run_view
from helpers import APP


def test_a_job_claimed_after_its_runs_deadline_is_not_started(store, tmp_path):
    handle = rt_app.queued_deadline.trigger(30, database=store)  # a 2 s run deadline
    worker = build_worker(store, [APP], 1, load_settings(database_url=store.url, poll_interval=0.1))
    slot = worker.slots[0]
    slot.child = worker.spares.new_child()
    try:
        store.register_worker(worker.id, "test-host", 1, 1)
        sent = worker.clock.now()  # as the worker's registration measures the database clock
        worker.clock.measure(store.now_ms(), sent, worker.clock.now())
        job = store.claim(worker.id, ["rt_queued_deadline"], 1, 30_000)[0]
        # The run's deadline passes while the job waits (in a queue, or given back
        # and claimed again by a worker that had not heard of the deadline).
        past = store.now_ms() - 5000  # well past, whatever the error of the measured offset
        job = job.starting(job.started_ms, past, past)
        recorded: list[Outcome] = []
        worker.outbox.add = recorded.append  # type: ignore[method-assign]
        assert worker.claimer.start(slot, job) is False
        assert slot.job is None and not slot.busy  # its child got nothing
        assert [(o.attempt.job_id, o.run_deadline, o.attempt.begun) for o in recorded] == [(job.job_id, True, False)]
        # Recorded as the deadline's stop: the run fails; the job never began, so it is
        # skipped as a waiting one is, without an attempt (`ductline.model.stops.begun_by`).
        from ductline.engine.batch import record_batch

        record_batch(store, recorded, worker.definitions, 0, now_ms=store.now_ms)
        view = run_view(store, handle.id)
        assert view["status"] == "failed" and view["metadata"]["timeout_exceeded"] is True
        [first] = [s for s in view["steps"] if s["step"] == job.step]
        assert (first["status"], first["skip_reason"], first["attempts"]) == ("skipped", "workflow timeout", [])
    finally:
        slot.child.stop()
        slot.child.join(timeout=5)
