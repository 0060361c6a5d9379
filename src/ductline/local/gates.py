"""Concurrency and rate limits of steps in the in-process executor.

The same rules as the workers' (`ductline.store.claims`), within one run: at most
``concurrency`` attempts of a limit key (`ductline.model.limits.limit_key`, fixed
when the step run is created) at once, and starts of a key at least ``1/rate``
seconds apart on the executor's clock.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator

from ductline.dsl.options import StepOptions
from ductline.local.clock import Clock, waiting


class Gate:
    """The limits of one limit key."""

    def __init__(self, options: StepOptions) -> None:
        self._slots = None if options.concurrency is None else asyncio.Semaphore(options.concurrency)
        self._interval = None if options.rate is None else 1.0 / options.rate
        self._next_start = float("-inf")
        self._turn = asyncio.Lock()  # starts take their rate slots one at a time

    @asynccontextmanager
    async def enter(self, clock: Clock) -> AsyncIterator[None]:
        """Wait for a concurrency slot, hold it for the attempt."""
        if self._slots is not None:
            async with waiting(clock):  # its holders may wait on the clock
                await self._slots.acquire()
        try:
            yield
        finally:
            if self._slots is not None:
                self._slots.release()

    async def pace(self, clock: Clock) -> None:
        """Wait for the key's next start time and take it. Called right before the
        attempt's start is recorded (after its child is ready), so recorded starts
        are ``1/rate`` apart however long getting a child took."""
        if self._interval is None:
            return
        async with waiting(clock):
            await self._turn.acquire()
        try:
            wait = self._next_start - clock.now()
            if wait > 0:
                await clock.sleep(wait)
            self._next_start = clock.now() + self._interval
        finally:
            self._turn.release()
