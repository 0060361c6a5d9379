"""How a worker's new step children start: the failures in a row since the last
child that started, and what the last one reported.

A child imports the apps before it says it is ready; one that cannot (the app
raises in the child, or the child dies first) is replaced, and so is its
replacement. The worker goes on restarting them -- a fixed file or environment
makes the next one start -- but runs nothing meanwhile, so its heartbeat says so:
`ductline.model.workers.condition` judges these counts. Past a few failures the
next start waits (`ductline.model.workers.start_backoff_seconds`): `due_at`.

A child that said it was ready and then exits on its own within `SETTLE_SECONDS`,
before any attempt (a thread of the app that ends the process), failed its start
too: such children restarted back to back while the worker counted each of them a
start that worked. After one of those, a start works once its child outlives
`SETTLE_SECONDS`, not when it says it is ready.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from ductline.execution.process import Child
from ductline.runtime.folding import FoldedWarning
from ductline.model.workers import START_FAILURES_TOLERATED, start_backoff_seconds, start_problem

log = logging.getLogger("ductline.worker")

# The error type of a child's FATAL message whose text already names the app
# (`ductline.apps.import_app`): the type adds nothing to the problem's text.
_NAMED_APP_TYPE = "ductline.errors.TargetError"
# At most one line a minute about children that exit on their own while idle (seconds).
IDLE_EXIT_LOG_EVERY_SECONDS = 60.0
# A child that exits on its own this soon after it said it was ready, before any
# attempt, failed its start (seconds; see the module docstring).
SETTLE_SECONDS = 5.0


class Starts:
    """The worker's record of its children's starts.

    Args:
        changed: called when the worker's health turns (unhealthy or healthy
            again), so that its row says so at once rather than at its next heartbeat.
        clock: the monotonic clock (seconds).
        stopping: whether the worker stops (it ends its children itself then).
    """

    def __init__(self, changed: Callable[[], None] = lambda: None, clock: Callable[[], float] = time.monotonic,
                 stopping: Callable[[], bool] = lambda: False) -> None:
        self.failed = 0  # new children that failed to start in a row
        self.error: str | None = None  # what the last of them reported, if it did
        self._changed = changed
        self._clock = clock
        self._failed_at = 0.0  # monotonic: when the last of them was found gone
        # The failures the wait before the next start counts (`start_backoff_seconds`):
        # children started together (one per slot, and the spares) that fail together
        # make one round, counted once. Counted per child, a worker with many slots
        # went past the doubling at once and waited the cap before its first new child.
        self._rounds = 0
        self._stopping = stopping
        # A child that said it was ready and exited before any attempt, on its own (a
        # thread of the app that ends the process, a kill from outside), is replaced
        # like one that failed its start; unsaid, such children restarted back to back
        # with nothing in the worker's log.
        self._idle_exits = FoldedWarning(log, IDLE_EXIT_LOG_EVERY_SECONDS, clock)
        # A child died soon after it said it was ready: the next start counts as
        # working once its child outlived SETTLE_SECONDS (`_settle`), not at its READY.
        self._unsettled = False
        self._ready_at = 0.0  # monotonic: when the last child said it was ready

    def failures(self) -> int:
        """The new children that failed to start in a row (`failed`), once a start
        that has not settled yet is judged (`SETTLE_SECONDS`)."""
        self._settle()
        return self.failed

    def due_at(self) -> float | None:
        """When the next child may start (monotonic seconds), if that is ahead; ``None``: now."""
        self._settle()
        due = self._failed_at + start_backoff_seconds(self._rounds)
        return due if due > self._clock() else None

    def fatal(self, child: Child, error_type: str, error: str) -> None:
        """``child`` reported that it could not import the apps (its FATAL message);
        its start is counted failed when it is gone (`gone`)."""
        child.start_error = error if error_type == _NAMED_APP_TYPE else f"{error_type}: {error}"

    def ready(self, child: Child) -> None:
        """``child`` said it is ready: its start worked, and the worker is healthy again
        -- or, after a child that died soon after it said so, once it outlives
        `SETTLE_SECONDS` (`_settle`)."""
        child.ready_at = self._ready_at = self._clock()
        if not self._unsettled:
            self._worked()

    def _settle(self) -> None:
        if self._unsettled and self._ready_at > self._failed_at and \
                self._clock() - self._ready_at >= SETTLE_SECONDS:
            self._worked()

    def _worked(self) -> None:
        if self.failed >= START_FAILURES_TOLERATED:
            log.warning("A step child started after %d that failed; the worker runs steps again", self.failed)
            self._changed()
        self.failed, self.error, self._rounds, self._unsettled = 0, None, 0, False

    def gone(self, child: Child) -> None:
        """``child`` ended: a failed start if it never said it was ready."""
        now = self._clock()
        if child.ready:
            if child.used or self._stopping():
                return
            code = child.process.returncode
            self._idle_exits.warning("A step child exited on its own while idle, before any attempt "
                                     "(exit code %s); it is replaced", code)
            lived = now - child.ready_at
            if lived >= SETTLE_SECONDS:
                return
            self._unsettled = True
            child.start_error = (f"a child exited on its own (exit code {code}) {lived:.1f} s after it said "
                                 f"it was ready, before any attempt")
        if now >= self._failed_at + start_backoff_seconds(self._rounds):
            self._rounds += 1  # not a child of the round whose wait runs now
        self.failed += 1
        self.error = child.start_error
        self._failed_at = now
        if self.failed == START_FAILURES_TOLERATED:
            log.error("Worker unhealthy: %s; it keeps restarting them", start_problem(self.failed, self.error))
            self._changed()
