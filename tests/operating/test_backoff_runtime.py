"""Backoff, no_retry_on / retry_on and `ductline.Retry` with real workers on both
backends, one per backend shared by the module's tests (each looks only at its own runs)."""

from __future__ import annotations

from datetime import datetime

import ops_app
from helpers import APP, shared_worker_fixture

from ductline.views import run_view

OPS_APP = APP.replace("rt_app.py", "ops_app.py")
shared_worker = shared_worker_fixture(OPS_APP)


def _started(attempt) -> float:
    return datetime.fromisoformat(attempt["started_at"].replace("Z", "+00:00")).timestamp()


def test_no_retry_on_halts_at_once_and_retry_on_ignores_the_budget(shared_store, shared_worker):
    halted = ops_app.never_retried.trigger(1, database=shared_store)
    kept = ops_app.always_retried.trigger(2, database=shared_store)
    assert halted.wait(90) == "halted" and kept.wait(90) == "completed"
    view = run_view(shared_store, halted.id)
    assert view["halt_reason"] == "non_retryable_error"
    attempts = view["steps"][0]["attempts"]
    assert [a["error_type"] for a in attempts] == ["ops_app.PaymentDeclined"]  # max_retry=5 unused
    assert kept.output() == {"x": 2, "attempt": 3}  # max_retry=1, yet KeyError was retried twice


def test_a_requested_retry_waits_its_delay_and_costs_no_budget(shared_store, shared_worker):
    handle = ops_app.requested_retry.trigger(1, database=shared_store)
    assert handle.wait(90) == "completed" and handle.output() == 3  # max_retry=1 would allow one
    attempts = run_view(shared_store, handle.id)["steps"][0]["attempts"]
    assert [a["result"] for a in attempts] == ["errored", "errored", "succeeded"]
    assert attempts[0]["error_type"] == "ductline.Retry"
    assert attempts[0]["error"] == "retry requested in 1 s: not ready on attempt 1"
    assert _started(attempts[1]) - _started(attempts[0]) >= 1.0
    assert shared_store.run_jobs(handle.id)[0]["failures"] == 0


def test_linear_backoff_spaces_attempts_by_the_policy(shared_store, shared_worker):
    handle = ops_app.linear_backoff.trigger(1, database=shared_store)
    assert handle.wait(90) == "halted"
    attempts = run_view(shared_store, handle.id)["steps"][0]["attempts"]
    assert len(attempts) == 3
    gaps = [_started(b) - _started(a) for a, b in zip(attempts, attempts[1:])]
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0  # linear(1, cap=2): 1 s, then 2 s
