"""Time as the in-process executor sees it for step delays, retry delays, rate
limits and pause timeouts (injectable, so tests can shorten them).

Step timeouts and the run deadline always use the event loop's own monotonic
time: a fast test clock must never let a stuck step run longer than its limit.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


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
