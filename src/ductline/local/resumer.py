"""The ``resume`` option of `ductline.execute`: who resumes a run's pauses
(``Pipeline.pause(before=step)``) at once -- a mapping ``{step: new_input}`` or a
callable ``(step, current_input) -> new_input`` (``async`` or not), either giving
`ductline.model.inputs.NO_INPUT` to keep the input.

Each paused step run is resumed by itself, through the engine's resume
(`ductline.engine.pause.resume`), as soon as it pauses. A stop, an expiry or a
halt that comes first leaves nothing to resume (the engine refuses, as it refuses
an operator's late resume). A callable that raises ends the run: the executor
cancels it and raises the error.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import Any, Callable

from ductline.errors import InvalidStateError
from ductline.local.clock import Clock, activity
from ductline.local.options import Resume, covers


class Resumer:
    """Resumes the pauses the ``resume`` option covers.

    Args:
        source: the ``resume`` option.
        clock: the run's clock (a fake one does not jump while a resume is decided).
        current_input: the value a paused job waits with (its one argument), by job id.
        resume: resumes one paused job with a value (`NO_INPUT`: keep its input).
        failed: takes what a ``resume`` callable raised (the run ends with it).
        changed: called when a resume was decided (the driver looks again).
    """

    def __init__(self, source: Resume | None, clock: Clock, *, current_input: Callable[[str], Any],
                 resume: Callable[[Any, list[str]], object], failed: Callable[[BaseException], None],
                 changed: Callable[[], None]) -> None:
        self.source = source
        self.clock = clock
        self._current_input = current_input
        self._resume_job = resume
        self._failed = failed
        self._changed = changed
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def paused(self, job: dict[str, Any]) -> None:
        """A step run paused (``job``: its row); resume it if the option covers it."""
        if not covers(self.source, job["step"]):
            return
        task = asyncio.get_running_loop().create_task(self._resume(job), name=f"ductline resume {job['step']}")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._failed(task.exception())  # type: ignore[arg-type]
        self._changed()

    async def _resume(self, job: dict[str, Any]) -> None:
        async with activity(self.clock):  # a fake clock does not expire the pause meanwhile
            source = self.source
            if isinstance(source, Mapping):
                value = source[job["step"]]
            else:
                assert source is not None
                value = source(job["step"], self._current_input(job["id"]))
                if inspect.isawaitable(value):
                    value = await value
            try:
                self._resume_job(value, [job["id"]])
            except InvalidStateError:
                pass  # a stop, an expiry or a halt came first: nothing to resume

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
