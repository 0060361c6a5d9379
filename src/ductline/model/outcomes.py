"""What an attempt's outcome means: complete, retry at a time, release, or fail
(and halt the run with a reason). Pure: drivers gather the facts, call `decide`,
and apply the `Verdict` with their own storage.

Rules, each from its source:

- Timeouts and errors share one budget, ``max_retry`` (Ductwork Pro, "Step
  Timeout": "a step that times out three times with max_retry: 3 halts the
  pipeline"): each failed attempt consumes one; ``max_retry`` is the largest number
  of failed attempts a job can have (0 and 1 both mean "no retry"). While retries
  remain, the next attempt waits ``retry_delay`` (or the step's `Backoff`); after
  the last, the run halts with ``job_retries_exhausted``.
- Crashes (the worker died, the lease expired, the child exited) have their own
  budget, ``max_crash``, with exponential backoff, so a step that kills its worker
  every time halts its run (``job_crashes_exhausted``) instead of looping forever.
- ``no_retry_on`` types fail at once (``non_retryable_error``); ``retry_on`` types
  are retried whatever is left of the budget (still counted). They apply to errors,
  not to timeouts. `ductline.PayloadTooLarge`, `ductline.PayloadNotSerializable`,
  `ductline.StepSignatureError` and `ductline.ExpandNotAList` are never retried
  unless ``retry_on`` names them: an output that is too large, does not round-trip
  through JSON or is not the list an expand needs, and arguments the step's
  signature cannot take, fail the same way every time.
  (A ``TypeError`` raised inside a step's body is an ordinary error: only encoding
  the output raises `ductline.PayloadNotSerializable`, and only binding the
  arguments, checked before the call, `ductline.StepSignatureError`.)
- A `ductline.Retry` the step raised is retried after its delay, free of charge.
- An attempt that crossed a boundary (`ductline.cross_boundary`) is never run again
  automatically, whatever ended it -- error, timeout, crash, a requested retry or a
  worker's shutdown: the run halts with ``unsafe_to_retry`` (docs/howto/retries.md,
  "Safe-only retry").
- An expand's output that is not a list is a deterministic error (above); one
  longer than ``max_fanout`` halts the run at once (``max_fanout_exceeded``), also
  past a crossed boundary.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Callable

from ductline import codec
from ductline.dsl.graph import Node, TransitionKind
from ductline.dsl.options import StepOptions
from ductline.model.states import AttemptResult, HaltReason

# A job whose attempts are interrupted by its worker's shutdown grace this many times
# in a row (each one released, nothing charged) halts its run with
# `HaltReason.JOB_RELEASES_EXHAUSTED`: a step longer than every deploy allows would
# otherwise start again forever. An attempt that ends any other way resets the count.
# The default of the ``max_releases`` setting (`ductline.config.Settings`), which the
# recording worker passes in `Budget.max_releases`.
MAX_RELEASES = 5
CRASH_BACKOFF_BASE_MS = 1_000
CRASH_BACKOFF_CAP_MS = 60_000

# Error types recorded for failures ductline itself detects.
RETRY_REQUEST_TYPE = "ductline.Retry"              # the step raised `ductline.Retry`
PAYLOAD_TOO_LARGE_TYPE = "ductline.PayloadTooLarge"
NOT_SERIALIZABLE_TYPE = "ductline.PayloadNotSerializable"  # an output that does not round-trip
STEP_SIGNATURE_TYPE = "ductline.StepSignatureError"  # the step's arguments do not fit its signature
FANOUT_ERROR_TYPE = "FanoutError"                  # an expand's list is over max_fanout
NOT_A_LIST_TYPE = "ductline.ExpandNotAList"       # an expand's output is not a list
TIMEOUT_ERROR_TYPE = "TimeoutError"
RELEASED_TYPE = "Released"                         # a worker shut down during the attempt
# The error of a `RELEASED_TYPE` attempt that never began: claimed ahead and given back
# unstarted (its run's deadline does not count it; restart_run_deadline and unstart_run
# find such attempts with `GIVEN_BACK_PATTERN`).
GIVEN_BACK = "given back before it started"
GIVEN_BACK_PATTERN = GIVEN_BACK + "%"  # SQL LIKE: the error begins with it
# The error of a `RELEASED_TYPE` attempt that began in a child being killed for the
# attempt before it (junk it sent, a timeout, a cancel; the job was sent ahead to that
# child): it runs again, not charged.
KILLED_WITH_CHILD = "started in a child that was being killed for the attempt before it"
PROTOCOL_ERROR_TYPE = "ductline.ProtocolError"     # the child sent what its parent cannot take (a crash)
# How a `RELEASED_TYPE` attempt reads to people (`shown_result`).
RELEASED = "released"

_REQUESTED = re.compile(r"retry requested in (\d+) s")


class Action(StrEnum):
    COMPLETE = "complete"   # the job completed: route its output on
    RETRY = "retry"         # the job waits again (pending, or held in a halted run)
    RELEASE = "release"     # the job waits again, nothing charged (worker shutdown)
    FAIL = "fail"           # the job failed for good: halt the run (once)


class Charge(StrEnum):
    FAILURE = "failure"     # counts against max_retry
    CRASH = "crash"         # counts against max_crash
    RELEASE = "release"     # counts against max_releases (consecutive interrupted attempts)


@dataclass(frozen=True, slots=True)
class Budget:
    """What is known of the job when one of its attempts ends: the counts *before*
    this attempt, its limits, its fixed retry delay and its crossed boundary.

    ``max_releases`` is the recording worker's ``max_releases`` setting (>= 1): the
    attempts interrupted by a shutdown grace in a row that halt the run."""

    failures: int = 0
    crashes: int = 0
    max_retry: int = 3
    max_crash: int = 10
    retry_delay_seconds: float = 10  # a worker stores whole seconds; the in-process executor may use fractions
    boundary: str | None = None
    releases: int = 0  # consecutive attempts interrupted by a worker's shutdown grace
    max_releases: int = MAX_RELEASES


@dataclass(frozen=True, slots=True)
class Ended:
    """How an attempt ended, as the driver saw it.

    Attributes:
        result: the attempt's result.
        error_type: the recorded type of an error (``None`` for a success).
        error: the error's message.
        released: the worker gave the job back unfinished (shutdown); ``result``
            is then `AttemptResult.CANCELLED`.
        interrupted: released because the worker's shutdown grace ran out while the
            attempt ran (it counts toward `Budget.max_releases`); not a job claimed ahead
            and given back, nor one that began in a child killed for another.
        finished_ms: when the attempt ended (epoch ms, database clock), when that is
            known to be earlier than its recording; ``None``: it ended when it is
            recorded. A rescued attempt ended by its lease's expiry (`lease_expired`).
    """

    result: AttemptResult
    error_type: str | None = None
    error: str | None = None
    released: bool = False
    interrupted: bool = False
    finished_ms: int | None = None


WORKER_LOST_TYPE = "WorkerLost"


def lease_expired(lease_expires_ms: int | None) -> Ended:
    """How an attempt whose lease expired ended: ``crashed``, its worker lost.

    It finished by its lease's expiry, not when another worker noticed (a rescue
    comes up to a health-check interval later, or much later when no worker was
    running): a worker that cannot renew its leases kills its children before they
    expire (docs/concepts/job-lifecycle.md), so nothing of the attempt ran past it.
    The worker's last heartbeat is not known to the rescuer (its lease length is
    the dead worker's setting); the expiry is the one bound the database holds.

    Args:
        lease_expires_ms: the lease's expiry (epoch ms, database clock); ``None``
            when it is not known (the attempt then ends when it is recorded).
    """
    return Ended(AttemptResult.CRASHED, WORKER_LOST_TYPE, "the lease expired: its worker stopped heartbeating",
                 finished_ms=lease_expires_ms)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What follows an attempt.

    Attributes:
        action: complete, retry, release or fail.
        delay_ms: for a retry, how long the job waits (database clock).
        charge: the budget the attempt consumed, if any.
        halt: for a failure, the reason the run halts with (``None`` for the
            ``on_halt`` handler, whose failure halts nothing).
        detail: the text recorded with the halt.
    """

    action: Action
    delay_ms: int = 0
    charge: Charge | None = None
    halt: HaltReason | None = None
    detail: str | None = None

    @property
    def retries(self) -> bool:
        return self.action in (Action.RETRY, Action.RELEASE)


COMPLETE = Verdict(Action.COMPLETE)


def crash_backoff_ms(crashes: int) -> int:
    """The wait before re-running a job after its ``crashes``-th crash (>= 1)."""
    return min(CRASH_BACKOFF_CAP_MS, CRASH_BACKOFF_BASE_MS * (1 << max(0, min(crashes - 1, 32))))


def requested_delay_ms(ended: Ended) -> int | None:
    """The delay of a retry the step asked for with `ductline.Retry`, else ``None``."""
    if ended.result is not AttemptResult.ERRORED or ended.error_type != RETRY_REQUEST_TYPE or not ended.error:
        return None
    match = _REQUESTED.match(ended.error)
    return None if match is None else int(match.group(1)) * 1000


# Errors another attempt cannot fix (the same output or input fails the same way):
# never retried unless the step's retry_on names them.
_DETERMINISTIC = (PAYLOAD_TOO_LARGE_TYPE, NOT_SERIALIZABLE_TYPE, STEP_SIGNATURE_TYPE, NOT_A_LIST_TYPE)


def _never_retried(options: StepOptions | None) -> tuple[str, ...]:
    never = () if options is None else tuple(options.no_retry_on)
    always = () if options is None else options.retry_on
    return never + tuple(t for t in _DETERMINISTIC if t not in always)


def halt_detail(error: str | None, boundary: str | None) -> str | None:
    """The text a halt records: the error, and the boundary the attempt crossed."""
    return error if boundary is None else f"crossed boundary {boundary!r}: {error}"


def decide(ended: Ended, budget: Budget, options: StepOptions | None, *, handler: bool = False,
           rng: Callable[[], float] = random.random) -> Verdict:
    """Decide what follows one attempt of a job.

    Args:
        ended: how the attempt ended.
        budget: the job's counts before this attempt, its limits and boundary.
        options: the step's options (``None`` when this process does not know the
            step: the job's stored limits and fixed delay still apply).
        handler: the job runs the pipeline's ``on_halt`` handler (its failure
            halts nothing).
        rng: a source of floats in [0, 1) for a `Backoff`'s jitter.

    Returns:
        The `Verdict`. A success is always `COMPLETE` (check an expand's output
        with `check_expand_output` first).
    """
    if ended.result is AttemptResult.SUCCEEDED:
        return COMPLETE
    verdict = _decide_failure(ended, budget, options, rng)
    if verdict.action is Action.FAIL and handler:
        return Verdict(Action.FAIL, charge=verdict.charge)
    return verdict


def _decide_failure(ended: Ended, budget: Budget, options: StepOptions | None,
                    rng: Callable[[], float]) -> Verdict:
    crashed = ended.result is AttemptResult.CRASHED
    charge = None if ended.released else Charge.CRASH if crashed else Charge.FAILURE
    errored = ended.result is AttemptResult.ERRORED
    if errored and ended.error_type == FANOUT_ERROR_TYPE:
        # The output is at fault, not the attempt: the run halts with this cause
        # whether or not a boundary was crossed, so an operator sees why.
        return Verdict(Action.FAIL, charge=charge, halt=HaltReason.MAX_FANOUT_EXCEEDED, detail=ended.error)
    if budget.boundary is not None:
        # Whatever ended it, an attempt past its boundary is not run again by itself.
        return Verdict(Action.FAIL, charge=charge, halt=HaltReason.UNSAFE_TO_RETRY,
                       detail=halt_detail(ended.error, budget.boundary))
    if ended.released:
        if not ended.interrupted:
            return Verdict(Action.RELEASE)
        releases = budget.releases + 1
        if releases >= budget.max_releases:
            return Verdict(Action.FAIL, charge=Charge.RELEASE, halt=HaltReason.JOB_RELEASES_EXHAUSTED,
                           detail=f"interrupted by a worker's shutdown grace {releases} "
                                  f"time{'' if releases == 1 else 's'} in a row "
                                  f"(at most {budget.max_releases}): {ended.error}")
        return Verdict(Action.RELEASE, charge=Charge.RELEASE)
    if crashed:
        crashes = budget.crashes + 1
        if crashes >= budget.max_crash:
            return Verdict(Action.FAIL, charge=charge, halt=HaltReason.JOB_CRASHES_EXHAUSTED, detail=ended.error)
        return Verdict(Action.RETRY, delay_ms=crash_backoff_ms(crashes), charge=charge)
    requested = requested_delay_ms(ended)
    if requested is not None:
        return Verdict(Action.RETRY, delay_ms=requested)
    failures = budget.failures + 1
    backoff = None if options is None else options.backoff
    wait = round(budget.retry_delay_seconds * 1000) if backoff is None else backoff.delay_ms(failures, rng)
    error_type = ended.error_type if errored else None  # retry_on/no_retry_on name errors, not timeouts
    if error_type is not None and error_type in _never_retried(options):
        return Verdict(Action.FAIL, charge=charge, halt=HaltReason.NON_RETRYABLE_ERROR, detail=ended.error)
    if error_type is not None and options is not None and error_type in options.retry_on:
        return Verdict(Action.RETRY, delay_ms=wait, charge=charge)
    if failures >= budget.max_retry:
        return Verdict(Action.FAIL, charge=charge, halt=HaltReason.JOB_RETRIES_EXHAUSTED, detail=ended.error)
    return Verdict(Action.RETRY, delay_ms=wait, charge=charge)


def check_expand_output(node: Node, value: Any) -> Ended | None:
    """An expand's source must return a list of at most ``max_fanout`` elements.

    ``value`` is the output's structure (`ductline.codec.structure`): a tuple or a
    user type is a tagged JSON object there, named by its type in the error.

    Returns:
        ``None`` if ``node`` does not expand or its output is fine; otherwise the
        errored `Ended` to record instead of the success (`decide` halts a
        ``FanoutError`` with ``max_fanout_exceeded`` and a ``ductline.ExpandNotAList``
        with ``non_retryable_error``, both at once).
    """
    transition = node.next
    if transition is None or transition.kind is not TransitionKind.EXPAND:
        return None
    if not isinstance(value, list):
        return Ended(AttemptResult.ERRORED, NOT_A_LIST_TYPE,
                     f"step {node.name!r} is followed by expand, so it must return a list, "
                     f"not {codec.structure_type(value)}")
    if len(value) > transition.max_fanout:
        return Ended(AttemptResult.ERRORED, FANOUT_ERROR_TYPE,
                     f"step {node.name!r} returned {len(value)} elements; max_fanout is {transition.max_fanout}")
    return None


def shown_result(result: str | None, error_type: str | None) -> str | None:
    """An attempt's result as people read it (``ductline show``, its JSON, the API's
    run view, the run page): the stored result, except that an attempt its worker
    gave back (recorded ``cancelled`` with error type `RELEASED_TYPE`: claimed ahead
    and not started, or interrupted by a shutdown, and run again, nothing charged)
    reads `RELEASED`. The design's attempt ends stay five; "cancelled" alone reads as
    an operator's cancel of the run, which a shutdown release is not.

    Args:
        result: the stored result (``None`` while the attempt runs).
        error_type: the stored error type.
    """
    if result == AttemptResult.CANCELLED and error_type == RELEASED_TYPE:
        return RELEASED
    return result


def retry_reason(result: str, error_type: str | None, *, failures: int, crashes: int, max_retry: int,
                 max_crash: int) -> str:
    """Why a job waits for its next attempt, in the words of its budgets, for the log
    line of the attempt that ended and for the progress display while it waits:
    ``"after crash 6 of at most 10 (max_crash; backoff doubles to 60 s)"``. A step
    that kills its child every time spends the whole crash budget, about four minutes
    of waits by default: this says so. ``""`` when there is nothing to add.

    Args:
        result: the result of the attempt that ended (`AttemptResult` value).
        error_type: its error type, if any.
        failures, crashes: the job's counts with that attempt charged.
        max_retry, max_crash: the job's budgets.
    """
    if result == AttemptResult.CRASHED:
        return (f"after crash {crashes} of at most {max_crash} (max_crash; backoff doubles to "
                f"{CRASH_BACKOFF_CAP_MS // 1000} s)")
    if result == AttemptResult.ERRORED and error_type == RETRY_REQUEST_TYPE:
        return "as the step asked (ductline.Retry)"
    if result in (AttemptResult.ERRORED, AttemptResult.TIMED_OUT) and 0 < failures <= max_retry:
        return f"after failure {failures} of at most {max_retry} (max_attempts)"
    return ""


def timeout_message(attempt: int, step: str, seconds: float | None) -> str:
    """The error recorded for an attempt killed at its step timeout."""
    return f"attempt {attempt} of step {step!r} exceeded the step timeout of {seconds:g} s and was killed"


def child_died_message(code: int | None) -> str:
    return f"the child process running the step exited with code {code}"


def protocol_error_message(step: str, why: str) -> str:
    """The error recorded for an attempt whose child broke the message protocol."""
    return f"the child running step {step!r} sent its parent a message it cannot take ({why}); it was killed"
