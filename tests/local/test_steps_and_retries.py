"""Per-step timeouts, retry budgets (`ductline.model.outcomes`), crashes, safe-only retry, the
JSON rule and the step context, in the in-process executor."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

import ductline
import local_steps as s
from ductline import Pipeline
from local_helpers import FakeClock, pid_alive, read_pids


def name() -> str:
    return f"steps_{uuid.uuid4().hex[:10]}"


def test_a_sync_step_stuck_in_c_is_killed_at_its_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = Pipeline(name()).start(s.identity).chain(to=s.sleep_in_c, timeout=1, max_retry=1) \
        .chain(to=s.double)
    result = ductline.execute(pipeline, {"pidfile": str(pidfile)}, kill_grace=0.5)

    stuck = result.step("sleep_in_c")
    assert stuck.status == "failed" and stuck.error_type == "TimeoutError"
    assert "step timeout of 1 s" in stuck.error and stuck.attempts == 1
    # A halted run records no dependent it never created (a retry could still revive it).
    assert "double" not in result.statuses()
    assert result.overall_status == "failed" and result.status == "halted"
    assert result.metadata["timeout_exceeded"] is False
    assert result.metadata["halt_reason"] == "job_retries_exhausted"
    assert result.metadata["failed_step"] == "sleep_in_c"
    # The kill latency, not a polling interval (SIGTERM ends a C sleep at once).
    assert (stuck.finished_at - stuck.started_at).total_seconds() < 1 + 0.5 + 1.0
    assert all(not pid_alive(pid) for pid in read_pids(pidfile))


def test_timeouts_share_the_retry_budget_and_a_retry_can_succeed(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.slow_then_fast, timeout=1, max_retry=2, retry_delay=7)
    result = ductline.execute(pipeline, 1, clock=clock, kill_grace=0.2)
    assert result.overall_status == "success"
    assert result.output == "second time lucky"
    step = result.step("slow_then_fast")
    assert step.attempts == 2 and step.error is None
    assert clock.sleeps == [7]


def test_retries_then_success_with_a_fake_clock(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.fails_twice, max_retry=3, retry_delay=timedelta(minutes=5)) \
        .chain(to=s.async_fails_twice, max_retry=3)
    began = time.monotonic()
    result = ductline.execute(pipeline, 4, clock=clock, retry_delay=60)
    assert time.monotonic() - began < 10
    assert result.overall_status == "success"
    assert result.output == {"x": {"x": 4, "attempt": 3}, "attempt": 3}
    assert [r.attempts for r in result.steps] == [3, 3]
    assert clock.sleeps == [300, 300, 60, 60]  # the step's retry_delay, then the run's default


def test_max_retry_three_means_at_most_three_failed_attempts(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_fail, max_retry=3, retry_delay=1).chain(to=s.identity)
    result = ductline.execute(pipeline, "x", clock=clock)
    failed = result.step("async_fail")
    assert failed.status == "failed" and failed.attempts == 3
    assert failed.error_type == "ValueError" and failed.error == "always fails: x"
    assert clock.sleeps == [1, 1]
    assert "identity" not in result.statuses()  # never created: the run halted before it
    assert result.status == "halted"
    assert "ValueError" in result.metadata["error"]


@pytest.mark.parametrize("max_retry", [0, 1])
def test_zero_and_one_mean_no_retry(max_retry: int, clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_fail, max_retry=max_retry)
    result = ductline.execute(pipeline, clock=clock)
    assert result.step("async_fail").attempts == 1
    assert clock.sleeps == []


def test_an_async_step_is_cancelled_at_its_timeout() -> None:
    pipeline = Pipeline(name()).start(s.async_sleep_long, timeout=1, max_retry=1)
    result = ductline.execute(pipeline, 1)
    step = result.step("async_sleep_long")
    assert (step.finished_at - step.started_at).total_seconds() < 2
    assert step.status == "failed" and step.error_type == "TimeoutError" and "cancelled" in step.error


def test_a_thread_step_is_interrupted_at_its_timeout() -> None:
    pipeline = Pipeline(name()).start(s.thread_stuck, timeout=1, max_retry=1, isolation="thread")
    result = ductline.execute(pipeline, 1)
    step = result.step("thread_stuck")
    assert (step.finished_at - step.started_at).total_seconds() < 2.5
    assert step.status == "failed" and step.error_type == "TimeoutError" and "interrupted" in step.error


def test_a_thread_step_returns_its_output_and_sees_its_context() -> None:
    pipeline = Pipeline(name()).start(s.writes_context, isolation="thread") \
        .chain(to=s.async_reads_context)
    result = ductline.execute(pipeline, 5)
    assert result.output == {"seen": {"x": 5, "step": "writes_context"}, "missing": "default",
                             "step": "async_reads_context"}


def test_a_class_step_with_an_async_execute_runs_in_its_thread() -> None:
    pipeline = Pipeline(name()).start(s.AsyncTripler, isolation="thread")
    result = ductline.execute(pipeline, 5)
    assert result.overall_status == "success" and result.output == 15


def test_an_async_step_that_cancels_itself_is_an_error(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_cancels_itself, max_retry=1)
    step = ductline.execute(pipeline, 1, clock=clock).step("async_cancels_itself")
    assert (step.status, step.error_type, step.error) == \
        ("failed", "asyncio.exceptions.CancelledError", "the step was cancelled")


def test_a_request_of_a_kind_the_protocol_does_not_have_is_a_protocol_error(clock: FakeClock) -> None:
    # Not answered: only a step writing into its channel sends one (the worker does the same).
    pipeline = Pipeline(name()).start(s.asks_what_the_executor_does_not_know, max_retry=1, max_crash=0)
    step = ductline.execute(pipeline, 1, clock=clock, kill_grace=0.2).step("asks_what_the_executor_does_not_know")
    assert [a.result for a in step.history] == ["crashed"]
    assert step.error_type == "ductline.ProtocolError" and "no_such_request" in (step.error or "")


def test_a_result_under_another_attempts_lease_is_dropped(caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # A command run earlier in this process may have made ductline's logs stop at its handler.
    monkeypatch.setattr(logging.getLogger("ductline"), "propagate", True)
    pipeline = Pipeline(name()).start(s.sends_a_stale_result_first, max_retry=1)
    result = ductline.execute(pipeline, 1)
    assert "Result of an attempt that is no longer current dropped" in caplog.text
    assert result.overall_status == "success" and result.output == 2  # its own result, not the stale 999
    assert [a.result for a in result.step("sends_a_stale_result_first").history] == ["succeeded"]


def test_a_child_that_cannot_be_started_fails_the_attempt(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "no-such-python"))
    pipeline = Pipeline(name()).start(s.identity, max_retry=1)
    step = ductline.execute(pipeline, 1).step("identity")
    assert (step.status, step.error_type) == ("failed", "FileNotFoundError")
    assert step.error.startswith("cannot start a child process: [Errno 2] No such file or directory")


def test_a_fresh_step_does_not_take_the_idle_child_a_step_before_it_used(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = (Pipeline(name()).start(s.pid_of_this_process)
                .chain(to=s.pid_of_this_process, name="fresh", isolation="fresh"))
    result = ductline.execute(pipeline, concurrency=1)
    used, fresh = result.step("pid_of_this_process").output, result.step("fresh").output
    assert used != fresh
    assert not pid_alive(used)  # the used child was killed, not left idle


def test_a_crash_uses_the_crash_budget(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.exits_hard, max_crash=2, max_retry=5)
    result = ductline.execute(pipeline, 1, clock=clock)
    step = result.step("exits_hard")
    assert step.status == "failed" and step.error_type == "ChildDied" and "code 3" in step.error
    assert step.attempts == 2
    assert clock.sleeps == [1.0]  # crash backoff
    assert result.metadata["halt_reason"] == "job_crashes_exhausted"


def test_a_failure_after_cross_boundary_is_not_retried(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.crosses_then_fails, max_retry=3)
    result = ductline.execute(pipeline, 1, clock=clock)
    step = result.step("crosses_then_fails")
    assert step.status == "failed" and step.attempts == 1
    assert result.metadata["halt_reason"] == "unsafe_to_retry"
    assert step.error == "failed after the boundary"
    assert "crossed boundary 'charged the card'" in result.metadata["error"]
    assert clock.sleeps == []


def test_outputs_that_do_not_round_trip_are_errors(clock: FakeClock) -> None:
    sync = ductline.execute(Pipeline(name()).start(s.returns_frozenset, max_retry=3), 1, clock=clock)
    assert sync.step("returns_frozenset").error_type == "ductline.PayloadNotSerializable"
    assert "does not round-trip" in sync.step("returns_frozenset").error
    assert sync.step("returns_frozenset").attempts == 1  # the same output would fail again: not retried
    assert sync.metadata["halt_reason"] == "non_retryable_error"
    kept = ductline.execute(Pipeline(name()).start(s.returns_tuple, max_retry=1), 1, clock=clock)
    assert kept.output == (1, 1)  # a tuple round-trips with its tag
    in_loop = ductline.execute(Pipeline(name()).start(s.async_returns_set, max_retry=1), 1, clock=clock)
    assert in_loop.step("async_returns_set").error_type == "ductline.PayloadNotSerializable"


def test_arguments_that_do_not_round_trip_are_refused_before_anything_runs() -> None:
    pipeline = Pipeline(name()).start(s.identity)
    with pytest.raises(TypeError, match="round-trip"):
        ductline.execute(pipeline, {1, 2})


def test_bad_options_are_refused() -> None:
    pipeline = Pipeline(name()).start(s.async_identity)
    with pytest.raises(ValueError):
        ductline.execute(pipeline, timeout=0)
    with pytest.raises(ValueError):
        ductline.execute(pipeline, timeout=-1)
    with pytest.raises(TypeError):
        ductline.execute(pipeline, timeout="5")
    with pytest.raises(TypeError):
        ductline.execute(pipeline, timeout=True)
    with pytest.raises(ValueError):
        ductline.execute(pipeline, concurrency=0)
    with pytest.raises(TypeError):
        ductline.execute("not a pipeline")


def test_execute_refuses_a_running_loop_and_execute_async_works_there() -> None:
    pipeline = Pipeline(name()).start(s.add_one).chain(to=s.async_add_one)

    async def main() -> ductline.WorkflowResult:
        with pytest.raises(RuntimeError, match="execute_async"):
            ductline.execute(pipeline, 1)
        return await ductline.execute_async(pipeline, 1)

    assert asyncio.run(main()).output == 3


def test_context_values_are_shared_by_the_steps_of_a_run() -> None:
    pipeline = Pipeline(name()).start(s.writes_context).chain(to=s.async_reads_context)
    result = ductline.execute(pipeline, 3)
    assert result.output == {"seen": {"x": 3, "step": "writes_context"}, "missing": "default",
                             "step": "async_reads_context"}
    with pytest.raises(ductline.ExecutionError):
        ductline.context()  # nothing leaks out of the run


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_a_context_key_with_a_lone_surrogate_is_refused_not_stored_as_another(isolation: str) -> None:
    pipeline = Pipeline(name()).start(s.sets_a_key_that_would_alias, isolation=isolation)
    result = ductline.execute(pipeline, 1)
    assert result.status == "completed", result
    assert result.output["kept"] == "its own"
    assert "context keys cannot contain lone surrogates" in result.output["refused"]


def test_class_steps_and_children_are_reused() -> None:
    pipeline = (Pipeline(name()).start(s.pid_of_this_process)
                .chain(to=s.pid_of_this_process, name="again").chain(to=s.Doubler))
    result = ductline.execute(pipeline, concurrency=1)
    first, again = result.step("pid_of_this_process").output, result.step("again").output
    assert first == again, "one child runs consecutive attempts"
    assert result.output == first * 2


def test_a_failing_app_import_is_refused_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "breaks_in_children.py"
    module.write_text(
        "import os\n"
        "if os.getpid() != int(os.environ['PARENT']):\n"
        "    raise ImportError('cannot import me in a child')\n"
        "def step(x):\n"
        "    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PARENT", str(os.getpid()))
    import breaks_in_children

    pipeline = Pipeline(name()).start(breaks_in_children.step, max_retry=1)
    with pytest.raises(ductline.DefinitionError, match="cannot import me in a child"):
        ductline.execute(pipeline, 1)


def test_a_scaled_timeout_is_sized_by_the_attempt() -> None:
    timeouts = pytest.importorskip("ductline.dsl.timeouts")

    def scaled() -> object:
        return timeouts.ScaledTimeout(floor=1, cap=5, size=s.size_of, seconds_per_unit=1)

    def pipeline(step: object) -> Pipeline:
        return Pipeline(name()).start(step, timeout=scaled(), max_retry=1)

    # Sized 2 s in the child: 1.3 s of work fits although the floor is 1 s.
    assert ductline.execute(pipeline(s.sleeps_a_while), 2).output == 2
    # Sized at the floor: the same work is killed.
    small = ductline.execute(pipeline(s.sleeps_a_while), 0, kill_grace=0.2)
    assert small.step("sleeps_a_while").error_type == "TimeoutError"
    assert "step timeout of 1 s" in small.step("sleeps_a_while").error
    # In the loop the size is computed before the step starts.
    assert ductline.execute(pipeline(s.async_sleeps_a_while), 2).output == 2


# -- a step that cannot take its arguments ------------------------------------------------
@pytest.mark.parametrize(("step", "label"), [
    pytest.param(s.takes_two, "takes_two(a, b)", id="function"),
    pytest.param(s.async_takes_two, "async_takes_two(a, b)", id="async"),
    pytest.param(s.TakesTwo, "TakesTwo(a, b)", id="class"),
])
@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_a_step_given_arguments_its_signature_cannot_take_halts_at_the_first_attempt(
        clock: FakeClock, step: object, label: str, isolation: str) -> None:
    # Default retry options: before this rule the run made three attempts.
    pipeline = Pipeline(name()).start(s.identity).chain(to=step, name="adder", isolation=isolation)
    result = ductline.execute(pipeline, 5, clock=clock)
    adder = result.step("adder")
    assert result.status == "halted" and result.metadata["halt_reason"] == "non_retryable_error"
    assert adder.status == "failed" and adder.attempts == 1
    assert adder.error_type == "ductline.StepSignatureError"
    assert adder.error.startswith(f"step 'adder' cannot take its arguments: it expects {label} but got "
                                  "1 argument (int) (missing a required argument: 'b')"), adder.error


def test_too_many_trigger_arguments_halt_the_first_step_at_once(clock: FakeClock) -> None:
    result = ductline.execute(Pipeline(name()).start(s.double), 1, 2, clock=clock)
    double = result.step("double")
    assert double.attempts == 1 and double.error_type == "ductline.StepSignatureError"
    assert "expects double(x) but got 2 arguments (int, int) (too many positional arguments)" in double.error


def test_a_type_error_from_a_steps_body_is_retried(clock: FakeClock) -> None:
    result = ductline.execute(Pipeline(name()).start(s.type_error_in_body_first), 5, clock=clock)
    step = result.step("type_error_in_body_first")
    assert result.status == "completed" and result.output == 5
    assert [a.result for a in step.history] == ["errored", "succeeded"]
    assert step.history[0].error_type == "TypeError"
