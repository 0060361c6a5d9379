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

from dataclasses import dataclass

CRASH_BACKOFF_BASE_MS = 1_000
CRASH_BACKOFF_CAP_MS = 60_000


@dataclass(frozen=True, slots=True)
class RetryDecision:
    retry: bool
    delay_ms: int = 0


def after_failure(failures_so_far: int, max_retry: int, retry_delay_seconds: int) -> RetryDecision:
    """Decide what follows an errored or timed-out attempt.

    Args:
        failures_so_far: failed attempts of this job including the one just recorded.
        max_retry: the step's shared budget.
        retry_delay_seconds: delay before the next attempt.
    """
    if failures_so_far >= max_retry:
        return RetryDecision(retry=False)
    return RetryDecision(retry=True, delay_ms=retry_delay_seconds * 1000)


def after_crash(crashes_so_far: int, max_crash: int) -> RetryDecision:
    """Decide what follows a crashed attempt: re-queue with backoff under ``max_crash``."""
    if crashes_so_far >= max_crash:
        return RetryDecision(retry=False)
    delay = min(CRASH_BACKOFF_CAP_MS, CRASH_BACKOFF_BASE_MS * 2 ** max(0, crashes_so_far - 1))
    return RetryDecision(retry=True, delay_ms=delay)
