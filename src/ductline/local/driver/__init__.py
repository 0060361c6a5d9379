"""The in-process executor's driver: a worker's loop in one asyncio task, over the
engine (`ductline.engine`) and an in-memory store (`ductline.store.memory`).

It keeps only what is about driving -- claiming ready jobs for free slots,
starting their attempts (`ductline.local.attempts`), waiting on a clock, and
telling the caller (`ductline.local.report`). Everything an outcome means, what a
completion creates, what a halt, a cancel, a deadline or a pause does, is applied
by the same engine code a worker runs, with the same statements, so the two cannot
disagree.

One turn of the loop: attempts a stop took away are killed (their leases were
revoked, as a worker learns from its heartbeat), finished attempts are recorded
in one batch, what is due (the run deadline, expired pauses) is ended, free slots
are filled by a claim; then the loop sleeps until an attempt ends, the caller acts
(cancel, resume), or the clock reaches the next not-before time, pause expiry or
deadline. With a `ductline.testing.FakeClock` the store's clock is the fake one,
so delays, retry delays, rate limits and pause expiries pass in virtual time; the
run deadline passes in real time too, and step timeouts only in real time.

The driver's parts, a module each over the run's state (`DriverBase`): the claim
of a turn (`ClaimTurn`), the recording (`RecordTurn`), the stops (`StopTurn`) and
the wait (`WaitTurn`); the loop itself is `Driver`.
"""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

from ductline.engine import stop
from ductline.errors import DefinitionError, InvalidStateError
from ductline.execution.enforcer import UNDEAD_AFTER_SECONDS
from ductline.local.children import ChildStartError
from ductline.local.clock import activity
from ductline.local.driver.claiming import ClaimTurn
from ductline.local.driver.recording import RecordTurn
from ductline.local.driver.waiting import WaitTurn
from ductline.local.marker import apply_marks
from ductline.local.report import EndStatus
from ductline.local.results import WorkflowResult
from ductline.local.summary import workflow_result
from ductline.model.states import TERMINAL_RUN, JobStatus, RunStatus
from ductline.observability import events
from ductline.observability.events import EventName

STOP_MARGIN = 0.5


class Driver(ClaimTurn, RecordTurn, WaitTurn):
    """One in-process run of ``definition``; `run` may be awaited once."""

    # -- the run -------------------------------------------------------------------------------------
    async def run(self) -> WorkflowResult:
        """Run to the end; a cancellation of the awaiting task cancels the run (its
        children are killed, its tasks awaited) and is raised again."""
        began = self.clock.now()
        self.report.run_started(self.options.timeout)
        unsubscribe = events.subscribe(self._event) if self.tracing is not None else None
        try:
            try:
                await self._execute()
            except BaseException as exc:
                await self._abandon(exc)
                raise
            result = workflow_result(self.store, self.definition, self.run_id, self.clock.now() - began)
            self.report.run_ended(_end_status(result), result.status, result.metadata["error"])
            return result
        finally:
            self.finished = True
            self.resumer.close()
            await self.pool.close()
            if unsubscribe is not None:
                unsubscribe()
            self._final = self.status()
            self.store.close()

    def _event(self, name: EventName, attributes: dict[str, Any]) -> None:
        """This run's engine events feed its spans (the worker's tracing subscriber)."""
        if attributes.get("run_id") == self.run_id and self.tracing is not None:
            self.tracing(name, attributes)

    async def _execute(self) -> None:
        if self.status() in TERMINAL_RUN:
            return  # cancelled before it began
        if self.children.refs:
            await self._warm()  # interpreter start-up is not the run's time
        while True:
            async with activity(self.clock):
                if self._stopped_from_outside:  # a cancel by the caller revoked leases
                    self._stopped_from_outside = False
                    self._reap_lost()
                self._record()
                self._end_due()
                if self.bug is not None:
                    raise self.bug
                status = self.status()
                if status is RunStatus.HALTED and self._marks and not self.running \
                        and apply_marks(self.store, self.definition, self.run_id, self._marks,
                                        self.options.retry_delay, self.limits):
                    status = self.status()  # the mark_succeeded option revived the run
                if status not in TERMINAL_RUN:
                    self._claim()
                if self._over(status):
                    break
            await self._wait()
        await self._drain()

    async def _warm(self) -> None:
        """Start a child before the run does: one that cannot import the steps' modules
        fails the call at once (every attempt would fail the same way).

        Raises:
            DefinitionError: a child could not import the modules of the steps.
        """
        try:
            child = await self.pool.acquire()
        except ChildStartError as exc:
            if _resources(exc.error_type):
                return  # the machine, not the pipeline: the first attempt records it
            raise DefinitionError(
                f"the steps of pipeline {self.definition.name!r} run in child processes, and a child could not "
                f"import them: {exc.error_type}: {exc.message}. Define the steps in a module a new Python "
                "process can import (a file of their own, not `python -` or `python -c`), make them async, "
                "or use isolation='thread'") from None
        self.pool.release(child, True)

    def _over(self, status: RunStatus) -> bool:
        """Nothing more will happen: the run ended, or it halted (or its pauses wait
        in a halted run) with nothing left to run."""
        if self.running or self.resumer.busy:
            return False
        if status in TERMINAL_RUN:
            return True
        if status is RunStatus.PAUSED:
            return False  # a resume, a cancel, its expiry or the deadline moves it on
        if self.definition.waits and status is not RunStatus.HALTED \
                and self.store.run_progress(self.run_id).get(JobStatus.DEFERRED.value):
            return False  # an event, a cancel, its timeout or the deadline moves it on
        if self.store.next_wakeups(list(self.definitions), self.queues)[0] is not None:
            return False  # a job waits for its not-before time
        return not self.store.unthrottle_idle_keys()

    # -- ending ---------------------------------------------------------------------------------------
    async def _drain(self) -> None:
        """Cancel what still runs (a run that ended with attempts in flight) and wait
        for it: a task running a child needs the kill grace and a second for SIGKILL."""
        tasks = [r.task for r in self.running.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.options.kill_grace + UNDEAD_AFTER_SECONDS + STOP_MARGIN)
        self.running.clear()

    async def _abandon(self, exc: BaseException) -> None:
        """The awaiting task was cancelled, or the executor failed: cancel the run
        (its in-flight attempts are recorded cancelled), await its tasks, report."""
        try:
            with self.store.transaction() as tx:
                stop.cancel(tx, self.definition, self.run_id)
        except InvalidStateError:
            pass  # it ended already
        self._reap_lost()
        await self._drain()
        cancelled = isinstance(exc, asyncio.CancelledError)
        self.report.run_ended(EndStatus.CANCELLED if cancelled else EndStatus.FAILED, self.status().value,
                              f"{type(exc).__name__}: {exc}")


def _resources(error_type: str) -> bool:
    """A child that did not start for want of the machine's resources (an
    ``OSError`` such as no more processes, or memory), not for its imports."""
    found = getattr(builtins, error_type, None)
    return error_type == "ChildStartError" or (isinstance(found, type) and issubclass(found, (OSError, MemoryError)))


def _end_status(result: WorkflowResult) -> EndStatus:
    if result.status == "completed":
        return EndStatus.SUCCESS
    if result.timeout_exceeded:
        return EndStatus.TIMEOUT
    if result.status == "cancelled":
        return EndStatus.CANCELLED
    return EndStatus.FAILED
