"""The kill path (`ductline.execution.enforcer`), driven with a fake clock: deadline,
SIGTERM to the group, SIGKILL after the grace, undead a second later; lease safety."""

from __future__ import annotations

import signal

from ductline.clock import ManualClock
from ductline.execution.enforcer import UNDEAD_AFTER_SECONDS, Enforcer, Reason, Stage


class FakeChild:
    def __init__(self, pid: int = 7, is_thread: bool = False) -> None:
        self.pid = pid
        self.is_thread = is_thread
        self.signals: list[int] = []

    def signal_group(self, sig: int) -> None:
        self.signals.append(sig)


def make(grace: float = 2.0, lease_seconds: float | None = None) -> tuple[Enforcer, ManualClock, list[int]]:
    clock = ManualClock(100.0)
    woken: list[int] = []
    return Enforcer(grace, lambda: woken.append(1), clock, lease_seconds=lease_seconds), clock, woken


def test_deadline_then_sigterm_then_sigkill_then_undead() -> None:
    enforcer, clock, woken = make(grace=2.0)
    child = FakeChild()
    enforcer.watch(0, child, deadline=105.0)
    assert enforcer.tick(clock.now()) == 105.0
    assert child.signals == []
    assert enforcer.tick(105.0) == 107.0
    assert child.signals == [signal.SIGTERM]
    assert enforcer.tick(107.0) == 107.0 + UNDEAD_AFTER_SECONDS
    assert child.signals == [signal.SIGTERM, signal.SIGKILL]
    assert not woken
    assert enforcer.tick(107.0 + UNDEAD_AFTER_SECONDS) is None
    assert woken == [1]
    [(key, watch)] = enforcer.take_undead()
    assert key == 0 and watch.reason is Reason.TIMEOUT and watch.stage is Stage.UNDEAD
    assert enforcer.state(0) is None


def test_a_result_after_the_kill_began_is_refused() -> None:
    enforcer, clock, _ = make()
    enforcer.watch(0, FakeChild(), deadline=101.0)
    enforcer.watch(1, FakeChild(), deadline=101.0)
    assert enforcer.finish(1)  # in time: taken, no longer watched
    assert enforcer.state(1) is None
    enforcer.tick(101.0)
    assert not enforcer.finish(0)
    watch = enforcer.settle(0)
    assert watch is not None and watch.reason is Reason.TIMEOUT


def test_a_moved_deadline_and_an_explicit_kill() -> None:
    enforcer, clock, _ = make(grace=1.0)
    child = FakeChild()
    enforcer.watch(3, child, deadline=101.0)
    enforcer.move_deadline(3, 110.0)
    assert enforcer.tick(101.0) == 110.0
    enforcer.kill(3, Reason.CANCEL, grace=0.0)
    assert child.signals == [signal.SIGTERM]
    enforcer.kill(3, Reason.SHUTDOWN)  # a kill under way goes on as it was
    assert enforcer.tick(clock.now()) == clock.now() + UNDEAD_AFTER_SECONDS
    assert child.signals == [signal.SIGTERM, signal.SIGKILL]
    watch = enforcer.state(3)
    assert watch is not None and watch.reason is Reason.CANCEL


def test_a_thread_gets_no_grace() -> None:
    enforcer, clock, _ = make(grace=5.0)
    thread = FakeChild(is_thread=True)
    enforcer.watch(0, thread, deadline=100.0)
    assert enforcer.tick(100.0) == 100.0 + UNDEAD_AFTER_SECONDS
    assert thread.signals == [signal.SIGTERM, signal.SIGKILL]


def test_children_are_killed_before_unrenewed_leases_can_expire() -> None:
    enforcer, clock, _ = make(lease_seconds=20.0)
    child = FakeChild()
    enforcer.renewed(100.0)
    enforcer.watch(0, child, deadline=None)
    assert enforcer.tick(110.0) == 100.0 + 15.0 + 0.001
    enforcer.renewed(110.0)
    enforcer.tick(120.0)
    assert child.signals == []
    enforcer.tick(125.01)
    assert child.signals == [signal.SIGTERM, signal.SIGKILL]  # no grace: the lease is at stake
    watch = enforcer.state(0)
    assert watch is not None and watch.reason is Reason.LEASE


def test_without_leases_nothing_is_killed_for_them() -> None:
    enforcer, clock, _ = make(lease_seconds=None)
    child = FakeChild()
    enforcer.watch(0, child, deadline=None)
    assert enforcer.tick(10_000.0) is None
    assert child.signals == []


class HorizonChild(FakeChild):
    def __init__(self) -> None:
        super().__init__()
        self.horizons: list[float] = []

    def set_horizon(self, monotonic_seconds: float) -> None:
        self.horizons.append(monotonic_seconds)


def test_a_watched_child_learns_its_lease_horizon_at_the_claim_and_each_renewal() -> None:
    import time

    from ductline.execution.watchdog import CHILD_HORIZON_SHARE

    enforcer, clock, _ = make(lease_seconds=10.0)
    enforcer.renewed(100.0)
    child = HorizonChild()
    before = time.monotonic()
    enforcer.watch(0, child, deadline=None)
    # On the real monotonic clock the child reads: 9 s after the renewal (fake time 100).
    [first] = child.horizons
    assert before + 10.0 * CHILD_HORIZON_SHARE - 0.5 <= first <= time.monotonic() + 10.0 * CHILD_HORIZON_SHARE
    clock.advance(3.0)
    enforcer.renewed(101.0)  # a renewal sent 2 s ago (fake time): 7 s left from now
    after = time.monotonic()
    assert len(child.horizons) == 2
    assert after + 7.0 - 0.5 <= child.horizons[1] <= after + 7.0


def test_no_horizon_without_leases() -> None:
    enforcer, _, _ = make(lease_seconds=None)
    child = HorizonChild()
    enforcer.watch(0, child, deadline=None)
    assert child.horizons == [0.0]


def test_a_frame_that_stops_arriving_gets_the_child_killed_for_a_garbled_channel() -> None:
    import os
    import time

    from ductline.model.endings import FRAME_BOUND_SECONDS

    enforcer, clock, _ = make()
    child = FakeChild()
    enforcer.watch(0, child, deadline=None)
    read, write = os.pipe()
    try:
        # Its last bytes arrived just now (real monotonic clock): due one bound later.
        enforcer.frame_pending(0, time.monotonic(), read)
        due = enforcer.tick(clock.now())
        assert due is not None and clock.now() < due <= clock.now() + FRAME_BOUND_SECONDS
        # Bytes wait unread at the bound: the parent's reader is late, not the child.
        os.write(write, b"x")
        enforcer.tick(due)
        assert child.signals == []
        os.read(read, 1)
        enforcer.tick(due + FRAME_BOUND_SECONDS)
        assert child.signals == [signal.SIGTERM, signal.SIGKILL]  # no grace: what it writes is not trusted
        assert enforcer.state(0).reason is Reason.GARBLED
    finally:
        os.close(read)
        os.close(write)


def test_a_frame_completed_in_time_kills_nothing() -> None:
    import os
    import time

    enforcer, clock, _ = make()
    child = FakeChild()
    enforcer.watch(0, child, deadline=None)
    read, write = os.pipe()
    try:
        enforcer.frame_pending(0, time.monotonic(), read)
        enforcer.frame_pending(0, None, read)  # the rest arrived
        assert enforcer.tick(clock.now() + 10) is None
        assert child.signals == []
    finally:
        os.close(read)
        os.close(write)
