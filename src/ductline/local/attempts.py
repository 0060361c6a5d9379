"""One attempt of a step run: where it runs (a killable child, the event loop, or
a thread), what it may ask its run, and what its outcome means under the retry
budgets of `ductline.model.retry`."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from ductline import codec
from ductline.errors import ExecutionError
from ductline.local import inproc
from ductline.local.base import RunBase, log
from ductline.local.childapps import needs_child, task_pipeline
from ductline.local.children import ChildStartError
from ductline.local.state import Limit, Outcome, StepRun, utcnow
from ductline.model import retry
from ductline.model.states import HaltReason
from ductline.runtime.advance import FanoutRefused, check_fanout
from ductline.runtime.child import Task, describe
from ductline.step_context import StepContext, utc_from_ms


class Attempts(RunBase):
    """Running attempts and recording their outcomes."""

    async def _attempt(self, sr: StepRun) -> Outcome:
        node = sr.node
        args = tuple(codec.loads(sr.input))
        timeout = node.options.timeout
        if not needs_child(node):
            slots = self.thread_slots if node.kind != "async" else None
            if slots is not None:
                await slots.acquire()
            try:
                limit = self._begin(sr)
                size = getattr(timeout, "seconds_for", None)
                if size is not None:  # a ScaledTimeout, sized in this process
                    try:
                        limit.seconds = size(args)
                    except Exception as exc:
                        return Outcome("errored", None, *describe(exc))
                ctx = self._context(sr, limit)
                enter = self.tracing.enter(sr.span)
                if node.kind == "async":
                    return await inproc.run_async(node.func, args, ctx, limit.seconds, self.kill_grace, enter)
                return await inproc.run_thread(node.func, args, ctx, limit.seconds, enter)
            finally:
                if slots is not None:
                    slots.release()
        try:
            child = await self.pool.acquire()
        except ChildStartError as exc:
            self._begin(sr)
            return Outcome("errored", None, exc.error_type, exc.message, exc.traceback)
        reusable = False
        try:
            limit = self._begin(sr)
            deadline = self._deadline_ms(limit)
            task = Task(sr.job_id, self.run_id,
                        task_pipeline(self.children.refs[node.name], timeout, self.children.main_alias),
                        node.name, sr.attempts, sr.input, deadline, uuid.uuid4().hex)
            outcome = await self.pool.run(child, task, limit,
                                          lambda kind, a: self._answer(sr, kind, a, limit))
            reusable = outcome.reusable
            return outcome
        finally:
            self.pool.release(child, reusable)

    def _deadline_ms(self, limit: Limit) -> int | None:
        """When the attempt will be stopped, as epoch milliseconds (for
        ``ductline.context().deadline``): its step timeout or the run deadline."""
        ends = [] if self.deadline_at is None else [self.deadline_at.timestamp()]
        if limit.seconds is not None:
            ends.append(utcnow().timestamp() + limit.seconds - (self.clock_now() - limit.started))
        return int(min(ends) * 1000) if ends else None

    def clock_now(self) -> float:
        return asyncio.get_running_loop().time()

    def _context(self, sr: StepRun, limit: Limit) -> StepContext:
        deadline_ms = self._deadline_ms(limit)
        return StepContext(run_id=self.run_id, job_id=sr.job_id, step=sr.name, attempt=sr.attempts,
                           deadline=None if deadline_ms is None else utc_from_ms(deadline_ms),
                           _request=lambda kind, args: self._answer(sr, kind, args, limit))

    def _answer(self, sr: StepRun, kind: str, args: tuple[Any, ...], limit: Limit) -> Any:
        """A step's request to its run: context values, boundary crossings, and the
        size of a scaled timeout."""
        if kind == "context_get":
            return self.values.get(args[0])
        if kind == "context_set":
            key, encoded, overwrite = args
            if key in self.values and not overwrite:
                return False
            self.values[key] = encoded
            return True
        if kind == "boundary":
            sr.boundary = args[0]
            return True
        if kind == "timeout":  # the attempt sized its input: deadline = start + scaled timeout
            limit.seconds = int(args[0])
            return True
        raise ExecutionError(f"unknown request {kind!r}")

    def _begin(self, sr: StepRun) -> Limit:
        """The attempt starts now; returns its step timeout."""
        sr.status = "running"
        sr.attempts += 1
        sr.started_at = sr.started_at or utcnow()
        sr.attempt_started = self.clock.now()
        sr.span = self.tracing.start_attempt(self.span, self.d.name, self.run_id, sr.name, sr.job_id,
                                             sr.attempts, sr.index)
        self._emit({"type": "step_start", **self._ident(sr), "attempt": sr.attempts})
        timeout: Any = sr.node.options.timeout
        floor: float | None = getattr(timeout, "floor", timeout)  # a scaled timeout starts at its floor
        return Limit(self.clock_now(), floor)

    def _record(self, sr: StepRun, outcome: Outcome) -> float | None:
        """Record an attempt's outcome; the seconds until the next attempt, or
        ``None`` when the step run is over."""
        node = sr.node
        reason = HaltReason.JOB_RETRIES_EXHAUSTED
        decision = retry.RetryDecision(retry=False)
        if outcome.result == "succeeded":
            assert outcome.output is not None
            try:
                check_fanout(node, outcome.output)
            except FanoutRefused as exc:
                outcome = Outcome("errored", None, "FanoutError" if exc.too_many else "TypeError", str(exc))
                if exc.too_many:
                    reason = HaltReason.MAX_FANOUT_EXCEEDED
            else:
                sr.status, sr.finished_at = "completed", utcnow()
                sr.output_json, sr.output = outcome.output, codec.loads(outcome.output)
                sr.error_type = sr.error = None
                self._end_attempt(sr, outcome)
                self._advance(sr)
                return None
        if outcome.result == "crashed":
            sr.crashes += 1
            decision = retry.after_crash(sr.crashes, node.options.max_crash)
            reason = HaltReason.JOB_CRASHES_EXHAUSTED
        else:
            sr.failures += 1
            if reason is not HaltReason.MAX_FANOUT_EXCEEDED:
                delay = self.retry_delay if node.options.retry_delay is None else node.options.retry_delay
                if retry.after_failure(sr.failures, node.options.max_retry, 0).retry:
                    decision = retry.RetryDecision(retry=True, delay_ms=int(delay * 1000))
        if sr.boundary is not None:
            decision, reason = retry.RetryDecision(retry=False), HaltReason.UNSAFE_TO_RETRY
        if self.halt is not None:
            decision = retry.RetryDecision(retry=False)  # a halted run starts nothing new
        sr.error_type, sr.error = outcome.error_type, outcome.error
        self._log_failure(sr, outcome, decision.retry)
        if decision.retry:
            sr.status = "pending"
            self._end_attempt(sr, outcome)
            return decision.delay_ms / 1000
        sr.status, sr.finished_at = "failed", utcnow()
        self._end_attempt(sr, outcome)
        if self.halt is None and sr is not self.on_halt_run:
            detail = outcome.error if sr.boundary is None else f"crossed boundary {sr.boundary!r}: {outcome.error}"
            self._halt(sr, reason, detail)
        return None

    def _log_failure(self, sr: StepRun, outcome: Outcome, retrying: bool) -> None:
        extra = {"run_id": self.run_id, "job_id": sr.job_id, "step": sr.name, "attempt": sr.attempts}
        if outcome.result == "timed_out":
            log.log(logging.WARNING if retrying else logging.ERROR,
                    "Job timed out" if retrying else "Job exhausted retries and timed out", extra=extra)
        elif outcome.result == "crashed":
            log.warning("Job crashed: %s", outcome.error, extra=extra)
        else:
            log.warning("Job errored: %s: %s", outcome.error_type, outcome.error, extra=extra)

    def _halt(self, sr: StepRun, reason: HaltReason, detail: str | None) -> None:
        self.halt = {"reason": reason.value, "step": sr.name, "error": detail}
        self.halt_root = sr
        self.halt_text = f"step {sr.label()!r} failed ({reason.value})"
        log.error("Pipeline halted: %s", reason.value,
                  extra={"run_id": self.run_id, "job_id": sr.job_id, "step": sr.name, "attempt": sr.attempts})
        for other in self._ordered():  # waiting step runs never start; running ones finish
            if other.status == "pending":
                self._skip(other, self.halt_text)
                if other.task is not None:
                    other.task.cancel()
