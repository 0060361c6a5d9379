"""The whole-run deadline of the in-process executor (DESIGN.md, "Whole-run
timeout"): in-flight steps stopped (children killed), dependents and everything not
started skipped with "workflow timeout", a result returned, never an exception."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from pathlib import Path

import pytest

import ductline
import local_steps as s
from ductline import Pipeline
from local_helpers import FakeClock, pid_alive, read_pids

GRACE = 0.5
# The stuck steps below would hold their run for 30 s (a libc sleep, an asyncio sleep
# that swallows the first cancel): a result well before that shows the deadline, not
# the step, ended it -- without timing how fast this machine is.
HELD = 25.0
# Long enough for a quick step (in a child started on a loaded machine) to finish first.
ROOMY = 6.0


def name() -> str:
    return f"deadline_{uuid.uuid4().hex[:10]}"


def assert_timeout_metadata(result: ductline.WorkflowResult, seconds: float) -> None:
    assert result.overall_status == "failed"
    assert result.metadata["timeout_exceeded"] is True
    assert result.metadata["timeout_seconds"] == seconds
    # Word for word what a worker records for the run (`ductline show --json`, `ductline runs`).
    assert result.metadata["error"] == f"the run exceeded its deadline of {seconds:g} s"
    assert result.metadata["error_type"] == "TimeoutError"
    assert result.metadata["output"] is None


def test_chain_with_the_deadline_inside_a_step_stuck_in_c(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = Pipeline(name()).start(s.identity).chain(to=s.sleep_in_c).chain(to=s.double)
    began = time.monotonic()
    result = ductline.execute(pipeline, {"pidfile": str(pidfile)}, timeout=ROOMY, kill_grace=GRACE)
    elapsed = time.monotonic() - began

    assert_timeout_metadata(result, ROOMY)
    assert [r.step for r in result.steps] == ["identity", "sleep_in_c", "double"]
    a, b, c = result.steps
    assert a.status == "completed" and a.output == {"pidfile": str(pidfile)}
    assert b.status == "failed" and b.error_type == "TimeoutError"
    assert "run deadline" in b.error and b.attempts == 1
    assert b.started_at is not None and b.finished_at is not None and b.finished_at > b.started_at
    assert b.finished_at.tzinfo is not None
    assert c.status == "skipped" and c.skip_reason == "workflow timeout" and c.attempts == 0
    # The deadline starts as the first attempt starts: never early, and the kill ended it.
    assert ROOMY <= (b.finished_at - a.started_at).total_seconds() < HELD
    assert elapsed < HELD
    pids = read_pids(pidfile)
    assert len(pids) == 1 and not pid_alive(pids[0]), "the child running the step was killed"


def test_divide_keeps_the_finished_branch_and_skips_the_fan_in(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = (Pipeline(name()).start(s.identity)
                .divide(to=[s.quick, s.sleep_in_c])
                .combine(into=s.gather).chain(to=s.identity, name="after"))
    result = ductline.execute(pipeline, {"pidfile": str(pidfile)}, timeout=ROOMY, kill_grace=GRACE)

    assert_timeout_metadata(result, ROOMY)
    statuses = result.statuses()
    assert statuses == {"identity": "completed", "quick": "completed", "sleep_in_c": "failed",
                        "gather": "skipped", "after": "skipped"}
    assert result.step("quick").output == {"pidfile": str(pidfile)}
    assert result.step("sleep_in_c").error_type == "TimeoutError"
    assert result.step("gather").skip_reason == "workflow timeout"
    assert result.step("after").skip_reason == "workflow timeout"
    assert all(not pid_alive(pid) for pid in read_pids(pidfile))


def test_a_deadline_during_a_delay_skips_the_delayed_step() -> None:
    clock = FakeClock(scale=1.0)  # real delays, recorded
    pipeline = Pipeline(name()).start(s.async_identity).chain(to=s.async_add_one, delay=5) \
        .chain(to=s.double)
    began = time.monotonic()
    result = ductline.execute(pipeline, 1, timeout=1, clock=clock)
    elapsed = time.monotonic() - began

    assert_timeout_metadata(result, 1)
    assert result.statuses() == {"async_identity": "completed", "async_add_one": "skipped",
                                 "double": "skipped"}
    delayed = result.step("async_add_one")
    assert delayed.skip_reason == "workflow timeout" and delayed.attempts == 0
    assert delayed.started_at is None
    assert clock.sleeps == [5]
    assert elapsed < HELD


def test_the_start_delay_does_not_count_against_the_deadline() -> None:
    clock = FakeClock(scale=0.5)  # a 3 s start delay takes 1.5 s, more than the deadline
    pipeline = Pipeline(name()).start(s.async_add_one, delay=3).chain(to=s.async_add_one, name="second")
    result = ductline.execute(pipeline, 1, timeout=1, clock=clock)
    assert result.overall_status == "success", result.metadata
    assert result.output == 3
    assert result.metadata["timeout_exceeded"] is False
    assert clock.sleeps == [3]


def test_delays_between_steps_count_against_the_deadline() -> None:
    clock = FakeClock(scale=0.5)
    pipeline = Pipeline(name()).start(s.async_add_one).chain(to=s.async_identity, delay=3)
    result = ductline.execute(pipeline, 1, timeout=1, clock=clock)
    assert result.metadata["timeout_exceeded"] is True
    assert result.step("async_identity").skip_reason == "workflow timeout"


def test_an_async_step_that_swallows_cancellation_cannot_hold_the_deadline() -> None:
    pipeline = Pipeline(name()).start(s.async_swallows_cancel).chain(to=s.async_identity)
    began = time.monotonic()
    result = ductline.execute(pipeline, 1, timeout=1, kill_grace=GRACE)
    elapsed = time.monotonic() - began

    assert_timeout_metadata(result, 1)
    stuck = result.step("async_swallows_cancel")
    assert stuck.status == "failed" and stuck.error_type == "TimeoutError"
    assert result.step("async_identity").skip_reason == "workflow timeout"
    assert elapsed < HELD  # the step would have held the run 30 s


def test_a_sync_step_and_an_async_step_both_in_flight_at_the_deadline(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = (Pipeline(name()).start(s.identity)
                .divide(to=[s.sleep_in_c, s.async_sleep_long]).combine(into=s.gather))
    result = ductline.execute(pipeline, {"pidfile": str(pidfile)}, timeout=1, kill_grace=GRACE)
    assert result.step("sleep_in_c").error_type == "TimeoutError"
    assert result.step("async_sleep_long").error_type == "TimeoutError"
    assert result.step("gather").skip_reason == "workflow timeout"
    assert all(not pid_alive(pid) for pid in read_pids(pidfile))


def test_the_pipeline_timeout_applies_when_execute_gives_none() -> None:
    pipeline = Pipeline(name(), timeout=1).start(s.async_sleep_long)
    result = ductline.execute(pipeline, 1)
    assert result.metadata["timeout_exceeded"] is True
    assert result.metadata["timeout_seconds"] == 1


def test_expanded_steps_not_started_at_the_deadline_are_skipped() -> None:
    pipeline = (Pipeline(name()).start(s.make_list).expand(to=s.sleep_python)
                .collapse(into=s.gather))
    result = ductline.execute(pipeline, 3, timeout=1, concurrency=1, kill_grace=GRACE)
    assert result.metadata["timeout_exceeded"] is True
    elements = [r for r in result.steps if r.step == "sleep_python"]
    assert [r.index for r in elements] == [0, 1, 2]
    assert elements[0].status == "failed" and elements[0].error_type == "TimeoutError"
    assert [r.status for r in elements[1:]] == ["skipped", "skipped"]
    assert all(r.skip_reason == "workflow timeout" for r in elements[1:])
    assert result.step("gather").skip_reason == "workflow timeout"


def test_a_deadline_before_an_expand_skips_its_collapse_not_its_unknown_elements() -> None:
    # How many elements there would have been is unknown: the cascade goes on at the collapse.
    pipeline = (Pipeline(name()).start(s.async_sleep_long).expand(to=s.square)
                .chain(to=s.double).collapse(into=s.gather))
    result = ductline.execute(pipeline, 3, timeout=1)
    assert [(r.step, r.status, r.index, r.scope) for r in result.steps] == [
        ("async_sleep_long", "failed", None, ""),
        ("gather", "skipped", None, ""),
    ]
    assert result.step("gather").skip_root == "async_sleep_long"


def test_no_task_is_destroyed_pending_and_nothing_is_logged_by_asyncio(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    pipeline = (Pipeline(name()).start(s.identity)
                .divide(to=[s.async_swallows_cancel, s.async_sleep_long, s.sleep_python])
                .combine(into=s.gather))
    result = ductline.execute(pipeline, 1, timeout=1, kill_grace=GRACE)
    assert result.metadata["timeout_exceeded"] is True
    gc.collect()
    messages = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert not any("destroyed" in m or "never retrieved" in m for m in messages), messages


def test_execute_async_under_a_caller_loop_leaves_no_task_behind() -> None:
    async def main() -> ductline.WorkflowResult:
        before = asyncio.all_tasks()
        pipeline = Pipeline(name()).start(s.async_sleep_long).chain(to=s.async_identity)
        result = await ductline.execute_async(pipeline, 1, timeout=0.5)
        assert asyncio.all_tasks() == before
        return result

    result = asyncio.run(main())
    assert result.metadata["timeout_exceeded"] is True


def test_cancelling_execute_async_kills_children_and_leaves_no_task(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    events: list[dict] = []

    async def main() -> None:
        before = asyncio.all_tasks()
        pipeline = Pipeline(name()).start(s.identity).divide(to=[s.sleep_in_c, s.async_sleep_long]) \
            .combine(into=s.gather)
        run = asyncio.create_task(ductline.execute_async(pipeline, {"pidfile": str(pidfile)},
                                                         on_update=events.append, kill_grace=GRACE))
        while not pidfile.exists():
            await asyncio.sleep(0.02)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert asyncio.all_tasks() == before

    asyncio.run(main())
    assert all(not pid_alive(pid) for pid in read_pids(pidfile))
    assert events[-1]["type"] == "workflow_end" and events[-1]["status"] == "cancelled"
    ends = {e["step"]: e["status"] for e in events if e["type"] == "step_end"}
    assert ends["sleep_in_c"] == "cancelled" and ends["async_sleep_long"] == "cancelled"


def test_a_run_that_ends_in_time_is_not_a_timeout() -> None:
    pipeline = Pipeline(name()).start(s.add_one).chain(to=s.async_add_one)
    result = ductline.execute(pipeline, 1, timeout=30)
    assert result.overall_status == "success"
    assert result.metadata["timeout_exceeded"] is False
    assert result.metadata["timeout_seconds"] == 30
    assert result.metadata["error"] is None
    assert result.output == 3
