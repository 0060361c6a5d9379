"""Steps for bench/timeouts.py (imported as the module ``timeout_app``, by the
benchmark driver and by the worker's children alike).

Every step first appends ``"<kind> <pid> <time.monotonic()>"`` to the log file it is
given, so the driver knows when each attempt really began executing in its child
(CLOCK_MONOTONIC is system-wide on Linux: the child's clock is the parent's).
The stuck steps then block until killed:

* ``stuck_c``: in C, ``ctypes`` call of libc ``sleep(120)``;
* ``stuck_syscall``: in the kernel, ``read(2)`` of a FIFO nobody writes (opened
  read-write, so ``open`` returns at once and ``read`` blocks forever);
* ``stuck_ignore``: ignores SIGTERM, then blocks in libc ``sleep`` (only SIGKILL,
  ``kill_grace_seconds`` after the SIGTERM, ends it).

Each stuck step has ``timeout=1, max_retry=1``: one attempt, timed out, and the run
halts. ``noop`` is the ready work queued behind them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

from ductline import Pipeline


def _mark(log_path: str, kind: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{kind} {os.getpid()} {time.monotonic():.6f}\n".encode())
    finally:
        os.close(fd)


def stuck_c(log_path, fifo):
    _mark(log_path, "c")
    ctypes.CDLL(None).sleep(120)


def stuck_syscall(log_path, fifo):
    _mark(log_path, "syscall")
    fd = os.open(fifo, os.O_RDWR)  # a writer end exists (ours), so read() blocks, never EOF
    return os.read(fd, 1)


def stuck_ignore(log_path, fifo):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _mark(log_path, "ignore")
    ctypes.CDLL(None).sleep(120)


def noop(log_path, fifo):
    _mark(log_path, "noop")


timeout_c = Pipeline("bench_timeout_c").start(stuck_c, timeout=1, max_retry=1)
timeout_syscall = Pipeline("bench_timeout_syscall").start(stuck_syscall, timeout=1, max_retry=1)
timeout_ignore = Pipeline("bench_timeout_ignore").start(stuck_ignore, timeout=1, max_retry=1)
timeout_noop = Pipeline("bench_timeout_noop").start(noop)

PIPELINES = {"c": timeout_c, "syscall": timeout_syscall, "ignore": timeout_ignore, "noop": timeout_noop}
