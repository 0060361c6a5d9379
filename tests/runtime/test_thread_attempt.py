"""A thread-isolated attempt is over once its step has finished, not once the
interpreter has retired its thread."""

from __future__ import annotations

import select
import threading

from ductline.execution.protocol import Task
from ductline.pipeline import Pipeline
from ductline.runtime.threads import ThreadAttempt

entered = threading.Event()
gate = threading.Event()


def held(x):
    entered.set()
    gate.wait(60)
    return x


held_pipeline = Pipeline("thread_attempt_held").start(held, isolation="thread")


def test_an_attempt_is_reaped_once_its_step_finished_though_the_thread_lingers():
    task = Task(job_id="j", run_id="r", pipeline="thread_attempt_held", step="held", attempt=1, input="[1]",
                deadline_ms=None, lease_token="t", max_output_bytes=1 << 20)
    attempt = ThreadAttempt(task)
    assert entered.wait(60)
    # Holding the interpreter's thread registry lock keeps the thread alive after its
    # target returned: the window in which a loaded machine used to lose the slot
    # (the sentinel readable, the pipe at EOF, `is_alive()` still true).
    registry = threading._active_limbo_lock  # type: ignore[attr-defined]
    with registry:
        gate.set()
        readable, _, _ = select.select([attempt.sentinel], [], [], 60)
        assert readable == [attempt.sentinel]
        assert attempt._thread.is_alive()
        assert not attempt.alive()
        assert attempt.reap() == 0
    attempt._thread.join(60)
    assert not attempt._thread.is_alive()
