"""The in-process driver's sleep between turns: until an attempt ends, the caller
acts, or the next timer is due."""

from __future__ import annotations

import asyncio
from typing import Any

from ductline.local.driver.base import DriverBase


class WaitTurn(DriverBase):
    """The turn's wait."""

    async def _wait(self) -> None:
        """Sleep until an attempt ends, the caller acts, or the next timer is due."""
        if any(r.task is not None and r.task.done() for r in self.running.values()):
            return
        if self._wake.is_set():
            self._wake.clear()
            return
        not_before_ms, due_ms = self.store.next_wakeups(list(self.definitions), self.queues)
        timers: list[tuple[float, bool]] = []  # (seconds, passive) on the driver's clock
        if not_before_ms is not None and len(self.running) < self.options.concurrency:
            timers.append((self._seconds_until(not_before_ms), False))
        if due_ms is not None:
            if not self.deadline.is_deadline(due_ms):
                timers.append((self._seconds_until(due_ms), False))  # a pause expires
            elif self.virtual:  # the run deadline passes in virtual time too
                timers.append((self._seconds_until(due_ms), True))
        await self._sleep_or_wake(timers, self.deadline.real_seconds_left())

    async def _sleep_or_wake(self, timers: list[tuple[float, bool]], real: float | None) -> None:
        """Wait for a wake-up, the earliest timer on the driver's clock, or ``real``
        seconds of real time, whichever comes first."""
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._wake.wait())}
        # Every timer sleeps (not only the earliest): a virtual clock jumps for the
        # timers a step run waits on, and wakes a passive one (the run deadline) on
        # the way if it comes first.
        for seconds, passive in timers:
            if self.virtual:
                sleep = self.clock.sleep(seconds, passive=passive)  # type: ignore[call-arg]
            else:
                sleep = self.clock.sleep(seconds)
            waits.add(asyncio.ensure_future(sleep))
        try:
            await asyncio.wait(waits, timeout=real, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            self._wake.clear()
