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
from typing import TYPE_CHECKING, Any

from ductline import codec
from ductline.errors import InvalidStateError
from ductline.local.clock import activity
from ductline.local.options import Resume, covers
from ductline.store import payloads

if TYPE_CHECKING:
    from ductline.local.driver import Driver


class Resumer:
    """Resumes the pauses the ``resume`` option covers."""

    def __init__(self, driver: "Driver", source: Resume | None) -> None:
        self.driver = driver
        self.source = source
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
        if not task.cancelled() and task.exception() is not None and self.driver.bug is None:
            self.driver.bug = task.exception()
        self.driver.wake()

    async def _resume(self, job: dict[str, Any]) -> None:
        async with activity(self.driver.clock):  # a fake clock does not expire the pause meanwhile
            source = self.source
            if isinstance(source, Mapping):
                value = source[job["step"]]
            else:
                assert source is not None
                store, run_id = self.driver.store, self.driver.run_id
                current = codec.loads(payloads.load(store, run_id, _input_of(self.driver, job["id"])) or "[null]")
                value = source(job["step"], current[0])
                if inspect.isawaitable(value):
                    value = await value
            try:
                self.driver.resume(value, job_ids=[job["id"]])
            except InvalidStateError:
                pass  # a stop, an expiry or a halt came first: nothing to resume

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _input_of(driver: "Driver", job_id: str) -> str | None:
    with driver.store.dialect.reader() as s:
        rows = s.fetch("paused_job_input", {"job_id": job_id})
    return rows[0]["input"] if rows else None
