"""The rulebook's states (`ductline.model.states`): every allowed and every forbidden
transition of runs and jobs, the named sets, and the status a waiting job takes."""

from __future__ import annotations

import itertools

import pytest

from ductline.model import states
from ductline.model.states import (
    ACTIVE_RUN, LIVE_WORKER, OPEN_JOB, REVIVABLE_JOB, SETTLED_RUN, TERMINAL_JOB, TERMINAL_RUN, UNFINISHED_RUN,
    WAITING_JOB, AttemptResult, HaltReason, JobStatus, RunStatus, WorkerStatus, job_may_move, run_may_move,
    waiting_status,
)

R = RunStatus
J = JobStatus

# The contract, restated independently of the module: what each state may become.
RUN_ALLOWED: dict[RunStatus, set[RunStatus]] = {
    R.PENDING: {R.RUNNING, R.PAUSED, R.HALTED, R.FAILED, R.CANCELLED},
    R.RUNNING: {R.PAUSED, R.COMPLETED, R.HALTED, R.FAILED, R.CANCELLED},
    R.PAUSED: {R.RUNNING, R.HALTED, R.FAILED, R.CANCELLED},
    R.HALTED: {R.PENDING, R.RUNNING, R.PAUSED, R.FAILED, R.CANCELLED},
    R.COMPLETED: set(),
    R.FAILED: set(),
    R.CANCELLED: set(),
}

JOB_ALLOWED: dict[JobStatus, set[JobStatus]] = {
    J.PENDING: {J.RUNNING, J.HELD, J.SKIPPED},
    J.HELD: {J.PENDING, J.SKIPPED, J.COMPLETED},
    J.RUNNING: {J.COMPLETED, J.FAILED, J.PENDING, J.HELD, J.CANCELLED, J.AWAITING},
    J.PAUSED: {J.PENDING, J.FAILED, J.SKIPPED},
    J.DEFERRED: {J.PENDING, J.HELD, J.FAILED, J.SKIPPED},
    J.AWAITING: {J.COMPLETED, J.FAILED, J.SKIPPED},
    J.COMPLETED: set(),
    J.SKIPPED: set(),
    J.FAILED: {J.PENDING, J.COMPLETED},    # retry; mark-succeeded
    J.CANCELLED: {J.PENDING, J.COMPLETED},
}

RUN_PAIRS = [
    pytest.param(a, b, b in RUN_ALLOWED[a], id=f"{a}->{b}:{'ok' if b in RUN_ALLOWED[a] else 'no'}")
    for a, b in itertools.product(RunStatus, RunStatus)
]
JOB_PAIRS = [
    pytest.param(a, b, b in JOB_ALLOWED[a], id=f"{a}->{b}:{'ok' if b in JOB_ALLOWED[a] else 'no'}")
    for a, b in itertools.product(JobStatus, JobStatus)
]


# -- stored values ---------------------------------------------------------------------

@pytest.mark.parametrize(("enum", "values"), [
    pytest.param(RunStatus, ["pending", "running", "paused", "completed", "halted", "failed", "cancelled"],
                 id="run"),
    pytest.param(JobStatus, ["pending", "held", "running", "paused", "deferred", "awaiting", "completed", "failed",
                             "skipped", "cancelled"], id="job"),
    pytest.param(AttemptResult, ["succeeded", "errored", "timed_out", "crashed", "cancelled"], id="attempt"),
    pytest.param(HaltReason, ["job_retries_exhausted", "job_crashes_exhausted", "job_releases_exhausted",
                              "max_fanout_exceeded", "condition_unmatched", "unsafe_to_retry", "non_retryable_error",
                              "pause_expired", "event_timed_out", "child_run_failed"],
                 id="halt"),
    pytest.param(WorkerStatus, ["running", "stopping", "stopped", "unhealthy"], id="worker"),
])
def test_stored_values(enum: type, values: list[str]) -> None:
    # States are stored as these strings: renaming one breaks every database.
    assert [member.value for member in enum] == values  # type: ignore[attr-defined]


# -- transitions -------------------------------------------------------------------------

@pytest.mark.parametrize(("current", "to", "allowed"), RUN_PAIRS)
def test_run_transition(current: RunStatus, to: RunStatus, allowed: bool) -> None:
    assert run_may_move(current, to) is allowed


@pytest.mark.parametrize(("current", "to", "allowed"), JOB_PAIRS)
def test_job_transition(current: JobStatus, to: JobStatus, allowed: bool) -> None:
    assert job_may_move(current, to) is allowed


def test_transition_tables_name_every_state_and_nothing_else() -> None:
    assert set(states.RUN_TRANSITIONS) == set(RunStatus)
    assert set(states.JOB_TRANSITIONS) == set(JobStatus)
    assert {s: set(t) for s, t in states.RUN_TRANSITIONS.items()} == RUN_ALLOWED
    assert {s: set(t) for s, t in states.JOB_TRANSITIONS.items()} == JOB_ALLOWED


@pytest.mark.parametrize("status", list(RunStatus) + list(JobStatus), ids=lambda s: f"{type(s).__name__}.{s}")
def test_no_state_moves_to_itself(status: RunStatus | JobStatus) -> None:
    may_move = run_may_move if isinstance(status, RunStatus) else job_may_move
    assert may_move(status, status) is False  # type: ignore[arg-type]


# -- named sets --------------------------------------------------------------------------

@pytest.mark.parametrize(("named", "members"), [
    pytest.param(ACTIVE_RUN, {R.PENDING, R.RUNNING, R.PAUSED}, id="ACTIVE_RUN"),
    pytest.param(UNFINISHED_RUN, {R.PENDING, R.RUNNING, R.PAUSED, R.HALTED}, id="UNFINISHED_RUN"),
    pytest.param(TERMINAL_RUN, {R.COMPLETED, R.FAILED, R.CANCELLED}, id="TERMINAL_RUN"),
    pytest.param(SETTLED_RUN, {R.COMPLETED, R.FAILED, R.CANCELLED, R.HALTED}, id="SETTLED_RUN"),
    pytest.param(WAITING_JOB, {J.PENDING, J.HELD}, id="WAITING_JOB"),
    pytest.param(OPEN_JOB, {J.PENDING, J.HELD, J.RUNNING, J.PAUSED, J.DEFERRED, J.AWAITING}, id="OPEN_JOB"),
    pytest.param(TERMINAL_JOB, {J.COMPLETED, J.FAILED, J.SKIPPED, J.CANCELLED}, id="TERMINAL_JOB"),
    pytest.param(REVIVABLE_JOB, {J.FAILED, J.HELD, J.CANCELLED}, id="REVIVABLE_JOB"),
    pytest.param(LIVE_WORKER, {WorkerStatus.RUNNING, WorkerStatus.STOPPING, WorkerStatus.UNHEALTHY},
                 id="LIVE_WORKER"),
])
def test_named_set_members(named: frozenset[object], members: set[object]) -> None:
    assert isinstance(named, frozenset)
    assert named == members


@pytest.mark.parametrize(("left", "right"), [
    pytest.param(ACTIVE_RUN, TERMINAL_RUN, id="active-terminal-run"),
    pytest.param(UNFINISHED_RUN, TERMINAL_RUN, id="unfinished-terminal-run"),
    pytest.param(ACTIVE_RUN, SETTLED_RUN, id="active-settled-run"),
    pytest.param(OPEN_JOB, TERMINAL_JOB, id="open-terminal-job"),
    pytest.param(WAITING_JOB, TERMINAL_JOB, id="waiting-terminal-job"),
])
def test_named_sets_are_disjoint(left: frozenset[object], right: frozenset[object]) -> None:
    assert left & right == frozenset()


@pytest.mark.parametrize(("parts", "whole"), [
    pytest.param((UNFINISHED_RUN, TERMINAL_RUN), set(RunStatus), id="unfinished+terminal=all-runs"),
    pytest.param((ACTIVE_RUN, SETTLED_RUN), set(RunStatus), id="active+settled=all-runs"),
    pytest.param((OPEN_JOB, TERMINAL_JOB), set(JobStatus), id="open+terminal=all-jobs"),
])
def test_named_sets_cover(parts: tuple[frozenset[object], ...], whole: set[object]) -> None:
    assert frozenset().union(*parts) == whole


@pytest.mark.parametrize(("smaller", "larger"), [
    pytest.param(ACTIVE_RUN, UNFINISHED_RUN, id="active<unfinished"),
    pytest.param(TERMINAL_RUN, SETTLED_RUN, id="terminal<settled"),
    pytest.param(WAITING_JOB, OPEN_JOB, id="waiting<open"),
])
def test_named_sets_nest(smaller: frozenset[object], larger: frozenset[object]) -> None:
    assert smaller < larger


@pytest.mark.parametrize("status", list(RunStatus), ids=str)
def test_a_run_never_changes_exactly_when_terminal(status: RunStatus) -> None:
    assert (states.RUN_TRANSITIONS[status] == frozenset()) is (status in TERMINAL_RUN)


@pytest.mark.parametrize("status", sorted(TERMINAL_JOB), ids=str)
def test_a_terminal_job_moves_only_by_an_operator(status: JobStatus) -> None:
    # Failed and cancelled jobs are revived (to pending) or marked succeeded (completed),
    # and nothing else; completed and skipped ones never move again.
    expected = {J.PENDING, J.COMPLETED} if status in REVIVABLE_JOB else set()
    assert states.JOB_TRANSITIONS[status] == expected
    assert {J.FAILED, J.CANCELLED} == TERMINAL_JOB & REVIVABLE_JOB


@pytest.mark.parametrize("status", sorted(REVIVABLE_JOB), ids=str)
def test_every_revivable_job_may_go_back_to_pending(status: JobStatus) -> None:
    assert job_may_move(status, J.PENDING)


@pytest.mark.parametrize("status", sorted(OPEN_JOB), ids=str)
def test_every_open_job_can_end(status: JobStatus) -> None:
    # A cancel or a deadline ends every open job: each has a way to a terminal state.
    assert states.JOB_TRANSITIONS[status] & TERMINAL_JOB


# -- waiting status ----------------------------------------------------------------------

@pytest.mark.parametrize(("run", "expected"), [
    pytest.param(R.PENDING, J.PENDING, id="pending"),
    pytest.param(R.RUNNING, J.PENDING, id="running"),
    pytest.param(R.PAUSED, J.PENDING, id="paused"),
    pytest.param(R.HALTED, J.HELD, id="halted"),
    pytest.param(R.COMPLETED, J.HELD, id="completed"),
    pytest.param(R.FAILED, J.HELD, id="failed"),
    pytest.param(R.CANCELLED, J.HELD, id="cancelled"),
])
def test_waiting_status(run: RunStatus, expected: JobStatus) -> None:
    assert waiting_status(run) is expected


@pytest.mark.parametrize("run", list(RunStatus), ids=str)
def test_a_running_job_may_go_back_to_its_waiting_status(run: RunStatus) -> None:
    # A retry or a release moves a running job to the waiting status of its run.
    assert job_may_move(J.RUNNING, waiting_status(run))
