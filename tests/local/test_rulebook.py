"""The in-process executor decides as a worker does (`ductline.model`): retry
options, requested retries, halts that hold what waits, fail-fast, the on_halt
handler, attempt histories and skip roots."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import ductline
import local_steps as s
from ductline import Backoff, Pipeline
from local_helpers import FakeClock, pid_alive, read_pids


def name() -> str:
    return f"rules_{uuid.uuid4().hex[:10]}"


def history(result: ductline.WorkflowResult, step: str) -> list[tuple[int, str, str | None]]:
    return [(a.attempt, a.result, a.error_type) for a in result.step(step).history]


def test_no_retry_on_makes_one_attempt_and_halts_non_retryable(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_fail, no_retry_on=[ValueError], max_retry=3)
    result = ductline.execute(pipeline, "x", clock=clock)
    step = result.step("async_fail")
    assert step.status == "failed" and step.attempts == 1
    assert history(result, "async_fail") == [(1, "errored", "ValueError")]
    assert result.status == "halted" and result.metadata["halt_reason"] == "non_retryable_error"
    assert clock.sleeps == []


def test_retry_on_retries_past_the_budget(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_key_error_twice, retry_on=[KeyError], max_retry=1, retry_delay=2)
    result = ductline.execute(pipeline, 5, clock=clock)
    assert result.status == "completed" and result.output == {"x": 5, "attempt": 3}
    assert clock.sleeps == [2, 2]


def test_a_requested_retry_is_free(clock: FakeClock) -> None:
    pipeline = (Pipeline(name()).start(s.async_asks_retry_once, max_retry=1)
                .chain(to=s.asks_retry_once, max_retry=1))
    result = ductline.execute(pipeline, 7, clock=clock)
    assert result.status == "completed" and result.output == 7
    for step in ("async_asks_retry_once", "asks_retry_once"):
        assert history(result, step) == [(1, "errored", "ductline.Retry"), (2, "succeeded", None)]
        assert result.step(step).history[0].error == "retry requested in 0 s: not ready yet"
    assert clock.sleeps == []  # Retry(0): no wait


def test_a_backoff_spaces_the_retries(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.async_fail, max_retry=4, retry_delay=Backoff.linear(2, cap=5))
    result = ductline.execute(pipeline, 1, clock=clock)
    assert result.step("async_fail").attempts == 4
    assert clock.sleeps == [2, 4, 5]


def test_a_too_large_output_is_never_retried(clock: FakeClock, monkeypatch) -> None:
    monkeypatch.setenv("DUCTLINE_PAYLOAD_MAX_BYTES", "1024")
    pipeline = Pipeline(name()).start(s.make_list, max_retry=3).expand(to=s.async_identity) \
        .collapse(into=s.gather)
    result = ductline.execute(pipeline, 1000, clock=clock)
    assert history(result, "make_list") == [(1, "errored", "ductline.PayloadTooLarge")]
    assert result.metadata["halt_reason"] == "non_retryable_error"


def test_a_halt_holds_the_retry_of_a_running_sibling(clock: FakeClock) -> None:
    pipeline = (Pipeline(name()).start(s.async_identity)
                .divide(to=[s.async_fail, s.async_fail_later], max_retry=3)
                .combine(into=s.gather))
    result = ductline.execute(pipeline, 1, clock=clock)
    assert result.status == "halted"
    # async_fail used up its budget (3 attempts, no real wait) before its sibling failed once.
    later = result.step("async_fail_later")
    assert later.status == "held" and later.attempts == 1 and later.finished_at is None
    assert history(result, "async_fail_later") == [(1, "errored", "RuntimeError")]
    assert "gather" not in result.statuses()


def test_completions_in_a_halted_run_create_held_step_runs() -> None:
    pipeline = Pipeline(name()).start(s.async_identity).divide(to=[s.async_fail, s.async_sleep_short],
                                                               max_retry=1)
    pipeline.branch(s.async_sleep_short).chain(to=s.async_add_one)
    pipeline.combine(into=s.gather)
    result = ductline.execute(pipeline, 1)
    assert result.status == "halted"
    assert result.statuses() == {"async_identity": "completed", "async_fail": "failed",
                                 "async_sleep_short": "completed", "async_add_one": "held"}
    assert result.step("async_add_one").attempts == 0


def test_fail_fast_cancels_running_siblings_at_once(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = (Pipeline(name(), on_failure="fail_fast").start(s.identity)
                .divide(to=[s.sleep_in_c, s.async_sleep_long, s.async_fail_later], max_retry=1)
                .combine(into=s.gather).on_halt(s.record_halt))
    began = time.monotonic()
    result = ductline.execute(pipeline, {"pidfile": str(pidfile)}, kill_grace=0.5)
    assert time.monotonic() - began < 20  # not the 30 s the siblings would take
    assert result.status == "halted" and result.metadata["failed_step"] == "async_fail_later"
    for sibling in ("sleep_in_c", "async_sleep_long"):
        step = result.step(sibling)
        assert step.status == "cancelled"
        assert history(result, sibling) == [(1, "cancelled", "Cancelled")]
        assert step.error == "cancelled because step 'async_fail_later' failed (fail_fast)"
    assert "gather" not in result.statuses()
    assert result.step("__on_halt__").status == "completed"
    assert all(not pid_alive(pid) for pid in read_pids(pidfile))


def test_on_halt_runs_once_and_its_failure_halts_nothing() -> None:
    pipeline = (Pipeline(name()).start(s.async_identity).divide(to=[s.async_fail, s.async_fail_later],
                                                                max_retry=1)
                .combine(into=s.gather).on_halt(s.async_record_halt_and_fail))
    result = ductline.execute(pipeline, "boom")
    handlers = [r for r in result.steps if r.step == "__on_halt__"]
    assert len(handlers) == 1 and handlers[0].status == "failed"
    assert result.steps[-1].step == "__on_halt__"
    assert result.status == "halted"
    assert result.metadata["halt_reason"] == "job_retries_exhausted"
    assert result.metadata["failed_step"] == "async_fail"  # the sibling's later failure is no new halt
    assert result.step("async_fail_later").status == "failed"


def test_skip_roots_name_the_open_step_each_dependent_was_reached_from() -> None:
    pipeline = Pipeline(name()).start(s.async_identity).divide(to=[s.async_sleep_long, s.async_tag_b])
    pipeline.branch(s.async_sleep_long).chain(to=s.async_add_one)
    pipeline.branch(s.async_tag_b).chain(to=s.async_identity, name="after_b", delay=60)
    pipeline.combine(into=s.gather).chain(to=s.double)
    result = ductline.execute(pipeline, 1, timeout=1)
    assert result.status == "failed" and result.metadata["timeout_exceeded"] is True
    rows = {r.step: (r.status, r.skip_reason, r.skip_root) for r in result.steps}
    assert rows == {
        "async_identity": ("completed", None, None),
        "async_sleep_long": ("failed", None, None),
        "async_tag_b": ("completed", None, None),
        "async_add_one": ("skipped", "workflow timeout", "async_sleep_long"),
        "after_b": ("skipped", "workflow timeout", None),  # it was waiting (its delay): a root itself
        # Breadth first from every open step run: the fan-in is one hop from after_b.
        "gather": ("skipped", "workflow timeout", "after_b"),
        "double": ("skipped", "workflow timeout", "after_b"),
    }
    assert history(result, "async_sleep_long") == [(1, "timed_out", "TimeoutError")]
