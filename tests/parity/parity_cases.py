"""The parity corpus: every case runs through `ductline.execute`, a worker on
SQLite and a worker on PostgreSQL (tests/parity/test_parity.py).

Each case names the run status and halt reason the drivers must agree on; some
also pin step runs whose meaning the design fixes (attempt counts of the retry
options, what a halt holds, what a stop skips), so three drivers that agree on a
wrong answer still fail.
"""

from __future__ import annotations

from typing import Any, Callable

import parity_app as app
from parity_harness import NO_INPUT, Case, Record


def steps(*expected: tuple[Any, ...]) -> Callable[[Record], None]:
    """A check that pins step runs: ``(step, scope, status, attempts)`` or with a
    fifth item, the skip root (skipped runs also carry their reason), or the output."""

    def check(record: Record) -> None:
        for row in expected:
            step, scope, status, attempts = row[:4]
            found = record.step(step, scope)
            assert (found.status, found.attempts) == (status, tuple(attempts)), (
                f"{step}[{scope}]: expected {status} after {list(attempts)}, recorded "
                f"{found.status} after {list(found.attempts)}\n" + "\n".join(record.lines()))
            if len(row) > 4:
                extra = row[4]
                actual = (found.skip_reason, found.skip_root) if status == "skipped" else found.output
                assert actual == extra, f"{step}[{scope}]: expected {extra!r}, recorded {actual!r}"

    return check


def absent(*names: str) -> Callable[[Record], None]:
    def check(record: Record) -> None:
        present = sorted({s.step for s in record.steps} & set(names))
        assert not present, f"step runs {present} should not exist:\n" + "\n".join(record.lines())

    return check


def errors(step: str, *types: str, scope: str = "") -> Callable[[Record], None]:
    """A check that pins the error types of a step run's errored attempts, in order."""

    def check(record: Record) -> None:
        found = record.step(step, scope).errors
        assert found == types, f"{step}[{scope}]: expected errors {list(types)}, recorded {list(found)}"

    return check


def error_is(text: str) -> Callable[[Record], None]:
    """A check that pins the run's error text (`ductline.store.run_errors`)."""

    def check(record: Record) -> None:
        assert record.error == text, f"expected error {text!r}, recorded {record.error!r}"

    return check


def never_called(record: Record) -> None:
    """No step of the run left a call file (`parity_app.later_called`)."""
    assert not record.called, f"steps {list(record.called)} were called:\n" + "\n".join(record.lines())


def deadline_exceeded(record: Record) -> None:
    assert record.timeout_exceeded, "timeout_exceeded is not set:\n" + "\n".join(record.lines())


def both(*checks: Callable[[Record], None]) -> Callable[[Record], None]:
    def check(record: Record) -> None:
        for c in checks:
            c(record)

    return check


def step_logs_kept(record: Record) -> None:
    first = record.step("log_then_fail_once")
    assert first.logs == (
        (("INFO", "parity_app.steps", "attempt 1 with 1"), ("INFO", "stdout", "printed on attempt 1"),
         ("WARNING", "parity_app.steps", "about to fail")),
        (("INFO", "parity_app.steps", "attempt 2 with 1"), ("INFO", "stdout", "printed on attempt 2")),
    ), first.logs
    assert record.step("log_warnings_only").logs == ((("WARNING", "parity_app.steps", "kept: 2"),),)
    assert record.step("log_in_thread").logs == ((("INFO", "parity_app.steps", "thread step got 2"),),)
    assert record.step("log_async").logs == ((("ERROR", "parity_app.steps", "async step got 2"),),)


OK = "succeeded"
ERR = "errored"
TIMED_OUT = "timed_out"
NOT_TAKEN = "route not taken"
COMPLETED, HALTED, FAILED, CANCELLED = "completed", "halted", "failed", "cancelled"
RETRIES = "job_retries_exhausted"

CASES: list[Case] = [
    # -- transitions ---------------------------------------------------------------------
    Case("chain", app.chain, (3,), COMPLETED, check=steps(("async_square", "", COMPLETED, [OK], 64))),
    Case("chain_delay", app.chain_delay, (3,), COMPLETED, seconds=1),
    Case("queued", app.queued, (3,), COMPLETED, check=steps(("q_gather", "", COMPLETED, [OK], [8, 16]))),
    Case("start_args", app.start_args, (2, 3), COMPLETED),
    Case("class_step", app.class_step, ("ana",), COMPLETED),
    Case("context", app.context_values, (5,), COMPLETED),
    Case("json_values", app.json_values, (1,), COMPLETED),
    Case("thread_steps", app.thread_steps, (1,), COMPLETED),
    Case("divide_combine", app.divide_combine, (1,), COMPLETED, slots=2,
         check=steps(("gather", "", COMPLETED, [OK], ["slow:2", "fast:2"]))),
    Case("divide_branches", app.divide_branches, (1,), COMPLETED, slots=3),
    Case("divert_match", app.divert_match, ("big",), COMPLETED,
         check=steps(("on_small", "", "skipped", [], (NOT_TAKEN, "identity")),
                     ("on_medium", "", "skipped", [], (NOT_TAKEN, "identity")))),
    Case("divert_otherwise", app.divert_otherwise, (3,), COMPLETED,
         check=steps(("on_big", "", "skipped", [], (NOT_TAKEN, "route")))),
    Case("divert_branch", app.divert_branch, (300,), COMPLETED,  # the route not taken is two steps long
         check=steps(("on_small", "", "skipped", [], (NOT_TAKEN, "route")),
                     ("identity", "", "skipped", [], (NOT_TAKEN, "route")))),
    Case("expand_collapse", app.expand_collapse, (5,), COMPLETED, slots=5,
         check=steps(("gather", "", COMPLETED, [OK], [0, 1, 4, 9, 16]))),
    Case("expand_empty", app.expand_empty, (0,), COMPLETED,
         check=both(steps(("gather", "", COMPLETED, [OK], [])), absent("square", "add_one"))),
    Case("expand_chain", app.expand_chain, (5,), COMPLETED, slots=5),
    Case("expand_in_divide", app.expand_in_divide, (3,), COMPLETED, slots=5),
    Case("divide_in_expand", app.divide_in_expand, (3,), COMPLETED, slots=6),
    Case("expand_in_expand", app.expand_in_expand, (3,), COMPLETED, slots=6),
    Case("divert_in_expand", app.divert_in_expand, (4,), COMPLETED, slots=4),
    Case("delays_expand", app.delays_expand, (3,), COMPLETED, slots=3, seconds=3,
         check=steps(("gather", "", COMPLETED, [OK], [0, 1, 4]))),
    Case("delays_divide", app.delays_divide, (2,), COMPLETED, slots=2, seconds=2,
         check=steps(("gather", "", COMPLETED, [OK], [9, 6]))),
    # -- retry options ---------------------------------------------------------------------
    Case("retry_max0", app.retry_max0, (1,), HALTED, RETRIES,
         check=both(steps(("fail_always", "", FAILED, [ERR])), absent("never"))),
    Case("retry_max1", app.retry_max1, (1,), HALTED, RETRIES, check=steps(("fail_always", "", FAILED, [ERR]))),
    Case("retry_max3", app.retry_max3, (1,), HALTED, RETRIES,
         check=steps(("fail_always", "", FAILED, [ERR, ERR, ERR]))),
    Case("retry_delay0", app.retry_delay0, (1,), COMPLETED,
         check=steps(("fail_until_third", "", COMPLETED, [ERR, ERR, OK]))),
    Case("backoff_fixed", app.backoff_fixed, (1,), COMPLETED, seconds=1,
         check=steps(("fail_first", "", COMPLETED, [ERR, OK]))),
    Case("backoff_exhausted", app.backoff_exhausted, (1,), HALTED, RETRIES, seconds=1,
         check=steps(("fail_always", "", FAILED, [ERR, ERR]))),
    Case("retry_on", app.retry_on, (1,), COMPLETED,
         check=steps(("key_error_until_third", "", COMPLETED, [ERR, ERR, OK]))),
    # Known drift: execute made 3 attempts and halted job_retries_exhausted.
    Case("no_retry_on", app.no_retry_on, (1,), HALTED, "non_retryable_error",
         check=both(steps(("value_error", "", FAILED, [ERR])), absent("never"),
                    error_is("step 'value_error' failed: ValueError: bad value 1 on attempt 1 "
                             "(non_retryable_error)"))),
    Case("no_retry_on_other_error", app.no_retry_on_other, (1,), COMPLETED,
         check=steps(("key_error_first", "", COMPLETED, [ERR, OK]))),
    # Known drift: execute halted the run instead of retrying free of charge.
    Case("retry_request", app.retry_request, (1,), COMPLETED,
         check=steps(("retry_once", "", COMPLETED, [ERR, OK], {"attempt": 2}))),
    Case("retry_request_free", app.retry_request_free, (1,), COMPLETED,
         check=steps(("retry_three_times", "", COMPLETED, [ERR, ERR, ERR, OK]))),
    Case("crash_exhausted", app.crash_exhausted, (1,), HALTED, "job_crashes_exhausted", seconds=1,
         check=steps(("crash_always", "", FAILED, ["crashed", "crashed"]))),
    Case("crash_recovered", app.crash_recovered, (1,), COMPLETED, seconds=1,
         check=steps(("crash_first", "", COMPLETED, ["crashed", OK]))),
    Case("unsafe_to_retry", app.unsafe_to_retry, (1,), HALTED, "unsafe_to_retry",
         check=steps(("pay_then_fail", "", FAILED, [ERR]))),
    Case("boundary_after_retry", app.boundary_after_retry, (1,), COMPLETED,
         check=steps(("fail_then_pay", "", COMPLETED, [ERR, OK]))),
    # A step that cannot take its arguments halts at its first attempt; a TypeError
    # raised inside a step's body is retried like any error.
    Case("signature_mismatch", app.signature_mismatch, (1,), HALTED, "non_retryable_error",
         check=both(steps(("pair_sum", "", FAILED, [ERR])), absent("never"),
                    errors("pair_sum", "ductline.StepSignatureError"))),
    Case("signature_mismatch_thread", app.signature_mismatch_thread, (1,), HALTED, "non_retryable_error",
         check=both(steps(("pair_sum", "", FAILED, [ERR])), absent("never"),
                    errors("pair_sum", "ductline.StepSignatureError"))),
    Case("type_error_in_body", app.type_error_in_body, (1,), COMPLETED,
         check=both(steps(("type_error_first", "", COMPLETED, [ERR, OK], {"attempt": 2})),
                    errors("type_error_first", "TypeError"))),
    # An output with no JSON form fails the same way every time: it halts at once,
    # unless retry_on names the error.
    Case("bad_output", app.bad_output, (1,), HALTED, "non_retryable_error",
         check=both(steps(("returns_set", "", FAILED, [ERR])), absent("never"),
                    errors("returns_set", "ductline.PayloadNotSerializable"))),
    Case("bad_output_thread", app.bad_output_thread, (1,), HALTED, "non_retryable_error",
         check=both(steps(("returns_set", "", FAILED, [ERR])), absent("never"),
                    errors("returns_set", "ductline.PayloadNotSerializable"))),
    Case("bad_output_retry_on", app.bad_output_retry_on, (1,), COMPLETED,
         check=both(steps(("returns_bytes_first", "", COMPLETED, [ERR, OK], "text")),
                    errors("returns_bytes_first", "ductline.PayloadNotSerializable"))),
    # -- step timeouts and the run deadline ---------------------------------------------------
    Case("timeout_in_c", app.timeout_in_c, (1,), HALTED, RETRIES, seconds=3,
         check=steps(("sleep_in_c", "", FAILED, ["timed_out", "timed_out"]))),
    Case("timeout_in_python", app.timeout_in_python, (1,), COMPLETED, seconds=1,
         check=steps(("python_sleep_first", "", COMPLETED, ["timed_out", OK]))),
    Case("scaled_timeout_floor", app.scaled_floor, (0,), HALTED, RETRIES, seconds=2,
         check=steps(("hang", "", FAILED, [TIMED_OUT]))),
    Case("scaled_timeout_up", app.scaled_up, (3,), COMPLETED,
         check=steps(("granted_more_than_the_floor", "", COMPLETED, [OK], True))),
    Case("timeout_in_thread", app.timeout_in_thread, (1,), COMPLETED, seconds=1,
         check=steps(("python_loop_first", "", COMPLETED, ["timed_out", OK], {"attempt": 2}))),
    Case("deadline_chain", app.deadline_chain, (1,), FAILED, seconds=3,
         check=both(steps(("hang", "", FAILED, ["timed_out"]),
                          ("after", "", "skipped", [], ("workflow timeout", "hang"))),
                    deadline_exceeded)),
    Case("deadline_divide", app.deadline_divide, (1,), FAILED, slots=2, seconds=3,
         check=steps(("async_label", "", COMPLETED, [OK], "async:1"), ("hang", "", FAILED, ["timed_out"]),
                     ("after", "", "skipped", [], ("workflow timeout", "hang")))),
    Case("deadline_in_delay", app.deadline_delay, (1,), FAILED, seconds=3,
         check=both(steps(("later", "", "skipped", [])), deadline_exceeded)),
    Case("deadline_while_paused", app.deadline_paused, (1,), FAILED, seconds=3,
         check=both(steps(("approve", "", "skipped", []), ("finish", "", "skipped", [])), deadline_exceeded)),
    # -- halts, fail-fast, cancel, on_halt ----------------------------------------------------------
    Case("fail_fast", app.fail_fast, (1,), HALTED, RETRIES, slots=2, seconds=1,
         check=both(steps(("fail_soon", "", FAILED, [ERR]), ("hang_sibling", "", CANCELLED, [CANCELLED])),
                    absent("after"))),
    Case("halt_then_deadline", app.halt_then_deadline, (1,), FAILED, RETRIES, slots=2, seconds=9,
         check=both(steps(("fail_soon", "", FAILED, [ERR]), ("hang_sibling", "", FAILED, [TIMED_OUT]),
                          ("after", "", "skipped", [], ("workflow timeout", "hang_sibling"))), deadline_exceeded)),
    # -- mark succeeded (ductline mark-succeeded; execute's mark_succeeded option) -------------------
    Case("mark_succeeded_chain", app.mark_chain, (1,), COMPLETED, mark={"fail_always": {"fixed": 1}},
         check=steps(("fail_always", "", COMPLETED, [ERR], {"fixed": 1}),
                     ("never", "", COMPLETED, [OK], {"fixed": 1}))),
    Case("mark_succeeded_fan_in", app.mark_fan_in, (1,), COMPLETED, mark={"fail_always": "marked"}, slots=2,
         check=steps(("fail_always", "", COMPLETED, [ERR], "marked"),
                     ("quick_ok", "", COMPLETED, [OK], {"quick": 1}))),
    Case("fail_at_once", app.fail_at_once, (1,), HALTED, RETRIES, slots=2,
         check=both(steps(("fail_always", "", FAILED, [ERR]), ("quick_ok", "", COMPLETED, [OK], {"quick": 1})),
                    absent("after"))),
    Case("halt_sibling_finishes", app.halt_held, (1,), HALTED, RETRIES, slots=2, seconds=3,
         check=both(steps(("fail_soon", "", FAILED, [ERR]), ("slow_ok", "", COMPLETED, [OK]),
                          ("after_slow", "", "held", [])), absent("after"))),
    Case("halt_holds_waiting", app.halt_holds_waiting, (1,), HALTED, RETRIES, slots=2, seconds=1,
         check=steps(("ready_sibling", "", COMPLETED, [OK]), ("later", "", "held", []))),
    # A halted run can be cancelled: what its halt held is skipped; the halt reason stays.
    Case("cancel_halted", app.cancel_halted, (1,), CANCELLED, RETRIES, slots=2, seconds=1, cancel_halted=True,
         check=both(steps(("fail_soon", "", FAILED, [ERR]), ("ready_sibling", "", COMPLETED, [OK]),
                          ("later", "", "skipped", [], ("cancelled", None)),
                          ("after", "", "skipped", [], ("cancelled", "later"))),
                    error_is("the run was cancelled"))),
    Case("on_halt", app.on_halt, (1,), HALTED, RETRIES,
         check=steps(("fail_always", "", FAILED, [ERR, ERR]),
                     ("__on_halt__", "", COMPLETED, [OK], [{"reason": RETRIES, "step": "fail_always"}]))),
    Case("cancel_running", app.cancel_chain, (1,), CANCELLED, cancel_at="hang",
         check=both(steps(("hang", "", CANCELLED, [CANCELLED]), ("after", "", "skipped", [], ("cancelled", "hang"))),
                    error_is("the run was cancelled"))),
    # Two open step runs lead to the fan-in: its skip root is the first open one in
    # declaration order.
    Case("cancel_two_branches", app.cancel_two_branches, (1,), CANCELLED, cancel_at="hang_element", slots=2,
         check=steps(("hang", "", CANCELLED, [CANCELLED]), ("hang_element", "", CANCELLED, [CANCELLED]),
                     ("after", "", "skipped", [], ("cancelled", "hang")))),
    Case("cancel_in_expand", app.cancel_expand, (1,), CANCELLED, cancel_at="hang_element",
         check=steps(("hang_element", "0", CANCELLED, [CANCELLED]),
                     ("gather", "", "skipped", [], ("cancelled", "hang_element")))),
    # -- held jobs: a delayed step claimed by a worker before its time, its run stopped then ---------
    # The stop treats the held job as waiting (`ductline.model.stops.begun_by`): its step
    # gets no attempt, and it is never called, not even at its time.
    Case("cancel_while_held", app.held_cancel, (1,), CANCELLED, held="later_called", cancel_held=True, seconds=7,
         check=both(steps(("identity", "", COMPLETED, [OK], 1),
                          ("later_called", "", "skipped", [], ("cancelled", None)),
                          ("after", "", "skipped", [], ("cancelled", "later_called"))),
                    never_called, error_is("the run was cancelled"))),
    Case("deadline_while_held", app.held_deadline, (1,), FAILED, held="later_called", seconds=7,
         check=both(steps(("identity", "", COMPLETED, [OK], 1),
                          ("later_called", "", "skipped", [], ("workflow timeout", None)),
                          ("after", "", "skipped", [], ("workflow timeout", "later_called"))),
                    never_called, deadline_exceeded)),
    # A halt holds it with the run's waiting jobs (a worker once started it at its time).
    Case("halt_while_held", app.held_halt, (1,), HALTED, RETRIES, held="later_called", slots=2, seconds=7,
         check=both(steps(("fail_when_released", "", FAILED, [ERR]), ("ready_sibling", "", COMPLETED, [OK]),
                          ("later_called", "", "held", [])), absent("after"), never_called)),
    Case("fail_fast_while_held", app.held_fail_fast, (1,), HALTED, RETRIES, held="later_called", slots=2,
         seconds=7, check=both(steps(("fail_when_released", "", FAILED, [ERR]),
                                     ("ready_sibling", "", COMPLETED, [OK]), ("later_called", "", "held", [])),
                               absent("after"), never_called)),
    # -- pause ------------------------------------------------------------------------------------
    Case("pause_resume_with_input", app.pause_resume_input, (7,), COMPLETED,
         resume={"approve": {"approved_by": "ana"}},
         check=steps(("approve", "", COMPLETED, [OK], {"approved": {"approved_by": "ana"}}))),
    Case("pause_resume_keeping_input", app.pause_resume_keep, (7,), COMPLETED, resume={"approve": NO_INPUT},
         check=steps(("approve", "", COMPLETED, [OK], {"approved": {"order": 7}}))),
    Case("pause_in_divide", app.pause_divide, (5,), COMPLETED, resume={"approve": {"order": 50}}, slots=2),
    Case("pause_expired", app.pause_expired, (7,), FAILED, "pause_expired", seconds=1,
         check=steps(("approve", "", FAILED, []), ("finish", "", "skipped", [], ("pause expired", "approve")))),
    Case("pause_expired_sibling_running", app.pause_expired_sibling, (7,), FAILED, "pause_expired", slots=2,
         seconds=2, check=steps(("approve", "", FAILED, []), ("hang", "", CANCELLED, [CANCELLED]),
                                ("collect", "", "skipped", [], ("pause expired", "approve")))),
    # -- events -----------------------------------------------------------------------------------
    Case("event_sent_before_the_wait", app.event_before_wait, (7,), COMPLETED, events={"approved": {"by": "ana"}},
         check=steps(("approve", "", COMPLETED, [OK], {"approved": {"by": "ana"}}))),
    Case("event_sent_to_the_wait", app.event_when_waiting, (7,), COMPLETED, events={"approved": "yes"},
         events_when_waiting=True, check=steps(("approve", "", COMPLETED, [OK], {"approved": "yes"}))),
    Case("event_in_divide", app.event_divide, (5,), COMPLETED, events={"approved": None}, slots=2,
         check=steps(("collect", "", COMPLETED, [OK], [{"approved": None}, {"side": 5}]))),
    Case("event_wait_past_the_run_deadline", app.event_past_deadline, (7,), FAILED, seconds=2,
         check=both(steps(("approve", "", "skipped", []), ("finish", "", "skipped", [])), deadline_exceeded)),
    Case("event_timed_out_sibling_running", app.event_timed_out, (7,), FAILED, "event_timed_out", slots=2,
         seconds=1, check=steps(("approve", "", FAILED, []), ("hang", "", CANCELLED, [CANCELLED]),
                                ("collect", "", "skipped", [], ("event timed out", "approve")))),
    # -- expand errors ----------------------------------------------------------------------------
    Case("max_fanout_exceeded", app.max_fanout, (5,), HALTED, "max_fanout_exceeded",
         check=both(steps(("make_list", "", FAILED, [ERR])), absent("square", "gather"))),
    Case("expand_not_a_list", app.expand_not_a_list, (1,), HALTED, "non_retryable_error",
         check=steps(("not_a_list", "", FAILED, [ERR]))),
    # -- limits and payloads --------------------------------------------------------------------------
    Case("concurrency_limited", app.concurrency_limited, (6,), COMPLETED, slots=2,
         check=steps(("gather", "", COMPLETED, [OK], [0, 1, 4, 9, 16, 25]))),
    Case("rate_limited", app.rate_limited, (4,), COMPLETED, slots=4, seconds=1),
    Case("concurrency_key", app.keyed_limit, (4,), COMPLETED, slots=2),
    Case("large_payload", app.large_payload, (3,), COMPLETED),
    Case("large_fan_in", app.large_fan_in, (2,), COMPLETED, slots=2,
         check=steps(("lengths", "", COMPLETED, [OK], [1_200_000, 1_200_001]))),
    # -- step logs --------------------------------------------------------------------------------------
    Case("step_logs", app.step_logs, (1,), COMPLETED, check=step_logs_kept),
    # -- isolation and resource limits ------------------------------------------------------------
    Case("memory_limit_exceeded", app.memory_limited, (1024,), HALTED, RETRIES,
         check=both(steps(("allocate_megabytes", "", FAILED, [ERR, ERR])), absent("never"),
                    errors("allocate_megabytes", "MemoryLimitExceeded", "MemoryLimitExceeded"))),
    Case("cpu_limit_exceeded", app.cpu_limited, (30,), HALTED, RETRIES,
         check=both(steps(("burn_cpu", "", FAILED, [ERR, ERR])), absent("never"),
                    errors("burn_cpu", "CpuLimitExceeded", "CpuLimitExceeded"))),
    Case("garbled_channel", app.garbled_channel, (1,), HALTED, "job_crashes_exhausted", seconds=1,
         check=both(steps(("garble_channel", "", FAILED, ["crashed"])), absent("never"))),
    Case("lifted_limit", app.lifted_limit, (512,), HALTED, RETRIES,  # the step cannot raise a hard limit
         check=both(steps(("lift_limit_then_allocate", "", FAILED, [ERR])), absent("never"),
                    errors("lift_limit_then_allocate", "MemoryLimitExceeded"))),
    Case("within_limits", app.within_limits, (16,), COMPLETED,
         check=steps(("identity", "", COMPLETED, [OK], 16 * 1024 * 1024))),
    Case("clean_state", app.clean_state, (5,), COMPLETED,
         check=steps(("find_env", "", COMPLETED, [OK], {"leftover": None, "umask_077": False}))),
    Case("clean_state_fresh", app.clean_state_fresh, (5,), COMPLETED,
         check=steps(("find_env", "", COMPLETED, [OK], {"leftover": None, "umask_077": False}))),
    Case("unrenderable_error", app.unrenderable_error, (1,), HALTED, RETRIES,
         check=errors("raise_unrenderable", "parity_app.UnrenderableError")),
    # -- child runs -------------------------------------------------------------------------------
    # The parent's step run waits in one row; its children run in their own runs (on a
    # worker in the worker's slots, in execute in the same loop).
    Case("children_outputs", app.children_outputs, (3,), COMPLETED, slots=2,
         check=steps(("start_squares", "", COMPLETED, [OK], [0, 1, 4]), ("sum_of", "", COMPLETED, [OK], 5))),
    Case("children_fail", app.children_fail, (2,), HALTED, "child_run_failed", slots=2,
         check=both(steps(("start_one_failing", "", FAILED, [OK])), absent("sum_of"))),
    Case("children_collect", app.children_collect, (2,), COMPLETED, slots=2,
         check=steps(("statuses", "", COMPLETED, [OK], [4, "halted: job_retries_exhausted: attempt 1 of fail_always fails"]))),
    # A cancel of the parent reaches its children (each ends cancelled; on a worker the
    # harness checks them).
    Case("children_cancel", app.children_cancel, (2,), CANCELLED, slots=2, cancel_awaiting="start_hanging",
         check=both(steps(("start_hanging", "", "skipped", [OK], ("cancelled", None)),
                          ("sum_of", "", "skipped", [], ("cancelled", "start_hanging"))),
                    error_is("the run was cancelled"))),
    Case("children_deadline", app.children_deadline, (2,), FAILED, slots=2, seconds=3,
         check=both(steps(("start_hanging", "", "skipped", [OK], ("workflow timeout", None)),
                          ("sum_of", "", "skipped", [], ("workflow timeout", "start_hanging"))),
                    deadline_exceeded)),
]

assert len({c.name for c in CASES}) == len(CASES), "case names must be unique"
assert len({c.pipeline.name for c in CASES}) == len(CASES), "each case runs its own pipeline"
