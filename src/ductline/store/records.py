"""Records passed across the store boundary (frozen, slotted)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from ductline.dsl.graph import Definition
from ductline.dsl.options import DEFAULT_QUEUE
from ductline.model.claim_order import UNDER_WAY
from ductline.model.limits import StepLimit
from ductline.model.routing import JobSpec

__all__ = ["ClaimedJob", "ExpiredLease", "JobBudget", "LoadedDefinition", "NewJob", "NewRun", "StepLimit",
           "AUTO_STATUS", "new_job_ids"]

# A new job's status decided by the insert itself from its run's status, in the
# same statement (`ductline.model.states.waiting_status`: pending, or held in a
# halted run), so creating jobs never needs a read of the run first.
AUTO_STATUS = "auto"


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
    definition: str = ""       # the fingerprint of its definition (ductline.dsl.fingerprint)


@dataclass(frozen=True, slots=True)
class NewJob:
    id: str
    run_id: str
    pipeline: str
    step: str
    scope: str
    parent_scope: str | None
    elem_index: int | None
    status: str                # a JobStatus value, or AUTO_STATUS
    input: str                 # JSON list of positional arguments
    delay_ms: int
    max_retry: int
    max_crash: int
    retry_delay_seconds: int
    timeout_seconds: int | None
    not_before_ms: int | None = None
    priority: int = 0          # the step's, added to its run's by the insert
    limit_key: str | None = None  # concurrency/rate limit key, None when unlimited
    phase: int = UNDER_WAY     # claim order at equal priority (ductline.model.claim_order)
    queue: str = DEFAULT_QUEUE  # only workers serving it claim the job
    definition: str = ""       # its run's definition fingerprint: only workers that loaded it claim the job

    @classmethod
    def of(cls, run_id: str, pipeline: str, step: str, scope: str, input_json: str, spec: JobSpec, *,
           status: str = AUTO_STATUS, not_before_ms: int | None = None, delay_ms: int | None = None,
           job_id: str | None = None) -> "NewJob":
        """A job of ``step`` at ``scope`` carrying what its `JobSpec` fixed
        (`ductline.model.routing.job_spec`); ``input_json`` is stored as given;
        ``job_id`` defaults to a new random id."""
        return cls(
            id=uuid.uuid4().hex if job_id is None else job_id, run_id=run_id, pipeline=pipeline, step=step, scope=scope,
            parent_scope=spec.parent_scope, elem_index=spec.elem_index, status=status, input=input_json,
            delay_ms=spec.delay_ms if delay_ms is None else delay_ms, not_before_ms=not_before_ms,
            max_retry=spec.max_retry, max_crash=spec.max_crash,
            retry_delay_seconds=_whole(spec.retry_delay_seconds),
            timeout_seconds=spec.timeout_seconds, priority=spec.priority, limit_key=spec.limit_key,
            phase=spec.phase, queue=spec.queue, definition=spec.definition,
        )


def new_job_ids(n: int) -> list[str]:
    """``n`` new random job ids: 32 hex digits each (128 random bits, the length of
    ``uuid4().hex``), drawn from the system's random source in one read -- an
    expand's ten thousand ids in one call instead of ten thousand."""
    digits = os.urandom(16 * n).hex()
    return [digits[i:i + 32] for i in range(0, 32 * n, 32)]


def _whole(seconds: float) -> int:
    """Seconds as stored: whole seconds (a worker's settings and step options are
    whole); the in-process executor's fractions of a second are kept as they are."""
    return int(seconds) if float(seconds).is_integer() else seconds  # type: ignore[return-value]


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
    priority: int = 0  # the claim order (`ductline.model.claim_order`): higher first,
    phase: int = 0     # then runs under way (0) before first steps (1)

    def starting(self, started_ms: int, deadline_ms: int | None, run_deadline_ms: int | None) -> "ClaimedJob":
        """This job as its attempt starts now (a job claimed ahead starts later than
        its claim). Built directly: `dataclasses.replace` costs a busy worker's loop
        several times as much, once per attempt."""
        return ClaimedJob(self.job_id, self.run_id, self.pipeline, self.step, self.scope, self.input, self.attempt,
                          self.lease_token, self.timeout_seconds, self.boundary, self.not_before_ms, started_ms,
                          deadline_ms, run_deadline_ms, self.limit_key, self.priority, self.phase)


@dataclass(frozen=True, slots=True)
class LoadedDefinition:
    """A definition a worker loaded, as the store keeps it: its fingerprint, its
    pipeline, and each step's queue by step name (the halt handler's included)."""

    fingerprint: str
    pipeline: str
    step_queues: tuple[tuple[str, str], ...]  # (step, queue) in declaration order

    @property
    def steps(self) -> list[str]:
        return [step for step, _ in self.step_queues]

    @property
    def queues(self) -> list[str]:
        return sorted({queue for _, queue in self.step_queues})

    @classmethod
    def of(cls, definition: Definition) -> "LoadedDefinition":
        steps = [*definition.nodes, *([] if definition.on_halt is None else [definition.on_halt.name])]
        return cls(definition.fingerprint, definition.name, tuple((s, definition.queue_of(s)) for s in steps))


@dataclass(frozen=True, slots=True)
class ExpiredLease:
    job_id: str
    run_id: str
    pipeline: str
    step: str
    attempt: int
    lease_token: str
    definition: str = ""  # the fingerprint of its run's definition
    lease_expires_ms: int | None = None  # when the lease ran out (epoch ms, database clock)


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
    status: str
    lease_token: str | None
    releases: int = 0
