"""Time as the worker parent sees it: its monotonic clock, and the database clock
read through it.

Every lease, delay and deadline is stored as a database-clock time (epoch
milliseconds from the database). A worker waits and kills on its own monotonic
clock, so an NTP step on the worker can neither stretch nor shrink a window
(docs/howto/timeouts.md, "How the kill works"). `DatabaseClock` is the one place that converts
between the two, from an offset it measures each time the database answers a
call that returns its clock (register, claim, heartbeat).

Components take a clock instead of calling `time` themselves, so tests can pass a
`ManualClock`. (The fake clock of tests of users' pipelines is another thing:
`ductline.testing.FakeClock`, virtual time for the in-process executor.)
"""

from __future__ import annotations

import math
import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A monotonic clock that can also wait."""

    def now(self) -> float:
        """Monotonic seconds (any origin; only differences count)."""

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock."""


class SystemClock:
    """The process's own monotonic clock (``CLOCK_MONOTONIC``, shared by the worker
    and its children)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class ManualClock:
    """A monotonic clock that moves only when told to (tests of the worker's parts).

    Args:
        start: its first reading, in seconds.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)


class DatabaseClock:
    """A monotonic clock that also converts to and from the database clock.

    The offset (database clock minus monotonic clock) is measured with round trips:
    the database's answer is assumed to be read halfway between sending the call and
    receiving its result, so a measurement's error is at most half its round trip.
    The most precise measurement is kept (NTP's rule): a later one replaces it when its
    error bound is smaller than the kept one's, which grows with its age by
    `DRIFT_MS_PER_SECOND`, or when the two disagree by more than both bounds (the
    database's clock was stepped). A busy worker's claims take tens of milliseconds
    under load; taking each as it came put started times that much after the truth.

    Args:
        base: the monotonic clock (default: the system's).
    """

    # How fast two clocks may drift apart: NTP slews a clock by at most 500 ppm.
    DRIFT_MS_PER_SECOND = 0.5

    def __init__(self, base: Clock | None = None) -> None:
        self._base: Clock = base if base is not None else SystemClock()
        # Written by the worker loop only; the tuple is replaced whole, so a reader in
        # another thread (the scheduler's estimate) sees the old or the new one.
        # (offset ms, error bound ms, measured at: monotonic seconds); no bound yet: inf
        self._kept: tuple[float, float, float] = (0.0, math.inf, 0.0)

    @property
    def _offset_ms(self) -> float:
        return self._kept[0]

    def now(self) -> float:
        """Monotonic seconds."""
        return self._base.now()

    def sleep(self, seconds: float) -> None:
        self._base.sleep(seconds)

    def measure(self, db_ms: int, sent: float, received: float) -> None:
        """Take one round trip into account (see the class).

        Args:
            db_ms: the database clock the call returned (epoch milliseconds).
            sent, received: this clock's `now` before the call and after its result.
        """
        offset = db_ms - (sent + received) / 2 * 1000
        error = max(0.0, received - sent) / 2 * 1000
        kept, kept_error, at = self._kept
        kept_error += max(0.0, received - at) * self.DRIFT_MS_PER_SECOND
        if error <= kept_error or abs(offset - kept) > error + kept_error:
            self._kept = (offset, error, received)

    def to_monotonic(self, db_ms: int | float) -> float:
        """A database-clock time (epoch milliseconds) as monotonic seconds."""
        return (db_ms - self._offset_ms) / 1000

    def passed(self, db_ms: int | float) -> float:
        """The first monotonic instant (seconds) at which the database clock has surely
        reached ``db_ms`` (epoch milliseconds): `to_monotonic` plus the kept
        measurement's error bound, grown with its age (a step must not start before
        its not-before time by the database's clock)."""
        return self.to_monotonic(db_ms) + self.error_ms() / 1000

    def error_ms(self) -> float:
        """The kept measurement's error bound now (milliseconds): half its round trip,
        grown with its age by `DRIFT_MS_PER_SECOND`; 0.0 before any measurement (the
        offset is then a guess)."""
        _, error, at = self._kept
        if math.isinf(error):
            return 0.0
        return error + max(0.0, self.now() - at) * self.DRIFT_MS_PER_SECOND

    def db_now_ms(self) -> float:
        """This process's estimate of the database clock now, in epoch milliseconds."""
        return self._offset_ms + self.now() * 1000
