"""Records passed across the store boundary (frozen, slotted)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NewRun:
    id: str
    pipeline: str
    args: str                  # JSON list
    timeout_seconds: int | None
    delay_ms: int
    not_before_ms: int | None  # absolute start (delay_until), else now + delay_ms
    idempotency_key: str | None = None  # at most one active run per (pipeline, key)
    priority: int = 0          # the pipeline's default or the trigger's override


@dataclass(frozen=True, slots=True)
class NewJob:
    id: str
    run_id: str
    pipeline: str
    step: str
    scope: str
    parent_scope: str | None
    elem_index: int | None
    status: str                # 'pending', or 'held' when the run is halted
    input: str                 # JSON list of positional arguments
    delay_ms: int
    max_retry: int
    max_crash: int
    retry_delay_seconds: int
    timeout_seconds: int | None
    not_before_ms: int | None = None
    priority: int = 0          # the step's, added to its run's by the insert
    limit_key: str | None = None  # concurrency/rate limit key, None when unlimited


@dataclass(frozen=True, slots=True)
class StepLimit:
    """A step's limits per limit key: at most ``concurrency`` running attempts and
    ``rate`` starts per second (either may be ``None``)."""

    concurrency: int | None
    rate: float | None


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job claimed by a worker: one attempt under one lease token.

    ``deadline_ms`` is the effective deadline on the database clock: the earlier of
    the step's timeout and the run's deadline (``None`` when neither is set).
    """

    job_id: str
    run_id: str
    pipeline: str
    step: str
    scope: str
    input: str
    attempt: int
    lease_token: str
    timeout_seconds: int | None
    boundary: str | None
    not_before_ms: int
    started_ms: int
    deadline_ms: int | None
    run_deadline_ms: int | None
    limit_key: str | None = None


@dataclass(frozen=True, slots=True)
class ExpiredLease:
    job_id: str
    run_id: str
    pipeline: str
    step: str
    attempt: int
    lease_token: str


@dataclass(frozen=True, slots=True)
class JobBudget:
    failures: int
    crashes: int
    max_retry: int
    max_crash: int
    retry_delay_seconds: int
    boundary: str | None
    run_id: str
    step: str
    pipeline: str
