"""The run deadline of an in-process run, as the driver keeps it.

The store starts it with the run's first claim (``deadline_ms`` on the store's
clock, as on a worker). The driver also counts it in real time from that claim,
so that a run whose store's clock is a caller's (a test's clock, which may stand
still or jump) still ends at its deadline; with a `ductline.testing.FakeClock` it
passes at whichever comes first, the real or the virtual deadline.
"""

from __future__ import annotations

from typing import Callable


class RunDeadline:
    """Args:
        timeout_seconds: the run's timeout (``None``: no deadline).
        virtual: the store's clock is virtual (its deadline counts too).
        loop_time: the event loop's monotonic time.
        seconds_until: seconds from now until a time on the store's clock (epoch ms).
    """

    def __init__(self, timeout_seconds: float | None, *, virtual: bool, loop_time: Callable[[], float],
                 seconds_until: Callable[[float], float]) -> None:
        self.timeout = timeout_seconds
        self.virtual = virtual
        self._loop_time = loop_time
        self._seconds_until = seconds_until
        self.real: float | None = None       # loop time of the deadline, once the run started
        self.stored_ms: int | None = None    # the store's deadline, once the run started

    def started(self, deadline_ms: int | None) -> None:
        """The run's first claim started it (``deadline_ms``: what the store set)."""
        if self.real is None and deadline_ms is not None and self.timeout is not None:
            self.stored_ms = deadline_ms
            self.real = self._loop_time() + self.timeout

    def began(self, deadline_ms: int | None) -> None:
        """The run's first attempt began now (after its child was ready): the store
        moved the deadline to this start (``deadline_ms``), as a worker's does for an
        attempt that began after its claim; the real-time deadline moves with it."""
        if deadline_ms is not None and self.timeout is not None:
            self.stored_ms = deadline_ms
            self.real = self._loop_time() + self.timeout

    def bound(self) -> float | None:
        """The loop time an attempt starting now must end by (``None``: none)."""
        bound = self.real
        if self.virtual and self.stored_ms is not None:
            at = self._loop_time() + self._seconds_until(self.stored_ms)
            bound = at if bound is None else min(bound, at)
        return bound

    def due(self, store_now_ms: Callable[[], int]) -> bool:
        """It passed (in real time, or on a virtual store clock)."""
        if self.real is not None and self._loop_time() >= self.real:
            return True
        return self.virtual and self.stored_ms is not None and store_now_ms() >= self.stored_ms

    def is_deadline(self, due_ms: float) -> bool:
        """``due_ms`` (the store's next wake-up) is this deadline, not a pause expiring."""
        return self.stored_ms is not None and due_ms >= self.stored_ms

    def real_seconds_left(self) -> float | None:
        return None if self.real is None else max(0.0, self.real - self._loop_time())
