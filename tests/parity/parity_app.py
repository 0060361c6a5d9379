"""Pipelines of the parity suite: each runs through `ductline.execute`, a worker on
SQLite and a worker on PostgreSQL, and the three records must be equal.

Imported by the test process and by workers (``--app tests/parity/parity_app.py``)
as the module ``parity_app``. Steps decide what to do from their input, their
step name and their attempt number (`ductline.context`): no files, no globals, so
every driver sees the same behaviour. Short sleeps make branches and elements
finish out of order, which must not change any recorded value. Where a record does
depend on timing (a sibling still running when a step fails for good), the steps
meet through the run's key/value store instead of racing. The held-job cases alone
reach outside the run, through files (`HELD`).
"""

from __future__ import annotations

import asyncio
import logging
import ctypes
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import ductline
from ductline import Backoff, Pipeline, ScaledTimeout, Step

# How long a "hanging" step blocks: far beyond every deadline and timeout below, so it
# only ever ends by being killed.
HANG_SECONDS = 120


# -- plain steps ------------------------------------------------------------------------
def add_one(x):
    return x + 1


def double(x):
    return x * 2


async def async_square(x):
    await asyncio.sleep(0.01)
    return x * x


def identity(x):
    return x


def pair_sum(a, b):
    return {"sum": a + b, "args": [a, b]}


def make_list(n):
    return list(range(n))


def square(x):
    return x * x


def reverse_sleep(x):
    """Elements finish in reverse order: element 0 is the slowest."""
    time.sleep(0.1 * max(0, 4 - x))
    return x * x


def gather(outputs):
    return outputs


def total(outputs):
    return sum(outputs)


def slow_label(x):
    time.sleep(0.4)  # the first branch finishes last
    return f"slow:{x}"


def fast_label(x):
    return f"fast:{x}"


async def async_label(x):
    return f"async:{x}"


def exclaim(text):
    return text + "!"


def route(x):
    return "big" if x > 10 else "small"


def on_big(x):
    return {"route": "big", "x": x}


def on_small(x):
    return {"route": "small", "x": x}


def on_medium(x):
    return {"route": "medium", "x": x}


def parity(x):
    return "even" if x % 2 == 0 else "odd"


def halve(x):
    return x // 2


def triple_plus_one(x):
    return 3 * x + 1


def matrix(n):
    return [list(range(i + 1)) for i in range(n)]


def values(x):
    """Values beyond plain JSON that must round-trip: an aware datetime, NUL, floats."""
    return {"when": datetime(2030, 1, 31, 3, 0, tzinfo=timezone.utc), "nul": "a\x00b", "float": 1.5,
            "nested": [None, True, {"k": "v", "x": x}], "unicode": "\u00e9\u6f22\U0001f600"}


def describe(value):
    return {"keys": sorted(value), "when": value["when"], "nul": value["nul"]}


class Greet(Step):
    """A class step: receives its input as ``self.input``."""

    def execute(self):
        return {"hello": self.input, "step": ductline.context().step}


def context_write(x):
    ductline.context().set("seen", {"x": x})
    return x


def context_read(x):
    ctx = ductline.context()
    return {"seen": ctx.get("seen"), "missing": ctx.get("nope", "default"), "x": x}


def in_thread(x):
    return {"thread": x}


# -- failures and retries ------------------------------------------------------------------
def _attempt() -> int:
    return ductline.context().attempt


def fail_always(x):
    raise RuntimeError(f"attempt {_attempt()} of {ductline.context().step} fails")


def fail_until_third(x):
    attempt = _attempt()
    if attempt < 3:
        raise RuntimeError(f"flaky failure on attempt {attempt}")
    return {"x": x, "attempt": attempt}


def fail_first(x):
    attempt = _attempt()
    if attempt == 1:
        raise RuntimeError("first attempt fails")
    return {"x": x, "attempt": attempt}


def value_error(x):
    raise ValueError(f"bad value {x} on attempt {_attempt()}")


def key_error_until_third(x):
    attempt = _attempt()
    if attempt < 3:
        raise KeyError(f"missing on attempt {attempt}")
    return {"attempt": attempt}


def key_error_first(x):
    attempt = _attempt()
    if attempt == 1:
        raise KeyError("missing on the first attempt")
    return {"attempt": attempt}


def type_error_first(x):
    """Its first attempt raises a TypeError from a call inside its body (an ordinary,
    retried error), unlike a step that cannot take its own arguments."""
    if _attempt() == 1:
        return pair_sum(x)
    return {"attempt": _attempt()}


def retry_once(x):
    """Asks for a retry (free of charge) once, then succeeds."""
    attempt = _attempt()
    if attempt == 1:
        raise ductline.Retry(0, reason="not ready yet")
    return {"attempt": attempt}


def retry_three_times(x):
    attempt = _attempt()
    if attempt <= 3:
        raise ductline.Retry(0)
    return {"attempt": attempt}


def crash_always(x):
    os._exit(3)


def crash_first(x):
    if _attempt() == 1:
        os._exit(3)
    return {"attempt": _attempt()}


def pay_then_fail(x):
    ductline.cross_boundary("charged the card")
    raise RuntimeError("failed after paying")


def fail_then_pay(x):
    """Fails before its boundary on attempt 1 (free), pays and succeeds on attempt 2."""
    if _attempt() == 1:
        raise RuntimeError("failed before paying")
    ductline.cross_boundary("charged the card")
    return {"paid": x, "attempt": _attempt()}


def returns_set(x):
    return {1, 2}


def returns_bytes_first(x):
    """Its first attempt returns bytes (no JSON form); the next returns text."""
    return b"raw" if _attempt() == 1 else "text"


def not_a_list(x):
    return {"n": x}


# -- time ----------------------------------------------------------------------------------
def sleep_in_c(x):
    """Blocked in C (libc ``sleep``): only a signal to the process group ends it."""
    ctypes.CDLL(None).sleep(HANG_SECONDS)
    return "woke up"


def python_sleep_first(x):
    """Blocked in ``time.sleep`` on attempt 1; attempt 2 returns at once."""
    if _attempt() == 1:
        time.sleep(HANG_SECONDS)
    return {"attempt": _attempt()}


def python_loop_first(x):
    """Loops in Python bytecode on attempt 1 (a thread step is stopped between
    bytecodes, `isolation="thread"`); attempt 2 returns at once."""
    if _attempt() == 1:
        end = time.monotonic() + HANG_SECONDS
        while time.monotonic() < end:
            time.sleep(0.01)
    return {"attempt": _attempt()}


def hang(x):
    ctypes.CDLL(None).sleep(HANG_SECONDS)
    return x


def hang_element(x):
    ctypes.CDLL(None).sleep(HANG_SECONDS)
    return x


# Siblings that must overlap in time meet through the run's own key/value store
# (`ductline.context().get/set`, which both drivers implement) instead of racing on
# sleeps: a step that must fail while its sibling runs waits until the sibling says
# it has started.
SIBLING_RUNNING = "sibling running"
FAILING = "failing"
MEETING_SECONDS = 60      # a meeting that does not happen fails the step, it never hangs
RECORDING_MARGIN = 1.0    # seconds for a driver to record what the sibling just did


def _wait_for_key(key: str) -> None:
    ctx = ductline.context()
    end = time.monotonic() + MEETING_SECONDS
    while ctx.get(key) is None:
        if time.monotonic() > end:
            raise RuntimeError(f"context key {key!r} was never set")
        time.sleep(0.02)


def fail_soon(x):
    """Fails for good once its sibling has started (and had time to be recorded)."""
    _wait_for_key(SIBLING_RUNNING)
    time.sleep(RECORDING_MARGIN)
    ductline.context().set(FAILING, True)
    raise RuntimeError("failed while a sibling runs")


def hang_sibling(x):
    """Says it runs, then blocks until it is killed."""
    ductline.context().set(SIBLING_RUNNING, True)
    ctypes.CDLL(None).sleep(HANG_SECONDS)
    return x


def slow_ok(x):
    """Still running when fail_soon halts the run; succeeds after the halt."""
    ductline.context().set(SIBLING_RUNNING, True)
    _wait_for_key(FAILING)
    time.sleep(RECORDING_MARGIN)
    return {"slow": x}


def ready_sibling(x):
    ductline.context().set(SIBLING_RUNNING, True)
    return {"ready": x}


def after(x):
    return x


def after_slow(x):
    return {"after": x}


def later(x):
    return {"later": x}


# -- pause ---------------------------------------------------------------------------------
def prepare(x):
    return {"order": x}


def approve(request):
    return {"approved": request}


def finish(decision):
    return decision


def side(request):
    return {"side": request["order"]}


def collect(outputs):
    return outputs


# -- on_halt -------------------------------------------------------------------------------
def halt_reasons(reasons):
    """The handler's output keeps what both drivers decide (reason and step), not
    the error texts."""
    return [{"reason": r["reason"], "step": r["step"]} for r in reasons]


def never(x):
    return x


# -- limits and payloads ----------------------------------------------------------------------
def records(n):
    return [{"customer": f"c{i % 2}", "amount": i} for i in range(n)]


def limited_square(x):
    time.sleep(0.05)
    return x * x


def charge(record):
    time.sleep(0.05)
    return {"customer": record["customer"], "charged": record["amount"] * 10}


def big_text(n):
    """About ``n`` MiB of text: stored out of line by a worker (inline limit 1 MiB)."""
    block = "".join(chr(ord("a") + i % 26) for i in range(1024))
    return block * (1024 * n) + "end"


def measure(text):
    return {"length": len(text), "head": text[:8], "tail": text[-3:]}


def big_element(i):
    return str(i) * (1_200_000 + i)


def lengths(texts):
    return [len(t) for t in texts]


# == pipelines =================================================================================
# -- transitions --------------------------------------------------------------------------------
chain = Pipeline("parity_chain").start(add_one).chain(to=double).chain(to=async_square)

# Steps in two queues (the worker serves both, execute runs every queue), a
# divide whose branches wait in different queues, and priorities within them.
queued = (Pipeline("parity_queued", queue="parity_side")
          .start(add_one)
          .divide(to=[double, square], name=["q_double", "q_square"])
          .combine(into=identity, name="q_gather", queue="default", priority=3))

chain_delay = Pipeline("parity_chain_delay").start(add_one).chain(to=double, delay=1)

start_args = Pipeline("parity_start_args").start(pair_sum).chain(to=identity)

class_step = Pipeline("parity_class_step").start(Greet).chain(to=identity)

context_values = Pipeline("parity_context").start(context_write).chain(to=context_read)

json_values = Pipeline("parity_json_values").start(values).chain(to=describe)

thread_steps = (Pipeline("parity_thread_steps").start(add_one, isolation="thread")
                .chain(to=in_thread, isolation="thread"))

divide_combine = (Pipeline("parity_divide_combine").start(add_one)
                  .divide(to=[slow_label, fast_label]).combine(into=gather))

divide_branches = Pipeline("parity_divide_branches").start(add_one).divide(to=[slow_label, fast_label, square])
divide_branches.branch(slow_label).chain(to=exclaim)
divide_branches.branch(fast_label).chain(to=exclaim, name="exclaim_fast").chain(to=exclaim, name="exclaim_twice")
divide_branches.combine(into=gather)

divert_match = (Pipeline("parity_divert_match").start(identity)
                .divert(to={"big": on_big, "small": on_small, "otherwise": on_medium})
                .converge(into=finish))

divert_otherwise = (Pipeline("parity_divert_otherwise").start(route)
                    .divert(to={"huge": on_big, "otherwise": on_small}).converge(into=finish))

divert_branch = Pipeline("parity_divert_branch").start(route).divert(to={"big": on_big, "otherwise": on_small})
divert_branch.branch(on_small).chain(to=identity)
divert_branch.converge(into=finish)

expand_collapse = Pipeline("parity_expand_collapse").start(make_list).expand(to=reverse_sleep).collapse(into=gather)

expand_empty = (Pipeline("parity_expand_empty").start(make_list).expand(to=square).chain(to=add_one)
                .collapse(into=gather).chain(to=identity))

expand_chain = (Pipeline("parity_expand_chain").start(make_list).expand(to=reverse_sleep)
                .chain(to=add_one).collapse(into=total))

expand_in_divide = Pipeline("parity_expand_in_divide").start(add_one).divide(to=[make_list, double])
expand_in_divide.branch(make_list).expand(to=reverse_sleep).collapse(into=total)
expand_in_divide.combine(into=gather)

divide_in_expand = (Pipeline("parity_divide_in_expand").start(make_list).expand(to=add_one)
                    .divide(to=[slow_label, fast_label]).combine(into=gather).collapse(into=collect))

expand_in_expand = (Pipeline("parity_expand_in_expand").start(matrix).expand(to=identity)
                    .expand(to=square).collapse(into=total).collapse(into=gather))

divert_in_expand = (Pipeline("parity_divert_in_expand").start(make_list).expand(to=identity)
                    .divert(to={"even": halve, "otherwise": triple_plus_one}, name=["even_half", "odd_step"])
                    .converge(into=add_one).collapse(into=gather))

# -- retries -----------------------------------------------------------------------------------
# A failing step comes after the start step: a job's default retry delay is fixed by
# the process that creates it, and a worker (DUCTLINE_RETRY_DELAY=0) creates every
# job but the first, which the triggering process creates.
def allocate_megabytes(n):
    return len(bytearray(n * 1024 * 1024))


def burn_cpu(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds


def leave_env(x):
    os.environ["PARITY_LEFTOVER"] = str(x)
    os.umask(0o077)
    return x


def find_env(x):
    mask = os.umask(0)
    os.umask(mask)
    return {"leftover": os.environ.get("PARITY_LEFTOVER"), "umask_077": mask == 0o077}


class UnrenderableError(Exception):
    def __str__(self):
        raise ValueError("no text for you")


def raise_unrenderable(x):
    raise UnrenderableError()


def _after_start(name: str) -> Pipeline:
    return Pipeline(name).start(identity, name="begin")


retry_max0 = _after_start("parity_retry_max0").chain(to=fail_always, max_retry=0).chain(to=never)
retry_max1 = _after_start("parity_retry_max1").chain(to=fail_always, max_retry=1).chain(to=never)
retry_max3 = _after_start("parity_retry_max3").chain(to=fail_always, max_retry=3).chain(to=never)
retry_delay0 = Pipeline("parity_retry_delay0").start(fail_until_third, max_retry=3, retry_delay=0).chain(to=identity)
backoff_fixed = Pipeline("parity_backoff_fixed").start(fail_first, retry_delay=Backoff.fixed(1)).chain(to=identity)
backoff_exhausted = (Pipeline("parity_backoff_exhausted")
                     .start(fail_always, max_retry=2, retry_delay=Backoff.exponential(1, cap=1)))
retry_on = (_after_start("parity_retry_on")
            .chain(to=key_error_until_third, max_retry=1, retry_on=[KeyError]).chain(to=identity))
no_retry_on = (_after_start("parity_no_retry_on")
               .chain(to=value_error, no_retry_on=[ValueError], max_retry=3).chain(to=never))
no_retry_on_other = (_after_start("parity_no_retry_on_other")
                     .chain(to=key_error_first, no_retry_on=[ValueError], max_retry=3).chain(to=identity))
retry_request = _after_start("parity_retry_request").chain(to=retry_once, max_retry=1).chain(to=identity)
retry_request_free = _after_start("parity_retry_request_free").chain(to=retry_three_times, max_retry=1)
crash_exhausted = _after_start("parity_crash_exhausted").chain(to=crash_always, max_crash=2).chain(to=never)
crash_recovered = _after_start("parity_crash_recovered").chain(to=crash_first, max_crash=3).chain(to=identity)
unsafe_to_retry = _after_start("parity_unsafe_to_retry").chain(to=pay_then_fail, max_retry=3).chain(to=never)
boundary_after_retry = _after_start("parity_boundary_after_retry").chain(to=fail_then_pay, max_retry=3)
# ``pair_sum(a, b)`` after a step: it receives one input. Default retry options.
signature_mismatch = _after_start("parity_signature_mismatch").chain(to=pair_sum).chain(to=never)
signature_mismatch_thread = (_after_start("parity_signature_mismatch_thread")
                             .chain(to=pair_sum, isolation="thread").chain(to=never))
type_error_in_body = _after_start("parity_type_error_in_body").chain(to=type_error_first).chain(to=identity)
bad_output = _after_start("parity_bad_output").chain(to=returns_set, max_retry=2).chain(to=never)
bad_output_thread = (_after_start("parity_bad_output_thread")
                     .chain(to=returns_set, max_retry=2, isolation="thread").chain(to=never))
bad_output_retry_on = (_after_start("parity_bad_output_retry_on")
                       .chain(to=returns_bytes_first, max_retry=2, retry_delay=0,
                              retry_on=["ductline.PayloadNotSerializable"])
                       .chain(to=identity))

# -- timeouts and the run deadline ---------------------------------------------------------------
timeout_in_c = _after_start("parity_timeout_in_c").chain(to=sleep_in_c, timeout=1, max_retry=2).chain(to=never)
timeout_in_thread = (_after_start("parity_timeout_in_thread")
                     .chain(to=python_loop_first, timeout=1, max_retry=2, isolation="thread").chain(to=identity))
timeout_in_python = (_after_start("parity_timeout_in_python").chain(to=python_sleep_first, timeout=1, max_retry=2)
                     .chain(to=identity))
deadline_chain = Pipeline("parity_deadline_chain", timeout=3).start(identity).chain(to=hang).chain(to=after)
# The finished branch is an async step: the in-process executor runs it in its event
# loop, so ``hang`` gets the child ``identity`` used instead of waiting for a new one
# to start (a loaded machine could take the whole deadline to start one).
deadline_divide = (Pipeline("parity_deadline_divide", timeout=3).start(identity)
                   .divide(to=[async_label, hang]).combine(into=after))
deadline_delay = Pipeline("parity_deadline_delay", timeout=3).start(identity).chain(to=later, delay=60)
deadline_paused = (Pipeline("parity_deadline_paused", timeout=3).start(prepare).chain(to=approve)
                   .chain(to=finish).pause(before=approve))

# -- halts, fail-fast, cancel -----------------------------------------------------------------------
fail_fast = (Pipeline("parity_fail_fast", on_failure="fail_fast").start(identity)
             .divide(to=[fail_soon, hang_sibling], max_retry=1).combine(into=after))

halt_held = Pipeline("parity_halt_held").start(identity).divide(to=[fail_soon, slow_ok], max_retry=1)
halt_held.branch(slow_ok).chain(to=after_slow)
halt_held.combine(into=after)

halt_holds_waiting = Pipeline("parity_halt_holds_waiting").start(identity).divide(to=[fail_soon, ready_sibling],
                                                                                  max_retry=1)
halt_holds_waiting.branch(ready_sibling).chain(to=later, delay=60)
halt_holds_waiting.combine(into=after)

# Halted holding a delayed step, then cancelled (tests/parity: cancel_halted).
cancel_halted = Pipeline("parity_cancel_halted").start(identity).divide(to=[fail_soon, ready_sibling], max_retry=1)
cancel_halted.branch(ready_sibling).chain(to=later, delay=60)
cancel_halted.combine(into=after)

on_halt = (_after_start("parity_on_halt").chain(to=fail_always, max_retry=2).chain(to=never)
           .on_halt(halt_reasons))

cancel_chain = Pipeline("parity_cancel_chain").start(identity).chain(to=hang).chain(to=after)

cancel_two_branches = Pipeline("parity_cancel_two_branches").start(identity).divide(to=[hang, fast_label])
cancel_two_branches.branch(fast_label).chain(to=hang_element)
cancel_two_branches.combine(into=after)

cancel_expand = (Pipeline("parity_cancel_expand").start(make_list).expand(to=hang_element)
                 .collapse(into=gather).chain(to=after))

# -- pause ---------------------------------------------------------------------------------------
pause_resume_input = (Pipeline("parity_pause_resume_input").start(prepare).chain(to=approve).chain(to=finish)
                      .pause(before=approve))
pause_resume_keep = (Pipeline("parity_pause_resume_keep").start(prepare).chain(to=approve).chain(to=finish)
                     .pause(before=approve))
pause_divide = (Pipeline("parity_pause_divide").start(prepare).divide(to=[approve, side]).combine(into=collect)
                .pause(before=approve))
pause_expired_sibling = (Pipeline("parity_pause_expired_sibling").start(prepare).divide(to=[approve, hang])
                         .combine(into=collect).pause(before=approve, timeout=2))
pause_expired = (Pipeline("parity_pause_expired").start(prepare).chain(to=approve).chain(to=finish)
                 .pause(before=approve, timeout=1))

# -- events ----------------------------------------------------------------------------------------
event_before_wait = (Pipeline("parity_event_before_wait").start(prepare).chain(to=approve).chain(to=finish)
                     .wait_for("approved", before=approve))
event_when_waiting = (Pipeline("parity_event_when_waiting").start(prepare).chain(to=approve).chain(to=finish)
                      .wait_for("approved", before=approve, timeout=600))
event_divide = (Pipeline("parity_event_divide").start(prepare).divide(to=[approve, side]).combine(into=collect)
                .wait_for("approved", before=approve))
event_past_deadline = (Pipeline("parity_event_past_deadline", timeout=2).start(prepare).chain(to=approve)
                       .chain(to=finish).wait_for("approved", before=approve))
event_timed_out = (Pipeline("parity_event_timed_out").start(prepare).divide(to=[approve, hang])
                   .combine(into=collect).wait_for("approved", before=approve, timeout=1))

# -- expand errors ---------------------------------------------------------------------------------
max_fanout = (Pipeline("parity_max_fanout").start(make_list).expand(to=square, max_fanout=3)
              .collapse(into=gather))
expand_not_a_list = (_after_start("parity_expand_not_a_list").chain(to=not_a_list, max_retry=2)
                      .expand(to=square).collapse(into=gather))

# -- limits and payloads ----------------------------------------------------------------------------
concurrency_limited = (Pipeline("parity_concurrency_limited").start(make_list)
                       .expand(to=limited_square, concurrency=2).collapse(into=gather))
rate_limited = (Pipeline("parity_rate_limited").start(make_list)
                .expand(to=limited_square, rate=10).collapse(into=gather))
keyed_limit = (Pipeline("parity_keyed_limit").start(records)
               .expand(to=charge, concurrency=1, concurrency_key="customer").collapse(into=gather))
large_payload = Pipeline("parity_large_payload").start(big_text).chain(to=measure)
large_fan_in = (Pipeline("parity_large_fan_in").start(make_list).expand(to=big_element)
                .collapse(into=lengths))


# -- step logs -------------------------------------------------------------------------------
_steps_log = logging.getLogger("parity_app.steps")


def log_then_fail_once(x):
    attempt = ductline.context().attempt
    _steps_log.debug("not kept at INFO")
    _steps_log.info("attempt %d with %s", attempt, x)
    print(f"printed on attempt {attempt}")
    if attempt == 1:
        _steps_log.warning("about to fail")
        raise RuntimeError("first attempt fails")
    return x + 1


def log_warnings_only(x):
    _steps_log.info("dropped: this step keeps WARNING and up")
    _steps_log.warning("kept: %s", x)
    return x


def log_in_thread(x):
    _steps_log.info("thread step got %s", x)
    return x


async def log_async(x):
    await asyncio.sleep(0)
    _steps_log.error("async step got %s", x)
    return x


step_logs = (Pipeline("parity_step_logs").start(log_then_fail_once, max_retry=2, retry_delay=0)
             .chain(to=log_warnings_only, log_level="WARNING")
             .chain(to=log_in_thread, isolation="thread")
             .chain(to=log_async))
# -- isolation and resource limits ------------------------------------------------------------------
memory_limited = (_after_start("parity_memory_limited")
                  .chain(to=allocate_megabytes, memory_limit=256 * 1024 * 1024, max_retry=2).chain(to=never))
cpu_limited = _after_start("parity_cpu_limited").chain(to=burn_cpu, cpu_limit=1, max_retry=2).chain(to=never)


def lift_limit_then_allocate(n):
    """Tries to lift its memory limit (unlimited, else soft up to hard), then
    allocates ``n`` MiB: past its limit whatever the try did."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    for wanted in ((resource.RLIM_INFINITY, resource.RLIM_INFINITY), (hard, hard)):
        try:
            resource.setrlimit(resource.RLIMIT_AS, wanted)
            break
        except (ValueError, OSError):
            continue
    return len(bytearray(n * 1024 * 1024))


def garble_channel(x):
    """Writes a frame header announcing 1 KiB into its channel to its parent (found
    by looking: the channel sits out of the way), then returns: its result is read
    as the rest of that frame, which never completes."""
    import struct

    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                os.write(int(name), struct.pack("!i", 1024))
        except OSError:
            continue
    return x


# No step timeout: the frame bound ends the attempt (a protocol error, a crash).
garbled_channel = _after_start("parity_garbled_channel").chain(to=garble_channel, max_crash=1).chain(to=never)
lifted_limit = (_after_start("parity_lifted_limit")
                .chain(to=lift_limit_then_allocate, memory_limit=256 * 1024 * 1024, max_retry=1).chain(to=never))
within_limits = (Pipeline("parity_within_limits").start(allocate_megabytes, memory_limit=1 << 30, cpu_limit=60)
                 .chain(to=identity))
clean_state = Pipeline("parity_clean_state").start(leave_env).chain(to=find_env)
clean_state_fresh = Pipeline("parity_clean_state_fresh").start(leave_env, isolation="fresh").chain(to=find_env)
unrenderable_error = _after_start("parity_unrenderable_error").chain(to=raise_unrenderable, max_retry=1)


# -- where the two appliers once disagreed ------------------------------------------------------
def quick_ok(x):
    """Returns at once: a worker with a free slot starts it beside its sibling."""
    return {"quick": x}


# One branch halts the run while its sibling outlives the run deadline (long enough
# for the failing branch to fail first, child start-ups included, on a loaded machine): the deadline
# ends the halted run too (failed, timeout_exceeded; the sibling failed timed_out).
halt_then_deadline = (Pipeline("parity_halt_then_deadline", timeout=8).start(identity)
                      .divide(to=[fail_soon, hang_sibling], max_retry=1).combine(into=after))

# The first branch fails at once; the other starts all the same in a free slot.
fail_at_once = (Pipeline("parity_fail_at_once").start(identity)
                .divide(to=[fail_always, quick_ok], max_retry=1).combine(into=after))


# -- mark succeeded: a failed step recorded succeeded by an operator, and the run goes on ------
mark_chain = _after_start("parity_mark_chain").chain(to=fail_always, max_retry=1).chain(to=never)
mark_fan_in = (Pipeline("parity_mark_fan_in").start(identity)
               .divide(to=[fail_always, quick_ok], max_retry=1).combine(into=after))


# -- child runs (ductline.children) ------------------------------------------------------------------
def start_squares(n):
    return ductline.children([ductline.child(child_square, i) for i in range(n)])


def start_one_failing(n):
    return ductline.children([ductline.child(child_square, n), ductline.child(child_failing, n)])


def start_collecting(n):
    return ductline.children([ductline.child(child_square, n), ductline.child(child_failing, n)],
                             on_failure="collect")


def start_hanging(n):
    return ductline.children([ductline.child(child_hang, i) for i in range(n)])


def statuses(outputs):
    return [o if not isinstance(o, ductline.ChildRunFailed) else f"{o.status}: {o.reason}: {o.error}"
            for o in outputs]


def sum_of(outputs):
    return sum(outputs)


child_square = Pipeline("parity_child_square").start(square)
child_failing = Pipeline("parity_child_failing").start(fail_always, max_retry=1)
child_hang = Pipeline("parity_child_hang").start(hang)
children_outputs = Pipeline("parity_children_outputs").start(start_squares).chain(to=sum_of)
children_fail = Pipeline("parity_children_fail").start(start_one_failing).chain(to=sum_of)
children_collect = Pipeline("parity_children_collect").start(start_collecting).chain(to=statuses)
children_deadline = Pipeline("parity_children_deadline", timeout=2).start(start_hanging).chain(to=sum_of)
children_cancel = Pipeline("parity_children_cancel").start(start_hanging).chain(to=sum_of)


# -- delays on every kind of transition; step timeouts that scale with the input -------------------
# A start delay delays the run; a fan-out's delay counts for every step it creates, a
# fan-in's from the last branch's end (DESIGN.md, "Step delays").
delays_expand = (Pipeline("parity_delays_expand").start(make_list, delay=1)
                 .expand(to=square, delay=1).collapse(into=gather, delay=1))
delays_divide = (Pipeline("parity_delays_divide").start(add_one)
                 .divide(to=[square, double], delay=1).combine(into=gather, delay=1))


def scaled_units(x):
    """The size of a scaled timeout's input: the input itself (1 s per unit)."""
    return x


SCALED = ScaledTimeout(floor=1, cap=4, size=scaled_units)


def granted_more_than_the_floor(x):
    """Whether its attempt's deadline is more than the floor (1 s) away."""
    deadline = ductline.context().deadline
    return deadline is not None and (deadline - datetime.now(timezone.utc)).total_seconds() > 1


# An input of 0 gets the floor: the hanging step is killed after 1 s.
scaled_floor = _after_start("parity_scaled_floor").chain(to=hang, timeout=SCALED, max_retry=1)
# An input of 3 gets 3 s: more than the floor.
scaled_up = _after_start("parity_scaled_up").chain(to=granted_more_than_the_floor, timeout=SCALED)


# -- held jobs: a delayed step a worker claimed before its time --------------------------------------
# A worker claims a delayed job shortly before its time and holds it until then
# (`ductline.runtime.horizon`); execute never does. These pipelines run in the queue
# `HELD`, served by workers that claim far ahead (conftest.py), so that the harness
# finds the job held and stops the run then (on execute, once the job waits for its
# time). They reach outside the run through a folder of the session's (`GATES_ENV`):
# a step that must fail while the job is held waits for the harness's release file,
# and the delayed step leaves a file there when it is called, so that the harness can
# tell it never was (a held job of a stopped run must not start at its time).
HELD = "parity_held"
GATES_ENV = "PARITY_GATES"
# Seconds: the delayed step is held this long, minus the claim's time (under the 5 s
# after which a worker gives back a held job it has not started, `ductline.runtime.ahead`).
HOLD_DELAY = 4


def gate_path(run_id: str, what: str) -> Path:
    """The file ``what`` of run ``run_id`` in the session's folder."""
    return Path(os.environ[GATES_ENV]) / f"{run_id}.{what}"


def fail_when_released(x):
    """Fails for good once the harness released the run (it saw the delayed sibling held)."""
    path = gate_path(ductline.context().run_id, "release")
    end = time.monotonic() + MEETING_SECONDS
    while not path.exists():
        if time.monotonic() > end:
            raise RuntimeError("the run was never released")
        time.sleep(0.02)
    raise RuntimeError("failed while a delayed sibling waits")


def later_called(x):
    """A delayed step that leaves a file when it is called."""
    ctx = ductline.context()
    gate_path(ctx.run_id, f"called.{ctx.step}").touch()
    return {"later": x}


held_cancel = (Pipeline("parity_held_cancel", queue=HELD).start(identity)
               .chain(to=later_called, delay=HOLD_DELAY).chain(to=after))
# The deadline falls while the delayed step is held: it is claimed at once (due within
# the workers' horizon) and due after the deadline.
held_deadline = (Pipeline("parity_held_deadline", timeout=2, queue=HELD).start(identity)
                 .chain(to=later_called, delay=HOLD_DELAY).chain(to=after))
held_halt = (Pipeline("parity_held_halt", queue=HELD).start(identity)
             .divide(to=[fail_when_released, ready_sibling], max_retry=1))
held_halt.branch(ready_sibling).chain(to=later_called, delay=HOLD_DELAY)
held_halt.combine(into=after)
held_fail_fast = (Pipeline("parity_held_fail_fast", queue=HELD, on_failure="fail_fast").start(identity)
                  .divide(to=[fail_when_released, ready_sibling], max_retry=1))
held_fail_fast.branch(ready_sibling).chain(to=later_called, delay=HOLD_DELAY)
held_fail_fast.combine(into=after)
