"""Module-level steps for the in-process executor tests (imported by the tests and,
by name, by the child processes that run the sync ones).

Steps that report their process id write it to the file named by the argument,
so a test can check that the child is gone afterwards.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import pathlib
import time

import ductline

_libc = ctypes.CDLL(None)


# -- plain values -------------------------------------------------------------------
def add_one(x):
    return x + 1


def double(x):
    return x * 2


def identity(x=None):
    return x


def make_list(n):
    return list(range(n))


def square(x):
    return x * x


def tag_a(x):
    return f"a:{x}"


def tag_b(x):
    return f"b:{x}"


def tag_c(x):
    return f"c:{x}"


def gather(values):
    return values


def pairs(n):
    return [[i, i + 10] for i in range(n)]


def split_pair(pair):
    return pair


def negate(x):
    return -x


def classify(x):
    return "big" if x >= 10 else "small"


async def route_big(value):
    return "went big"


async def route_small(value):
    return "went small"


def route_other(value):
    return "went otherwise"


def not_a_list(x):
    return {"x": x}


def returns_tuple(x):
    return (x, x)


def returns_frozenset(x):
    return frozenset({x})


def fail(x=None):
    raise ValueError(f"always fails: {x}")


def pid_of_this_process(x=None):
    return os.getpid()


# -- slow steps -----------------------------------------------------------------------
def sleep_in_c(x):
    """Record the child's pid, then sleep 30 s inside libc (no Python bytecode runs,
    so only a signal can stop it)."""
    path = x["pidfile"] if isinstance(x, dict) else None
    if path:
        with open(path, "a") as fh:
            fh.write(f"{os.getpid()}\n")
    _libc.sleep(30)
    return "woke up"


def quick(x):
    time.sleep(0.05)
    return x


def numbered_in(folder_and_n):
    folder, n = folder_and_n
    return [[folder, i] for i in range(n)]


def meet_in_pairs(folder_and_i):
    """Mark this element started in the folder, then wait (at most 30 s) until two
    have started: under a concurrency limit of 2 the first two overlap for certain,
    however slow the machine."""
    folder, i = folder_and_i
    pathlib.Path(folder, str(i)).touch()
    end = time.monotonic() + 30
    while len(os.listdir(folder)) < 2 and time.monotonic() < end:
        time.sleep(0.005)
    return i


def sleep_python(x):
    time.sleep(30)
    return x


async def async_identity(x=None):
    await asyncio.sleep(0)
    return x


async def async_noop(x=None):
    return x


async def async_add_one(x):
    await asyncio.sleep(0)
    return x + 1


async def async_sleep_long(x):
    await asyncio.sleep(30)
    return x


async def async_swallows_cancel(x):
    """Ignores the first cancellation and keeps going (a misbehaving step)."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        pass
    await asyncio.sleep(30)
    return "finished anyway"


async def async_returns_set(x):
    return {1, 2}


# -- retries --------------------------------------------------------------------------
def fails_twice(x):
    attempt = ductline.context().attempt
    if attempt < 3:
        raise RuntimeError(f"failure on attempt {attempt}")
    return {"x": x, "attempt": attempt}


async def async_fails_twice(x):
    attempt = ductline.context().attempt
    if attempt < 3:
        raise RuntimeError(f"failure on attempt {attempt}")
    return {"x": x, "attempt": attempt}


def takes_two(a, b):
    return a + b


async def async_takes_two(a, b):
    return a + b


class TakesTwo(ductline.Step):
    def __init__(self, a, b):
        super().__init__(a, b)

    def execute(self):
        return self.args


def type_error_in_body_first(x):
    """Its first attempt raises a TypeError from a call inside its body: an ordinary error."""
    if ductline.context().attempt == 1:
        return takes_two(x)
    return x


def slow_then_fast(x):
    """Stuck in C on its first attempt, instant on the next."""
    if ductline.context().attempt == 1:
        _libc.sleep(30)
    return "second time lucky"


def crosses_then_fails(x):
    ductline.cross_boundary("charged the card")
    raise RuntimeError("failed after the boundary")


def asks_retry_once(x):
    """Asks for a retry (free of charge) on its first attempt."""
    if ductline.context().attempt == 1:
        raise ductline.Retry(0, reason="not ready yet")
    return x


async def async_asks_retry_once(x):
    if ductline.context().attempt == 1:
        raise ductline.Retry(0, reason="not ready yet")
    return x


async def async_key_error_twice(x):
    attempt = ductline.context().attempt
    if attempt < 3:
        raise KeyError(f"missing on attempt {attempt}")
    return {"x": x, "attempt": attempt}


async def async_fail_later(x):
    """Fails after a moment (so a sibling can fail first)."""
    await asyncio.sleep(0.3)
    raise RuntimeError(f"failed later: {x}")


async def async_record_halt_and_fail(reasons):
    raise RuntimeError("the halt handler failed")


# -- pauses ---------------------------------------------------------------------------
async def approve(request):
    return {"approved": request}


# -- context --------------------------------------------------------------------------
def writes_context(x):
    ctx = ductline.context()
    ctx.set("seen", {"x": x, "step": ctx.step})
    return x


def sets_a_key_that_would_alias(x):
    """Sets the six characters ``k\\ud800``, then tries the key with a lone surrogate."""
    ctx = ductline.context()
    ctx.set("k\\ud800", "its own")
    try:
        ctx.set("k\ud800", "another", overwrite=True)
    except TypeError as exc:
        refused = str(exc)
    else:
        refused = None
    return {"refused": refused, "kept": ctx.get("k\\ud800")}


async def async_reads_context(x):
    ctx = ductline.context()
    return {"seen": ctx.get("seen"), "missing": ctx.get("nope", "default"), "step": ctx.step}


def exits_hard(x):
    os._exit(3)


class Doubler(ductline.Step):
    def execute(self):
        return self.input * 2


def thread_stuck(x):
    while True:  # runs bytecode, so an interruption is delivered
        time.sleep(0.01)


def thread_stuck_until_interrupted(pidfile):
    """Note that it runs (its process id, in the file ``pidfile`` names), then run
    until interrupted; the interruption's type is noted next to it."""
    with open(pidfile, "a") as f:
        f.write(f"{os.getpid()}\n")
    try:
        while True:
            time.sleep(0.01)
    except BaseException as exc:
        with open(f"{pidfile}.interrupted", "w") as f:
            f.write(type(exc).__name__)
        raise


class AsyncTripler(ductline.Step):
    async def execute(self):
        await asyncio.sleep(0)
        return self.input * 3


async def async_cancels_itself(x):
    raise asyncio.CancelledError()


# -- on_halt --------------------------------------------------------------------------
def record_halt(reasons):
    return reasons


# -- order checks ---------------------------------------------------------------------
# run id -> the elements of finish_in_reverse that have returned (async steps of
# `execute` share this process's event loop).
_finished_in_reverse: dict[str, set[int]] = {}


async def finish_in_reverse(x):
    """Element x of 0..4 returns only once element x+1 has: a condition, never a
    duration, so the order holds on a loaded machine."""
    finished = _finished_in_reverse.setdefault(ductline.context().run_id, set())
    while x < 4 and x + 1 not in finished:
        await asyncio.sleep(0.001)
    finished.add(x)
    return x * 10


async def slow_tag_a(x):
    await asyncio.sleep(0.2)
    return f"a:{x}"


async def async_tag_b(x):
    return f"b:{x}"


async def async_fail(x=None):
    raise ValueError(f"always fails: {x}")


async def async_sleep_short(x):
    await asyncio.sleep(0.3)
    return x


async def async_current_span(x):
    """The id of the span current inside the step (its attempt's span)."""
    from opentelemetry import trace

    await asyncio.sleep(0)
    return trace.get_current_span().get_span_context().span_id


# -- scaled timeouts --------------------------------------------------------------------
def size_of(x):
    return x


def sleeps_a_while(x):
    time.sleep(1.3)
    return x


async def async_sleeps_a_while(x):
    await asyncio.sleep(1.3)
    return x


def current_span(x):
    """The id of the span current inside the step (in its child process)."""
    from opentelemetry import trace

    return trace.get_current_span().get_span_context().span_id


# -- steps that break the parent/child protocol ----------------------------------------
def _descriptors():
    """Every open descriptor of the process from 3 on (the channel sits high)."""
    return sorted(int(name) for name in os.listdir("/proc/self/fd") if int(name) >= 3)


def loud_failure(size):
    """Fail with an error message of ``size`` characters (a message too long to read)."""
    raise RuntimeError("x" * size)


def asks_what_the_executor_does_not_know(x):
    """A request of a kind no parent answers (through the step context's channel)."""
    return ductline.context()._request("no_such_request", (x,))


def sends_a_stale_result_first(x):
    """Send its parent a result under another attempt's lease token (on the child's
    socket, found among the inherited descriptors), then return its own."""
    import stat
    from multiprocessing.connection import Connection

    from ductline.execution import protocol

    for fd in _descriptors():
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                Connection(os.dup(fd)).send(protocol.done("not-this-attempt", "999"))
        except OSError:
            continue
    return x + 1


def garbles_once(x):
    """On its first attempt, write bytes that are not the protocol into the child's
    socket to its parent (found among the inherited descriptors), then wait to be
    killed; later attempts succeed."""
    return _garble_once(x, b"")


def garbles_out_of_step_once(x):
    """`garbles_once`, with bytes after the junk frame that read as a header of -1
    and an 8-byte size past any cap."""
    return _garble_once(x, b"\xff" * 12)


def forges_fatal_once(x):
    """`garbles_once` with a well-formed FATAL frame (what a child whose apps did not
    import sends instead of READY), written in the middle of an attempt."""
    import pickle
    import struct

    frame = pickle.dumps(("fatal", None, "FakeType", "forged", "tb"))
    return _garble_once(x, b"", struct.pack("!i", len(frame)) + frame)


def _garble_once(x, tail, junk=None):
    import stat
    import struct

    if ductline.context().attempt > 1:
        return x
    for fd in _descriptors():
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, (struct.pack("!i", 5) + b"hello" if junk is None else junk) + tail)
        except OSError:
            continue
    time.sleep(30)
