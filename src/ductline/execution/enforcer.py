"""The thread that kills: deadlines and lease safety, never blocked by the caller.

A worker loop talks to the database, and a database call can block (a lock, an
outage, a slow network); the in-process executor's event loop may be busy with
other steps. Killing must wait for neither, so a dedicated thread owns the kill
path: SIGTERM to the child's process group at the deadline, SIGKILL after the
grace, and *undead* one second later if it still has not exited (docs/howto/timeouts.md,
"How the kill works"). For a worker it also kills every child whose lease could expire,
because the worker has not renewed its leases for three quarters of the lease:
two live executions of one job must never overlap.

The enforcer only signals. Whoever started the child waits on its pidfd, learns
from `settle` why it died, and collects undead watches with `take_undead` when
the enforcer's ``wake`` callback says there are some.
"""

from __future__ import annotations

import logging
import select
import signal
import threading
import time
from dataclasses import dataclass
from enum import IntEnum
from typing import Callable, Protocol

from ductline.clock import Clock, SystemClock
from ductline.execution.watchdog import CHILD_HORIZON_SHARE
from ductline.model.endings import FRAME_BOUND_SECONDS, KillReason

Reason = KillReason  # why a child is killed: the rulebook's names (`ductline.model.endings`)

log = logging.getLogger("ductline.execution")

# How long a child may take to vanish after SIGKILL before it is declared undead
# (a process in kernel D state, or a thread that does not unwind).
UNDEAD_AFTER_SECONDS = 1.0

# Leases are renewed every third of the lease; a worker that has not renewed for
# this share of it kills its children before anyone else may claim their jobs.
LEASE_SAFETY_SHARE = 0.75


class Stage(IntEnum):
    RUNNING = 0
    TERM_SENT = 1
    KILL_SENT = 2
    UNDEAD = 3


class Killable(Protocol):
    """What the enforcer needs of what it kills: a `ductline.execution.process.Child`
    or a thread-isolated attempt (for which SIGTERM raises an exception in the
    thread and SIGKILL can do nothing more)."""

    @property
    def pid(self) -> int: ...

    def signal_group(self, sig: int) -> None: ...


def _tell_horizon(child: Killable, horizon: float) -> None:
    """Give a child process its lease horizon (a thread has no use for one)."""
    set_horizon = getattr(child, "set_horizon", None)
    if set_horizon is not None:
        set_horizon(horizon)


@dataclass(slots=True)
class Watch:
    child: Killable
    deadline: float | None         # monotonic seconds
    stage: Stage = Stage.RUNNING
    next_at: float = 0.0           # when the next stage is due
    reason: Reason | None = None
    term_at: float | None = None   # when SIGTERM was sent (overrun measurements)
    frame_by: float | None = None  # a frame the child began must have arrived by then
    channel: int | None = None     # the parent's end of the child's channel (read pending?)


class Enforcer:
    """Kills children on time from its own thread.

    Args:
        grace: seconds between SIGTERM and SIGKILL.
        wake: called (from the enforcer's thread) when a watch became undead and
            its owner must look (`take_undead`).
        clock: the monotonic clock deadlines are given in.
        undead_after: seconds after SIGKILL (for a thread: after the timeout was
            raised in it) before a watch that has not ended becomes undead.
        lease_seconds: the lease length of a worker; its children are killed when
            the last renewal is older than `LEASE_SAFETY_SHARE` of it. ``None``
            (no leases, the in-process executor) disables this.
    """

    def __init__(self, grace: float, wake: Callable[[], None], clock: Clock | None = None, *,
                 lease_seconds: float | None = None, undead_after: float = UNDEAD_AFTER_SECONDS) -> None:
        self._grace = grace
        self._undead_after = undead_after
        self._wake = wake
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lease = lease_seconds
        self._cond = threading.Condition()
        self._watches: dict[int, Watch] = {}
        self._wake_at: float | None = None  # when the thread wakes next by itself (None: only when told)
        self._stop = False
        self.last_renewal = self._clock.now()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ductline-enforcer")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def renewed(self, at: float) -> None:
        """The leases were renewed (or a claim took fresh ones) at monotonic ``at``;
        every watched child learns its new horizon."""
        with self._cond:
            self.last_renewal = at
            for watch in self._watches.values():
                if watch.stage is Stage.RUNNING:
                    _tell_horizon(watch.child, self._horizon())

    def _horizon(self) -> float:
        """When a child must stop itself if no renewal comes (`ductline.execution.watchdog`),
        on the real monotonic clock the child reads (the enforcer's may be injected)."""
        if self._lease is None:
            return 0.0
        due = self.last_renewal + self._lease * CHILD_HORIZON_SHARE
        return time.monotonic() + (due - self._clock.now())

    def watch(self, key: int, child: Killable, deadline: float | None) -> None:
        """Watch ``child`` under ``key`` (a worker's slot); kill it at ``deadline``."""
        with self._cond:
            self._watches[key] = Watch(child, deadline)
            _tell_horizon(child, self._horizon())
            # Woken only if it must look sooner than it would: on a busy worker a watch
            # starts with every attempt, and waking the thread each time cost two
            # context switches per attempt.
            if self._wake_at is None or (deadline is not None and deadline < self._wake_at):
                self._cond.notify()

    def settle(self, key: int) -> Watch | None:
        """Stop watching a key whose child ended; returns its watch (its ``reason``
        says why it was killed, ``None`` if it was not)."""
        with self._cond:
            return self._watches.pop(key, None)

    def finish(self, key: int) -> bool:
        """The attempt sent its result: stop watching and return ``True``, unless
        its kill already began (then the result must be dropped: ``False``)."""
        with self._cond:
            watch = self._watches.get(key)
            if watch is None or watch.stage is not Stage.RUNNING:
                return False
            del self._watches[key]
            return True

    def take_undead(self) -> list[tuple[int, Watch]]:
        """Watches whose child survived SIGKILL; they are no longer watched."""
        with self._cond:
            found = [(k, w) for k, w in self._watches.items() if w.stage is Stage.UNDEAD]
            for k, _ in found:
                del self._watches[k]
            return found

    def move_deadline(self, key: int, deadline: float | None) -> None:
        """A scaled timeout was reported: the attempt's deadline changes."""
        with self._cond:
            watch = self._watches.get(key)
            if watch is not None and watch.stage is Stage.RUNNING:
                watch.deadline = deadline
            self._cond.notify()

    def frame_pending(self, key: int, since: float | None, channel: int) -> None:
        """A frame from the child is incomplete, its last bytes read at ``since``
        (``time.monotonic()`` seconds; ``None``: no frame is incomplete). If nothing
        more of it has been read `FRAME_BOUND_SECONDS` later, and nothing waits
        unread on ``channel`` (the parent's end, whose reader may be busy), the
        child is killed for a garbled channel (`Reason.GARBLED`): it wrote bytes out
        of step with the protocol, and its result, if any, was swallowed by them."""
        with self._cond:
            watch = self._watches.get(key)
            if watch is None or watch.stage is not Stage.RUNNING:
                return
            watch.channel = channel
            if since is None:
                watch.frame_by = None
                return
            watch.frame_by = self._clock.now() + (since + FRAME_BOUND_SECONDS - time.monotonic())
            if self._wake_at is None or watch.frame_by < self._wake_at:
                self._cond.notify()

    def state(self, key: int) -> Watch | None:
        with self._cond:
            return self._watches.get(key)

    def deadlines(self) -> dict[int, float]:
        """The deadline (monotonic seconds) of every watched key that has one and
        has not become undead: when each attempt ends at the latest, give or take
        the kill's grace."""
        with self._cond:
            return {k: w.deadline for k, w in self._watches.items()
                    if w.deadline is not None and w.stage is not Stage.UNDEAD}

    def kill(self, key: int, reason: Reason, grace: float | None = None) -> None:
        """Begin killing a key's child now (lease lost, shutdown, cancel, protocol
        broken); a kill already under way goes on as it was."""
        with self._cond:
            watch = self._watches.get(key)
            if watch is not None and watch.stage is Stage.RUNNING:
                self._term(watch, reason, self._clock.now(), self._grace if grace is None else grace)
            self._cond.notify()

    def tick(self, now: float) -> float | None:
        """Advance every due watch to its next stage; returns when the next one is
        due. The thread calls it; tests with a fake clock may call it directly."""
        with self._cond:
            return self._step(now)

    # -- the thread (every method below runs with the condition held) ---------------------
    def _term(self, watch: Watch, reason: Reason, now: float, grace: float) -> None:
        if getattr(watch.child, "is_thread", False):
            grace = 0.0  # nothing stronger exists for a thread: undead one second later
        watch.reason, watch.stage, watch.term_at, watch.next_at = reason, Stage.TERM_SENT, now, now + grace
        # First, so a child whose step ends within the grace cannot start what was sent ahead to it.
        take_back = getattr(watch.child, "take_back_sent_ahead", None)
        if take_back is not None:
            take_back()
        watch.child.signal_group(signal.SIGTERM)

    def _lease_unsafe(self, now: float) -> bool:
        return self._lease is not None and now - self.last_renewal > self._lease * LEASE_SAFETY_SHARE

    def _step(self, now: float) -> float | None:
        lease_unsafe = self._lease_unsafe(now)
        upcoming: list[float] = []
        for watch in self._watches.values():
            if watch.stage is Stage.RUNNING:
                if lease_unsafe:
                    log.error("Leases not renewed for %.1f s; killing child %d", now - self.last_renewal,
                              watch.child.pid)
                    self._term(watch, Reason.LEASE, now, 0.0)
                elif watch.deadline is not None and now >= watch.deadline:
                    self._term(watch, Reason.TIMEOUT, now, self._grace)
                elif watch.frame_by is not None and now >= watch.frame_by:
                    if watch.channel is not None and _unread(watch.channel):
                        watch.frame_by = now + FRAME_BOUND_SECONDS  # its reader is late, not the child
                    else:
                        log.error("Child %d left a frame incomplete for %g s; killing it", watch.child.pid,
                                  FRAME_BOUND_SECONDS)
                        self._term(watch, Reason.GARBLED, now, 0.0)
                if watch.stage is Stage.RUNNING:
                    upcoming += [at for at in (watch.deadline, watch.frame_by) if at is not None]
            if watch.stage is Stage.TERM_SENT and now >= watch.next_at:
                watch.stage, watch.next_at = Stage.KILL_SENT, now + self._undead_after
                watch.child.signal_group(signal.SIGKILL)
            elif watch.stage is Stage.KILL_SENT and now >= watch.next_at:
                watch.stage = Stage.UNDEAD
                self._wake()
            if watch.stage in (Stage.TERM_SENT, Stage.KILL_SENT):
                upcoming.append(watch.next_at)
        if self._watches and self._lease is not None:
            upcoming.append(self.last_renewal + self._lease * LEASE_SAFETY_SHARE + 0.001)
        return min(upcoming) if upcoming else None

    def _run(self) -> None:
        with self._cond:
            while not self._stop:
                due = self._step(self._clock.now())
                # Waits on the real clock; a fake clock's tests drive `tick` themselves.
                timeout = None if due is None else max(0.0, due - self._clock.now())
                self._wake_at = due
                self._cond.wait(timeout)
                self._wake_at = None


def _unread(fd: int) -> bool:
    """Bytes wait on ``fd`` (poll: a descriptor may be numbered past select's 1024)."""
    poller = select.poll()
    try:
        poller.register(fd, select.POLLIN)
        return any(events & select.POLLIN for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False
