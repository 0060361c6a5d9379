"""Pauses, resumes and cancels in the in-process executor, with a worker's rules:
a paused step run waits without an attempt, a resume (the ``resume`` option or
`LocalRun.resume`) lets it run with its input or a new one, a pause that expires
fails the run closed, and a cancel ends the run and returns a result."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

import ductline
import local_steps as s
from ductline import Pipeline
from ductline.handle import NO_INPUT
from ductline.local import start
from local_helpers import FakeClock, pid_alive, read_pids, until


def name() -> str:
    return f"pause_{uuid.uuid4().hex[:10]}"


def chain(timeout: int | None = None) -> Pipeline:
    """async_identity -> [pause] approve -> async_identity (as "finish")."""
    return (Pipeline(name()).start(s.async_identity).chain(to=s.approve)
            .chain(to=s.async_identity, name="finish").pause(before=s.approve, timeout=timeout))


def test_a_resume_with_a_new_input() -> None:
    events: list[dict[str, Any]] = []
    result = ductline.execute(chain(), {"order": 7}, resume={"approve": "yes"}, on_update=events.append)
    assert result.status == "completed" and result.output == {"approved": "yes"}
    kinds = [(e["type"], e.get("step")) for e in events if e["type"].startswith("step_")]
    assert kinds[2:5] == [("step_paused", "approve"), ("step_resumed", "approve"), ("step_start", "approve")]
    assert next(e for e in events if e["type"] == "step_resumed")["input_replaced"] is True


def test_a_resume_that_keeps_the_paused_input() -> None:
    result = ductline.execute(chain(), {"order": 7}, resume={"approve": NO_INPUT})
    assert result.output == {"approved": {"order": 7}}


def test_a_resume_callable_sees_the_paused_input_and_may_be_async() -> None:
    seen = []

    async def decide(step: str, value: Any) -> Any:
        seen.append((step, value))
        await asyncio.sleep(0)
        return NO_INPUT if value == {"order": 1} else {**value, "checked": True}

    assert ductline.execute(chain(), {"order": 1}, resume=decide).output == {"approved": {"order": 1}}
    assert ductline.execute(chain(), {"order": 2}, resume=lambda step, v: {**v, "by": step}).output == \
        {"approved": {"order": 2, "by": "approve"}}
    assert ductline.execute(chain(), {"order": 3}, resume=decide).output == \
        {"approved": {"order": 3, "checked": True}}
    assert seen == [("approve", {"order": 1}), ("approve", {"order": 3})]


def test_a_resumed_step_still_waits_out_its_delay(clock: FakeClock) -> None:
    pipeline = (Pipeline(name()).start(s.async_identity).chain(to=s.approve, delay=30)
                .pause(before=s.approve))
    result = ductline.execute(pipeline, 1, resume={"approve": 2}, clock=clock)
    assert result.output == {"approved": 2}
    assert len(clock.sleeps) == 1 and 29 < clock.sleeps[0] <= 30


def test_a_pause_without_timeout_or_resume_is_refused_before_anything_runs() -> None:
    with pytest.raises(ductline.DefinitionError, match="pauses before step 'approve' without a timeout"):
        ductline.execute(chain(), 1)
    with pytest.raises(ductline.DefinitionError):
        ductline.execute(chain(), 1, resume={})


def test_bad_resume_options_are_refused() -> None:
    with pytest.raises(ValueError, match="resume names step 'finish'"):
        ductline.execute(chain(), 1, resume={"approve": 1, "finish": 2})
    with pytest.raises(TypeError, match="round-trip"):
        ductline.execute(chain(), 1, resume={"approve": {1, 2}})
    with pytest.raises(TypeError, match="resume must be"):
        ductline.execute(chain(), 1, resume=["approve"])


def test_a_pause_that_expires_fails_the_run_closed(clock: FakeClock) -> None:
    result = ductline.execute(chain(timeout=30), {"order": 7}, clock=clock)
    assert clock.sleeps == [30]
    assert result.status == "failed" and result.overall_status == "failed"
    assert result.metadata["halt_reason"] == "pause_expired"
    assert result.metadata["pause_expired"] is True and result.metadata["paused_step"] == "approve"
    assert result.metadata["error"] == "pause before step 'approve' expired after 30 s without a resume"
    approve = result.step("approve")
    assert approve.status == "failed" and approve.attempts == 0 and approve.history == ()
    finish = result.step("finish")
    assert (finish.status, finish.skip_reason, finish.skip_root) == ("skipped", "pause expired", "approve")


def test_a_pause_expiry_cancels_a_running_sibling() -> None:
    clock = FakeClock(scale=0.05)  # a pause of 10 s lasts half a second
    pipeline = (Pipeline(name()).start(s.async_identity).divide(to=[s.approve, s.async_sleep_long])
                .combine(into=s.gather).pause(before=s.approve, timeout=10))
    result = ductline.execute(pipeline, 1, clock=clock)
    assert result.status == "failed" and result.metadata["halt_reason"] == "pause_expired"
    sibling = result.step("async_sleep_long")
    assert sibling.status == "cancelled" and sibling.history[0].result == "cancelled"
    assert sibling.error == "cancelled because the pause before step 'approve' expired after 10 s without a resume"
    assert result.step("gather").skip_root == "approve"  # the first open step run, breadth first


def test_the_first_pause_to_expire_fails_the_run_and_skips_the_other_paused_elements(
        clock: FakeClock) -> None:
    pipeline = (Pipeline(name()).start(s.make_list).expand(to=s.approve).collapse(into=s.gather)
                .pause(before=s.approve, timeout=5))
    result = ductline.execute(pipeline, 2, clock=clock)
    assert result.metadata["halt_reason"] == "pause_expired"
    assert [r.status for r in result.steps if r.step == "approve"] == ["failed", "skipped"]
    assert result.step("approve", 1).skip_root == "approve"


def test_start_resume_and_cancel_through_the_handle() -> None:
    pipeline = (Pipeline(name()).start(s.make_list).expand(to=s.approve).collapse(into=s.gather)
                .pause(before=s.approve))

    async def main() -> tuple[ductline.WorkflowResult, ductline.WorkflowResult]:
        run = start(pipeline, 2)
        await until(lambda: run.status == "paused")
        with pytest.raises(ductline.InvalidStateError, match="2 paused step runs"):
            run.resume(input="one for both")
        assert run.resume() == ["approve"]
        resumed = await run.result()
        with pytest.raises(ductline.InvalidStateError):
            run.cancel()  # it ended

        waiting = start(pipeline, 2)
        await until(lambda: waiting.status == "paused")
        waiting.cancel()
        return resumed, await waiting.result()

    resumed, cancelled = asyncio.run(main())
    assert resumed.status == "completed" and resumed.output == [{"approved": 0}, {"approved": 1}]
    assert cancelled.status == "cancelled" and cancelled.metadata["cancelled"] is True
    assert [(r.status, r.skip_reason) for r in cancelled.steps if r.step == "approve"] == \
        [("skipped", "cancelled")] * 2
    assert cancelled.step("gather").skip_root == "approve"


def test_cancel_kills_children_and_skips_what_follows(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = Pipeline(name()).start(s.identity).chain(to=s.sleep_in_c).chain(to=s.double)

    async def main() -> ductline.WorkflowResult:
        before = asyncio.all_tasks()
        run = start(pipeline, {"pidfile": str(pidfile)}, kill_grace=0.5)
        await until(pidfile.exists)
        assert run.status == "running"
        run.cancel()
        assert run.status == "cancelled"
        result = await run.result()
        assert asyncio.all_tasks() == before
        return result

    result = asyncio.run(main())
    assert result.status == "cancelled" and result.overall_status == "failed"
    stuck = result.step("sleep_in_c")
    assert stuck.status == "cancelled"
    assert [(a.result, a.error_type, a.error) for a in stuck.history] == \
        [("cancelled", "Cancelled", "the run was cancelled")]
    double = result.step("double")
    assert (double.status, double.skip_reason, double.skip_root) == ("skipped", "cancelled", "sleep_in_c")
    assert all(not pid_alive(pid) for pid in read_pids(pidfile))


def test_cancel_interrupts_a_thread_step(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    pipeline = Pipeline(name()).start(s.thread_stuck_until_interrupted, isolation="thread").chain(to=s.double)

    async def main() -> ductline.WorkflowResult:
        run = start(pipeline, str(pidfile))
        await until(pidfile.exists)
        run.cancel()
        return await run.result()

    result = asyncio.run(main())
    assert result.status == "cancelled"
    assert result.step("thread_stuck_until_interrupted").status == "cancelled"
    assert (tmp_path / "pids.interrupted").read_text() == "StepInterrupted"  # it unwound in its thread
    assert result.step("double").skip_reason == "cancelled"


def _child_pids() -> list[int]:
    """Processes this test process started that are still its children."""
    found: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as children:
            found.extend(int(pid) for pid in children.read().split())
    return found


def test_cancelling_the_awaiting_task_while_the_first_child_starts_kills_it() -> None:
    pipeline = Pipeline(name()).start(s.identity)

    async def main() -> list[int]:
        before = set(_child_pids())
        task = asyncio.create_task(ductline.execute_async(pipeline, 1))
        await until(lambda: bool(set(_child_pids()) - before))  # its child is starting up
        starting = sorted(set(_child_pids()) - before)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return starting

    starting = asyncio.run(main())
    assert starting and not any(pid_alive(pid) for pid in starting)


def test_a_failing_resume_callable_is_raised_after_the_run_is_cancelled() -> None:
    def broken(step: str, value: Any) -> Any:
        raise LookupError("no decision")

    with pytest.raises(LookupError, match="no decision"):
        ductline.execute(chain(), 1, resume=broken)
