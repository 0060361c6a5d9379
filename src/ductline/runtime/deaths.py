"""When each child process died, noted by a thread that does nothing else.

The worker's loop learns of a child's death when it next waits, which may be
hundreds of milliseconds later on a busy worker (it was recording outcomes or
claiming). How late a timeout's kill was (``timeout.overrun``: from the deadline
to the child's death) must not include that: a thread of its own waits on the
pidfds of the running children and notes the moment each becomes readable (the
process exited). A pidfd stays readable, so the loop's own wait still sees the
death as before.
"""

from __future__ import annotations

import os
import select
import threading
from typing import Any

from ductline.clock import Clock


# Deaths remembered at most (those of children that ended without a timeout are never asked for).
MAX_REMEMBERED = 1024


class DeathClock:
    """Notes when watched processes exit (monotonic seconds, the worker's clock).

    Args:
        clock: the clock the times are read on.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._watched: dict[int, int] = {}   # pid -> its pidfd, while alive
        self._died: dict[int, float] = {}    # pid -> when it was seen gone (oldest first)
        self._wake: tuple[int, int] | None = None  # the thread's wake-up pipe, once started
        self._closed = False

    def watch(self, runner: Any) -> None:
        """Watch ``runner`` (a child process with ``pid`` and a pidfd ``sentinel``;
        a thread-isolated attempt is ignored)."""
        pid, fd = getattr(runner, "pid", None), getattr(runner, "sentinel", None)
        if getattr(runner, "is_thread", False) or not isinstance(pid, int) or not isinstance(fd, int):
            return
        with self._lock:
            if self._closed:
                return
            if self._wake is None:  # started with the first attempt: a worker never run holds nothing
                read, write = os.pipe()
                os.set_blocking(write, False)
                self._wake = (read, write)
                threading.Thread(target=self._run, args=(read, write), daemon=True, name="ductline-deaths").start()
            self._died.pop(pid, None)
            if self._watched.get(pid) == fd:
                # A reused child, watched since an attempt before: the thread polls its
                # pidfd already. Waking the thread at every start put a context switch
                # (and its turn for the interpreter lock) between the claim and the
                # task sent to the child.
                return
            self._watched[pid] = fd
        self._nudge()

    def died_at(self, runner: Any) -> float | None:
        """When ``runner`` was seen exiting (``None``: not seen), and forget it."""
        pid = getattr(runner, "pid", None)
        with self._lock:
            self._watched.pop(pid, None)  # type: ignore[arg-type]
            return self._died.pop(pid, None)  # type: ignore[arg-type]

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._nudge()

    def _nudge(self) -> None:
        if self._wake is None:
            return
        try:
            os.write(self._wake[1], b"x")
        except OSError:  # full (a wake-up is pending anyway), or closed
            pass

    def _run(self, wake_r: int, wake_w: int) -> None:
        while not self._closed:
            with self._lock:
                by_fd = {fd: pid for pid, fd in self._watched.items()}
            poller = select.poll()
            poller.register(wake_r, select.POLLIN)
            for fd in by_fd:
                poller.register(fd, select.POLLIN)
            events = poller.poll()
            now = self._clock.now()
            for fd, event in events:
                if fd == wake_r:
                    try:
                        os.read(wake_r, 4096)
                    except OSError:
                        pass
                    continue
                pid = by_fd[fd]
                with self._lock:
                    if self._watched.get(pid) != fd:
                        continue  # forgotten meanwhile
                    del self._watched[pid]
                    if not event & select.POLLNVAL:  # closed by its owner: no death seen here
                        self._died[pid] = now
                        if len(self._died) > MAX_REMEMBERED:  # deaths nobody asked about
                            del self._died[next(iter(self._died))]
        with self._lock:
            self._wake = None
        os.close(wake_r)
        os.close(wake_w)
