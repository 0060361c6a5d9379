"""A new run's rows: the run and its first job, as every trigger writes them (the
operations' `trigger`, and the in-process executor's start)."""

from __future__ import annotations

from dataclasses import dataclass

from ductline.dsl.graph import Definition
from ductline.model.routing import JobSpec, job_spec
from ductline.model.states import JobStatus
from ductline.store import payloads
from ductline.store.records import NewJob, NewRun
from ductline.store.store import Tx


_PENDING = JobStatus.PENDING.value  # read once: an enum member's value is a descriptor call


@dataclass(frozen=True, slots=True)
class NewRunRows:
    """A run ready to be written: its row, its first job, and arguments to store
    out of line with it (``pending``)."""

    run: NewRun
    job: NewJob
    pending: payloads.Pending | None
    limits: payloads.Limits


def new_run(definition: Definition, run_id: str, encoded_args: str, *, timeout_seconds: float | None,
            delay_ms: int, not_before_ms: int | None, retry_delay: float, limits: payloads.Limits,
            key: str | None = None, priority: int | None = None, job_id: str | None = None,
            spec: JobSpec | None = None) -> NewRunRows:
    """The rows of a new run of ``definition`` whose arguments are ``encoded_args``
    (a JSON list, checked against ``limits.max_bytes`` by the caller).

    Args:
        timeout_seconds: the run deadline, counted from its first attempt's start.
        delay_ms, not_before_ms: when the first job becomes ready (``not_before_ms``,
            epoch ms, wins when given).
        retry_delay: the default seconds between attempts (a step's own wins).
        job_id: the first job's id (default: a new random one).
        spec: the first job's `JobSpec` when the caller has it already (it is
            ``job_spec(definition, definition.start, "", encoded_args, retry_delay)``).
    """
    start = definition.node(definition.start)
    stored_args, pending = payloads.prepare(encoded_args, limits)
    if spec is None:
        spec = job_spec(definition, start.name, "", encoded_args, retry_delay)
    run = NewRun(run_id, definition.name, stored_args, timeout_seconds, delay_ms,  # type: ignore[arg-type]
                 not_before_ms, key, definition.priority if priority is None else priority, definition.fingerprint)
    job = NewJob.of(run_id, definition.name, start.name, "", stored_args, spec, status=_PENDING,
                    delay_ms=delay_ms, not_before_ms=not_before_ms, job_id=job_id)
    return NewRunRows(run, job, pending, limits)


def write(tx: Tx, rows: NewRunRows) -> bool:
    """Write the run and its first job (and its out-of-line arguments) inside ``tx``;
    ``False``, and nothing written, when an active run holds its idempotency key."""
    if not tx.insert_run_with_job(rows.run, rows.job):
        return False
    if rows.pending is not None:
        payloads.write(tx, rows.run.id, rows.pending, rows.limits)
    return True
