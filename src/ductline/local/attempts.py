"""Running one claimed job's attempt for the in-process executor: in a killable
child (sync steps), in the event loop (``async def``) or in a thread
(``isolation="thread"`` and the inline steps of `ductline.testing`), answering what
the step asks its run (context values, boundary crossings, the size of a scaled
timeout, chunks of an input stored out of line) from the run's store.

What the attempt's outcome means is not decided here: the engine records it
(`ductline.engine.batch.record_batch`) as the rulebook says.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ductline import codec
from ductline.dsl.graph import Definition, Node
from ductline.engine.record import ON_HALT_STEP
from ductline.errors import ExecutionError
from ductline.execution import steplog
from ductline.execution.child import describe
from ductline.execution.protocol import Task
from ductline.local import inproc
from ductline.local.childapps import ChildSetup, needs_child, parent_type_name, task_pipeline
from ductline.local.children import ChildStartError, Pool
from ductline.local.outcome import Limit, Outcome
from ductline.loglevels import DEFAULT_LEVEL, DEFAULT_MAX_BYTES
from ductline.model.states import AttemptResult
from ductline.observability import tracing
from ductline.step_context import StepContext, utc_from_ms
from ductline.store import Store, payloads
from ductline.store.records import ClaimedJob


@dataclass(slots=True)
class Started:
    """An attempt that began: when (loop time), and its limit."""

    loop_time: float
    limit: Limit
    run_bound: float | None  # loop time of the run deadline, if it binds the attempt


class AttemptRunner:
    """Runs attempts of one run's claimed jobs.

    Args:
        definition: the pipeline.
        store: the run's store (requests of the step are answered from it).
        pool: the run's children.
        children: what those children import.
        kill_grace: seconds between cancelling an async step and giving up on it.
        max_output_bytes: the largest output an attempt may return.
        log_level, log_max_bytes: the step log level of steps without their own,
            and the cap of each attempt's log (`ductline.execution.steplog`).
        inline: sync steps run in threads of this process, not in children.
        on_log: receives ``(job, records)`` for each batch an attempt logged.
    """

    def __init__(self, definition: Definition, store: Store, pool: Pool, children: ChildSetup, *,
                 kill_grace: float, max_output_bytes: int, log_level: str = DEFAULT_LEVEL,
                 log_max_bytes: int = DEFAULT_MAX_BYTES, inline: bool = False,
                 on_log: Callable[[ClaimedJob, list[tuple[int, str, str, str]]], None]) -> None:
        self.definition = definition
        self.store = store
        self.pool = pool
        self.children = children
        self.kill_grace = kill_grace
        self.max_output_bytes = max_output_bytes
        self.log_level = log_level
        self.log_max_bytes = log_max_bytes
        self.inline = inline
        self.on_log = on_log

    def node(self, step: str) -> Node:
        if step == ON_HALT_STEP and self.definition.on_halt is not None:
            return self.definition.on_halt
        return self.definition.node(step)

    def in_child(self, step: str) -> bool:
        return needs_child(self.node(step), self.inline)

    async def run(self, job: ClaimedJob, begin: Callable[[], Started]) -> Outcome:
        """One attempt of ``job``. ``begin`` is called as the attempt really begins
        (a child is ready for it) and returns its limit.

        Raises:
            asyncio.CancelledError: the attempt was cancelled (a stop revoked its
                lease); its child was killed first.
        """
        node = self.node(job.step)
        if not needs_child(node, self.inline):
            return await self._in_process(job, node, begin)
        try:
            child = await self.pool.acquire(fresh=node.options.isolation == "fresh")
        except ChildStartError as exc:
            begin()
            return Outcome(AttemptResult.ERRORED, None, exc.error_type, exc.message, exc.traceback)
        reusable = False
        try:
            started = begin()
            limit = started.limit
            task = Task(job.job_id, job.run_id,
                        task_pipeline(self.children.refs[node.name], node.options.timeout, self.children.main_alias),
                        node.name, job.attempt, job.input, self._deadline_ms(started), job.lease_token,
                        self.max_output_bytes, node.options.log_level or self.log_level, self.log_max_bytes,
                        memory_limit=node.options.memory_limit, cpu_limit=node.options.cpu_limit,
                        fresh=node.options.isolation == "fresh")
            outcome = await self.pool.run(child, task, limit, lambda kind, a: self._answer(job, kind, a, started),
                                          lambda records: self.on_log(job, records))
            reusable = outcome.reusable
            named = parent_type_name(outcome.error_type, self.children.main_alias)
            return outcome if named == outcome.error_type else dataclasses.replace(outcome, error_type=named)
        finally:
            self.pool.release(child, reusable)

    async def _in_process(self, job: ClaimedJob, node: Node, begin: Callable[[], Started]) -> Outcome:
        started = begin()
        limit = started.limit
        try:
            args = tuple(codec.loads(payloads.load(self.store, job.run_id, job.input) or "[]"))
        except Exception as exc:  # noqa: BLE001 - a stored input the step cannot take is its error
            return Outcome(AttemptResult.ERRORED, None, *describe(exc))
        size = getattr(node.options.timeout, "seconds_for", None)
        if size is not None:  # a ScaledTimeout, sized in this process
            try:
                self._scale(started, size(args))
            except Exception as exc:  # noqa: BLE001 - sizing is the step's code
                return Outcome(AttemptResult.ERRORED, None, *describe(exc))
        ctx = StepContext(run_id=job.run_id, job_id=job.job_id, step=job.step, attempt=job.attempt,
                          deadline=_utc(self._deadline_ms(started)),
                          _request=lambda kind, args: self._answer(job, kind, args, started))
        # Set in this attempt's task, the capture is inherited by the context the step
        # runs in (and only by it): concurrent steps keep their own records.
        capture = steplog.Capture(lambda batch: self.on_log(job, [r.wire() for r in batch]),
                                  node.options.log_level or self.log_level, self.log_max_bytes)
        enter = tracing.attempt_entry(job.run_id, job.job_id, job.attempt)
        remaining = None if limit.at is None else max(0.0, limit.at - asyncio.get_running_loop().time())
        with steplog.activate(capture):
            if node.kind == "async":
                return await inproc.run_async(node.func, args, ctx, remaining, self.kill_grace,
                                              self.max_output_bytes, enter)
            return await inproc.run_thread(node.func, args, ctx, remaining, self.max_output_bytes, enter)

    def _deadline_ms(self, started: Started) -> int | None:
        """When the attempt will be stopped, as epoch milliseconds of the real clock
        (for ``ductline.context().deadline``)."""
        at = started.limit.at
        if at is None:
            return None
        import time

        return int((time.time() + (at - asyncio.get_running_loop().time())) * 1000)

    def _scale(self, started: Started, seconds: float) -> None:
        """A scaled timeout sized: start + ``seconds``, never past the run deadline."""
        limit = started.limit
        seconds = float(seconds)
        if started.run_bound is not None:
            seconds = min(seconds, started.run_bound - limit.started)
        limit.seconds = seconds

    def _answer(self, job: ClaimedJob, kind: str, args: tuple[Any, ...], started: Started) -> Any:
        """A step's request to its run, answered from the store as a worker answers
        it (`ductline.runtime.requests`)."""
        if kind == "context_get":
            return self.store.context_get(job.run_id, args[0])
        if kind == "context_set":
            return self.store.context_set(job.run_id, args[0], args[1], overwrite=bool(args[2]), job_id=job.job_id,
                                          lease_token=job.lease_token)
        if kind == "boundary":
            return self.store.mark_boundary(job.job_id, job.lease_token, args[0])
        if kind == "payload_chunk":
            return payloads.read_chunk(self.store, job.run_id, str(args[0]), int(args[1]))
        if kind == "timeout":  # the attempt sized its input: deadline = start + scaled timeout
            self._scale(started, int(args[0]))
            return self._deadline_ms(started)  # the step's context().deadline
        raise ExecutionError(f"unknown request {kind!r}")


def _utc(ms: int | None) -> Any:
    return None if ms is None else utc_from_ms(ms)
