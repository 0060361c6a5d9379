"""Pausing before a step for a person: inserting the jobs of paused steps.

``Pipeline.pause(before=step, timeout=None)``: when the step's job is created it is
inserted with status ``paused`` -- one row, no thread, no lease -- and the run's
status becomes ``paused`` in the same transaction. Other branches of the run keep
running; the run deadline keeps counting. Resuming is `ductline.operations.resume`;
an expired pause fails the run closed (`ductline.engine.stop.expire_pauses`,
called by the workers' timers and maintenance).
"""

from __future__ import annotations

from ductline.dsl.graph import Definition
from ductline.model.states import JobStatus
from ductline.store.records import NewJob
from ductline.store.store import Tx


def insert_paused(tx: Tx, definition: Definition, jobs: list[NewJob]) -> list[NewJob]:
    """Insert the ``paused`` jobs among ``jobs`` now, with their expiry, and pause
    their run; returns the other jobs, for the caller to insert."""
    paused = [j for j in jobs if j.status == JobStatus.PAUSED]
    if not paused:
        return jobs
    tx.insert_jobs(paused)
    tx.pause_jobs([(j.id, j.run_id, definition.pauses.get(j.step)) for j in paused])
    return [j for j in jobs if j.status != JobStatus.PAUSED]
