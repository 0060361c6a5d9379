"""Ending a run early: what a run deadline, a cancel, an expired pause and a
fail-fast halt do to the run, its running attempts, its waiting jobs and the
dependents never created.

One rule for all of them (docs/howto/deadlines-and-cancel.md): in-flight attempts are
ended (their children killed), every waiting job is skipped, and the never-created
dependents are recorded skipped by a breadth-first walk (`ductline.model.cascade`)
that remembers the step each was reached from. Finished step runs keep their state;
nothing goes from a terminal state back to pending. Fail-fast is the exception
that keeps what waits: its run is halted, and a retry revives it.

A job a worker claimed before its not-before time and holds until then
(`ductline.runtime.ahead`) is running in the database but has not begun: a stop
before that time treats it as waiting (`begun_by`), so its step is skipped (or kept,
by fail-fast) with no attempt, as it would have been had it not been claimed yet. A
halt does the same (`ductline.engine.record.halt`): the held job waits, held, with the
run's other waiting jobs, instead of starting at its time in a halted run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ductline.model.states import UNFINISHED_RUN, AttemptResult, HaltReason, JobStatus, RunStatus

WORKFLOW_TIMEOUT = "workflow timeout"   # skip reason after a run deadline
CANCELLED = "cancelled"                 # skip reason after a cancel
PAUSE_EXPIRED = "pause expired"         # skip reason after a pause expired
EVENT_TIMED_OUT = "event timed out"     # skip reason after an awaited event did not come in time
STOP_SKIP_REASONS = (WORKFLOW_TIMEOUT, CANCELLED, PAUSE_EXPIRED, EVENT_TIMED_OUT)


def stopped_before_its_end(status: str, skip_reason: str | None) -> bool:
    """Whether a step run ended because something stopped its run, not by getting
    to an end of its own: ``cancelled`` (in flight or waiting at a cancel, or by a
    fail-fast sibling), ``failed`` in flight at its run's deadline (its reason is the
    attempt's error, "stopped at the run deadline: ..."), or ``skipped`` by a stop (a
    cancel, a run deadline, an expired pause or an awaited event that did not come).
    A step run skipped by routing (a divert's path not taken) did get to its end.
    Progress displays count the others as done, so a stopped run's bar stays where
    the run stood.

    Args:
        status: the step run's status (a `JobStatus` value).
        skip_reason: the reason stored with it.
    """
    if status == JobStatus.FAILED:
        return (skip_reason or "").startswith(DEADLINE_STOPPED)
    return status == JobStatus.CANCELLED or (status == JobStatus.SKIPPED and skip_reason in STOP_SKIP_REASONS)


def begun_by(not_before_ms: int, at_ms: int) -> bool:
    """Whether a running job may have begun its attempt by a stop at ``at_ms``.

    A worker starts a job only once the database clock has surely passed the job's
    not-before time (`ductline.clock.DatabaseClock.passed`), whenever it claimed it;
    a job due after the stop's instant has therefore not begun, and the stop treats
    it as waiting. At or after that time the worker may have started it: the stop
    treats it as in flight (its child is killed). The stores apply this rule in SQL
    (``drop_unstarted_attempts`` and ``take_back_unstarted_jobs``), where a worker
    may also say of its own job that it did not start it (a job claimed after its
    run's deadline, which it never starts).

    The stop's instant is the database clock's now, read once the run's running jobs
    are locked, so a worker that confirmed a held job's lease before starting it
    (`ductline.runtime.claimer`) did so before that instant or finds the lease gone;
    a run deadline's stop takes the deadline instead, after which no worker starts a
    job of the run.

    Args:
        not_before_ms: the job's not-before time (epoch ms, database clock).
        at_ms: the stop's instant (epoch ms, database clock).
    """
    return not_before_ms <= at_ms


def shown_skip_reason(status: str, skip_reason: str | None, attempts: int) -> str | None:
    """Why a step run never ran, as every view shows it: of a ``skipped`` one, and of
    one that failed without an attempt (its pause expired, its awaited event did not
    come). A stop also records its message on the step runs it ends in flight
    (``failed`` at a run deadline, ``cancelled`` by a cancel); there it is the error
    of their last attempt, not a reason they were skipped: ``None``.

    Args:
        status: the step run's status (a `JobStatus` value).
        skip_reason: the reason stored with it.
        attempts: how many attempts it began.
    """
    if status == JobStatus.SKIPPED or (status == JobStatus.FAILED and not attempts):
        return skip_reason
    return None


@dataclass(frozen=True, slots=True)
class StopPlan:
    """What a stop does.

    Attributes:
        run_status: what the run becomes (``None``: it stays as it is -- fail-fast
            acts on a run that just halted).
        from_statuses: the run statuses the stop applies to.
        job_status: what its running jobs become.
        attempt_result, error_type, error: how their open attempts are recorded.
        skip_reason: waiting jobs and never-created dependents are skipped with
            this reason (``None``: they are kept).
        skip_root: the root recorded on the waiting jobs skipped (the step whose
            pause expired), else ``None``.
        halt_reason: the run's ``halt_reason`` afterwards, if it gets one.
        metadata: merged into the run's metadata.
    """

    run_status: RunStatus | None
    from_statuses: frozenset[RunStatus]
    job_status: JobStatus
    attempt_result: AttemptResult
    error_type: str
    error: str
    skip_reason: str | None
    skip_root: str | None = None
    halt_reason: HaltReason | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def deadline_error(timeout_seconds: float | None) -> str:
    """The error recorded on a run that exceeded its deadline."""
    seconds = "?" if timeout_seconds is None else f"{timeout_seconds:g}"
    return f"the run exceeded its deadline of {seconds} s"


def pause_expired_reason(step: str, seconds: int) -> str:
    """The error recorded on a run whose pause before ``step`` expired."""
    return f"pause before step {step!r} expired after {seconds} s without a resume"


# The error type of an attempt its run's deadline stopped, and how its error begins (`deadline`).
DEADLINE_ERROR_TYPE = "TimeoutError"
DEADLINE_STOPPED = "stopped at the run deadline: "
# The reason of such an attempt's ``job.completed`` event and of its run's ``pipeline.failed``.
DEADLINE_REASON = "timeout_exceeded"


def stopped_by_deadline(result: str | None, error_type: str | None, error: str | None) -> bool:
    """Whether a stored attempt is one its run's deadline stopped in flight (`deadline`
    records it): not a failure of its step that a retry follows, nor one past a
    boundary (the run ended ``failed``; nothing of it runs again)."""
    return (result == AttemptResult.TIMED_OUT and error_type == DEADLINE_ERROR_TYPE
            and (error or "").startswith(DEADLINE_STOPPED))


def deadline(timeout_seconds: float | None) -> StopPlan:
    """The run deadline passed: the run ends ``failed`` with ``timeout_exceeded``;
    attempts in flight are recorded ``timed_out`` with ``TimeoutError``. A halted run
    ends too (keeping its halt reason): past its deadline a retry could not run it."""
    error = deadline_error(timeout_seconds)
    return StopPlan(
        run_status=RunStatus.FAILED, from_statuses=UNFINISHED_RUN, job_status=JobStatus.FAILED,
        attempt_result=AttemptResult.TIMED_OUT, error_type=DEADLINE_ERROR_TYPE,
        error=DEADLINE_STOPPED + error, skip_reason=WORKFLOW_TIMEOUT,
        metadata={"timeout_exceeded": True, "timeout_seconds": timeout_seconds, "error": error})


def cancel() -> StopPlan:
    """An operator (or the API) cancelled the run."""
    return StopPlan(
        run_status=RunStatus.CANCELLED, from_statuses=UNFINISHED_RUN, job_status=JobStatus.CANCELLED,
        attempt_result=AttemptResult.CANCELLED, error_type="Cancelled", error="the run was cancelled",
        skip_reason=CANCELLED, metadata={"cancelled": True})


def pause_expired(step: str, seconds: int) -> StopPlan:
    """A pause before ``step`` passed its timeout without a resume: the run fails
    closed (``halt_reason`` ``pause_expired``); the paused job itself is recorded
    ``failed`` by the driver (it never ran)."""
    reason = pause_expired_reason(step, seconds)
    return StopPlan(
        run_status=RunStatus.FAILED, from_statuses=UNFINISHED_RUN, job_status=JobStatus.CANCELLED,
        attempt_result=AttemptResult.CANCELLED, error_type="PauseExpired", error=f"cancelled because the {reason}",
        skip_reason=PAUSE_EXPIRED, skip_root=step, halt_reason=HaltReason.PAUSE_EXPIRED,
        metadata={"pause_expired": True, "paused_step": step, "pause_timeout_seconds": seconds, "error": reason})


def event_timed_out_reason(step: str, event: str, seconds: int) -> str:
    """The error recorded on a run whose wait for ``event`` before ``step`` timed out."""
    return f"event {event!r} awaited before step {step!r} did not come within {seconds} s"


def event_timed_out(step: str, event: str, seconds: int) -> StopPlan:
    """A wait for ``event`` before ``step`` passed its timeout: the run fails
    (``halt_reason`` ``event_timed_out``), as an expired pause fails it; the
    deferred job itself is recorded ``failed`` (it never ran)."""
    reason = event_timed_out_reason(step, event, seconds)
    return StopPlan(
        run_status=RunStatus.FAILED, from_statuses=UNFINISHED_RUN, job_status=JobStatus.CANCELLED,
        attempt_result=AttemptResult.CANCELLED, error_type="EventTimedOut", error=f"cancelled because the {reason}",
        skip_reason=EVENT_TIMED_OUT, skip_root=step, halt_reason=HaltReason.EVENT_TIMED_OUT,
        metadata={"event_timed_out": True, "waiting_step": step, "event": event, "event_timeout_seconds": seconds,
                  "error": reason})


def fail_fast(step: str) -> StopPlan:
    """``on_failure="fail_fast"``: when ``step`` halts the run, siblings still
    running are cancelled at once; waiting jobs stay held so a retry revives
    everything."""
    return StopPlan(
        run_status=None, from_statuses=frozenset({RunStatus.HALTED}), job_status=JobStatus.CANCELLED,
        attempt_result=AttemptResult.CANCELLED, error_type="Cancelled",
        error=f"cancelled because step {step!r} failed (fail_fast)", skip_reason=None)
