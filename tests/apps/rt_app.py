"""Pipelines exercised by the runtime and durability tests (imported by workers
as ``rt_app`` from tests/apps)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from pathlib import Path

import ductline
from ductline import Pipeline, Step


# -- plain chain ----------------------------------------------------------------
def add_one(x):
    return x + 1


def double(x):
    return x * 2


async def async_square(x):
    await asyncio.sleep(0)
    return x * x


chain = Pipeline("rt_chain").start(add_one).chain(to=double).chain(to=async_square)


# -- class step and context --------------------------------------------------------
class Greet(Step):
    def execute(self):
        ctx = ductline.context()
        ctx.set("greeted", self.input)
        return {"hello": self.input, "run_id": ctx.run_id, "attempt": ctx.attempt, "step": ctx.step}


def read_context(value):
    ctx = ductline.context()
    return {"greeted": ctx.get("greeted"), "missing": ctx.get("nope", "default"), "prev": value}


context_pipeline = Pipeline("rt_context").start(Greet).chain(to=read_context)


# -- retries -------------------------------------------------------------------------
def flaky(x):
    """Fails on attempts 1 and 2, succeeds on 3."""
    attempt = ductline.context().attempt
    if attempt < 3:
        raise RuntimeError(f"flaky failure on attempt {attempt}")
    return {"x": x, "attempt": attempt}


flaky_pipeline = Pipeline("rt_flaky").start(flaky, max_retry=3, retry_delay=0)


def always_fails(x):
    raise ValueError("bad \x00 input")


def never_runs(x):
    return x


def write_halt_file(reasons):
    Path(os.environ["RT_HALT_FILE"]).write_text(repr(reasons))
    return None


failing = (Pipeline("rt_failing").start(always_fails, max_retry=2, retry_delay=0)
           .chain(to=never_runs).on_halt(write_halt_file))


# -- timeouts (the child is killed) -------------------------------------------------
def sleep_in_c(seconds):
    ctypes.CDLL(None).sleep(int(seconds))
    return "woke up"


timeout_pipeline = Pipeline("rt_timeout").start(sleep_in_c, timeout=1, max_retry=2, retry_delay=0)


# -- crashes -------------------------------------------------------------------------
def crash(x):
    os._exit(3)


crash_pipeline = Pipeline("rt_crash").start(crash, max_crash=2)


CRASH_AFTER_SECONDS = 0.3


def note_pid_then_crash(path):
    """The first call dies `CRASH_AFTER_SECONDS` after it was called, the second
    returns; each notes in ``path`` its process id and when it was called (seconds
    since boot, the clock of /proc/PID/stat)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {time.clock_gettime(time.CLOCK_BOOTTIME)}\n")
    if len(Path(path).read_text(encoding="utf-8").splitlines()) == 1:
        time.sleep(CRASH_AFTER_SECONDS)
        os._exit(3)
    return "second child"


pid_crash = Pipeline("rt_pid_crash").start(note_pid_then_crash, max_crash=2)


# -- fan-out / fan-in -------------------------------------------------------------------
def make_list(n):
    return list(range(n))


def slow_square(x):
    time.sleep(0.01 * (x % 3))
    return x * x


def gather(xs):
    return xs


fan = Pipeline("rt_fan").start(make_list).expand(to=slow_square).collapse(into=gather)


def branch_a(x):
    return f"a{x}"


def branch_b(x):
    time.sleep(0.05)
    return f"b{x}"


def branch_b2(x):
    return x + "!"


def joined(pair):
    return pair


divided = (Pipeline("rt_divide").start(add_one).divide(to=[branch_b, branch_a]))
divided.branch(branch_b).chain(to=branch_b2)
divided.combine(into=joined)


def route(x):
    return "big" if x > 10 else "small"


def on_big(x):
    return "took big"


def on_small(x):
    return "took small"


def finish(x):
    return x


diverted = (Pipeline("rt_divert").start(route).divert(to={"big": on_big, "otherwise": on_small})
            .converge(into=finish))


# -- bad output ----------------------------------------------------------------------------
def returns_set(x):
    return {1, 2}


bad_output = Pipeline("rt_bad_output").start(returns_set, max_retry=1)


# -- safe-only retry -------------------------------------------------------------------------
def pays_then_fails(x):
    ductline.cross_boundary("charged the card")
    raise RuntimeError("failed after paying")


unsafe = Pipeline("rt_unsafe").start(pays_then_fails, retry_delay=0)


# -- slow step for durability tests ------------------------------------------------------------
def slow_step(x):
    time.sleep(0.5)
    return x


slow_chain = Pipeline("rt_slow").start(slow_step).chain(to=double)


# -- run deadline, cancel, fail-fast ------------------------------------------------------------
def quick(x):
    return x


def stuck(x):
    ctypes.CDLL(None).sleep(60)
    return x


def after(x):
    return x


deadline_chain = Pipeline("rt_deadline_chain", timeout=2).start(quick).chain(to=stuck).chain(to=after)

def nap(seconds):
    time.sleep(seconds)
    return seconds


# Short runs without a deadline: a backlog of them keeps a worker's claims from running dry.
busy = Pipeline("rt_busy").start(nap)

# Runs of a 2 s deadline; one that sleeps 30 s uses all of its own.
queued_deadline = Pipeline("rt_queued_deadline", timeout=2).start(nap)

deadline_in_delay = Pipeline("rt_deadline_delay", timeout=2).start(quick).chain(to=after, delay=30)


def fast_branch(x):
    return "fast"


deadline_divide = (Pipeline("rt_deadline_divide", timeout=2).start(quick)
                   .divide(to=[fast_branch, stuck]).combine(into=after))


def fails_at_once(x):
    raise RuntimeError("boom")


# Halts within a second (one attempt, no retry), well before its 2 s deadline.
halts_before_deadline = Pipeline("rt_halt_deadline", timeout=2).start(quick).chain(to=fails_at_once, max_retry=1)

fail_fast = (Pipeline("rt_fail_fast", on_failure="fail_fast").start(quick)
             .divide(to=[fails_at_once, stuck], max_retry=1).combine(into=after))

cancellable = Pipeline("rt_cancellable").start(stuck).chain(to=after)


# -- one step: its completion completes the run (cancel races) --------------------------
single = Pipeline("rt_single").start(quick)
