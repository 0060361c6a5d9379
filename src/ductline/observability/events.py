"""The catalogue of engine events, emitted in one place: the boundary between the
runtime and the store (after the transaction that made the event true committed).

Subscribers (metrics, tracing, logs) register with `subscribe`; nothing else in
the engine counts, times or traces by hand. A subscriber that raises is logged and
never changes what the engine does.

Every event carries ``pipeline``; job events also ``step``, ``run_id``, ``job_id``
and ``attempt``. Durations are in seconds.
"""

from __future__ import annotations

import logging
import threading
from enum import StrEnum
from typing import Any, Callable

from ductline.model.states import AttemptResult

log = logging.getLogger("ductline.observability")


class EventName(StrEnum):
    PIPELINE_TRIGGERED = "pipeline.triggered"   # run_id
    PIPELINE_COMPLETED = "pipeline.completed"   # run_id, runtime_seconds
    PIPELINE_HALTED = "pipeline.halted"         # run_id, reason
    PIPELINE_FAILED = "pipeline.failed"         # run_id, reason (default: the run deadline fired)
    PIPELINE_CANCELLED = "pipeline.cancelled"   # run_id
    PIPELINE_PAUSED = "pipeline.paused"         # run_id, step (a step waits for a resume)
    PIPELINE_RESUMED = "pipeline.resumed"       # run_id, steps, input_replaced
    STEP_MARKED_SUCCEEDED = "step.marked_succeeded"  # run_id, step (an operator's mark, ductline.engine.mark)
    SCHEDULE_RUNS_STARTED = "schedule.runs_started"  # schedule, reason (tick, catch_up, backfill), count
    EVENT_RECEIVED = "event.received"           # run_id, event, step (the step it released, or None: kept)
    JOB_ENQUEUED = "job.enqueued"               # step, count
    ATTEMPT_STARTED = "attempt.started"         # job fields, pickup_latency_seconds, deadline_ms
    JOB_COMPLETED = "job.completed"             # job fields, result, runtime_seconds, error_type, outcome,
    #                                             reason (the halt reason a failure carries, else None)
    TIMEOUT_OVERRUN = "timeout.overrun"         # job fields, overrun_seconds (deadline -> child gone)
    THREAD_UNDEAD = "thread.undead"             # job fields
    PROCESS_UNDEAD = "process.undead"           # job fields, pid
    LEASE_LOST = "lease.lost"                   # job fields
    CLAIM = "claim"                             # asked, claimed, duration_seconds (one claim statement)


# The `result` label of job.completed (the seeds' names), by attempt result.
RESULT_LABELS: dict[str, str] = {
    AttemptResult.SUCCEEDED: "success", AttemptResult.ERRORED: "error", AttemptResult.TIMED_OUT: "timed_out",
    AttemptResult.CRASHED: "crashed", AttemptResult.CANCELLED: "cancelled",
}

Subscriber = Callable[[EventName, dict[str, Any]], None]
_subscribers: list[Subscriber] = []
_lock = threading.Lock()


def subscribe(subscriber: Subscriber) -> Callable[[], None]:
    """Receive every event as ``subscriber(name, attributes)``; returns an unsubscribe function."""
    with _lock:
        _subscribers.append(subscriber)

    def unsubscribe() -> None:
        with _lock:
            if subscriber in _subscribers:
                _subscribers.remove(subscriber)

    return unsubscribe


def emit(name: EventName, **attributes: Any) -> None:
    """Deliver an event to every subscriber (cheap when there are none)."""
    if not _subscribers:
        return
    with _lock:
        targets = list(_subscribers)
    for subscriber in targets:
        try:
            subscriber(name, attributes)
        except Exception:  # a broken sink must never break the engine
            log.exception("event subscriber %r failed on %s", subscriber, name)
