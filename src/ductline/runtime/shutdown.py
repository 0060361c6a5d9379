"""The bound on a worker process's exit once a signal asked it to stop.

The worker's loop stops on its own: it ends when nothing runs, or kills what still
runs at the end of the shutdown grace and records it. But the loop, and what runs
after it (its last write to the worker table, closing the connection pool), can
be held by the database: an unreachable PostgreSQL makes a checkout wait for the
pool, a server that silently dropped off holds a query, another process's write
lock holds a SQLite statement for the busy timeout. An orchestrator then kills the
process at its own stop timeout instead, mid-write.

So a guard thread ends the process when the loop could not:

- at the end of the shutdown grace, if nothing is at stake (no attempt running, no
  outcome waiting to be recorded): an idle worker exits within its grace whatever
  state its database is in. A worker on its way out on its own -- it killed what
  still ran at the end of its grace, or its loop ended and it is stopping its
  children and writing its last row -- counts as having something at stake for
  `FINISH_SECONDS` from then: it was not held, and ended there it would leave its
  row ``stopping``;
- otherwise ``overtime`` seconds later (the kill of what still runs, and the time
  unrecorded outcomes may wait for the database while their leases hold; see
  docs/howto/deployment.md).

A worker ended this way writes nothing more: its row in the worker table is judged
lost a lease after its last heartbeat (`ductline.model.workers`), its children die
with it (they are started with a parent-death signal), and an outcome it could not
record is the attempt's lease expiring (the job runs again).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Callable

from ductline.clock import Clock, SystemClock

log = logging.getLogger("ductline.worker")

# How often the guard looks (seconds).
CHECK_EVERY_SECONDS = 0.1
# How long a worker on its way out on its own (`ExitGuard.finishing`) may take to
# stop its children and write its last row before the guard ends it (seconds).
FINISH_SECONDS = 3.0


class ExitGuard:
    """Ends the process when a stopping worker overstays (see the module docstring).

    It learns of SIGTERM and SIGINT through the interpreter's wake-up descriptor
    (`signal.set_wakeup_fd`), written by the C-level handler the moment a signal
    arrives: a Python handler runs only once the main thread is back in the
    interpreter, which a SQLite busy wait or a pool checkout can delay for their
    whole timeout. The grace is counted from the first signal; a second SIGINT ends
    it at once (as the worker's own handler does).

    Args:
        clock: the monotonic clock.
        grace: the shutdown grace (seconds).
        at_stake: whether an attempt runs or an outcome waits to be recorded.
        overtime: seconds past the grace a worker with something at stake gets.
        end: ends the process with an exit status (default `os._exit`: the threads
            holding the database are not waited for).
    """

    def __init__(self, clock: Clock, *, grace: float, at_stake: Callable[[], bool], overtime: float,
                 end: Callable[[int], None] = os._exit) -> None:
        self._clock = clock
        self._grace = grace
        self._at_stake = at_stake
        self._overtime = overtime
        self._end = end
        self._lock = threading.Lock()
        self.deadline: float | None = None  # monotonic: the end of the grace, once signalled
        self._interrupts = 0
        self._finishing: float | None = None  # monotonic: when the worker last said it is on its way out

    def hand_over(self, at_stake: Callable[[], bool], overtime: float) -> None:
        """Judge what is at stake with ``at_stake`` from now on: a guard listening
        since the process started (nothing at stake while it opens its database and
        imports its apps) is handed to the worker once it is built."""
        with self._lock:
            self._at_stake = at_stake
            self._overtime = overtime

    def finishing(self) -> None:
        """The worker is on its way out on its own: it killed what still ran at the end
        of its grace, or its loop ended. Its last steps (recording the kills, stopping
        its children, its last write) count as at stake for `FINISH_SECONDS`."""
        with self._lock:
            self._finishing = self._clock.now()

    @property
    def overtime(self) -> float:
        """Seconds past the grace a worker with something at stake gets."""
        return self._overtime

    def listen(self) -> None:
        """Watch for the stop signals (call from the main thread, once)."""
        reader, writer = socket.socketpair()
        writer.setblocking(False)  # the C handler must never block
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self._keep = (reader, writer)  # the descriptors live as long as the guard
        threading.Thread(target=self._read, args=(reader,), daemon=True, name="ductline-exit-signals").start()
        threading.Thread(target=self._watch, daemon=True, name="ductline-exit-guard").start()

    def signalled(self, signum: int) -> None:
        """A stop signal arrived (from the descriptor's thread, or a test)."""
        if signum not in (signal.SIGTERM, signal.SIGINT):
            return
        now = self._clock.now()
        with self._lock:
            if signum == signal.SIGINT:
                self._interrupts += 1
            if self.deadline is None:
                self.deadline = now + self._grace
            elif signum == signal.SIGINT and self._interrupts >= 2:
                self.deadline = min(self.deadline, now)

    def overdue(self, now: float) -> str | None:
        """Why the process must end now, or ``None``."""
        deadline = self.deadline
        if deadline is None or now < deadline:
            return None
        finishing = self._finishing
        if not self._at_stake() and (finishing is None or now >= finishing + FINISH_SECONDS):
            return "the shutdown grace is over and nothing runs"
        if now >= deadline + self._overtime:
            return f"the shutdown grace is over, and {self._overtime:g} s more"
        return None

    def _read(self, reader: socket.socket) -> None:
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                self.signalled(signum)

    def _watch(self) -> None:
        while True:
            why = self.overdue(self._clock.now())
            if why is not None:
                break
            self._clock.sleep(CHECK_EVERY_SECONDS)
        log.error("Worker still not stopped (%s): the database holds it; exiting now without "
                  "waiting for it", why)
        for handler in logging.getLogger().handlers + log.handlers:
            try:
                handler.flush()
            except Exception:  # a broken handler must not keep the process alive
                pass
        self._end(0)


def bound_startup(grace: float) -> ExitGuard:
    """A listening guard for a worker process that is still starting: opening its
    database (a migration waits for another session's lock, a SQLite write lock for
    the busy timeout) and importing its apps hold the main thread, where a signal's
    Python handler would wait for them. Nothing is at stake yet, so the process ends
    at the grace; `ductline.runtime.worker.Worker.install_signal_handlers` takes the
    guard over once the worker is built. Call from the main thread, after the stop
    signals have Python handlers (the wake-up descriptor is written only for those).

    Args:
        grace: the shutdown grace (seconds).
    """
    guard = ExitGuard(SystemClock(), grace=grace, at_stake=lambda: False, overtime=0.0)
    guard.listen()
    return guard
