"""Store contract: started runs first (`ductline.model.claim_order`), both backends.

At equal priority a job of a run already under way is claimed before the first
steps of runs not yet started, each oldest first; the oldest-first claim that bounds
starvation still takes the globally oldest job; priorities still come first. Each
case runs on both claim paths: the plain claim, and the candidate path a claim takes
when it enforces limits (here a limit on a step these jobs do not have).
"""

from __future__ import annotations

import pytest

from contract_support import LONG_LEASE_MS, PIPELINE, WORKER, create_run
from ductline.model.claim_order import FIRST_STEP, UNDER_WAY
from ductline.store import Store
from ductline.store.records import StepLimit

FIRST_STEPS = 40
PATHS = {"plain": None, "limited": {(PIPELINE, "elsewhere"): StepLimit(concurrency=1, rate=None)}}


@pytest.fixture(params=sorted(PATHS))
def limits(request: pytest.FixtureRequest) -> dict[tuple[str, str], StepLimit] | None:
    return PATHS[request.param]


def claim(store: Store, limits: dict[tuple[str, str], StepLimit] | None, n: int = 1,
          fifo: bool = False) -> set[str]:
    """The ids one claim of up to ``n`` jobs takes (a batch comes back in no set order)."""
    return {c.job_id for c in store.claim(WORKER, [PIPELINE], n, LONG_LEASE_MS, limits=limits, fifo=fifo)}


def claim_order(store: Store, limits: dict[tuple[str, str], StepLimit] | None, n: int) -> list[str]:
    """The ids ``n`` claims of one job each take, in order."""
    order = []
    for _ in range(n):
        (job_id,) = claim(store, limits)
        order.append(job_id)
    return order


def first_steps(store: Store, count: int, *, oldest_ms: int, priority: int = 0) -> list[str]:
    """``count`` new runs, each with its first step ready; oldest first, 10 ms apart."""
    ids = []
    for i in range(count):
        _, (job_id,) = create_run(store, {"step": "first", "phase": FIRST_STEP, "priority": priority,
                                          "not_before_ms": oldest_ms + 10 * i})
        ids.append(job_id)
    return ids


def next_step(store: Store, *, not_before_ms: int, priority: int = 0, step: str = "second") -> str:
    """A run under way: its next step, ready since ``not_before_ms``."""
    _, (job_id,) = create_run(store, {"step": step, "phase": UNDER_WAY, "priority": priority,
                                      "not_before_ms": not_before_ms})
    return job_id


def test_a_started_runs_next_step_is_claimed_before_older_first_steps(store: Store, limits) -> None:
    now = store.now_ms()
    firsts = first_steps(store, FIRST_STEPS, oldest_ms=now - 60_000)
    second = next_step(store, not_before_ms=now - 1)  # the newest ready job
    assert claim_order(store, limits, 4) == [second] + firsts[:3]  # then the first steps, oldest first


def test_a_batch_claim_takes_runs_under_way_first_then_the_oldest_first_steps(store: Store, limits) -> None:
    now = store.now_ms()
    firsts = first_steps(store, FIRST_STEPS, oldest_ms=now - 60_000)
    late = next_step(store, not_before_ms=now - 1, step="third")
    early = next_step(store, not_before_ms=now - 100)
    assert claim(store, limits, 4) == {early, late, firsts[0], firsts[1]}
    assert claim(store, limits, 2) == set(firsts[2:4])


def test_the_oldest_first_claim_still_takes_the_oldest_job(store: Store, limits) -> None:
    now = store.now_ms()
    firsts = first_steps(store, FIRST_STEPS, oldest_ms=now - 60_000)
    next_step(store, not_before_ms=now - 1)
    assert claim(store, limits, fifo=True) == {firsts[0]}
    assert claim(store, limits, 2, fifo=True) == set(firsts[1:3])


def test_the_oldest_first_claim_takes_an_older_step_of_a_run_under_way(store: Store, limits) -> None:
    now = store.now_ms()
    firsts = first_steps(store, 3, oldest_ms=now - 1_000)
    second = next_step(store, not_before_ms=now - 5_000)
    assert claim(store, limits, 2, fifo=True) == {second, firsts[0]}


def test_priorities_still_come_before_runs_under_way(store: Store, limits) -> None:
    now = store.now_ms()
    low_firsts = first_steps(store, 5, oldest_ms=now - 60_000, priority=-1)
    urgent = first_steps(store, 2, oldest_ms=now - 500, priority=3)
    second = next_step(store, not_before_ms=now - 90_000)
    low_second = next_step(store, not_before_ms=now - 1, priority=-1, step="third")
    assert claim_order(store, limits, 9) == urgent + [second, low_second] + low_firsts
    assert claim(store, limits) == set()


def test_delayed_steps_of_runs_under_way_do_not_hold_back_ready_first_steps(store: Store, limits) -> None:
    now = store.now_ms()
    for i in range(20):
        next_step(store, not_before_ms=now + 3_600_000 + i, step=f"later{i}")
    firsts = first_steps(store, 2, oldest_ms=now - 1_000)
    assert claim_order(store, limits, 2) == firsts
    assert claim(store, limits, 5) == set()
