"""Time as the in-process executor sees it for step delays, retry delays, rate
limits and pause timeouts (injectable, so tests can shorten them).

Step timeouts always use the event loop's own monotonic time: a fast test clock
must never let a stuck step run longer than its limit. The run deadline uses it
too, and, with a `FakeClock`, also the fake clock's time (whichever comes first).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from typing import AsyncIterator, Protocol


class Clock(Protocol):
    """What the executor needs of a clock."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""

    def now(self) -> float:
        """This clock's time in seconds (any origin; only differences count)."""


class RealClock:
    """The default clock: ``asyncio.sleep`` and the event loop's monotonic time."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def now(self) -> float:
        return asyncio.get_running_loop().time()


class FakeClock:
    """Virtual time for the in-process executor: a test's run goes through a
    one-day delay, retry delays, rate limits, pause timeouts and its run deadline
    without waiting for them.

    Time moves on only when the run has nothing else to do: when every step run
    of the run is waiting on this clock (nothing is running or about to run), the
    clock jumps to the earliest time one of them waits for and wakes it. So the
    order of events is the order of their times, as on a real clock, and a step
    that runs for real (in a child, a thread or the event loop) takes no virtual
    time. Step timeouts stay real: a stuck step is still stopped at its limit.

    Args:
        start: the first reading, in seconds (any origin).

    Use one clock per run (`ductline.testing.run_pipeline` makes one when not
    given). `frozen` stops the automatic jumps (a test that acts on a paused
    run first); `advance` moves time by hand.
    """

    virtual = True

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        # (when, order, future, passive): a passive sleeper (the run deadline) is woken
        # in its turn, but never makes time jump by itself.
        self._sleepers: list[tuple[float, int, asyncio.Future[None], bool]] = []
        self._count = itertools.count()
        self._busy: dict[asyncio.Task[object], int] = {}  # tasks in `activity`, with their depth
        self._sleeping: set[asyncio.Task[object]] = set()
        self._driver: asyncio.Task[None] | None = None
        self.frozen = False
        self.advanced_seconds = 0.0  # virtual seconds jumped over (for reports)

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float, *, passive: bool = False) -> None:
        """Wait ``seconds`` of virtual time (at once when it is not positive).

        Args:
            passive: time never jumps for this sleeper alone, only while some step
                run (a delay, a retry delay, a pause timeout, a rate limit) also
                waits on the clock. The run deadline sleeps so: once nothing of the
                run waits any more (it completed or halted) the run ends before its
                deadline, as it would in real time.
        """
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._count), future, passive))
        self._ensure_driver()
        task = asyncio.current_task()
        sleeping = task is not None and task not in self._sleeping
        if sleeping:
            assert task is not None
            self._sleeping.add(task)  # a busy task is idle while it sleeps
        try:
            await future
        finally:
            if sleeping:
                assert task is not None
                self._sleeping.discard(task)

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds`` by hand, waking every sleeper now due
        (frozen or not).

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError(f"a clock does not go back: advance({seconds})")
        self._move_to(self._now + seconds)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future, _ = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def thaw(self) -> None:
        """Let time jump again after `frozen` was set."""
        self.frozen = False
        self._ensure_driver()

    @contextlib.asynccontextmanager
    async def activity(self) -> AsyncIterator[None]:
        """Mark the calling task as busy while the block runs (the executor wraps
        each step run's task: time does not jump while it works)."""
        task = asyncio.current_task()
        assert task is not None
        self._busy[task] = self._busy.get(task, 0) + 1
        try:
            yield
        finally:
            self._busy[task] -= 1
            if not self._busy[task]:
                del self._busy[task]

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """Mark the calling task as idle while the block runs: it waits for another
        task (a limit's slot) that may itself wait on this clock."""
        task = asyncio.current_task()
        assert task is not None
        added = task not in self._sleeping
        self._sleeping.add(task)
        try:
            yield
        finally:
            if added:
                self._sleeping.discard(task)

    def _working(self) -> bool:
        return any(task not in self._sleeping for task in self._busy)

    def _move_to(self, when: float) -> None:
        if when > self._now:
            self.advanced_seconds += when - self._now
            self._now = when

    def _ensure_driver(self) -> None:
        if self._driver is None or self._driver.done():
            self._driver = asyncio.get_running_loop().create_task(self._drive(), name="ductline fake clock")

    def _awaited(self) -> bool:
        """Some step run waits on this clock (a sleeper that is not passive)."""
        return any(not future.done() and not passive for _, _, future, passive in self._sleepers)

    async def _drive(self) -> None:
        while self._awaited() and not self.frozen:
            # Let whatever is runnable run first: tasks just spawned enter their
            # activity within a few turns of the loop.
            for _ in range(SETTLE_TURNS):
                await asyncio.sleep(0)
            if self._working() or self.frozen:
                await asyncio.sleep(IDLE_POLL_SECONDS)  # a step is running for real
                continue
            if not self._awaited():
                break  # only the deadline is left: the run ends first
            when, _, future, _ = heapq.heappop(self._sleepers)
            if future.done():  # its sleeper was cancelled
                continue
            self._move_to(when)
            future.set_result(None)


SETTLE_TURNS = 20
IDLE_POLL_SECONDS = 0.001


def activity(clock: Clock) -> contextlib.AbstractAsyncContextManager[None]:
    """``clock.activity()`` for a `FakeClock`, else a block that does nothing."""
    marker = getattr(clock, "activity", None)
    return marker() if marker is not None else contextlib.nullcontext()


def waiting(clock: Clock) -> contextlib.AbstractAsyncContextManager[None]:
    """``clock.waiting()`` for a `FakeClock`, else a block that does nothing."""
    marker = getattr(clock, "waiting", None)
    return marker() if marker is not None else contextlib.nullcontext()


def is_virtual(clock: Clock) -> bool:
    """The clock's time is not real time (a `FakeClock`): the run deadline then
    also counts its time."""
    return bool(getattr(clock, "virtual", False))
