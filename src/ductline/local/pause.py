"""Pauses before a step (``Pipeline.pause(before=step, timeout=None)``) in the
in-process executor, with the worker's rules (`ductline.engine.pause`):

- a step run of a paused step is created ``paused`` (no attempt) and the run
  becomes ``paused``; other branches keep running, the run deadline keeps counting;
- a resume makes it pending at once (it still waits out the rest of its step's
  delay), optionally with a new single input, and the run ``running`` once no step
  run is paused; a halted run is not resumed (its paused step runs stay paused);
- a pause with a timeout that passes without a resume fails the run closed
  (`ductline.model.stops.pause_expired`), on the executor's clock.

The person who resumes is the ``resume`` option of `ductline.execute` -- a mapping
``{step: new_input}`` or a callable ``(step, current_input) -> new_input``, either
giving `ductline.handle.NO_INPUT` to keep the input -- or a call of
`ductline.local.LocalRun.resume`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Callable

from ductline import codec
from ductline.errors import InvalidStateError
from ductline.model.inputs import NO_INPUT
from ductline.local.clock import Clock, activity
from ductline.local.options import Resume, covers
from ductline.local.report import Reporter
from ductline.local.state import RunState
from ductline.local.steprun import StepRun
from ductline.local.tasks import TaskSet
from ductline.model.states import JobStatus, RunStatus
from ductline.store import payloads


def encode_input(value: Any, max_bytes: int) -> str:
    """The JSON list of arguments a resumed step receives: ``[value]``.

    Raises:
        TypeError: ``value`` does not round-trip through JSON.
        PayloadTooLarge: it is above ``max_bytes`` as JSON.
    """
    encoded = codec.dumps([value], what="resume input")
    payloads.check_size(encoded, "resume input", max_bytes)
    return encoded


class Pauses:
    """The paused step runs of one run.

    Args:
        resume: the ``resume`` option, or ``None``.
        launch: starts the task of a pending step run after a delay in seconds.
        expire: fails the run because the pause of a step run (its second
            argument: the pause's timeout in seconds) expired.
    """

    def __init__(self, state: RunState, report: Reporter, tasks: TaskSet, clock: Clock, resume: Resume | None,
                 max_input_bytes: int, launch: Callable[[StepRun, float], None],
                 expire: Callable[[StepRun, int], None]) -> None:
        self.state = state
        self.report = report
        self.tasks = tasks
        self.clock = clock
        self.source = resume
        self.max_input_bytes = max_input_bytes
        self.launch = launch
        self.expire = expire

    def paused(self, sr: StepRun) -> None:
        """``sr`` was created paused."""
        if self.state.status in (RunStatus.PENDING, RunStatus.RUNNING):  # a halted run stays halted
            self.state.move(RunStatus.PAUSED)
        self.report.step_paused(sr)
        seconds = sr.spec.pause_timeout_seconds
        if seconds is not None:
            self.tasks.spawn(("pause", sr.key), self._expire_after(sr, seconds), f"ductline pause {sr.label()}")
        if covers(self.source, sr.name) and self.state.status is RunStatus.PAUSED:
            self.tasks.spawn(("resume", sr.key), self._resume_by_option(sr), f"ductline resume {sr.label()}")

    async def _expire_after(self, sr: StepRun, seconds: int) -> None:
        await self.clock.sleep(seconds)
        if sr.status is JobStatus.PAUSED:
            self.expire(sr, seconds)

    async def _resume_by_option(self, sr: StepRun) -> None:
        async with activity(self.clock):  # a fake clock does not expire the pause meanwhile
            await self._resume_now(sr)

    async def _resume_now(self, sr: StepRun) -> None:
        source = self.source
        if isinstance(source, Mapping):
            value = source[sr.name]
        else:
            assert source is not None
            value = source(sr.name, codec.loads(sr.input)[0])
            if inspect.isawaitable(value):
                value = await value
        # A stop, an expiry or a halt may have come first: then there is nothing
        # to resume (a worker refuses to resume a run that is not paused).
        if sr.status is JobStatus.PAUSED and self.state.status is RunStatus.PAUSED:
            encoded = None if value is NO_INPUT else encode_input(value, self.max_input_bytes)
            self._resume([sr], encoded)

    def resume(self, input: Any = NO_INPUT) -> list[str]:
        """Resume every paused step run (see `ductline.local.LocalRun.resume`).

        Raises:
            TypeError: ``input`` does not round-trip through JSON.
            PayloadTooLarge: ``input`` is too large.
            InvalidStateError: the run is not paused, or ``input`` was given
                while several step runs are paused. Nothing is changed.
        """
        state = self.state
        if state.status is not RunStatus.PAUSED:
            raise InvalidStateError(f"run {state.run_id} is {state.status}; only a paused run can be resumed")
        paused = state.with_status({JobStatus.PAUSED})
        if input is not NO_INPUT and len(paused) > 1:
            where = ", ".join(sr.label() for sr in paused[:10])
            raise InvalidStateError(f"run {state.run_id} has {len(paused)} paused step runs ({where}); a new "
                                    "input replaces the input of one: resume without an input")
        encoded = None if input is NO_INPUT else encode_input(input, self.max_input_bytes)
        self._resume(paused, encoded)
        return sorted({sr.name for sr in paused})

    def _resume(self, runs: list[StepRun], encoded: str | None) -> None:
        for sr in runs:
            if encoded is not None:
                sr.input = encoded
            sr.move(JobStatus.PENDING)
            self.tasks.cancel(("pause", sr.key))
            self.report.step_resumed(sr, encoded is not None)
            # Ready now, or at the end of the step's own delay if that is later.
            waited = self.clock.now() - sr.created_at
            self.launch(sr, max(0.0, sr.spec.delay_ms / 1000 - waited))
        if not any(other.status is JobStatus.PAUSED for other in self.state.step_runs.values()):
            self.state.move(RunStatus.RUNNING)
        self.tasks.wake()
