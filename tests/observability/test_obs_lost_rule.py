"""`ductline.engine.lost`: an attempt found without its lease is reported as what was
recorded for it -- a stop's ``timed_out`` or ``cancelled`` as ``job.completed``,
anything else as ``lease.lost`` -- once per process. Both backends."""

from __future__ import annotations

import rt_app

from ductline.engine import record
from ductline.engine.lost import Lost, report_lost
from ductline.model.outcomes import Ended
from ductline.model.states import AttemptResult
from ductline.observability.events import subscribe
from ductline.operations.cancel import cancel_run

WORKER = "lost-rule-worker"


def _running(store):
    handle = rt_app.chain.trigger(1, database=store)
    [job] = store.claim(WORKER, [rt_app.chain.name], 1, 60_000)
    return handle, job


def _lost(job) -> Lost:
    return Lost(rt_app.chain.name, job.step, job.run_id, job.job_id, job.attempt)


def test_a_stop_is_reported_as_recorded_and_anything_else_as_a_lost_lease(store):
    seen: list[tuple[str, dict]] = []
    unsubscribe = subscribe(lambda name, a: seen.append((name.value, a)))
    try:
        cancelled, cancelled_job = _running(store)
        cancel_run(store, cancelled.id)
        _, rescued_job = _running(store)
        with store.transaction() as tx:  # what a rescue records for an expired lease
            record.failure(tx, rt_app.chain.definition(), record.Attempt(
                rescued_job.job_id, rescued_job.run_id, rescued_job.step, "", rescued_job.attempt,
                rescued_job.lease_token), Ended(AttemptResult.CRASHED, "WorkerLost", "the lease expired"), None)
        _, open_job = _running(store)  # its row not closed: nothing recorded says why
        report_lost(store, [_lost(cancelled_job), _lost(rescued_job), _lost(open_job)])
        report_lost(store, [_lost(cancelled_job)])  # found again (heartbeat, then outcome): once
    finally:
        unsubscribe()
    by_job = [(name, a["job_id"], a.get("result")) for name, a in seen
              if name in ("job.completed", "lease.lost")]
    assert by_job == [("job.completed", cancelled_job.job_id, "cancelled"),
                      ("lease.lost", rescued_job.job_id, None),
                      ("lease.lost", open_job.job_id, None)]
    [completed] = [a for name, a in seen if name == "job.completed"]
    assert completed["error_type"] == "Cancelled" and completed["runtime_seconds"] >= 0
