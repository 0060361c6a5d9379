"""What an attempt's outcome means (`ductline.model.outcomes`): the verdict for every
kind of ending under the retry and crash budgets, `retry_on`/`no_retry_on`,
`ductline.Retry`, crossed boundaries, releases, the ``on_halt`` handler, backoff
policies, and the check of an expand's output.

Sources: DESIGN.md ("Step timeouts": one shared budget, "a step that times out three
times with max_retry: 3 halts the pipeline"; "The killable child, leases and
safe-only retry": ``max_crash`` with backoff, ``unsafe_to_retry``) and issue 12's
measured drifts (``no_retry_on`` and ``Retry(0)``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import ductline
import rules_definitions as D
import steps_for_tests as S
from ductline.dsl.backoff import Backoff
from ductline.dsl.options import StepOptions, build_options, error_type_name
from ductline.model.outcomes import (
    COMPLETE, MAX_RELEASES, Action, Budget, Charge, Ended, Verdict, check_expand_output, child_died_message,
    crash_backoff_ms,
    decide, halt_detail, requested_delay_ms, retry_reason, timeout_message, RETRY_REQUEST_TYPE,
)
from ductline.model.states import AttemptResult, HaltReason

OK = AttemptResult.SUCCEEDED
ERR = AttemptResult.ERRORED
TIMEOUT = AttemptResult.TIMED_OUT
CRASH = AttemptResult.CRASHED
CANCEL = AttemptResult.CANCELLED

RETRY_TYPE = error_type_name(ductline.Retry)
TOO_LARGE_TYPE = error_type_name(ductline.PayloadTooLarge)
SIGNATURE_TYPE = "ductline.StepSignatureError"
NOT_SERIALIZABLE_TYPE = "ductline.PayloadNotSerializable"


def opts(**kwargs: Any) -> StepOptions:
    """Step options validated as the DSL validates them."""
    return build_options(**kwargs)


def errored(error_type: str = "ValueError", error: str = "boom") -> Ended:
    return Ended(ERR, error_type, error)


def timed_out(error: str = "too slow") -> Ended:
    return Ended(TIMEOUT, "TimeoutError", error)


def crashed(error: str = "lease expired") -> Ended:
    return Ended(CRASH, "Crashed", error)


def requested(delay: object = 0, reason: str = "") -> Ended:
    """An attempt that raised `ductline.Retry`, recorded as a child records it."""
    return Ended(ERR, RETRY_TYPE, str(ductline.Retry(delay, reason)))


def released() -> Ended:
    return Ended(CANCEL, "Released", "the worker shut down", released=True)


def interrupted() -> Ended:
    return Ended(CANCEL, "Released", "the worker shut down", released=True, interrupted=True)


def never(*_: Any) -> float:
    raise AssertionError("the rng must not be drawn")


def retry(delay_ms: int, charge: Charge | None = Charge.FAILURE) -> Verdict:
    return Verdict(Action.RETRY, delay_ms=delay_ms, charge=charge)


def fail(halt: HaltReason | None, detail: str | None, charge: Charge | None = Charge.FAILURE) -> Verdict:
    return Verdict(Action.FAIL, charge=charge, halt=halt, detail=detail)


EXHAUSTED = HaltReason.JOB_RETRIES_EXHAUSTED
CRASHES = HaltReason.JOB_CRASHES_EXHAUSTED
NEVER = HaltReason.NON_RETRYABLE_ERROR
UNSAFE = HaltReason.UNSAFE_TO_RETRY
FANOUT = HaltReason.MAX_FANOUT_EXCEEDED

DEFAULT = opts()
B = Budget  # failures=0, crashes=0, max_retry=3, max_crash=10, retry_delay_seconds=10, boundary=None

# (ended, budget, options, expected verdict); ids say what each row proves.
DECISIONS = [
    # -- success ----------------------------------------------------------------------------
    pytest.param(Ended(OK), B(), DEFAULT, COMPLETE, id="success"),
    pytest.param(Ended(OK), B(failures=3, crashes=10), DEFAULT, COMPLETE, id="success-with-exhausted-budgets"),
    pytest.param(Ended(OK), B(boundary="charge"), DEFAULT, COMPLETE, id="success-past-boundary"),
    pytest.param(Ended(OK), B(), None, COMPLETE, id="success-unknown-step"),

    # -- errors and timeouts share max_retry -------------------------------------------------
    pytest.param(errored(), B(failures=0), DEFAULT, retry(10_000), id="error-1st-of-3-retries"),
    pytest.param(errored(), B(failures=1), DEFAULT, retry(10_000), id="error-2nd-of-3-retries"),
    pytest.param(errored(), B(failures=2), DEFAULT, fail(EXHAUSTED, "boom"), id="error-3rd-of-3-exhausted"),
    pytest.param(errored(), B(failures=7), DEFAULT, fail(EXHAUSTED, "boom"), id="error-past-budget-exhausted"),
    pytest.param(timed_out(), B(failures=0), DEFAULT, retry(10_000), id="timeout-1st-of-3-retries"),
    pytest.param(timed_out(), B(failures=2), DEFAULT, fail(EXHAUSTED, "too slow"), id="timeout-3rd-of-3-exhausted"),
    pytest.param(errored(), B(max_retry=0), opts(max_retry=0), fail(EXHAUSTED, "boom"), id="error-max_retry-0"),
    pytest.param(errored(), B(max_retry=1), opts(max_retry=1), fail(EXHAUSTED, "boom"), id="error-max_retry-1"),
    pytest.param(timed_out(), B(max_retry=0), opts(max_retry=0), fail(EXHAUSTED, "too slow"),
                 id="timeout-max_retry-0"),
    pytest.param(errored(), B(max_retry=2), opts(max_retry=2), retry(10_000), id="error-max_retry-2-first"),
    pytest.param(errored(), B(failures=1, max_retry=2), opts(max_retry=2), fail(EXHAUSTED, "boom"),
                 id="error-max_retry-2-second"),
    pytest.param(Ended(ERR, "ValueError", None), B(failures=2), DEFAULT, fail(EXHAUSTED, None),
                 id="error-without-message"),
    # The fixed delay is the job's stored one (fixed when the job was created).
    pytest.param(errored(), B(retry_delay_seconds=7), DEFAULT, retry(7_000), id="stored-retry-delay"),
    pytest.param(errored(), B(retry_delay_seconds=0), DEFAULT, retry(0), id="zero-retry-delay"),
    pytest.param(errored(), B(retry_delay_seconds=5), opts(retry_delay=30), retry(5_000),
                 id="stored-delay-over-step-option"),
    pytest.param(errored(), B(retry_delay_seconds=7), None, retry(7_000), id="unknown-step-stored-delay"),
    pytest.param(errored(), B(failures=2), None, fail(EXHAUSTED, "boom"), id="unknown-step-stored-budget"),
    # An error does not touch the crash budget.
    pytest.param(errored(), B(crashes=9, max_crash=10), DEFAULT, retry(10_000), id="error-ignores-crash-budget"),

    # -- crashes: their own budget, exponential backoff capped at 60 s ----------------------
    pytest.param(crashed(), B(crashes=0), DEFAULT, retry(1_000, Charge.CRASH), id="crash-1-waits-1s"),
    pytest.param(crashed(), B(crashes=1), DEFAULT, retry(2_000, Charge.CRASH), id="crash-2-waits-2s"),
    pytest.param(crashed(), B(crashes=2), DEFAULT, retry(4_000, Charge.CRASH), id="crash-3-waits-4s"),
    pytest.param(crashed(), B(crashes=3), DEFAULT, retry(8_000, Charge.CRASH), id="crash-4-waits-8s"),
    pytest.param(crashed(), B(crashes=5), DEFAULT, retry(32_000, Charge.CRASH), id="crash-6-waits-32s"),
    pytest.param(crashed(), B(crashes=6), DEFAULT, retry(60_000, Charge.CRASH), id="crash-7-capped-60s"),
    pytest.param(crashed(), B(crashes=8), DEFAULT, retry(60_000, Charge.CRASH), id="crash-9-of-10-capped"),
    pytest.param(crashed(), B(crashes=9), DEFAULT, fail(CRASHES, "lease expired", Charge.CRASH),
                 id="crash-10-of-10-exhausted"),
    pytest.param(crashed(), B(crashes=0, max_crash=0), opts(max_crash=0), fail(CRASHES, "lease expired", Charge.CRASH),
                 id="crash-max_crash-0"),
    pytest.param(crashed(), B(crashes=0, max_crash=1), opts(max_crash=1), fail(CRASHES, "lease expired", Charge.CRASH),
                 id="crash-max_crash-1"),
    pytest.param(crashed(), B(crashes=0, max_crash=2), opts(max_crash=2), retry(1_000, Charge.CRASH),
                 id="crash-max_crash-2-first"),
    # A crash does not touch the retry budget, nor use the retry delay or a Backoff.
    pytest.param(crashed(), B(failures=2, max_retry=3), DEFAULT, retry(1_000, Charge.CRASH),
                 id="crash-ignores-retry-budget"),
    pytest.param(crashed(), B(retry_delay_seconds=99), opts(retry_delay=Backoff.fixed(99)),
                 retry(1_000, Charge.CRASH), id="crash-ignores-retry-delay-and-backoff"),
    pytest.param(crashed(), B(crashes=9), None, fail(CRASHES, "lease expired", Charge.CRASH),
                 id="crash-unknown-step"),

    # -- no_retry_on: errors only, at once ---------------------------------------------------
    pytest.param(errored("ValueError"), B(), opts(no_retry_on=[ValueError], max_retry=3),
                 fail(NEVER, "boom"), id="no_retry_on-halts-first-attempt"),
    pytest.param(errored("KeyError"), B(), opts(no_retry_on=[ValueError]), retry(10_000),
                 id="no_retry_on-other-type-retried"),
    pytest.param(errored("KeyError"), B(), opts(no_retry_on=[LookupError]), retry(10_000),
                 id="no_retry_on-names-exact-types-not-subclasses"),
    pytest.param(errored("billing.CardDeclined"), B(), opts(no_retry_on=["billing.CardDeclined"]),
                 fail(NEVER, "boom"), id="no_retry_on-by-qualified-name"),
    pytest.param(timed_out(), B(), opts(no_retry_on=[TimeoutError]), retry(10_000),
                 id="no_retry_on-not-for-timeouts"),
    pytest.param(timed_out(), B(failures=2), opts(no_retry_on=[TimeoutError]), fail(EXHAUSTED, "too slow"),
                 id="no_retry_on-timeout-exhausts-normally"),
    pytest.param(crashed(), B(), opts(no_retry_on=["Crashed"]), retry(1_000, Charge.CRASH),
                 id="no_retry_on-not-for-crashes"),

    # -- retry_on: past the budget, still charged --------------------------------------------
    pytest.param(errored("ValueError"), B(failures=2), opts(retry_on=[ValueError]), retry(10_000),
                 id="retry_on-at-budget-retried"),
    pytest.param(errored("ValueError"), B(failures=50), opts(retry_on=[ValueError]), retry(10_000),
                 id="retry_on-far-past-budget-retried"),
    pytest.param(errored("ValueError"), B(max_retry=0), opts(retry_on=[ValueError], max_retry=0), retry(10_000),
                 id="retry_on-max_retry-0-retried"),
    pytest.param(errored("KeyError"), B(failures=2), opts(retry_on=[ValueError]), fail(EXHAUSTED, "boom"),
                 id="retry_on-other-type-exhausts"),
    pytest.param(timed_out(), B(failures=2), opts(retry_on=[TimeoutError]), fail(EXHAUSTED, "too slow"),
                 id="retry_on-not-for-timeouts"),
    pytest.param(errored("ValueError"), B(failures=2), None, fail(EXHAUSTED, "boom"),
                 id="retry_on-unknown-step-not-applied"),

    # -- ductline.Retry: free of charge, after its own delay ----------------------------------
    pytest.param(requested(0), B(), DEFAULT, retry(0, None), id="Retry-0"),
    pytest.param(requested(5), B(), DEFAULT, retry(5_000, None), id="Retry-5s"),
    pytest.param(requested(timedelta(minutes=2)), B(), DEFAULT, retry(120_000, None), id="Retry-timedelta"),
    pytest.param(requested(3, "rate limited"), B(), DEFAULT, retry(3_000, None), id="Retry-with-reason"),
    pytest.param(requested(5), B(failures=2), DEFAULT, retry(5_000, None), id="Retry-on-last-retry"),
    pytest.param(requested(5), B(failures=9, max_retry=1), opts(max_retry=1), retry(5_000, None),
                 id="Retry-budget-exhausted"),
    pytest.param(requested(0), B(max_retry=0), opts(max_retry=0), retry(0, None), id="Retry-max_retry-0"),
    pytest.param(requested(5), B(), opts(no_retry_on=[ductline.Retry]), retry(5_000, None),
                 id="Retry-not-subject-to-no_retry_on"),
    pytest.param(requested(5), B(), opts(retry_delay=Backoff.exponential(60)), retry(5_000, None),
                 id="Retry-ignores-backoff"),
    pytest.param(requested(5), B(), None, retry(5_000, None), id="Retry-unknown-step"),
    # An unreadable request is an ordinary failure.
    pytest.param(Ended(ERR, RETRY_TYPE, "please retry"), B(), DEFAULT, retry(10_000),
                 id="Retry-unparsable-message-charged"),
    pytest.param(Ended(ERR, RETRY_TYPE, None), B(failures=2), DEFAULT, fail(EXHAUSTED, None),
                 id="Retry-no-message-charged"),

    # -- PayloadTooLarge: deterministic, never retried unless retry_on names it ---------------
    pytest.param(errored(TOO_LARGE_TYPE, "too big"), B(), DEFAULT, fail(NEVER, "too big"),
                 id="PayloadTooLarge-halts"),
    pytest.param(errored(TOO_LARGE_TYPE, "too big"), B(), None, fail(NEVER, "too big"),
                 id="PayloadTooLarge-unknown-step-halts"),
    pytest.param(errored(TOO_LARGE_TYPE, "too big"), B(), opts(retry_on=[ValueError]), fail(NEVER, "too big"),
                 id="PayloadTooLarge-halts-other-retry_on"),
    pytest.param(errored(TOO_LARGE_TYPE, "too big"), B(failures=5), opts(retry_on=[ductline.PayloadTooLarge]),
                 retry(10_000), id="PayloadTooLarge-in-retry_on-retried"),

    # -- StepSignatureError: the step cannot take its arguments, so the same input fails the same
    # way; a TypeError from the step's body stays an ordinary error ---------------------------------
    pytest.param(errored(SIGNATURE_TYPE, "takes 2"), B(), DEFAULT, fail(NEVER, "takes 2"),
                 id="StepSignatureError-halts-at-first-attempt"),
    pytest.param(errored(SIGNATURE_TYPE, "takes 2"), B(), None, fail(NEVER, "takes 2"),
                 id="StepSignatureError-unknown-step-halts"),
    pytest.param(errored(SIGNATURE_TYPE, "takes 2"), B(), opts(max_retry=10, retry_on=[TypeError]),
                 fail(NEVER, "takes 2"), id="StepSignatureError-halts-TypeError-in-retry_on"),
    pytest.param(errored(SIGNATURE_TYPE, "takes 2"), B(failures=5), opts(retry_on=[SIGNATURE_TYPE]),
                 retry(10_000), id="StepSignatureError-in-retry_on-retried"),
    # -- PayloadNotSerializable: the output has no JSON form, the same every time -----------------
    pytest.param(errored(NOT_SERIALIZABLE_TYPE, "bytes"), B(), DEFAULT, fail(NEVER, "bytes"),
                 id="PayloadNotSerializable-halts-at-first-attempt"),
    pytest.param(errored(NOT_SERIALIZABLE_TYPE, "bytes"), B(), opts(max_retry=10, retry_on=[TypeError]),
                 fail(NEVER, "bytes"), id="PayloadNotSerializable-halts-TypeError-in-retry_on"),
    pytest.param(errored(NOT_SERIALIZABLE_TYPE, "bytes"), B(failures=5),
                 opts(retry_on=[ductline.PayloadNotSerializable]), retry(10_000),
                 id="PayloadNotSerializable-in-retry_on-retried"),
    pytest.param(errored("TypeError", "in the body"), B(), DEFAULT, retry(10_000),
                 id="TypeError-from-the-body-retried"),
    pytest.param(errored("TypeError", "in the body"), B(failures=2), DEFAULT, fail(EXHAUSTED, "in the body"),
                 id="TypeError-from-the-body-exhausts"),

    # -- an expand's output --------------------------------------------------------------------
    pytest.param(errored("FanoutError", "too many"), B(), DEFAULT, fail(FANOUT, "too many"),
                 id="FanoutError-halts-at-once"),
    pytest.param(errored("FanoutError", "too many"), B(), opts(retry_on=["FanoutError"]),
                 fail(FANOUT, "too many"), id="FanoutError-not-retried-by-retry_on"),
    pytest.param(errored("FanoutError", "too many"), B(boundary="pay"), DEFAULT, fail(FANOUT, "too many"),
                 id="FanoutError-past-boundary-keeps-its-reason"),
    pytest.param(errored("TypeError", "not a list"), B(), DEFAULT, retry(10_000), id="not-a-list-retried"),
    pytest.param(errored("TypeError", "not a list"), B(boundary="pay"), DEFAULT,
                 fail(UNSAFE, "crossed boundary 'pay': not a list"), id="not-a-list-past-boundary-unsafe"),
    pytest.param(errored("TypeError", "not a list"), B(failures=2), DEFAULT, fail(EXHAUSTED, "not a list"),
                 id="not-a-list-exhausts"),

    # -- a crossed boundary: never run again automatically -------------------------------------
    pytest.param(errored(), B(boundary="charge card"), DEFAULT,
                 fail(UNSAFE, "crossed boundary 'charge card': boom"), id="boundary-error"),
    pytest.param(timed_out(), B(boundary="charge card"), DEFAULT,
                 fail(UNSAFE, "crossed boundary 'charge card': too slow"), id="boundary-timeout"),
    pytest.param(crashed(), B(boundary="charge card"), DEFAULT,
                 fail(UNSAFE, "crossed boundary 'charge card': lease expired", Charge.CRASH), id="boundary-crash"),
    pytest.param(requested(5), B(boundary="charge card"), DEFAULT,
                 fail(UNSAFE, "crossed boundary 'charge card': retry requested in 5 s"), id="boundary-Retry"),
    pytest.param(released(), B(boundary="charge card"), DEFAULT,
                 fail(UNSAFE, "crossed boundary 'charge card': the worker shut down", None), id="boundary-release"),
    pytest.param(errored("ValueError"), B(boundary="pay"), opts(retry_on=[ValueError]),
                 fail(UNSAFE, "crossed boundary 'pay': boom"), id="boundary-beats-retry_on"),
    pytest.param(errored("ValueError"), B(boundary="pay"), opts(no_retry_on=[ValueError]),
                 fail(UNSAFE, "crossed boundary 'pay': boom"), id="boundary-beats-no_retry_on"),
    pytest.param(errored(), B(boundary="pay", max_retry=100), opts(max_retry=100),
                 fail(UNSAFE, "crossed boundary 'pay': boom"), id="boundary-with-budget-left"),
    pytest.param(errored(), B(boundary="pay"), None, fail(UNSAFE, "crossed boundary 'pay': boom"),
                 id="boundary-unknown-step"),

    # -- a worker's shutdown gives the job back, uncharged -------------------------------------
    pytest.param(released(), B(), DEFAULT, Verdict(Action.RELEASE), id="release"),
    pytest.param(released(), B(failures=2, crashes=9), DEFAULT, Verdict(Action.RELEASE),
                 id="release-with-budgets-at-limit"),
    pytest.param(released(), B(max_retry=0, max_crash=0), opts(max_retry=0, max_crash=0), Verdict(Action.RELEASE),
                 id="release-zero-budgets"),
    pytest.param(released(), B(), None, Verdict(Action.RELEASE), id="release-unknown-step"),
    # -- interrupted by the shutdown grace while it ran: counted, MAX_RELEASES in a row halt -----
    pytest.param(interrupted(), B(), DEFAULT, Verdict(Action.RELEASE, charge=Charge.RELEASE),
                 id="interrupted-counts"),
    pytest.param(interrupted(), B(releases=MAX_RELEASES - 2, failures=2, crashes=9), DEFAULT,
                 Verdict(Action.RELEASE, charge=Charge.RELEASE), id="interrupted-below-the-limit"),
    pytest.param(interrupted(), B(releases=MAX_RELEASES - 1), DEFAULT,
                 Verdict(Action.FAIL, charge=Charge.RELEASE, halt=HaltReason.JOB_RELEASES_EXHAUSTED,
                         detail=f"interrupted by a worker's shutdown grace {MAX_RELEASES} times in a row "
                                f"(at most {MAX_RELEASES}): the worker shut down"), id="interrupted-at-the-limit"),
    pytest.param(released(), B(releases=MAX_RELEASES + 3), DEFAULT, Verdict(Action.RELEASE),
                 id="given-back-never-counts"),
    # -- the max_releases setting moves the limit ------------------------------------------------
    pytest.param(interrupted(), B(releases=0, max_releases=1), DEFAULT,
                 Verdict(Action.FAIL, charge=Charge.RELEASE, halt=HaltReason.JOB_RELEASES_EXHAUSTED,
                         detail="interrupted by a worker's shutdown grace 1 time in a row "
                                "(at most 1): the worker shut down"), id="interrupted-limit-one"),
    pytest.param(interrupted(), B(releases=MAX_RELEASES - 1, max_releases=MAX_RELEASES + 1), DEFAULT,
                 Verdict(Action.RELEASE, charge=Charge.RELEASE), id="interrupted-under-a-raised-limit"),
    pytest.param(interrupted(), B(boundary="pay"), DEFAULT, fail(UNSAFE, "crossed boundary 'pay': the worker shut down", charge=None),
                 id="interrupted-past-its-boundary"),
]


@pytest.mark.parametrize(("ended", "budget", "options", "expected"), DECISIONS)
def test_decide(ended: Ended, budget: Budget, options: StepOptions | None, expected: Verdict) -> None:
    assert decide(ended, budget, options, rng=never) == expected


# -- the on_halt handler: its failure halts nothing ------------------------------------------

@pytest.mark.parametrize(("ended", "budget", "expected"), [
    pytest.param(errored(), B(max_retry=1), Verdict(Action.FAIL, charge=Charge.FAILURE), id="error-exhausted"),
    pytest.param(timed_out(), B(max_retry=1), Verdict(Action.FAIL, charge=Charge.FAILURE), id="timeout-exhausted"),
    pytest.param(crashed(), B(max_crash=0), Verdict(Action.FAIL, charge=Charge.CRASH), id="crash-exhausted"),
    pytest.param(errored(), B(boundary="b"), Verdict(Action.FAIL, charge=Charge.FAILURE), id="boundary"),
    pytest.param(errored(TOO_LARGE_TYPE), B(), Verdict(Action.FAIL, charge=Charge.FAILURE), id="too-large"),
    pytest.param(errored(), B(max_retry=3), retry(10_000), id="retries-while-budget-left"),
    pytest.param(requested(2), B(max_retry=1), retry(2_000, None), id="Retry-like-any-step"),
    pytest.param(released(), B(), Verdict(Action.RELEASE), id="release-like-any-step"),
    pytest.param(Ended(OK), B(), COMPLETE, id="success"),
])
def test_decide_for_the_on_halt_handler(ended: Ended, budget: Budget, expected: Verdict) -> None:
    handler = D.with_on_halt().on_halt
    assert handler is not None
    assert decide(ended, budget, handler.options, handler=True, rng=never) == expected


def test_on_halt_handler_budgets_are_one_attempt_and_no_crash() -> None:
    handler = D.with_on_halt().on_halt
    assert handler is not None
    assert (handler.options.max_retry, handler.options.max_crash) == (1, 0)


# -- the whole life of a job ----------------------------------------------------------------

def life(endings: list[Ended], options: StepOptions | None, budget: Budget) -> list[Verdict]:
    """Apply `decide` to successive attempts as a driver would (counting what each
    verdict charges) until the job completes, fails or ``endings`` run out."""
    verdicts = []
    for ended in endings:
        verdict = decide(ended, budget, options, rng=never)
        verdicts.append(verdict)
        if verdict.action in (Action.COMPLETE, Action.FAIL):
            break
        budget = Budget(budget.failures + (verdict.charge is Charge.FAILURE),
                        budget.crashes + (verdict.charge is Charge.CRASH),
                        budget.max_retry, budget.max_crash, budget.retry_delay_seconds, budget.boundary)
    return verdicts


@pytest.mark.parametrize(("max_retry", "failed_attempts"), [
    pytest.param(0, 1, id="max_retry-0-one-attempt"),
    pytest.param(1, 1, id="max_retry-1-one-attempt"),
    pytest.param(2, 2, id="max_retry-2-two-attempts"),
    pytest.param(3, 3, id="max_retry-3-three-attempts"),
    pytest.param(5, 5, id="max_retry-5-five-attempts"),
])
@pytest.mark.parametrize("ending", [errored(), timed_out()], ids=["errors", "timeouts"])
def test_max_retry_is_the_number_of_failed_attempts(max_retry: int, failed_attempts: int, ending: Ended) -> None:
    # "A step that times out three times with max_retry: 3 halts the pipeline."
    verdicts = life([ending] * 10, opts(max_retry=max_retry), Budget(max_retry=max_retry))
    assert len(verdicts) == failed_attempts
    assert [v.action for v in verdicts] == [Action.RETRY] * (failed_attempts - 1) + [Action.FAIL]
    assert verdicts[-1].halt is HaltReason.JOB_RETRIES_EXHAUSTED


@pytest.mark.parametrize(("endings", "attempts", "last"), [
    pytest.param([errored(), timed_out(), errored()], 3, EXHAUSTED, id="error-timeout-error"),
    pytest.param([timed_out(), errored(), timed_out()], 3, EXHAUSTED, id="timeout-error-timeout"),
    pytest.param([errored(), crashed(), crashed(), timed_out(), errored()], 5, EXHAUSTED,
                 id="crashes-do-not-count"),
    pytest.param([requested(0), requested(0), errored(), requested(1), timed_out(), errored()], 6, EXHAUSTED,
                 id="requested-retries-do-not-count"),
    pytest.param([errored(), released(), errored(), released(), Ended(OK)], 5, None, id="releases-do-not-count"),
])
def test_errors_and_timeouts_share_one_budget(endings: list[Ended], attempts: int,
                                              last: HaltReason | None) -> None:
    verdicts = life(endings, DEFAULT, Budget(max_retry=3))
    assert len(verdicts) == attempts
    assert verdicts[-1].halt is last


def test_max_crash_crashes_halt_with_doubling_waits_capped_at_a_minute() -> None:
    verdicts = life([crashed()] * 20, DEFAULT, Budget(max_crash=10))
    assert [v.delay_ms for v in verdicts[:-1]] == [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]
    assert verdicts[-1] == fail(CRASHES, "lease expired", Charge.CRASH)


# Issue 12's measured drifts between the worker and `execute`, as the rulebook decides them.
def test_no_retry_on_value_error_makes_one_attempt() -> None:
    verdicts = life([errored("ValueError")] * 3, opts(no_retry_on=[ValueError], max_retry=3), Budget(max_retry=3))
    assert verdicts == [fail(NEVER, "boom")]


def test_retry_zero_once_with_max_retry_one_completes() -> None:
    verdicts = life([requested(0), Ended(OK)], opts(max_retry=1), Budget(max_retry=1))
    assert verdicts == [retry(0, None), COMPLETE]


# -- backoff policies ------------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "failures_before", "expected_ms"), [
    pytest.param(Backoff.fixed(5), 0, 5_000, id="fixed-1st"),
    pytest.param(Backoff.fixed(5), 4, 5_000, id="fixed-5th"),
    pytest.param(Backoff.fixed(timedelta(minutes=1)), 0, 60_000, id="fixed-timedelta"),
    pytest.param(Backoff.linear(2), 0, 2_000, id="linear-1st"),
    pytest.param(Backoff.linear(2), 1, 4_000, id="linear-2nd"),
    pytest.param(Backoff.linear(2), 5, 12_000, id="linear-6th"),
    pytest.param(Backoff.linear(2, cap=5), 2, 5_000, id="linear-capped"),
    pytest.param(Backoff.exponential(1), 0, 1_000, id="exponential-1st"),
    pytest.param(Backoff.exponential(1), 1, 2_000, id="exponential-2nd"),
    pytest.param(Backoff.exponential(1), 2, 4_000, id="exponential-3rd"),
    pytest.param(Backoff.exponential(3), 3, 24_000, id="exponential-4th"),
    pytest.param(Backoff.exponential(1, cap=10), 3, 8_000, id="exponential-under-cap"),
    pytest.param(Backoff.exponential(1, cap=10), 4, 10_000, id="exponential-at-cap"),
    pytest.param(Backoff.exponential(1, cap=10), 80, 10_000, id="exponential-huge-n-capped"),
])
def test_backoff_policy_spaces_retries(policy: Backoff, failures_before: int, expected_ms: int) -> None:
    options = opts(retry_delay=policy, max_retry=100)
    budget = Budget(failures=failures_before, max_retry=100, retry_delay_seconds=policy.base)
    assert decide(errored(), budget, options, rng=never) == retry(expected_ms)


@pytest.mark.parametrize(("policy", "failures_before", "draw", "expected_ms"), [
    pytest.param(Backoff.exponential(2, jitter=0.5), 0, 0.0, 2_000, id="no-draw-full-delay"),
    pytest.param(Backoff.exponential(2, jitter=0.5), 0, 0.5, 1_500, id="half-draw-quarter-off"),
    pytest.param(Backoff.exponential(2, jitter=0.5), 1, 0.5, 3_000, id="2nd-failure-half-draw"),
    pytest.param(Backoff.exponential(2, jitter=1.0), 0, 0.25, 1_500, id="full-jitter"),
    pytest.param(Backoff.exponential(2, cap=3, jitter=1.0), 4, 0.5, 1_500, id="jitter-after-cap"),
    pytest.param(Backoff.fixed(10, jitter=0.2), 0, 0.999, 8_002, id="fixed-jitter-nearly-max-draw"),
    pytest.param(Backoff.linear(4, jitter=0.5), 2, 1.0 - 2 ** -53, 6_000, id="linear-jitter-top-draw"),
])
def test_backoff_jitter_uses_the_injected_rng(policy: Backoff, failures_before: int, draw: float,
                                              expected_ms: int) -> None:
    draws: list[float] = []

    def rng() -> float:
        draws.append(draw)
        return draw

    options = opts(retry_delay=policy, max_retry=100)
    verdict = decide(errored(), Budget(failures=failures_before, max_retry=100), options, rng=rng)
    assert verdict == retry(expected_ms)
    assert draws == [draw]


def test_backoff_applies_to_timeouts_and_retry_on() -> None:
    options = opts(retry_delay=Backoff.linear(3), retry_on=[KeyError], max_retry=2)
    assert decide(timed_out(), Budget(failures=0, max_retry=2), options, rng=never) == retry(3_000)
    assert decide(errored("KeyError"), Budget(failures=4, max_retry=2), options, rng=never) == retry(15_000)


def test_without_options_the_stored_fixed_delay_applies_not_a_backoff() -> None:
    assert decide(errored(), Budget(failures=2, max_retry=9, retry_delay_seconds=4), None, rng=never) == retry(4_000)


# -- helpers ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("crashes", "expected_ms"), [
    pytest.param(0, 1_000, id="0"),
    pytest.param(1, 1_000, id="1"),
    pytest.param(2, 2_000, id="2"),
    pytest.param(3, 4_000, id="3"),
    pytest.param(4, 8_000, id="4"),
    pytest.param(5, 16_000, id="5"),
    pytest.param(6, 32_000, id="6"),
    pytest.param(7, 60_000, id="7-capped"),
    pytest.param(40, 60_000, id="40-capped"),
    pytest.param(10_000, 60_000, id="huge-capped"),
])
def test_crash_backoff_ms(crashes: int, expected_ms: int) -> None:
    assert crash_backoff_ms(crashes) == expected_ms


@pytest.mark.parametrize(("ended", "expected"), [
    pytest.param(requested(0), 0, id="Retry-0"),
    pytest.param(requested(42), 42_000, id="Retry-42"),
    pytest.param(requested(timedelta(hours=1), "later"), 3_600_000, id="Retry-hour-with-reason"),
    pytest.param(Ended(ERR, RETRY_TYPE, "retry requested in 7 s"), 7_000, id="recorded-text"),
    pytest.param(Ended(ERR, RETRY_TYPE, "later: retry requested in 7 s"), None, id="text-not-at-start"),
    pytest.param(Ended(ERR, RETRY_TYPE, "retry requested in 1.5 s"), None, id="not-whole-seconds"),
    pytest.param(Ended(ERR, RETRY_TYPE, ""), None, id="empty-message"),
    pytest.param(Ended(ERR, RETRY_TYPE, None), None, id="no-message"),
    pytest.param(Ended(ERR, "ValueError", "retry requested in 7 s"), None, id="other-type"),
    pytest.param(Ended(TIMEOUT, RETRY_TYPE, "retry requested in 7 s"), None, id="timed-out"),
    pytest.param(Ended(CRASH, RETRY_TYPE, "retry requested in 7 s"), None, id="crashed"),
    pytest.param(Ended(OK), None, id="success"),
])
def test_requested_delay_ms(ended: Ended, expected: int | None) -> None:
    assert requested_delay_ms(ended) == expected


def test_retry_is_recorded_under_the_public_name() -> None:
    assert RETRY_TYPE == "ductline.Retry"
    assert TOO_LARGE_TYPE == "ductline.PayloadTooLarge"
    assert error_type_name(getattr(ductline, "StepSignatureError", object)) == SIGNATURE_TYPE
    assert error_type_name(ductline.PayloadNotSerializable) == NOT_SERIALIZABLE_TYPE


@pytest.mark.parametrize(("error", "boundary", "expected"), [
    pytest.param("boom", None, "boom", id="no-boundary"),
    pytest.param(None, None, None, id="nothing"),
    pytest.param("boom", "charge card", "crossed boundary 'charge card': boom", id="boundary"),
    pytest.param(None, "send", "crossed boundary 'send': None", id="boundary-no-error"),
])
def test_halt_detail(error: str | None, boundary: str | None, expected: str | None) -> None:
    assert halt_detail(error, boundary) == expected


@pytest.mark.parametrize(("verdict", "retries"), [
    pytest.param(COMPLETE, False, id="complete"),
    pytest.param(retry(0), True, id="retry"),
    pytest.param(Verdict(Action.RELEASE), True, id="release"),
    pytest.param(fail(EXHAUSTED, None), False, id="fail"),
])
def test_verdict_retries(verdict: Verdict, retries: bool) -> None:
    assert verdict.retries is retries


def test_timeout_and_child_messages() -> None:
    assert timeout_message(2, "load", 30) == "attempt 2 of step 'load' exceeded the step timeout of 30 s and was killed"
    assert timeout_message(1, "x", 0.5) == "attempt 1 of step 'x' exceeded the step timeout of 0.5 s and was killed"
    assert child_died_message(-9) == "the child process running the step exited with code -9"
    assert child_died_message(None) == "the child process running the step exited with code None"


# -- an expand's output ----------------------------------------------------------------------

def fanout_definition(max_fanout: int) -> Any:
    return (D.new().start(S.a).expand(to=S.b, max_fanout=max_fanout).collapse(into=S.c)
            .chain(to=S.d).definition())


@pytest.mark.parametrize(("step", "value", "expected"), [
    pytest.param("b", "not a list", None, id="element-step-not-checked"),
    pytest.param("c", 5, None, id="chain-source-not-checked"),
    pytest.param("d", {"k": 1}, None, id="last-step-not-checked"),
    pytest.param("a", [], None, id="empty-list"),
    pytest.param("a", [1, 2], None, id="under-max_fanout"),
    pytest.param("a", [1, 2, 3], None, id="at-max_fanout"),
    pytest.param("a", [1, 2, 3, 4], Ended(ERR, "FanoutError", "step 'a' returned 4 elements; max_fanout is 3"),
                 id="over-max_fanout"),
    pytest.param("a", (1, 2), Ended(ERR, "ductline.ExpandNotAList", "step 'a' is followed by expand, so it must return a list, "
                                                      "not tuple"), id="tuple"),
    pytest.param("a", {"k": 1}, Ended(ERR, "ductline.ExpandNotAList", "step 'a' is followed by expand, so it must return a "
                                                        "list, not dict"), id="dict"),
    pytest.param("a", None, Ended(ERR, "ductline.ExpandNotAList", "step 'a' is followed by expand, so it must return a list, "
                                                    "not NoneType"), id="none"),
    pytest.param("a", "abc", Ended(ERR, "ductline.ExpandNotAList", "step 'a' is followed by expand, so it must return a list, "
                                                     "not str"), id="str"),
])
def test_check_expand_output(step: str, value: Any, expected: Ended | None) -> None:
    definition = fanout_definition(3)
    assert check_expand_output(definition.node(step), value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param(list(range(4)), fail(FANOUT, "step 'a' returned 4 elements; max_fanout is 3"), id="fanout-halts"),
    pytest.param("abc", fail(NEVER, "step 'a' is followed by expand, so it must return a list, not str"),
                 id="not-a-list-halts"),
])
def test_checked_expand_output_is_decided(value: Any, expected: Verdict) -> None:
    definition = fanout_definition(3)
    ended = check_expand_output(definition.node("a"), value)
    assert ended is not None
    assert decide(ended, Budget(), definition.node("a").options, rng=never) == expected


def test_check_expand_output_nested_expand_source() -> None:
    definition = D.nested_expand()
    assert check_expand_output(definition.node("b"), 7) == Ended(
        ERR, "ductline.ExpandNotAList", "step 'b' is followed by expand, so it must return a list, not int")
    assert check_expand_output(definition.node("c"), 7) is None



@pytest.mark.parametrize(("result", "error_type", "failures", "crashes", "said"), [
    ("crashed", "ChildDied", 0, 6, "after crash 6 of at most 10 (max_crash; backoff doubles to 60 s)"),
    ("crashed", "WorkerLost", 2, 1, "after crash 1 of at most 10 (max_crash; backoff doubles to 60 s)"),
    ("errored", "ValueError", 2, 0, "after failure 2 of at most 3 (max_attempts)"),
    ("timed_out", "TimeoutError", 1, 0, "after failure 1 of at most 3 (max_attempts)"),
    ("errored", RETRY_REQUEST_TYPE, 0, 0, "as the step asked (ductline.Retry)"),
    ("errored", "ValueError", 5, 0, ""),   # retried past the budget: retry_on named it
    ("cancelled", None, 0, 0, ""),          # released: nothing charged
])
def test_retry_reason_says_why_a_job_waits_in_the_words_of_its_budgets(
        result: str, error_type: str | None, failures: int, crashes: int, said: str) -> None:
    assert retry_reason(result, error_type, failures=failures, crashes=crashes, max_retry=3, max_crash=10) == said
