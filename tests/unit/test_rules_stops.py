"""Ending a run early (`ductline.model.stops`): what a run deadline, a cancel, an
expired pause and a fail-fast halt do (DESIGN.md, "Whole-run timeout")."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from ductline.model import stops
from ductline.model.states import (
    UNFINISHED_RUN, WAITING_JOB, AttemptResult, HaltReason, JobStatus, RunStatus, job_may_move,
    run_may_move,
)
from ductline.model.stops import StopPlan

DEADLINE_ERROR = "the run exceeded its deadline of 7200 s"
PAUSE_REASON = "pause before step 'approve' expired after 3600 s without a resume"

PLANS = [
    pytest.param(lambda: stops.deadline(7200), StopPlan(
        run_status=RunStatus.FAILED,
        from_statuses=frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.HALTED}),
        job_status=JobStatus.FAILED,
        attempt_result=AttemptResult.TIMED_OUT,
        error_type="TimeoutError",
        error=f"stopped at the run deadline: {DEADLINE_ERROR}",
        skip_reason="workflow timeout",
        skip_root=None,
        halt_reason=None,
        metadata={"timeout_exceeded": True, "timeout_seconds": 7200, "error": DEADLINE_ERROR},
    ), id="deadline"),
    pytest.param(lambda: stops.deadline(None), StopPlan(
        run_status=RunStatus.FAILED,
        from_statuses=frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.HALTED}),
        job_status=JobStatus.FAILED,
        attempt_result=AttemptResult.TIMED_OUT,
        error_type="TimeoutError",
        error="stopped at the run deadline: the run exceeded its deadline of ? s",
        skip_reason="workflow timeout",
        metadata={"timeout_exceeded": True, "timeout_seconds": None,
                  "error": "the run exceeded its deadline of ? s"},
    ), id="deadline-unknown-seconds"),
    pytest.param(stops.cancel, StopPlan(
        run_status=RunStatus.CANCELLED,
        from_statuses=frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.HALTED}),
        job_status=JobStatus.CANCELLED,
        attempt_result=AttemptResult.CANCELLED,
        error_type="Cancelled",
        error="the run was cancelled",
        skip_reason="cancelled",
        skip_root=None,
        halt_reason=None,
        metadata={"cancelled": True},
    ), id="cancel"),
    pytest.param(lambda: stops.pause_expired("approve", 3600), StopPlan(
        run_status=RunStatus.FAILED,
        from_statuses=frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.HALTED}),
        job_status=JobStatus.CANCELLED,
        attempt_result=AttemptResult.CANCELLED,
        error_type="PauseExpired",
        error=f"cancelled because the {PAUSE_REASON}",
        skip_reason="pause expired",
        skip_root="approve",
        halt_reason=HaltReason.PAUSE_EXPIRED,
        metadata={"pause_expired": True, "paused_step": "approve", "pause_timeout_seconds": 3600,
                  "error": PAUSE_REASON},
    ), id="pause-expired"),
    pytest.param(lambda: stops.fail_fast("charge"), StopPlan(
        run_status=None,
        from_statuses=frozenset({RunStatus.HALTED}),
        job_status=JobStatus.CANCELLED,
        attempt_result=AttemptResult.CANCELLED,
        error_type="Cancelled",
        error="cancelled because step 'charge' failed (fail_fast)",
        skip_reason=None,
        skip_root=None,
        halt_reason=None,
        metadata={},
    ), id="fail-fast"),
]


@pytest.mark.parametrize(("make", "expected"), PLANS)
def test_plan(make: Callable[[], StopPlan], expected: StopPlan) -> None:
    assert make() == expected


@pytest.mark.parametrize(("make", "expected"), PLANS)
def test_plan_fields_one_by_one(make: Callable[[], StopPlan], expected: StopPlan) -> None:
    # Compared field by field too, so a failure names the field that changed.
    got = make()
    for name in StopPlan.__dataclass_fields__:
        assert (name, getattr(got, name)) == (name, getattr(expected, name))


ALL_PLANS = [
    pytest.param(lambda: stops.deadline(60), id="deadline"),
    pytest.param(stops.cancel, id="cancel"),
    pytest.param(lambda: stops.pause_expired("b", 5), id="pause-expired"),
    pytest.param(lambda: stops.fail_fast("b"), id="fail-fast"),
]


@pytest.mark.parametrize("make", ALL_PLANS)
def test_plan_moves_only_as_the_states_allow(make: Callable[[], StopPlan]) -> None:
    plan = make()
    if plan.run_status is not None:
        for status in plan.from_statuses:
            assert run_may_move(status, plan.run_status), (status, plan.run_status)
    assert job_may_move(JobStatus.RUNNING, plan.job_status)
    if plan.skip_reason is not None:
        for status in WAITING_JOB | {JobStatus.PAUSED}:
            assert job_may_move(status, JobStatus.SKIPPED), status


@pytest.mark.parametrize(("make", "keeps_waiting_jobs"), [
    pytest.param(lambda: stops.deadline(60), False, id="deadline"),
    pytest.param(stops.cancel, False, id="cancel"),
    pytest.param(lambda: stops.pause_expired("b", 5), False, id="pause-expired"),
    pytest.param(lambda: stops.fail_fast("b"), True, id="fail-fast"),
])
def test_only_fail_fast_keeps_what_waits(make: Callable[[], StopPlan], keeps_waiting_jobs: bool) -> None:
    assert (make().skip_reason is None) is keeps_waiting_jobs


def test_pause_expiry_may_fail_the_paused_job_that_never_ran() -> None:
    # The driver records the paused job itself failed, its dependents skipped.
    assert job_may_move(JobStatus.PAUSED, JobStatus.FAILED)
    assert stops.pause_expired("b", 5).skip_root == "b"


def test_stops_apply_to_the_named_run_sets() -> None:
    # A halted run too: past its deadline a retry could not run it (deadlines-and-cancel.md).
    assert stops.deadline(1).from_statuses == UNFINISHED_RUN
    assert stops.cancel().from_statuses == UNFINISHED_RUN
    assert stops.pause_expired("b", 1).from_statuses == UNFINISHED_RUN


def test_plans_do_not_share_metadata() -> None:
    first, second = stops.deadline(1), stops.deadline(2)
    assert first.metadata is not second.metadata
    assert stops.fail_fast("a").metadata is not stops.fail_fast("b").metadata


@pytest.mark.parametrize(("reason", "value"), [
    pytest.param(stops.WORKFLOW_TIMEOUT, "workflow timeout", id="deadline"),
    pytest.param(stops.CANCELLED, "cancelled", id="cancel"),
    pytest.param(stops.PAUSE_EXPIRED, "pause expired", id="pause-expired"),
])
def test_skip_reasons(reason: str, value: str) -> None:
    assert reason == value


@pytest.mark.parametrize(("seconds", "expected"), [
    pytest.param(None, "the run exceeded its deadline of ? s", id="unknown"),
    pytest.param(7200, "the run exceeded its deadline of 7200 s", id="int"),
    pytest.param(1.5, "the run exceeded its deadline of 1.5 s", id="fraction"),
    pytest.param(30.0, "the run exceeded its deadline of 30 s", id="whole-float"),
    pytest.param(0.25, "the run exceeded its deadline of 0.25 s", id="quarter"),
])
def test_deadline_error(seconds: float | None, expected: str) -> None:
    assert stops.deadline_error(seconds) == expected


@pytest.mark.parametrize(("step", "seconds", "expected"), [
    pytest.param("approve", 3600, PAUSE_REASON, id="approve"),
    pytest.param("it's", 1, "pause before step \"it's\" expired after 1 s without a resume", id="quoted-name"),
])
def test_pause_expired_reason(step: str, seconds: int, expected: str) -> None:
    assert stops.pause_expired_reason(step, seconds) == expected


def test_messages_used_by_plans_are_the_helpers() -> None:
    plan: Any = stops.pause_expired("x", 9)
    assert plan.metadata["error"] == stops.pause_expired_reason("x", 9)
    assert stops.deadline(9).metadata["error"] == stops.deadline_error(9)


@pytest.mark.parametrize("not_before_ms, at_ms, begun", [
    (1_000, 999, False),    # held for its time, still ahead at the stop: waiting
    (1_000, 1_000, True),   # its time came: its worker may have started it
    (1_000, 1_001, True),
    (0, 1_000, True),       # claimed when ready: in flight
])
def test_a_running_job_has_begun_only_once_its_time_came(not_before_ms: int, at_ms: int, begun: bool) -> None:
    assert stops.begun_by(not_before_ms, at_ms) is begun


@pytest.mark.parametrize("status,reason,stopped", [
    ("cancelled", None, True), ("skipped", "cancelled", True), ("skipped", "workflow timeout", True),
    ("skipped", "pause expired", True), ("skipped", "event timed out", True),
    ("skipped", None, False), ("skipped", "not taken: route 'a'", False),
    ("completed", None, False), ("failed", None, False), ("failed", "pause expired", False),
    ("failed", "stopped at the run deadline: the run exceeded its deadline of 2 s", True),  # killed in flight
    ("failed", "ValueError: stopped at the run deadline", False),
])
def test_a_step_run_a_stop_ended_is_told_from_one_that_got_to_its_end(status, reason, stopped):
    from ductline.model.stops import stopped_before_its_end

    assert stopped_before_its_end(status, reason) is stopped
