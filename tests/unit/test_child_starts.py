"""A worker's record of its step children's starts (`ductline.runtime.starts`): when a
start counts as failed, and when the worker is healthy again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ductline.model.workers import START_FAILURES_TOLERATED
from ductline.runtime.starts import SETTLE_SECONDS, Starts


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def child(code: int = 7) -> Any:
    return SimpleNamespace(ready=False, used=False, ready_at=0.0, start_error=None,
                           process=SimpleNamespace(returncode=code))


def test_children_that_exit_soon_after_they_said_they_were_ready_fail_their_starts() -> None:
    """A child that said it was ready and exited on its own before any attempt, soon
    after (a thread of the app ending the process), failed its start: three in a row
    make the worker unhealthy, and a child's READY alone does not make it healthy
    again -- the child must outlive `SETTLE_SECONDS`."""
    clock = Clock()
    starts = Starts(clock=clock)
    for _ in range(START_FAILURES_TOLERATED):
        c = child()
        c.ready = True
        starts.ready(c)
        clock.now += 0.2
        starts.gone(c)
        clock.now += 0.1
    assert starts.failures() == START_FAILURES_TOLERATED
    assert starts.error == "a child exited on its own (exit code 7) 0.2 s after it said it was ready, before any attempt"
    assert starts.due_at() is not None  # the next start waits
    survivor = child()
    survivor.ready = True
    clock.now += 2.0
    starts.ready(survivor)
    assert starts.failures() == START_FAILURES_TOLERATED  # said ready, not settled yet
    clock.now += SETTLE_SECONDS
    assert starts.failures() == 0 and starts.error is None and starts.due_at() is None


def test_a_child_that_exits_idle_long_after_it_started_or_after_an_attempt_is_no_failed_start() -> None:
    clock = Clock()
    starts = Starts(clock=clock)
    old = child()
    old.ready = True
    starts.ready(old)
    clock.now += SETTLE_SECONDS + 1
    starts.gone(old)  # killed from outside an hour later, say: replaced, not a failed start
    used = child()
    used.ready = True
    starts.ready(used)
    used.used = True
    clock.now += 0.1
    starts.gone(used)  # an attempt's crash is the attempt's, not the start's
    assert starts.failures() == 0 and starts.error is None


def test_a_child_that_never_said_it_was_ready_fails_its_start_and_the_next_ready_one_heals_at_once() -> None:
    clock = Clock()
    starts = Starts(clock=clock)
    for _ in range(START_FAILURES_TOLERATED):
        c = child(1)
        c.start_error = "'app.py': importing 'app' raised RuntimeError: no licence"
        starts.gone(c)
    assert starts.failures() == START_FAILURES_TOLERATED
    well = child()
    well.ready = True
    starts.ready(well)
    assert starts.failures() == 0
