"""The one rule that judges a worker's health from its row (`ductline.model.workers`)."""

from __future__ import annotations

import pytest

from ductline.model.workers import WorkerHealth, is_live, judge


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
