"""Recording attempt outcomes: fenced writes, budgets, halting, advancing.

Every function here runs inside one write transaction and starts with the
write that is conditional on the lease token. If that write changes nothing the
lease was lost (the attempt was rescued or cancelled meanwhile): the outcome is
dropped and the caller logs it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ductline.dsl.graph import Definition
from ductline.dsl.options import StepOptions
from ductline.model import retry
from ductline.model.states import AttemptResult, HaltReason
from ductline.runtime.advance import Completed, FanoutRefused, advance, check_fanout
from ductline.runtime.advance import timeout_floor
from ductline.store import payloads
from ductline.store.records import NewJob
from ductline.store.store import Store, Tx

ON_HALT_STEP = "__on_halt__"
PAYLOAD_TOO_LARGE = "ductline.PayloadTooLarge"  # the recorded error type of `ductline.PayloadTooLarge`


@dataclass(frozen=True, slots=True)
class Attempt:
    """The identity of one attempt, as far as recording needs it."""

    job_id: str
    run_id: str
    step: str
    scope: str
    attempt: int
    lease_token: str
    started_ms: int | None = None
    limit_key: str | None = None  # the job's concurrency/rate limit key, if limited


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording did: ``"completed"``, ``"retry"``, ``"failed"`` or ``"lost"``;
    ``halted`` when this outcome halted the run."""

    outcome: str
    halted: bool = False
    reason: str | None = None
    run_completed: bool = False
    run_failed: bool = False
    enqueued: dict[str, int] | None = None
    paused: tuple[str, ...] = ()


LOST = Recorded("lost")


def halt(tx: Tx, definition: Definition | None, run_id: str, reason: HaltReason, step: str,
         error: str | None) -> bool:
    """Halt the run (once) and, if the pipeline has one, queue its ``on_halt`` handler."""
    details = {"reason": reason.value, "step": step, "error": error}
    halted = tx.halt_run(run_id, reason.value, {"halted_step": step, "error": error,
                                                "reasons": [details]})
    if halted and definition is not None and definition.on_failure == "fail_fast":
        from ductline.runtime.abort import fail_fast

        fail_fast(tx, run_id, step)
    if halted and definition is not None and definition.on_halt is not None:
        handler = definition.on_halt
        tx.insert_jobs([NewJob(
            id=uuid.uuid4().hex, run_id=run_id, pipeline=definition.name, step=ON_HALT_STEP, scope="",
            parent_scope=None, elem_index=None, status="pending", input=_json_args([details]),
            delay_ms=0, max_retry=handler.options.max_retry, max_crash=handler.options.max_crash,
            retry_delay_seconds=0, timeout_seconds=timeout_floor(handler.options.timeout),
        )])
    return halted


def _json_args(value: Any) -> str:
    from ductline import codec

    return codec.dumps([value], what="on_halt reasons")


def success(tx: Tx, definition: Definition, a: Attempt, output: str, retry_delay: int,
            sink: list[NewJob] | None = None, limits: payloads.Limits | None = None) -> Recorded:
    """Record a succeeded attempt and advance the run in the same transaction.

    An ``output`` (JSON text) above ``limits.inline_bytes`` is stored out of line
    once the fenced write kept the job; the job's row holds its reference."""
    node = definition.node(a.step) if a.step != ON_HALT_STEP else definition.on_halt
    assert node is not None
    try:
        check_fanout(node, output)
    except FanoutRefused as exc:
        if exc.too_many:
            if not tx.fail_job(a.job_id, a.lease_token):
                return LOST
            tx.close_attempt(a.job_id, a.attempt, a.lease_token, AttemptResult.ERRORED,
                             "FanoutError", str(exc))
            halted = halt(tx, definition, a.run_id, HaltReason.MAX_FANOUT_EXCEEDED, a.step, str(exc))
            return Recorded("failed", halted, HaltReason.MAX_FANOUT_EXCEEDED.value)
        return failure(tx, definition, a, AttemptResult.ERRORED, "TypeError", str(exc), None)
    stored, pending = payloads.prepare(output, limits or payloads.DEFAULT_LIMITS)
    if not tx.complete_job(a.job_id, a.lease_token, stored):
        return LOST
    if pending is not None:
        payloads.write(tx, a.run_id, pending, limits or payloads.DEFAULT_LIMITS)
    tx.close_attempt(a.job_id, a.attempt, a.lease_token, AttemptResult.SUCCEEDED)
    if a.step == ON_HALT_STEP:
        return Recorded("completed")
    moved = advance(tx, definition, Completed(a.run_id, a.step, a.scope, stored,
                                              output if pending is not None else None),
                    retry_delay, sink, limits)
    return Recorded("completed", run_completed=moved.run_completed, enqueued=moved.enqueued, paused=moved.paused)


def failure(tx: Tx, definition: Definition | None, a: Attempt, result: AttemptResult,
            error_type: str | None, error: str | None, traceback: str | None) -> Recorded:
    """Record an errored, timed-out or crashed attempt under the step's budgets.

    Errors and timeouts share ``max_retry``; crashes use ``max_crash`` with backoff.
    An attempt that crossed a boundary (`ductline.cross_boundary`) is never retried
    automatically: the run halts with ``unsafe_to_retry``. The step's `Backoff`
    spaces retries; ``no_retry_on`` halts at once (``non_retryable_error``),
    ``retry_on`` retries whatever the budget; a requested `ductline.Retry` is
    retried after its delay without charge.
    """
    budget = tx.job_budget(a.job_id)
    crashed = result is AttemptResult.CRASHED
    errored = result is AttemptResult.ERRORED
    requested = retry.requested_retry(error_type, error) if errored else None
    if budget.boundary is not None:
        decision = retry.RetryDecision(retry=False)
        reason = HaltReason.UNSAFE_TO_RETRY
    elif crashed:
        decision = retry.after_crash(budget.crashes + 1, budget.max_crash)
        reason = HaltReason.JOB_CRASHES_EXHAUSTED
    elif requested is not None:
        decision = requested
        reason = HaltReason.JOB_RETRIES_EXHAUSTED
    else:
        options = _options(definition, a.step)
        failures = budget.failures + 1
        decision = retry.after_failure(
            failures, budget.max_retry, budget.retry_delay_seconds,
            delay_ms=None if options is None or options.backoff is None else options.backoff.delay_ms(failures),
            error_type=error_type if errored else None,
            retry_on=() if options is None else options.retry_on,
            no_retry_on=_never_retried(options),
        )
        reason = HaltReason.NON_RETRYABLE_ERROR if decision.never else HaltReason.JOB_RETRIES_EXHAUSTED
    if tx.lease_state(a.job_id) != (a.lease_token, "running"):
        return LOST
    # The attempt ends first, so the retry's not-before (read by the next statement)
    # is never earlier than the attempt's finish plus the delay.
    tx.close_attempt(a.job_id, a.attempt, a.lease_token, result, error_type, error, traceback)
    if decision.retry:
        changed = tx.retry_job(a.job_id, a.lease_token, decision.delay_ms, crashed=crashed,
                               charged=decision.charge)
    else:
        changed = tx.fail_job(a.job_id, a.lease_token, crashed=crashed)
    if not changed:  # the job's run ended (cancel, deadline): the attempt stays closed
        return LOST
    if decision.retry:
        return Recorded("retry")
    if a.step == ON_HALT_STEP:
        return Recorded("failed")
    detail = error if budget.boundary is None else f"crossed boundary {budget.boundary!r}: {error}"
    halted = halt(tx, definition, a.run_id, reason, a.step, detail)
    return Recorded("failed", halted, reason.value)


def _never_retried(options: StepOptions | None) -> tuple[str, ...]:
    """The step's ``no_retry_on`` plus `ductline.PayloadTooLarge`: an output too large
    is deterministic, so it halts the run at once (``non_retryable_error``) unless
    the step's ``retry_on`` names it."""
    never = () if options is None else tuple(options.no_retry_on)
    if options is not None and PAYLOAD_TOO_LARGE in options.retry_on:
        return never
    return never + (PAYLOAD_TOO_LARGE,)


def _options(definition: Definition | None, step: str) -> StepOptions | None:
    """The step's options from the definition this worker loaded (``None`` if the
    pipeline or step is unknown here: the job's stored fixed delay applies)."""
    if definition is None:
        return None
    try:
        return definition.node(step).options
    except KeyError:
        return None


def run_deadline_in_own_transaction(store: "Store", definition: Definition | None, a: Attempt) -> Recorded:
    """The run deadline killed this attempt: end the whole run (`abort.expire`), in a
    transaction of its own (it rolls back if the run ended meanwhile)."""
    from ductline.runtime.abort import Unchanged, expire

    try:
        with store.transaction() as tx:
            if tx.lease_state(a.job_id) != (a.lease_token, "running"):
                return LOST
            ended = expire(tx, definition, a.run_id)
    except Unchanged:
        return LOST
    return Recorded("failed", reason="timeout_exceeded", run_failed=ended)


def release(tx: Tx, a: Attempt, why: str) -> bool:
    """Give a job back without charging a budget; its attempt ends ``cancelled``."""
    if not tx.release_job(a.job_id, a.lease_token):
        return False
    tx.close_attempt(a.job_id, a.attempt, a.lease_token, AttemptResult.CANCELLED, "Released", why)
    return True
