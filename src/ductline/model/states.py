"""States of runs, jobs and attempts, stored as their string values."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    PENDING = "pending"        # triggered; its first attempt has not started (e.g. start delay)
    RUNNING = "running"
    PAUSED = "paused"          # a step waits for `ductline resume` (other branches may run)
    COMPLETED = "completed"
    HALTED = "halted"          # a step failed for good; `ductline retry` revives it
    FAILED = "failed"          # the run deadline fired, or a pause expired
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)

    @property
    def is_active(self) -> bool:
        return self in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED)


class JobStatus(StrEnum):
    PENDING = "pending"        # claimable once not_before has passed
    HELD = "held"              # run halted: kept, not claimable until `retry`
    RUNNING = "running"        # claimed by a worker under a lease
    PAUSED = "paused"          # waits for a resume (`.pause(before=)`); not claimable
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def public(self) -> str:
        """The status shown to users: a held job is still pending."""
        return "pending" if self is JobStatus.HELD else self.value


class AttemptResult(StrEnum):
    SUCCEEDED = "succeeded"
    ERRORED = "errored"
    TIMED_OUT = "timed_out"
    CRASHED = "crashed"
    CANCELLED = "cancelled"


class HaltReason(StrEnum):
    JOB_RETRIES_EXHAUSTED = "job_retries_exhausted"
    JOB_CRASHES_EXHAUSTED = "job_crashes_exhausted"
    MAX_FANOUT_EXCEEDED = "max_fanout_exceeded"
    CONDITION_UNMATCHED = "condition_unmatched"
    UNSAFE_TO_RETRY = "unsafe_to_retry"
    NON_RETRYABLE_ERROR = "non_retryable_error"  # the error's type is in the step's no_retry_on
