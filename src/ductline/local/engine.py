"""The scheduling loop of the in-process executor: it composes the parts of a run
and drives them.

Each step run that waits or runs is one asyncio task (`Engine._drive`): it waits
out its delay, runs attempts (`ductline.local.attempts`), and hands each outcome to
the recorder, which asks the rulebook what follows (`ductline.local.record`). The
loop that waits for those tasks runs under ``asyncio.timeout``, armed when the
first attempt starts: at the run deadline the rulebook's stop plan applies
(`ductline.local.stop`), every task is cancelled (a task running a child kills its
process group as it unwinds) and awaited, and a result is returned.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any, cast

from ductline.dsl.graph import Definition
from ductline.errors import InvalidStateError
from ductline.execution.enforcer import UNDEAD_AFTER_SECONDS
from ductline.model.inputs import NO_INPUT
from ductline.local.advance import Router
from ductline.local.attempts import AttemptRunner
from ductline.local.childapps import child_setup, needs_child
from ductline.local.clock import FakeClock, activity, is_virtual
from ductline.local.children import ChildStartError, Pool
from ductline.local.options import RunOptions
from ductline.local.pause import Pauses
from ductline.local.record import Recorder
from ductline.local.report import EndStatus, Reporter
from ductline.local.results import WorkflowResult
from ductline.local.state import RunState
from ductline.local.steprun import StepRun, utcnow
from ductline.local.stop import Stops
from ductline.local.summary import workflow_result
from ductline.local.tasks import TaskSet
from ductline.local.tracing import Tracing
from ductline.model import stops
from ductline.model.states import TERMINAL_RUN, JobStatus, RunStatus
from ductline.store import payloads

STOP_MARGIN = 0.5


class Engine:
    """One in-process run of a definition; `run` may be awaited once."""

    def __init__(self, definition: Definition, args_json: str, options: RunOptions) -> None:
        self.options = options
        self.clock = options.clock
        self.timeout = options.timeout
        self.state = RunState(definition, uuid.uuid4().hex)
        self.tasks = TaskSet()
        self.report = Reporter(definition.name, self.state.run_id, options.on_update,
                               Tracing(options.tracer_provider), self.clock)
        self.children = child_setup(definition, inline=options.inline)
        self.pool = Pool(self.children.apps, self.children.sys_path, options.concurrency, options.kill_grace,
                         message_cap=options.max_payload_bytes + payloads.MESSAGE_SLACK_BYTES,
                         max_output_bytes=options.max_payload_bytes)
        self.stopper = Stops(self.state, self.report, self.tasks, self.clock)
        self.pauses = Pauses(self.state, self.report, self.tasks, self.clock, options.resume,
                             options.max_payload_bytes, launch=self._launch, expire=self._expire_pause)
        self.router = Router(self.state, self.clock, options.retry_delay, launch=self._launch,
                             paused=self.pauses.paused)
        self.recorder = Recorder(self.state, self.report, self.router, self.tasks, self.stopper)
        self.runner = AttemptRunner(self.state, self.report, self.pool, self.children,
                                    concurrency=options.concurrency, kill_grace=options.kill_grace,
                                    clock=self.clock, max_output_bytes=options.max_payload_bytes,
                                    on_begin=self._begins, log_level=options.log_level,
                                    log_max_bytes=options.log_max_bytes, inline=options.inline)
        # The start step run exists from the trigger on (a cancel before the first
        # attempt skips it); its task starts once children are warm.
        self.first = self.router.create(definition.start, "", args_json, launch=False)
        self._deadline: asyncio.Timeout | None = None
        self._started_at: float | None = None  # loop time of the first attempt
        self._clock_deadline: asyncio.Task[None] | None = None
        self.finished = False

    # -- what a handle may do --------------------------------------------------------
    def cancel(self) -> None:
        """Cancel the run (`ductline.model.stops.cancel`).

        Raises:
            InvalidStateError: the run already finished.
        """
        if self.finished or not self.stopper.apply(stops.cancel()):
            raise InvalidStateError(f"run {self.state.run_id} is {self.state.status}; "
                                    "only an unfinished run can be cancelled")

    def resume(self, input: Any = NO_INPUT) -> list[str]:
        """Resume the paused step runs; see `ductline.local.LocalRun.resume`."""
        if self.finished:
            raise InvalidStateError(f"run {self.state.run_id} is {self.state.status}; "
                                    "only a paused run can be resumed")
        return self.pauses.resume(input)

    # -- the run -----------------------------------------------------------------------
    async def run(self) -> WorkflowResult:
        """Run to the end; a cancellation of the awaiting task cancels the run (its
        children are killed, its tasks awaited) and is raised again."""
        began = self.clock.now()
        self.report.run_started(self.timeout)
        try:
            try:
                await self._execute()
            except BaseException as exc:
                await self._abandon(exc)
                raise
        finally:
            self.finished = True
            if self._clock_deadline is not None:
                self._clock_deadline.cancel()
            await self.pool.close()
        result = workflow_result(self.state, self.timeout, self.clock.now() - began)
        meta = result.metadata
        ended = self.state.status
        status = (EndStatus.SUCCESS if ended is RunStatus.COMPLETED else EndStatus.TIMEOUT if result.timeout_exceeded
                  else EndStatus.CANCELLED if ended is RunStatus.CANCELLED else EndStatus.FAILED)
        self.report.run_ended(status, ended.value, error_type=meta["error_type"], error=meta["error"],
                              timeout_seconds=self.timeout)
        return result

    async def _execute(self) -> None:
        if self.state.status in TERMINAL_RUN:
            return  # cancelled before it began
        if needs_child(self.first.node, self.options.inline):
            await self._warm()  # interpreter start-up is not the run's time
        if self.first.status is JobStatus.PENDING:
            self._launch(self.first, self.first.spec.delay_ms / 1000)
        deadline = asyncio.timeout(None)  # armed when the first attempt starts
        try:
            async with deadline:
                self._deadline = deadline
                self._arm_deadline()
                await self._schedule()
        except TimeoutError:
            if not deadline.expired():
                raise
            self._at_deadline()
        finally:
            self._deadline = None  # exited: it can no longer be moved
        await self._drain()

    async def _warm(self) -> None:
        try:
            child = await self.pool.acquire()
        except ChildStartError:
            return  # the first attempt meets the same error and records it
        self.pool.release(child, True)

    async def _schedule(self) -> None:
        """Wait until nothing runs or waits any more (a paused run waits for a
        resume, a cancel or its deadline)."""
        while True:
            self.tasks.reset()
            if self.tasks.bug is not None:
                raise self.tasks.bug
            if self.state.status in (RunStatus.FAILED, RunStatus.CANCELLED):
                return  # a stop ended it; its tasks were cancelled
            if not self.tasks.busy and self.state.status is not RunStatus.PAUSED:
                return
            await self.tasks.changed()

    def _launch(self, sr: StepRun, delay: float) -> None:
        self.tasks.spawn(sr.key, self._drive(sr, delay), f"ductline {sr.label()}")

    async def _drive(self, sr: StepRun, delay: float) -> None:
        async with activity(self.clock):  # a fake clock waits while the step run works
            if delay > 0:
                await self.clock.sleep(delay)
            while True:
                outcome = await self.runner.run(sr)
                if outcome is None or sr.status is not JobStatus.RUNNING:
                    return  # it never started, or a stop recorded its attempt
                wait = self.recorder.record(sr, outcome)
                if wait is None:
                    return
                if wait > 0:
                    await self.clock.sleep(wait)

    # -- the run deadline ----------------------------------------------------------------
    def _begins(self) -> None:
        """An attempt begins: the first one starts the run and its deadline."""
        if self.state.status is not RunStatus.PENDING:
            return
        self.state.move(RunStatus.RUNNING)
        self._started_at = asyncio.get_running_loop().time()
        if self.timeout is not None:
            self.state.deadline_at = utcnow() + timedelta(seconds=self.timeout)
            if is_virtual(self.clock):
                self._clock_deadline = asyncio.get_running_loop().create_task(
                    self._deadline_on_clock(self.timeout), name="ductline run deadline")
        self._arm_deadline()

    async def _deadline_on_clock(self, seconds: float) -> None:
        """With a fake clock the deadline also passes when the clock's time does."""
        # Passive: the deadline never makes time jump by itself (a run that halted,
        # with nothing left waiting, ends before it as it would in real time).
        await cast(FakeClock, self.clock).sleep(seconds, passive=True)
        if self._deadline is not None:
            self._deadline.reschedule(asyncio.get_running_loop().time())

    def _arm_deadline(self) -> None:
        if self._deadline is not None and self._started_at is not None and self.timeout is not None:
            self._deadline.reschedule(self._started_at + self.timeout)

    def _at_deadline(self) -> None:
        if self.state.status is RunStatus.HALTED:
            self.stopper.deadline_of_halted_run(self.timeout, self.recorder.record)
        else:
            self.stopper.apply(stops.deadline(self.timeout))

    def _expire_pause(self, sr: StepRun, seconds: int) -> None:
        self.stopper.apply(stops.pause_expired(sr.name, seconds), expired=sr)

    # -- ending ----------------------------------------------------------------------------
    async def _drain(self) -> None:
        self.tasks.cancel_all()
        await self.tasks.drain(self.options.kill_grace + UNDEAD_AFTER_SECONDS + STOP_MARGIN)

    async def _abandon(self, exc: BaseException) -> None:
        """The awaiting task was cancelled, or the executor failed: cancel the run
        (its in-flight attempts are recorded cancelled), await its tasks, report."""
        self.stopper.apply(stops.cancel())  # unless it ended already
        await self._drain()
        cancelled = isinstance(exc, asyncio.CancelledError)
        self.report.run_ended(EndStatus.CANCELLED if cancelled else EndStatus.FAILED, self.state.status.value,
                              error_type=type(exc).__name__, error=f"{type(exc).__name__}: {exc}",
                              timeout_seconds=self.timeout)
