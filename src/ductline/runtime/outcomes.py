"""Outcomes waiting to be recorded, and the batch recorder.

A worker collects the outcomes of its children and records them together in one
transaction, so a busy worker pays one commit for many completions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ductline.dsl.graph import Definition
from ductline.model.states import AttemptResult
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
    return results


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
