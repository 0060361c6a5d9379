"""States of runs, jobs and attempts, the transitions each allows, and the named
sets of states every driver and query uses (and the states of worker processes).

States are stored as their string values. The sets below are the only place that
says which states are "active", "waiting", "open" or "terminal"; the SQL statements
name them (``status IN ({ACTIVE_RUN})``) and get them rendered from here when they
are loaded (`ductline.store.queries`).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    PENDING = "pending"        # triggered; its first attempt has not started (e.g. start delay)
    RUNNING = "running"
    PAUSED = "paused"          # a step waits for a resume (other branches may run)
    COMPLETED = "completed"
    HALTED = "halted"          # a step failed for good; a retry revives it
    FAILED = "failed"          # the run deadline fired, or a pause expired
    CANCELLED = "cancelled"


class JobStatus(StrEnum):
    PENDING = "pending"        # claimable once not_before has passed
    HELD = "held"              # its run halted: kept, not claimable until a retry
    RUNNING = "running"        # claimed by a worker under a lease
    PAUSED = "paused"          # waits for a resume (`.pause(before=)`); not claimable
    DEFERRED = "deferred"      # waits for an event (`.wait_for(event, before=)`); not claimable, no slot
    AWAITING = "awaiting"      # its step started child runs and waits for them to end; not claimable
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class AttemptResult(StrEnum):
    SUCCEEDED = "succeeded"
    ERRORED = "errored"
    TIMED_OUT = "timed_out"
    CRASHED = "crashed"
    CANCELLED = "cancelled"


class HaltReason(StrEnum):
    JOB_RETRIES_EXHAUSTED = "job_retries_exhausted"
    JOB_CRASHES_EXHAUSTED = "job_crashes_exhausted"
    JOB_RELEASES_EXHAUSTED = "job_releases_exhausted"  # released at a worker's shutdown grace too often in a row
    MAX_FANOUT_EXCEEDED = "max_fanout_exceeded"
    CONDITION_UNMATCHED = "condition_unmatched"
    UNSAFE_TO_RETRY = "unsafe_to_retry"
    NON_RETRYABLE_ERROR = "non_retryable_error"  # no_retry_on names the error's type, or it is deterministic
    PAUSE_EXPIRED = "pause_expired"              # a failed run's reason: its pause expired
    EVENT_TIMED_OUT = "event_timed_out"          # a failed run's reason: an awaited event did not come in time
    CHILD_RUN_FAILED = "child_run_failed"        # a child run did not complete (on_failure="fail")


class WorkerStatus(StrEnum):
    """A worker process's state in the worker table (not a run's or a job's)."""

    RUNNING = "running"        # claims and runs attempts
    STOPPING = "stopping"      # shutting down: no new claims, its attempts finish
    STOPPED = "stopped"        # exited cleanly
    UNHEALTHY = "unhealthy"    # more undead slots than it tolerates: no new claims, still heartbeats


# -- runs --------------------------------------------------------------------------------
# A run advances (creates jobs that can be claimed) only while active.
ACTIVE_RUN = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED})
# Not finished: can still be cancelled, holds its idempotency key, may be revived.
UNFINISHED_RUN = ACTIVE_RUN | {RunStatus.HALTED}
# A run in one of these never changes again.
TERMINAL_RUN = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
# A run stops moving on its own in these (a halted run waits for an operator).
SETTLED_RUN = TERMINAL_RUN | {RunStatus.HALTED}
PAUSABLE_RUN = frozenset({RunStatus.PENDING, RunStatus.RUNNING})
"""A step's pause pauses its run from these; a halted run stays halted (a retry restores the pause)."""
STOPPED_RUN = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})
"""Ended by a stop (run deadline, cancel, expired pause), not by its steps: what still runs in it is ended."""

RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.HALTED, RunStatus.FAILED,
                                  RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset({RunStatus.PAUSED, RunStatus.COMPLETED, RunStatus.HALTED, RunStatus.FAILED,
                                  RunStatus.CANCELLED}),
    RunStatus.PAUSED: frozenset({RunStatus.RUNNING, RunStatus.HALTED, RunStatus.FAILED, RunStatus.CANCELLED}),
    # A retry revives a halted run (to pending if it never started, paused if a step
    # still waits for a person); a pause expiry or a cancel ends it.
    RunStatus.HALTED: frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.FAILED,
                                 RunStatus.CANCELLED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}

# -- jobs --------------------------------------------------------------------------------
# Waiting to be claimed (pending) or to be released by a retry (held).
WAITING_JOB = frozenset({JobStatus.PENDING, JobStatus.HELD})
# Not finished: a cancel or a deadline has to end these.
OPEN_JOB = WAITING_JOB | {JobStatus.RUNNING, JobStatus.PAUSED, JobStatus.DEFERRED, JobStatus.AWAITING}
IDLE_JOB = WAITING_JOB | {JobStatus.PAUSED, JobStatus.DEFERRED, JobStatus.AWAITING}
"""Open but with no attempt under way (waiting, paused, deferred, or awaiting its child runs): a stop
skips these (and cancels the child runs they await) and ends the running ones."""
TERMINAL_JOB = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.SKIPPED, JobStatus.CANCELLED})
# A retry of a halted run makes these pending again (with fresh budgets).
REVIVABLE_JOB = frozenset({JobStatus.FAILED, JobStatus.HELD, JobStatus.CANCELLED})
# step runs an operator may mark succeeded (ductline.model.marking): failed for good, held by a
# halt, or cancelled (e.g. by a fail_fast sibling); never running, completed, skipped or waiting
MARKABLE_JOB = REVIVABLE_JOB

JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PENDING: frozenset({JobStatus.RUNNING, JobStatus.HELD, JobStatus.SKIPPED}),
    JobStatus.HELD: frozenset({JobStatus.PENDING, JobStatus.SKIPPED, JobStatus.COMPLETED}),
    # An attempt ends: done, failed for good, back to waiting (retry, release), or
    # stopped by a cancel, a deadline or fail-fast.
    JobStatus.RUNNING: frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.PENDING, JobStatus.HELD,
                                  JobStatus.CANCELLED, JobStatus.AWAITING}),
    JobStatus.PAUSED: frozenset({JobStatus.PENDING, JobStatus.FAILED, JobStatus.SKIPPED}),
    # Its event arrives (pending, or held in a halted run), its wait times out, or a stop skips it.
    JobStatus.DEFERRED: frozenset({JobStatus.PENDING, JobStatus.HELD, JobStatus.FAILED, JobStatus.SKIPPED}),
    # Its child runs ended: completed with their outputs, or failed (a child did not
    # complete under on_failure="fail"); a stop of its run skips it.
    JobStatus.AWAITING: frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.SKIPPED}),
    JobStatus.COMPLETED: frozenset(),
    JobStatus.SKIPPED: frozenset(),
    # Only an operator moves these: a retry of a halted run (back to pending), or a
    # mark-succeeded of the step run (completed with the operator's output).
    JobStatus.FAILED: frozenset({JobStatus.PENDING, JobStatus.COMPLETED}),
    JobStatus.CANCELLED: frozenset({JobStatus.PENDING, JobStatus.COMPLETED}),
}

# -- workers -----------------------------------------------------------------------------
# The statuses of a worker expected to heartbeat; one killed without a clean exit keeps
# its status, and is judged lost once its heartbeat is a lease old (`ductline.model.workers`).
LIVE_WORKER = frozenset({WorkerStatus.RUNNING, WorkerStatus.STOPPING, WorkerStatus.UNHEALTHY})


def run_may_move(current: RunStatus, to: RunStatus) -> bool:
    """Whether a run may go from ``current`` to ``to``."""
    return to in RUN_TRANSITIONS[current]


def job_may_move(current: JobStatus, to: JobStatus) -> bool:
    """Whether a job (a step run) may go from ``current`` to ``to``."""
    return to in JOB_TRANSITIONS[current]


def waiting_status(run: RunStatus) -> JobStatus:
    """The status of a job that is created or goes back to waiting (a retry, a
    release) in a run of status ``run``: pending while the run advances, held once
    it halted, so nothing new starts until an operator retries it."""
    return JobStatus.PENDING if run in ACTIVE_RUN else JobStatus.HELD

