"""The asyncio tasks of one in-process run: one per step run that waits or runs an
attempt, plus timers of paused step runs and resume callbacks.

The scheduling loop sleeps until the set changes (a task ended, a stop or a resume
woke it). A task that fails with an exception is a bug of the executor or of a
resume callback: it is kept, and the loop raises it after stopping the run.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any, Coroutine, Hashable

log = logging.getLogger("ductline.local")


class TaskSet:
    """Tasks by key (a step run's ``(step, scope)``, or a tagged key for timers)."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()
        self.bug: BaseException | None = None

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def spawn(self, key: Hashable, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``coro`` as the task of ``key`` (which must have none running)."""
        if key in self._tasks:  # pragma: no cover - a step run has one task at a time
            coro.close()
            raise AssertionError(f"a task for {key!r} is already running")
        task = asyncio.create_task(coro, name=name)
        self._tasks[key] = task
        task.add_done_callback(partial(self._done, key))

    def _done(self, key: Hashable, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None and self.bug is None:
            self.bug = task.exception()
        self._changed.set()

    def cancel(self, key: Hashable) -> None:
        """Cancel the task of ``key``, if any (it unwinds at its next await)."""
        task = self._tasks.get(key)
        if task is not None:
            _cancel_once(task)

    def cancel_all(self) -> None:
        for task in list(self._tasks.values()):
            _cancel_once(task)

    def wake(self) -> None:
        """Make the scheduling loop look again (a stop or a resume changed the run)."""
        self._changed.set()

    def reset(self) -> None:
        """Forget earlier changes; call before looking at the run's state."""
        self._changed.clear()

    async def changed(self) -> None:
        """Wait until a task ends or `wake` is called (after the last `reset`)."""
        await self._changed.wait()

    async def drain(self, seconds: float) -> None:
        """Await every task (they were cancelled), at most ``seconds``: a task that
        runs a child needs the kill grace and a second for SIGKILL. A task still
        pending after that is reported and left to finish on its own."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        gathered = asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.wait({gathered}, timeout=seconds)
        if not gathered.done():
            log.error("%d step task(s) did not stop in time", sum(not t.done() for t in tasks))
            gathered.add_done_callback(lambda f: f.cancelled() or f.exception())
            return
        for outcome in gathered.result():
            if isinstance(outcome, Exception):
                log.error("Step task failed while stopping: %r", outcome)


def _cancel_once(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` unless it is being cancelled already: a second cancellation
    would cut short its unwinding (a killed child awaited, an interrupted thread step
    given time to unwind), and the run's result would come before the step ended."""
    if not task.cancelling():
        task.cancel()
