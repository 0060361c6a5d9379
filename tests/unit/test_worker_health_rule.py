"""The one rule that judges a worker's health from its row (`ductline.model.workers`)."""

from __future__ import annotations

import pytest

from ductline.model.states import WorkerStatus
from ductline.model.workers import (PROBLEM_MAX_CHARS, START_BACKOFF_CAP_SECONDS, START_FAILURES_TOLERATED,
                                    Condition, WorkerHealth, start_backoff_seconds,
                                    condition, is_live, judge, start_problem)


@pytest.mark.parametrize(("status", "age_ms", "health", "live"), [
    ("running", 0, WorkerHealth.HEALTHY, True),
    ("running", 15_000, WorkerHealth.HEALTHY, True),
    ("running", 15_001, WorkerHealth.LATE, True),
    ("stopping", 30_000, WorkerHealth.LATE, True),
    ("running", 30_001, WorkerHealth.LOST, False),       # killed without a clean exit
    ("stopping", 10**9, WorkerHealth.LOST, False),
    ("unhealthy", 1_000, WorkerHealth.UNHEALTHY, True),   # too many undead slots
    ("unhealthy", 30_001, WorkerHealth.LOST, False),
    ("stopped", 0, WorkerHealth.STOPPED, False),
    ("stopped", 10**9, WorkerHealth.STOPPED, False),
])
def test_judge(status: str, age_ms: int, health: WorkerHealth, live: bool) -> None:
    assert judge(status, age_ms, lease_ms=30_000) == health
    assert is_live(health) is live


APP_ERROR = "'app.py': importing 'app' raised RuntimeError: no licence server (at app.py:5)"


@pytest.mark.parametrize(("stopping", "undead", "failed", "status", "problem"), [
    (False, 0, 0, WorkerStatus.RUNNING, None),
    (False, 0, START_FAILURES_TOLERATED - 1, WorkerStatus.RUNNING, None),   # a passing failure
    (False, 0, START_FAILURES_TOLERATED, WorkerStatus.UNHEALTHY,
     f"step children fail to start ({START_FAILURES_TOLERATED} in a row): {APP_ERROR}"),
    (False, 3, 0, WorkerStatus.UNHEALTHY, None),                            # undead: no words of its own
    (True, 0, 0, WorkerStatus.STOPPING, None),
    (True, 3, 0, WorkerStatus.STOPPING, None),
    (True, 0, 7, WorkerStatus.STOPPING, f"step children fail to start (7 in a row): {APP_ERROR}"),
])
def test_condition(stopping: bool, undead: int, failed: int, status: WorkerStatus, problem: str | None) -> None:
    said = condition(stopping=stopping, undead=undead, max_undead=2, failed_starts=failed, start_error=APP_ERROR)
    assert said == Condition(status, problem)


def test_a_start_problem_names_the_first_and_last_lines_of_the_error_and_is_bounded() -> None:
    error = "'app.py': importing 'app' raised ValueError: first\nmiddle\n\nlast line\n"
    assert start_problem(4, error) == \
        "step children fail to start (4 in a row): 'app.py': importing 'app' raised ValueError: first ... last line"
    assert start_problem(3, None) == \
        "step children fail to start (3 in a row): no error reported (the child died before it said it was ready)"
    long = start_problem(3, "x" * 10_000)
    assert len(long) == PROBLEM_MAX_CHARS and long.endswith("...")


@pytest.mark.parametrize(("failed", "seconds"), [
    (0, 0.0), (START_FAILURES_TOLERATED - 1, 0.0),
    (START_FAILURES_TOLERATED, 1.0), (START_FAILURES_TOLERATED + 1, 2.0), (START_FAILURES_TOLERATED + 4, 16.0),
    (START_FAILURES_TOLERATED + 5, START_BACKOFF_CAP_SECONDS), (10**6, START_BACKOFF_CAP_SECONDS),
])
def test_children_that_keep_failing_to_start_are_restarted_ever_more_slowly(failed: int, seconds: float) -> None:
    assert start_backoff_seconds(failed) == seconds
