"""Pausing before a step for a person, and resuming: the engine's half.

``Pipeline.pause(before=step, timeout=None)``: when the step's job is created it is
inserted with status ``paused`` -- one row, no thread, no lease -- and the run's
status becomes ``paused`` in the same transaction. Other branches of the run keep
running; the run deadline keeps counting. A resume (`resume`) makes paused jobs
pending at once, optionally with a new input, and the run running again once no
job of it is paused. An expired pause fails the run closed
(`ductline.engine.stop.expire_pauses`).

A pause whose expiry (``pause_expires_ms``) passed on the database clock is never
resumed: it fails closed, whether or not anything has failed the run yet.
"""

from __future__ import annotations

from typing import Any

from ductline import codec
from ductline.dsl.graph import Definition
from ductline.errors import InvalidStateError, RunNotFound
from ductline.model.states import JobStatus, RunStatus
from ductline.store import payloads
from ductline.store.records import NewJob
from ductline.store.store import Tx
from ductline.views import iso


def insert_paused(tx: Tx, definition: Definition, jobs: list[NewJob]) -> list[NewJob]:
    """Insert the ``paused`` jobs among ``jobs`` now, with their expiry, and pause
    their run; returns the other jobs, for the caller to insert."""
    paused = [j for j in jobs if j.status == JobStatus.PAUSED]
    if not paused:
        return jobs
    tx.insert_jobs(paused)
    tx.pause_jobs([(j.id, j.run_id, definition.pauses.get(j.step)) for j in paused])
    return [j for j in jobs if j.status != JobStatus.PAUSED]


def encode_input(value: Any) -> str:
    """The JSON list of arguments a resumed step receives: ``[value]``.

    Raises:
        TypeError: ``value`` does not round-trip through JSON (docs/howto/payloads.md).
    """
    return codec.dumps([value], what="resume input")


def resume(tx: Tx, run_id: str, encoded: str | None, limits: payloads.Limits, *,
           job_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Resume paused jobs of a run inside ``tx``.

    Args:
        encoded: the new input (a JSON list of one argument, `encode_input`), or
            ``None`` to keep the inputs the jobs were paused with.
        limits: payload limits; an input above the inline limit is stored out of
            line with the run.
        job_ids: resume only these paused jobs (a driver resuming step runs one by
            one); default every paused job of the run.

    Returns:
        The resumed jobs (``id``, ``step``, ``scope``, ``elem_index``, ``pause_expires_ms``).

    Raises:
        RunNotFound: no such run.
        InvalidStateError: the run is not paused, a pause expired, an input was
            given while several jobs would be resumed, or another call resumed or
            ended it meanwhile. Nothing is changed (the caller rolls back).
    """
    status = tx.lock_runs([run_id]).get(run_id)  # the run first, as stops and outcomes do
    if status is None:
        status = tx.run_status(run_id)  # locked by this transaction already
        if status is None:
            raise RunNotFound(f"run {run_id!r} not found")
    paused = tx.paused_jobs(run_id)
    # 'running' with a paused job: a pause committed just after a resume had read
    # the run (PostgreSQL, read committed). It is resumable all the same.
    if status != RunStatus.PAUSED and not (status == RunStatus.RUNNING and paused):
        raise InvalidStateError(f"run {run_id} is {status}; only a paused run can be resumed")
    if job_ids is not None:
        paused = [p for p in paused if p["id"] in job_ids]
    now_ms = tx.now_ms()
    expired = sorted((int(p["pause_expires_ms"]), p["step"]) for p in paused
                     if p["pause_expires_ms"] is not None and int(p["pause_expires_ms"]) <= now_ms)
    if expired:
        expires_ms, step = expired[0]
        raise InvalidStateError(f"run {run_id} cannot be resumed: its pause before step {step!r} expired "
                                f"at {iso(expires_ms)}; the run fails closed")
    if encoded is not None and len(paused) > 1:
        where = ", ".join(p["step"] + (f"[{p['elem_index']}]" if p["elem_index"] is not None else "")
                          for p in paused[:10])
        raise InvalidStateError(f"run {run_id} has {len(paused)} paused step runs ({where}); a new "
                                "input replaces the input of one: resume without an input")
    # Jobs first, then the run: the lock order of cancel and of the run deadline.
    lost = f"run {run_id} is no longer paused (resumed, cancelled or expired meanwhile)"
    stored_input, pending = (None, None) if encoded is None else payloads.prepare(encoded, limits)
    if paused and tx.resume_jobs([p["id"] for p in paused], stored_input) != len(paused):
        raise InvalidStateError(lost)
    if pending is not None and paused:  # a large input is stored out of line with the run
        payloads.write(tx, run_id, pending, limits)
    if not tx.resume_run(run_id) and status == RunStatus.PAUSED and not paused and job_ids is None:
        raise InvalidStateError(lost)
    tx.notify()
    return paused
