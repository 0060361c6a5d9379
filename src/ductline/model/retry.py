"""Retry and crash budget decisions (pure functions).

Seed semantics (Ductwork Pro, "Step Timeout"): timeouts and errors share one budget,
``max_retry``. Each failed attempt consumes one retry; while retries remain a new
attempt is scheduled ``retry_delay`` seconds out on the database clock, otherwise the
step fails and the run halts with ``job_retries_exhausted``. "A step that times out
three times with max_retry: 3 halts the pipeline" -- so ``max_retry`` is also the
largest number of failed attempts a job can have (0 and 1 both mean "no retry").

Crashes (the worker died, the lease expired) have their own budget, ``max_crash``,
with exponential backoff, so a step that kills its worker every time halts its run
(``job_crashes_exhausted``) instead of looping forever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CRASH_BACKOFF_BASE_MS = 1_000
CRASH_BACKOFF_CAP_MS = 60_000
# What a child records for `ductline.Retry` (see `ductline.errors.Retry`).
RETRY_REQUEST_TYPE = "ductline.Retry"
_REQUESTED = re.compile(r"retry requested in (\d+) s")


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """``retry``: schedule another attempt ``delay_ms`` out; ``charge``: count the
    attempt against ``max_retry``; ``never``: the error type is in ``no_retry_on``."""

    retry: bool
    delay_ms: int = 0
    charge: bool = True
    never: bool = False


def after_failure(failures_so_far: int, max_retry: int, retry_delay_seconds: int, *,
                  delay_ms: int | None = None, error_type: str | None = None,
                  retry_on: tuple[str, ...] = (), no_retry_on: tuple[str, ...] = ()) -> RetryDecision:
    """Decide what follows an errored or timed-out attempt.

    Args:
        failures_so_far: failed attempts of this job including the one just recorded.
        max_retry: the step's shared budget.
        retry_delay_seconds: delay before the next attempt (fixed policy).
        delay_ms: the delay a `Backoff` policy computed, overriding the fixed one.
        error_type: the recorded type of an errored attempt (``None`` for a timeout).
        retry_on: types retried whatever the budget (still counted as failures).
        no_retry_on: types never retried.
    """
    wait = retry_delay_seconds * 1000 if delay_ms is None else delay_ms
    if error_type is not None and error_type in no_retry_on:
        return RetryDecision(retry=False, never=True)
    if error_type is not None and error_type in retry_on:
        return RetryDecision(retry=True, delay_ms=wait)
    if failures_so_far >= max_retry:
        return RetryDecision(retry=False)
    return RetryDecision(retry=True, delay_ms=wait)


def requested_retry(error_type: str | None, error: str | None) -> RetryDecision | None:
    """A retry the step asked for with `ductline.Retry`: after its delay, free of
    charge; ``None`` if the attempt did not ask."""
    if error_type != RETRY_REQUEST_TYPE or error is None:
        return None
    match = _REQUESTED.match(error)
    if match is None:
        return None
    return RetryDecision(retry=True, delay_ms=int(match.group(1)) * 1000, charge=False)


def after_crash(crashes_so_far: int, max_crash: int) -> RetryDecision:
    """Decide what follows a crashed attempt: re-queue with backoff under ``max_crash``."""
    if crashes_so_far >= max_crash:
        return RetryDecision(retry=False)
    delay = min(CRASH_BACKOFF_CAP_MS, CRASH_BACKOFF_BASE_MS * 2 ** max(0, crashes_so_far - 1))
    return RetryDecision(retry=True, delay_ms=delay)
