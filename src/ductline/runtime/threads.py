"""``isolation="thread"``: a step run in a thread of the worker process.

Cheaper than a child for I/O steps, but it cannot be killed: at the deadline the
worker raises `ThreadTimeout` in the thread, which Python delivers only between
bytecodes. A thread that has not unwound one second later is *undead* (docs/howto/timeouts.md,
"Thread isolation and undead attempts"): it is left alone, its attempt is
recorded ``timed_out`` and retried (fencing keeps the zombie from ever recording a
result), ``thread.undead`` is counted, and its slot is gone until the process
restarts.

A `ThreadAttempt` looks like a `ductline.execution.process.Child` to the worker loop: the same message
protocol over a pipe, a sentinel that becomes readable when the thread ends, and
``signal_group`` (SIGTERM raises the exception; SIGKILL can do nothing more).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any

from ductline.execution import protocol
from ductline.execution.child import run_step
from ductline.execution.protocol import Task


class ThreadTimeout(BaseException):
    """Raised inside a thread-isolated step at its deadline. A `BaseException`, so
    a step's ``except Exception`` does not swallow it."""


class ThreadAttempt:
    """One attempt of a thread-isolated step, running in a thread of its own."""

    is_thread = True

    def __init__(self, task: Task) -> None:
        self.conn, thread_end = multiprocessing.Pipe(duplex=True)
        self.reader = protocol.Reader(self.conn.fileno())
        self.eof = False
        self.sentinel, self._done = os.pipe()
        # Set as the thread's last act, before the sentinel is written: from then on
        # it runs no more of the step, though `Thread.is_alive` may stay true a while.
        self.finished = False
        self._thread = threading.Thread(target=self._run, args=(thread_end, task), daemon=True,
                                        name=f"ductline-step-{task.step}")
        self._thread.start()
        self.pid = self._thread.ident or 0

    def _run(self, conn: Connection, task: Task) -> None:
        try:
            run_step(conn, task)
        except BaseException:  # noqa: BLE001 - the async timeout may land after the step returned
            pass
        finally:
            self.finished = True
            os.write(self._done, b"x")

    def send(self, message: Any) -> None:
        self.conn.send(message)

    def signal_group(self, sig: int) -> None:
        if sig == signal.SIGTERM and self.alive() and self._thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread.ident),
                                                       ctypes.py_object(ThreadTimeout))

    def alive(self) -> bool:
        return not self.finished and self._thread.is_alive()

    def reap(self) -> int | None:
        """0 once the thread has finished its step (its sentinel is readable then),
        ``None`` before. Waiting for `Thread.is_alive` to turn false instead would
        race the loop: the sentinel is readable, and its pipe at EOF, a moment
        before the interpreter retires the thread."""
        if not self.finished:
            return None
        self.close()
        return 0

    def close(self) -> None:
        for close in (self.conn.close, lambda: os.close(self.sentinel), lambda: os.close(self._done)):
            try:
                close()
            except OSError:
                pass

    def stop(self) -> None:
        pass
