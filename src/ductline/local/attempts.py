"""Running one attempt of a step run: once its limits let it start, in a killable
child (sync steps), in the event loop (``async def``) or in a thread
(``isolation="thread"``), answering what the step asks its run (context values,
boundary crossings, the size of a scaled timeout).

What the attempt's outcome means is not decided here: see `ductline.local.record`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable

from ductline import codec
from ductline.errors import ExecutionError
from ductline.execution import steplog
from ductline.execution.child import describe
from ductline.loglevels import DEFAULT_LEVEL, DEFAULT_MAX_BYTES
from ductline.execution.protocol import Task
from ductline.local import inproc
from ductline.local.childapps import ChildSetup, needs_child, parent_type_name, task_pipeline
from ductline.local.children import ChildStartError, Pool
from ductline.local.clock import Clock
from ductline.local.gates import Gate
from ductline.local.outcome import Limit, Outcome
from ductline.local.report import Reporter
from ductline.local.state import RunState
from ductline.local.steprun import StepRun, utcnow
from ductline.model.states import AttemptResult, JobStatus
from ductline.step_context import StepContext, utc_from_ms


class AttemptRunner:
    """Runs attempts for one run.

    Args:
        state: the run.
        report: where attempts are reported.
        pool: the run's children.
        children: what those children import.
        concurrency: the most thread steps at once (children are bounded by ``pool``).
        kill_grace: seconds between cancelling an async step and giving up on it.
        clock: the executor's clock (rate limits, attempt durations).
        max_output_bytes: the largest output an attempt may return.
        on_begin: called as an attempt begins (the run starts on its first).
        log_level, log_max_bytes: the step log level of steps without their own,
            and the cap of each attempt's log (`ductline.execution.steplog`).
        inline: sync steps run in threads of this process, not in children.
    """

    def __init__(self, state: RunState, report: Reporter, pool: Pool, children: ChildSetup, *,
                 concurrency: int, kill_grace: float, clock: Clock, max_output_bytes: int,
                 on_begin: Callable[[], None], log_level: str = DEFAULT_LEVEL,
                 log_max_bytes: int = DEFAULT_MAX_BYTES, inline: bool = False) -> None:
        self.state = state
        self.report = report
        self.pool = pool
        self.children = children
        self.kill_grace = kill_grace
        self.clock = clock
        self.max_output_bytes = max_output_bytes
        self.on_begin = on_begin
        self.log_level = log_level
        self.log_max_bytes = log_max_bytes
        self.inline = inline
        self.thread_slots = asyncio.Semaphore(concurrency)
        self.gates: dict[str, Gate] = {}  # concurrency/rate limits, by limit key

    async def run(self, sr: StepRun) -> Outcome | None:
        """One attempt of ``sr``, once its limits and a slot let it start.

        Returns:
            How it ended, or ``None`` if ``sr`` stopped waiting before it could
            start (a halt held it, a stop skipped it).
        """
        key = sr.spec.limit_key
        if key is None:
            return await self._placed(sr, None)
        gate = self.gates.setdefault(key, Gate(sr.node.options))
        async with gate.enter(self.clock):
            return await self._placed(sr, gate)

    async def _placed(self, sr: StepRun, gate: Gate | None) -> Outcome | None:
        node = sr.node
        args = tuple(codec.loads(sr.input))
        timeout = node.options.timeout
        if not needs_child(node, self.inline):
            slots = self.thread_slots if node.kind != "async" else None
            if slots is not None:
                await slots.acquire()
            try:
                limit = await self._begin(sr, gate)
                if limit is None:
                    return None
                size = getattr(timeout, "seconds_for", None)
                if size is not None:  # a ScaledTimeout, sized in this process
                    try:
                        limit.seconds = size(args)
                    except Exception as exc:
                        return Outcome(AttemptResult.ERRORED, None, *describe(exc))
                ctx = self._context(sr, limit)
                enter = self.report.tracing.enter(sr.span)
                # Set in this step run's task, the capture is inherited by the context
                # the step runs in (and only by it): concurrent steps keep their own records.
                capture = steplog.Capture(lambda batch: sr.add_logs([r.wire() for r in batch]),
                                          node.options.log_level or self.log_level, self.log_max_bytes)
                with steplog.activate(capture):
                    if node.kind == "async":
                        return await inproc.run_async(node.func, args, ctx, limit.seconds, self.kill_grace,
                                                      self.max_output_bytes, enter)
                    return await inproc.run_thread(node.func, args, ctx, limit.seconds, self.max_output_bytes,
                                                   enter)
            finally:
                if slots is not None:
                    slots.release()
        try:
            child = await self.pool.acquire(fresh=node.options.isolation == "fresh")
        except ChildStartError as exc:
            if await self._begin(sr, gate) is None:
                return None
            return Outcome(AttemptResult.ERRORED, None, exc.error_type, exc.message, exc.traceback)
        reusable = False
        try:
            limit = await self._begin(sr, gate)
            if limit is None:
                reusable = True
                return None
            task = Task(sr.job_id, self.state.run_id,
                        task_pipeline(self.children.refs[node.name], timeout, self.children.main_alias),
                        node.name, sr.attempts, sr.input, self._deadline_ms(limit), uuid.uuid4().hex,
                        self.max_output_bytes, node.options.log_level or self.log_level, self.log_max_bytes,
                        memory_limit=node.options.memory_limit, cpu_limit=node.options.cpu_limit,
                        fresh=node.options.isolation == "fresh")
            outcome = await self.pool.run(child, task, limit, lambda kind, a: self._answer(sr, kind, a, limit),
                                          sr.add_logs)
            reusable = outcome.reusable
            named = parent_type_name(outcome.error_type, self.children.main_alias)
            return outcome if named == outcome.error_type else dataclasses.replace(outcome, error_type=named)
        finally:
            self.pool.release(child, reusable)

    async def _begin(self, sr: StepRun, gate: Gate | None) -> Limit | None:
        """The attempt starts now (at its key's next rate slot), if ``sr`` still
        waits for it; returns its step timeout (a scaled timeout starts at its floor)."""
        if sr.status is not JobStatus.PENDING:
            return None
        if gate is not None:
            await gate.pace(self.clock)
            if sr.status is not JobStatus.PENDING:
                return None
        self.on_begin()
        sr.begin_attempt(self.clock.now())
        self.report.attempt_started(sr)
        timeout: Any = sr.node.options.timeout
        floor: float | None = getattr(timeout, "floor", timeout)
        return Limit(asyncio.get_running_loop().time(), floor)

    def _deadline_ms(self, limit: Limit) -> int | None:
        """When the attempt will be stopped, as epoch milliseconds (for
        ``ductline.context().deadline``): its step timeout or the run deadline."""
        ends: list[datetime] = [] if self.state.deadline_at is None else [self.state.deadline_at]
        if limit.seconds is not None:
            used = asyncio.get_running_loop().time() - limit.started
            ends.append(utcnow() + timedelta(seconds=limit.seconds - used))
        return int(min(ends).timestamp() * 1000) if ends else None

    def _context(self, sr: StepRun, limit: Limit) -> StepContext:
        deadline_ms = self._deadline_ms(limit)
        return StepContext(run_id=self.state.run_id, job_id=sr.job_id, step=sr.name, attempt=sr.attempts,
                           deadline=None if deadline_ms is None else utc_from_ms(deadline_ms),
                           _request=lambda kind, args: self._answer(sr, kind, args, limit))

    def _answer(self, sr: StepRun, kind: str, args: tuple[Any, ...], limit: Limit) -> Any:
        """A step's request to its run: context values, boundary crossings, and the
        size of a scaled timeout."""
        values = self.state.values
        if kind == "context_get":
            return values.get(args[0])
        if kind == "context_set":
            key, encoded, overwrite = args
            if key in values and not overwrite:
                return False
            values[key] = encoded
            return True
        if kind == "boundary":
            sr.boundary = args[0]
            return True
        if kind == "timeout":  # the attempt sized its input: deadline = start + scaled timeout
            limit.seconds = int(args[0])
            return True
        raise ExecutionError(f"unknown request {kind!r}")
