"""Waking a sleeping worker: a self-pipe written by signal handlers and, on
PostgreSQL, by a thread that LISTENs for new or retried jobs."""

from __future__ import annotations

import os
import threading
from typing import Any

from ductline.store import Store


class Wakeup:
    """Args:
        origin: this worker's id. A notification it sent itself (a recording
            transaction of its own, `ductline.store.tx.Tx.origin`) is ignored: that
            transaction claimed after making its jobs ready, and asked for its timers.
    """

    def __init__(self, origin: str = "") -> None:
        self._origin = origin
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._flag = threading.Event()
        self._cancel = threading.Event()
        self._stop = threading.Event()

    def fileno(self) -> int:
        return self._read

    def wake(self, payload: str = "") -> None:
        """Safe from signal handlers and other threads. ``payload`` ``"cancel"``
        asks the worker to renew its leases at once."""
        if payload and payload == self._origin:
            return
        if payload == "cancel":
            self._cancel.set()
        self._flag.set()
        self.nudge()

    def nudge(self) -> None:
        """Wake the loop without asking it to claim (e.g. a recording is done: it
        claimed in its own transaction). Safe from signal handlers and other threads."""
        try:
            os.write(self._write, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full: the loop is waking anyway

    def cancel_pending(self) -> bool:
        """A run was cancelled and the leases were not renewed since (`take_cancel`)."""
        return self._cancel.is_set()

    def take_cancel(self) -> bool:
        if self._cancel.is_set():
            self._cancel.clear()
            return True
        return False

    def pending(self) -> bool:
        return self._flag.is_set()

    def clear(self) -> None:
        self._flag.clear()

    def drain(self) -> None:
        try:
            while os.read(self._read, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def listen(self, store: Store) -> threading.Thread | None:
        """Start the LISTEN thread if the store supports it."""
        listen = getattr(store.dialect, "listen", None)
        # Behind a transaction pooler without a direct LISTEN URL the worker polls
        # (every ``poll_interval``): the not-before timer still fires on time.
        if listen is None or not getattr(store.dialect, "listens", False):
            return None
        thread = threading.Thread(target=listen, args=(self.wake, self._stop), daemon=True,
                                  name="ductline-listen")
        thread.start()
        return thread

    def close(self, thread: Any) -> None:
        self._stop.set()
        if thread is not None:
            thread.join(timeout=2)
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
