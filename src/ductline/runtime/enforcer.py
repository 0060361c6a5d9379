"""The thread that kills: deadlines and lease safety, never blocked by the database.

The worker loop talks to the database; a database call can block (a lock, an
outage, a slow network). Killing must not wait for it, so a dedicated thread owns
the kill path: SIGTERM to the child's process group at the deadline, SIGKILL after
the grace, and *undead* after one more second. It also kills every child whose
lease could expire because the worker has not renewed its leases for three
quarters of the lease: two live executions of one job must never overlap.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ductline.runtime.slots import UNDEAD_AFTER_SECONDS

log = logging.getLogger("ductline.worker")


@dataclass(slots=True)
class Watch:
    child: Any                   # a Child, or a ThreadAttempt
    deadline: float | None       # monotonic seconds
    stage: int = 0               # 0 running, 1 SIGTERM sent, 2 SIGKILL sent, 3 undead
    next_at: float = 0.0         # when the next stage is due
    reason: str | None = None    # "timeout", "lease", "shutdown", "cancel"
    term_at: float | None = None  # when SIGTERM was sent (overrun measurements)


class Enforcer:
    """Kills children on time from its own thread.

    Args:
        grace: seconds between SIGTERM and SIGKILL.
        lease_seconds: the lease length; children are killed when the last
            renewal is older than three quarters of it.
        wake: called (from this thread) when the worker loop must look again,
            e.g. a child became undead.
    """

    def __init__(self, grace: float, lease_seconds: float, wake: Callable[[], None]) -> None:
        self._grace = grace
        self._lease = lease_seconds
        self._wake = wake
        self._cond = threading.Condition()
        self._watches: dict[int, Watch] = {}
        self._stop = False
        self.last_renewal = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ductline-enforcer")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def renewed(self, at: float) -> None:
        with self._cond:
            self.last_renewal = at

    def watch(self, slot: int, child: Any, deadline: float | None) -> None:
        with self._cond:
            self._watches[slot] = Watch(child, deadline)
            self._cond.notify()

    def settle(self, slot: int) -> Watch | None:
        """Stop watching a slot whose attempt ended; returns its watch. If the kill
        had already begun (``stage > 0``) the attempt's own result must be dropped."""
        with self._cond:
            return self._watches.pop(slot, None)

    def finish(self, slot: int) -> bool:
        """The attempt sent its result: stop watching and return ``True``, unless
        its kill already began (then the result must be dropped: ``False``)."""
        with self._cond:
            watch = self._watches.get(slot)
            if watch is None or watch.stage != 0:
                return False
            del self._watches[slot]
            return True

    def take_undead(self) -> list[tuple[int, Watch]]:
        """Watches whose child survived SIGKILL; they are no longer watched."""
        with self._cond:
            found = [(i, w) for i, w in self._watches.items() if w.stage == 3]
            for i, _ in found:
                del self._watches[i]
            return found

    def move_deadline(self, slot: int, deadline: float | None) -> None:
        """A scaled timeout was reported: the attempt's deadline changes."""
        with self._cond:
            watch = self._watches.get(slot)
            if watch is not None and watch.stage == 0:
                watch.deadline = deadline
            self._cond.notify()

    def state(self, slot: int) -> Watch | None:
        with self._cond:
            return self._watches.get(slot)

    def kill(self, slot: int, reason: str, grace: float | None = None) -> None:
        """Begin killing a slot's child now (lease lost, shutdown, cancel)."""
        with self._cond:
            watch = self._watches.get(slot)
            if watch is not None and watch.stage == 0:
                self._term(watch, reason, time.monotonic(), self._grace if grace is None else grace)
            self._cond.notify()

    # -- the thread ---------------------------------------------------------------------
    def _term(self, watch: Watch, reason: str, now: float, grace: float) -> None:
        if getattr(watch.child, "is_thread", False):
            grace = 0.0  # nothing stronger exists for a thread: undead one second later
        watch.reason, watch.stage, watch.term_at, watch.next_at = reason, 1, now, now + grace
        watch.child.signal_group(signal.SIGTERM)

    def _step(self, now: float) -> float | None:
        """Advance every due watch; return when the next one is due."""
        lease_unsafe = now - self.last_renewal > self._lease * 0.75
        upcoming: list[float] = []
        for watch in self._watches.values():
            if watch.stage == 0:
                if lease_unsafe:
                    log.error("Leases not renewed for %.1f s; killing child %d", now - self.last_renewal,
                              watch.child.pid)
                    self._term(watch, "lease", now, 0.0)
                elif watch.deadline is not None and now >= watch.deadline:
                    self._term(watch, "timeout", now, self._grace)
                elif watch.deadline is not None:
                    upcoming.append(watch.deadline)
            if watch.stage == 1 and now >= watch.next_at:
                watch.stage, watch.next_at = 2, now + UNDEAD_AFTER_SECONDS
                watch.child.signal_group(signal.SIGKILL)
            elif watch.stage == 2 and now >= watch.next_at:
                watch.stage = 3
                self._wake()
            if watch.stage in (1, 2):
                upcoming.append(watch.next_at)
        if self._watches:
            upcoming.append(self.last_renewal + self._lease * 0.75 + 0.001)
        return min(upcoming) if upcoming else None

    def _run(self) -> None:
        with self._cond:
            while not self._stop:
                due = self._step(time.monotonic())
                timeout = None if due is None else max(0.0, due - time.monotonic())
                self._cond.wait(timeout)
