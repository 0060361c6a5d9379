"""Steps that resist being stopped, for the kill-path tests (imported as ``kill_app``)."""

from __future__ import annotations

import ctypes
import os
import signal
import sqlite3
import subprocess
import time

import psycopg

from ductline import Pipeline


def block_in_c(x):
    ctypes.CDLL(None).sleep(120)


def block_in_syscall(fifo):
    with open(fifo, "rb") as fh:  # nobody ever writes: open() blocks in the kernel
        return fh.read()


def spin(x):
    while True:
        pass


def ignore_sigterm(x):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)


def start_grandchildren(pidfile):
    # The last two leave the child's process group (killing the group misses them), and
    # the very last ignores SIGTERM: the SIGTERM that ends the child at once leaves it
    # to PID 1, where only the SIGKILL after the grace can reach it.
    procs = [subprocess.Popen(["sleep", "300"], start_new_session=new) for new in (False, False, True)]
    procs.append(subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 300"], start_new_session=True))
    with open(pidfile + ".tmp", "w") as fh:
        fh.write(" ".join(str(p.pid) for p in procs))
    os.rename(pidfile + ".tmp", pidfile)
    time.sleep(120)


def hold_transaction(url):
    """Take the engine's write lock (SQLite) or lock a ductline row (PostgreSQL), then hang."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.split("sqlite:///", 1)[1], isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
    else:
        conn = psycopg.connect(url)
        conn.execute("SELECT * FROM ductline_runs FOR UPDATE")
    time.sleep(120)


def fine(x):
    return "fine"


def pipeline_for(step, name):
    return Pipeline(name).start(step, timeout=1, max_retry=1).chain(to=fine, name=f"{name}_next")


c_block = pipeline_for(block_in_c, "kill_c")
syscall_block = pipeline_for(block_in_syscall, "kill_syscall")
spinning = pipeline_for(spin, "kill_spin")
# 3 s: the step must have installed SIG_IGN before the kill, even on a busy machine.
sigterm_ignored = Pipeline("kill_sigterm_ignored").start(ignore_sigterm, timeout=3, max_retry=1)
# 3 s: starting the grandchildren must finish well before the kill, even on a busy machine.
grandchildren = Pipeline("kill_grandchildren").start(start_grandchildren, timeout=3, max_retry=1)
transaction_held = pipeline_for(hold_transaction, "kill_transaction")


def slow_but_alive(x):
    time.sleep(4)  # longer than the 2 s lease of the test, shorter than the timeout
    return "done"


outlives_lease = Pipeline("kill_outlives_lease").start(slow_but_alive, timeout=30)
# Two quick steps: a run that needs the database's writes end to end, and nothing else.
follow_up = Pipeline("kill_follow_up").start(fine).chain(to=fine, name="kill_follow_up_next")


def fails(x):
    raise RuntimeError("again")


retry_spacing = Pipeline("kill_retry_spacing").start(fails, max_retry=3, retry_delay=1)


# -- thread isolation ------------------------------------------------------------------------
def io_step(x):
    return {"in_worker_process": True, "x": x}


def python_loop_in_thread(x):
    while True:  # interruptible between bytecodes: unwinds at once
        time.sleep(0.01)


_c_sleep = ctypes.CDLL(None).sleep  # resolved at import: the step's first call is already the C one


def c_block_in_thread(x):
    _c_sleep(10)  # holds no bytecode boundary: the thread cannot unwind


threaded = Pipeline("kill_threaded").start(io_step, isolation="thread")
thread_unwinds = Pipeline("kill_thread_unwinds").start(python_loop_in_thread, isolation="thread",
                                                       timeout=1, max_retry=1)
# 2 s: the thread must be inside its C call before the timeout, even on a loaded machine.
thread_undead = (Pipeline("kill_thread_undead").start(c_block_in_thread, isolation="thread", timeout=2,
                                                      max_retry=2, retry_delay=0))


# -- scaled timeouts ----------------------------------------------------------------------------
def payload_size(n):
    return n


def sleeps_three_seconds(n):
    time.sleep(3)
    return n


from ductline.dsl.timeouts import ScaledTimeout  # noqa: E402

scaled = Pipeline("kill_scaled").start(
    sleeps_three_seconds, max_retry=1,
    timeout=ScaledTimeout(floor=2, cap=10, size=payload_size, seconds_per_unit=1, unit=1))
