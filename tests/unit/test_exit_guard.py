"""When the exit guard ends a stopping worker process (`ductline.runtime.shutdown`)."""

from __future__ import annotations

import signal

from ductline.runtime.shutdown import ExitGuard


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_idle_ends_at_the_grace_busy_after_the_overtime_a_second_interrupt_at_once() -> None:
    clock, stake = Clock(), [False]
    guard = ExitGuard(clock, grace=30, at_stake=lambda: stake[0], overtime=10, end=lambda code: None)
    assert guard.overdue(clock.now()) is None  # not asked to stop
    guard.signalled(signal.SIGHUP)
    assert guard.deadline is None
    guard.signalled(signal.SIGTERM)
    assert guard.overdue(129.9) is None
    assert guard.overdue(130.0) == "the shutdown grace is over and nothing runs"
    stake[0] = True  # an attempt still runs: it gets the overtime
    assert guard.overdue(139.9) is None and guard.overdue(140.0) is not None
    guard.signalled(signal.SIGTERM)  # again: the grace still counts from the first
    assert guard.deadline == 130.0

    clock.t = 105.0
    sigint = ExitGuard(clock, grace=30, at_stake=lambda: False, overtime=10, end=lambda code: None)
    sigint.signalled(signal.SIGINT)
    assert sigint.deadline == 135.0
    sigint.signalled(signal.SIGINT)  # a second Ctrl-C ends the grace now
    assert sigint.deadline == 105.0


def test_a_worker_on_its_way_out_on_its_own_gets_time_to_finish() -> None:
    """Killed at the end of its grace, an attempt is recorded at once; the worker then
    stops its children and writes its last row. Nothing runs by then, but the worker
    is not held: ended there, its row would stay ``stopping``."""
    from ductline.runtime.shutdown import FINISH_SECONDS

    clock, stake = Clock(), [True]
    guard = ExitGuard(clock, grace=30, at_stake=lambda: stake[0], overtime=10, end=lambda code: None)
    guard.signalled(signal.SIGTERM)
    clock.t = 130.0
    guard.finishing()  # it kills what still runs
    stake[0] = False  # recorded: nothing at stake
    assert guard.overdue(130.1) is None
    assert guard.overdue(130.0 + FINISH_SECONDS) == "the shutdown grace is over and nothing runs"
    stake[0] = True  # however long the kill takes, the overtime still bounds it
    assert guard.overdue(139.9) is None and guard.overdue(140.0) is not None
    # A worker whose loop ended long before its grace did (idle, its last write held
    # by the database) still ends at the grace.
    clock.t = 200.0
    idle = ExitGuard(clock, grace=30, at_stake=lambda: False, overtime=10, end=lambda code: None)
    idle.signalled(signal.SIGTERM)
    idle.finishing()
    assert idle.overdue(230.0) == "the shutdown grace is over and nothing runs"
