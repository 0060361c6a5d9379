"""Backoff policies, retry_on / no_retry_on and retry requests: definition-time
validation and the pure retry decisions."""

from __future__ import annotations

from datetime import timedelta

import pytest

import ductline
from ductline import Backoff
from ductline.dsl.options import build_options
from ductline.model.outcomes import RETRY_REQUEST_TYPE, Action, Budget, Charge, Ended, Verdict, decide
from ductline.model.states import AttemptResult, HaltReason


def test_policies_compute_delays_in_milliseconds_with_cap():
    assert [Backoff.fixed(5).delay_ms(n) for n in (1, 2, 9)] == [5000, 5000, 5000]
    assert [Backoff.linear(2, cap=5).delay_ms(n) for n in (1, 2, 3, 4)] == [2000, 4000, 5000, 5000]
    exp = Backoff.exponential(timedelta(seconds=1), cap=timedelta(minutes=1))
    assert [exp.delay_ms(n) for n in (1, 2, 3, 7, 8, 500)] == [1000, 2000, 4000, 60000, 60000, 60000]
    assert Backoff.exponential(1).delay_ms(10_000) == 2**53  # no overflow without a cap


def test_jitter_only_shortens_a_delay():
    policy = Backoff.exponential(10, cap=40, jitter=0.5)
    assert policy.delay_ms(3, rng=lambda: 0.0) == 40_000
    assert policy.delay_ms(3, rng=lambda: 0.999) == pytest.approx(20_020, abs=1)
    assert policy.delay_ms(1, rng=lambda: 0.5) == 7_500


@pytest.mark.parametrize("build, error", [
    (lambda: Backoff.fixed(1.5), TypeError),
    (lambda: Backoff.linear("5s"), TypeError),
    (lambda: Backoff.exponential(0), ValueError),
    (lambda: Backoff.exponential(10, cap=5), ValueError),
    (lambda: Backoff.exponential(1, jitter=1.5), ValueError),
    (lambda: Backoff.exponential(1, jitter=True), TypeError),
    (lambda: Backoff.linear(-1), ValueError),
])
def test_invalid_policies_are_refused_at_definition_time(build, error):
    with pytest.raises(error):
        build()


# Options are built directly: a Pipeline would register itself in this process, and
# workers started in-process by other tests would then try to load it.
def test_step_options_take_a_policy_and_error_type_lists():
    options = build_options(retry_delay=Backoff.linear(3), retry_on=KeyError,
                            no_retry_on=[ValueError, "payments.Declined"])
    assert options.backoff == Backoff.linear(3) and options.retry_delay == 3
    assert options.retry_on == ("KeyError",)
    assert options.no_retry_on == ("ValueError", "payments.Declined")


@pytest.mark.parametrize("opts, error", [
    ({"retry_on": [ValueError], "no_retry_on": ["ValueError"]}, ValueError),
    ({"retry_on": [42]}, TypeError),
    ({"no_retry_on": [int]}, TypeError),
    ({"retry_delay": 2.5}, TypeError),
])
def test_invalid_retry_options_are_refused(opts, error):
    with pytest.raises(error):
        build_options(**opts)


def test_decisions_for_never_always_and_budget():
    options = build_options(no_retry_on=["ValueError"], retry_on=["KeyError"], retry_delay=7)
    never = decide(Ended(AttemptResult.ERRORED, "ValueError", "x"), Budget(0, 0, 5, 10, 7), options)
    assert never.action is Action.FAIL and never.halt is HaltReason.NON_RETRYABLE_ERROR
    always = decide(Ended(AttemptResult.ERRORED, "KeyError", "x"), Budget(8, 0, 1, 10, 7), options)
    assert always.action is Action.RETRY and always.delay_ms == 7000 and always.charge is Charge.FAILURE
    # a timeout carries no error type: only the budget decides
    timeout = decide(Ended(AttemptResult.TIMED_OUT, "TimeoutError", "x"), Budget(0, 0, 1, 10, 7),
                     build_options(retry_on=["TimeoutError"]))
    assert timeout.action is Action.FAIL and timeout.halt is HaltReason.JOB_RETRIES_EXHAUSTED
    assert decide(Ended(AttemptResult.ERRORED, "E", "x"), Budget(0, 0, 3, 10, 7), None) == \
        Verdict(Action.RETRY, 7000, Charge.FAILURE)


def test_a_retry_request_is_recognised_and_free():
    exc = ductline.Retry(delay=timedelta(seconds=30), reason="rate limited")
    assert str(exc) == "retry requested in 30 s: rate limited"
    assert type(exc).__module__ + "." + type(exc).__qualname__ == RETRY_REQUEST_TYPE
    exhausted = Budget(failures=5, max_retry=1)
    decision = decide(Ended(AttemptResult.ERRORED, RETRY_REQUEST_TYPE, str(exc)), exhausted, None)
    assert decision == Verdict(Action.RETRY, 30_000, None)
    assert decide(Ended(AttemptResult.ERRORED, "RuntimeError", str(exc)), exhausted, None).action is Action.FAIL
    with pytest.raises(TypeError):
        ductline.Retry(delay=0.5)
