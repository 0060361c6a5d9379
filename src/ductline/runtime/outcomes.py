"""Outcomes waiting to be recorded, and the batch recorder.

A worker collects the outcomes of its children and records them together in one
transaction, so a busy worker pays one commit for many completions.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ductline.dsl.graph import Definition
from ductline.model.states import AttemptResult
from ductline.observability.events import RESULT_LABELS, EventName, emit
from ductline.runtime import record
from ductline.store import Store

log = logging.getLogger("ductline.worker")


@dataclass(frozen=True, slots=True)
class Outcome:
    attempt: record.Attempt
    pipeline: str
    result: AttemptResult
    output: str | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None
    release: bool = False  # give the job back without charging a budget
    run_deadline: bool = False  # the run deadline killed it: end the whole run


def job_extra(a: record.Attempt) -> dict[str, object]:
    return {"run_id": a.run_id, "job_id": a.job_id, "step": a.step, "attempt": a.attempt}


def record_batch(store: Store, outcomes: list[Outcome], definitions: dict[str, Definition],
                 retry_delay: int) -> list[record.Recorded]:
    """Record every outcome in one transaction. Raises `StoreError` (and records
    nothing) if the database fails; the caller keeps the batch and tries again."""
    results = []
    with store.transaction() as tx:
        for o in outcomes:
            definition = definitions.get(o.pipeline)
            if o.run_deadline:
                done = record.run_deadline(tx, definition, o.attempt)
            elif o.release:
                done = record.Recorded("released" if record.release(tx, o.attempt, o.error or "") else "lost")
            elif o.result is AttemptResult.SUCCEEDED and definition is not None:
                assert o.output is not None
                done = record.success(tx, definition, o.attempt, o.output, retry_delay)
            else:
                done = record.failure(tx, definition, o.attempt, o.result, o.error_type, o.error,
                                      o.traceback)
            results.append(done)
    for o, done in zip(outcomes, results):
        _log(o, done)
        _emit(o, done)
    return results


def _emit(o: Outcome, done: record.Recorded) -> None:
    if done.outcome in ("lost", "released"):
        return
    a = o.attempt
    fields = {"pipeline": o.pipeline, "step": a.step, "run_id": a.run_id, "job_id": a.job_id,
              "attempt": a.attempt}
    runtime = None if a.started_ms is None else max(0.0, (time.time() * 1000 - a.started_ms) / 1000)
    emit(EventName.JOB_COMPLETED, **fields, result=RESULT_LABELS[o.result.value], runtime_seconds=runtime,
         error_type=o.error_type, outcome=done.outcome)
    for step, count in (done.enqueued or {}).items():
        emit(EventName.JOB_ENQUEUED, pipeline=o.pipeline, step=step, run_id=a.run_id, count=count)
    if done.run_completed:
        emit(EventName.PIPELINE_COMPLETED, pipeline=o.pipeline, run_id=a.run_id)
    if done.halted:
        emit(EventName.PIPELINE_HALTED, pipeline=o.pipeline, run_id=a.run_id, reason=done.reason)
    if done.run_failed:
        emit(EventName.PIPELINE_FAILED, pipeline=o.pipeline, run_id=a.run_id)


def _log(o: Outcome, done: record.Recorded) -> None:
    extra = job_extra(o.attempt)
    if done.outcome == "lost":
        log.warning("Lease lost; result dropped", extra=extra)
        return
    if o.run_deadline:
        log.error("Run deadline exceeded; run failed", extra=extra)
    elif o.result is AttemptResult.TIMED_OUT:
        if done.outcome == "retry":
            log.warning("Job timed out", extra=extra)
        else:
            log.error("Job exhausted retries and timed out", extra=extra)
    elif o.result is AttemptResult.ERRORED:
        log.warning("Job errored: %s: %s", o.error_type, o.error, extra=extra)
    elif o.result is AttemptResult.CRASHED:
        log.warning("Job crashed: %s", o.error, extra=extra)
    if done.halted:
        log.error("Pipeline halted: %s", done.reason, extra=extra)
