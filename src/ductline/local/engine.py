"""The scheduling loop of the in-process executor.

Each step run is driven by one asyncio task (`Run._drive`): it waits out the
step's delay, runs attempts (in a killable child, in the loop, or in a thread),
applies the retry budgets of `ductline.model.retry`, and on success moves the
output on exactly as `ductline.runtime.advance` does for the durable engine. The
loop that waits for those tasks runs under ``asyncio.timeout``: at the run deadline
every in-flight task is cancelled (a task running a child kills its process group
as it unwinds) and awaited, running steps are recorded failed with
``TimeoutError``, and everything that did not start is skipped.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from ductline import codec
from ductline.local.attempts import Attempts
from ductline.local.base import ON_HALT, WORKFLOW_TIMEOUT, Clock, RealClock, log
from ductline.local.childapps import needs_child
from ductline.local.children import ChildStartError
from ductline.local.flow import Flow
from ductline.local.gates import Gate
from ductline.local.results import WorkflowResult
from ductline.local.state import Outcome, Scope, StepRun, utcnow
from ductline.runtime.limits import limit_key
from ductline.runtime.slots import UNDEAD_AFTER_SECONDS

__all__ = ["Clock", "RealClock", "Run"]

STOP_MARGIN = 0.5


class Run(Attempts, Flow):
    """One in-process run of a definition; `run` may be awaited once."""

    # -- the run -------------------------------------------------------------------
    async def run(self) -> WorkflowResult:
        started = self.clock.now()
        self.span = self.tracing.start_run(self.d.name, self.run_id)
        self._emit({"type": "workflow_start", "timeout_seconds": self.timeout})
        try:
            timed_out = await self._execute()
        except BaseException as exc:
            cancelled = isinstance(exc, asyncio.CancelledError)
            await self._stop("cancelled" if cancelled else "error")
            self.tracing.end_run(self.span, "cancellation" if cancelled else "failure",
                                 error_type=type(exc).__name__, error=str(exc) or None)
            self._emit({"type": "workflow_end", "status": "cancelled" if cancelled else "failed",
                        "error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            await self.pool.close()
        result = self._result(timed_out, self.clock.now() - started)
        meta = result.metadata
        status = "timeout" if timed_out else result.overall_status
        self.tracing.end_run(self.span, {"success": "success", "failed": "failure"}.get(status, status),
                             error_type="TimeoutError" if timed_out else meta.get("error_type"),
                             error=meta["error"], timeout_seconds=self.timeout)
        self._emit({"type": "workflow_end", "status": status, "error": meta["error"]})
        return result

    async def _execute(self) -> bool:
        """Run to the end or to the deadline; true if the deadline stopped it."""
        start = self._create(self.d.start, (), self.args_json)
        if needs_child(start.node):
            await self._warm()  # interpreter start-up is not the run's time
        if start.node.options.delay:  # a start delay delays the run; the deadline starts after it
            await self.clock.sleep(start.node.options.delay)
        if self.timeout is not None:
            self.deadline_at = utcnow() + timedelta(seconds=self.timeout)
        self._launch(start, 0)
        deadline = asyncio.timeout(self.timeout)
        try:
            async with deadline:
                await self._schedule()
        except TimeoutError:
            if not deadline.expired():
                raise
            if self.tasks or any(not sr.terminal for sr in self.runs.values()):
                await self._stop("timeout")
                self._cascade()
                return True
        self._cascade()
        return False

    async def _warm(self) -> None:
        try:
            child = await self.pool.acquire()
        except ChildStartError:
            return  # the first attempt meets the same error and records it
        self.pool.release(child, True)

    async def _schedule(self) -> None:
        while True:
            if self.tasks and self.bug is None:
                self.idle.clear()
                await self.idle.wait()
            if self.bug is not None:
                raise self.bug
            if self.tasks:
                continue
            if self.halt is not None and self.d.on_halt is not None and self.on_halt_run is None:
                self.on_halt_run = self._create(ON_HALT, (), codec.dumps([[self.halt]], what="on_halt reasons"))
                self._launch(self.on_halt_run, 0)
                continue
            return

    def _launch(self, sr: StepRun, delay: int) -> None:
        task = asyncio.create_task(self._drive(sr, delay), name=f"ductline {sr.label()}")
        sr.task = task
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self.bug is None:
            self.bug = task.exception()
            self.idle.set()
        if not self.tasks:
            self.idle.set()

    def _spawn(self, step: str, scope: Scope, input_json: str) -> None:
        sr = self._create(step, scope, input_json)
        if self.stopped is not None:
            self._skip(sr, WORKFLOW_TIMEOUT if self.stopped == "timeout" else "cancelled")
        elif self.halt is not None:  # a halted run starts nothing new
            self._skip(sr, self.halt_text)
        else:
            self._launch(sr, sr.node.options.delay)

    async def _gated_attempt(self, sr: StepRun) -> Outcome:
        """An attempt, once the step's concurrency and rate limits let it start."""
        key = limit_key(self.d.name, sr.node.name, sr.node.options, sr.input)
        if key is None:
            return await self._attempt(sr)
        gate = self.gates.setdefault(key, Gate(sr.node.options))
        async with gate.enter(self.clock):
            return await self._attempt(sr)

    async def _drive(self, sr: StepRun, delay: int) -> None:
        if delay:
            await self.clock.sleep(delay)
        while True:
            if self.halt is not None and sr is not self.on_halt_run:
                self._skip(sr, self.halt_text)
                return
            outcome = await self._gated_attempt(sr)
            if self.stopped is not None or sr.status != "running":
                return
            wait = self._record(sr, outcome)
            if wait is None:
                return
            if wait > 0:
                await self.clock.sleep(wait)

    # -- stopping --------------------------------------------------------------------
    async def _stop(self, why: str) -> None:
        """Stop the run: record in-flight attempts (failed with ``TimeoutError`` at
        the deadline, else cancelled), skip what has not started, cancel every task
        and await them (bounded: a task running a child needs at most the kill
        grace plus a second)."""
        self.stopped = why
        skip_reason = WORKFLOW_TIMEOUT if why == "timeout" else "cancelled"
        for sr in self._ordered():
            if sr.status == "running":
                if why == "timeout":
                    sr.status, sr.error_type = "failed", "TimeoutError"
                    sr.error = (f"attempt {sr.attempts} of step {sr.label()!r} was stopped at the run "
                                f"deadline: the run exceeded its timeout of {self.timeout:g} s")
                    result = "timed_out"
                    self.at_deadline.append(sr)
                else:
                    sr.status, sr.error_type, sr.error = "cancelled", "CancelledError", "the run was cancelled"
                    result = "cancelled"
                sr.finished_at = utcnow()
                self._end_attempt(sr, Outcome(result, None, sr.error_type, sr.error))
            elif sr.status == "pending":
                self._skip(sr, skip_reason)
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        gathered = asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.wait({gathered}, timeout=self.kill_grace + UNDEAD_AFTER_SECONDS + STOP_MARGIN)
        if not gathered.done():
            log.error("%d step task(s) did not stop in time", sum(not t.done() for t in tasks))
            gathered.add_done_callback(lambda f: f.cancelled() or f.exception())
            return
        for outcome in gathered.result():
            if isinstance(outcome, Exception):
                log.error("Step task failed while stopping: %r", outcome)
