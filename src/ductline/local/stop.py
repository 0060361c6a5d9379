"""Applying a `ductline.model.stops.StopPlan` in memory: a run deadline, a cancel,
an expired pause, and fail-fast after a halt.

The order is the worker's (`ductline.runtime.abort`): the open step runs are
noted first (they are the roots of the cascade), then running attempts are
recorded as the plan says and their tasks cancelled (a task running a child kills
its process group as it unwinds), waiting step runs are skipped, the run moves on,
and the dependents never created are recorded skipped with the step they were
reached from (`ductline.model.cascade.dependents`).
"""

from __future__ import annotations

from typing import Callable

from ductline.local.clock import Clock
from ductline.local.outcome import Outcome
from ductline.local.report import Reporter
from ductline.local.state import RunState
from ductline.local.steprun import StepRun
from ductline.local.tasks import TaskSet
from ductline.model.cascade import dependents
from ductline.model.outcomes import TIMEOUT_ERROR_TYPE, Ended
from ductline.model.routing import job_spec
from ductline.model.states import OPEN_JOB, TERMINAL_RUN, WAITING_JOB, AttemptResult, JobStatus
from ductline.model.stops import StopPlan, deadline

RUNNING = frozenset({JobStatus.RUNNING})
WAITING_OR_PAUSED = WAITING_JOB | {JobStatus.PAUSED}


class Stops:
    """Ends one run early, or cancels what runs in it."""

    def __init__(self, state: RunState, report: Reporter, tasks: TaskSet, clock: Clock) -> None:
        self.state = state
        self.report = report
        self.tasks = tasks
        self.clock = clock

    def apply(self, plan: StopPlan, expired: StepRun | None = None) -> bool:
        """Apply ``plan`` if the run is in one of its ``from_statuses``.

        Args:
            expired: for an expired pause, the paused step run: it is recorded
                ``failed`` (it never ran) and its pause's expiry kept as its
                ``skip_reason``, as a worker records it.

        Returns:
            Whether the plan applied.
        """
        state = self.state
        if state.status not in plan.from_statuses:
            return False
        roots = [sr.key for sr in state.ordered() if sr.status in OPEN_JOB]
        if expired is not None:
            expired.skip_reason = plan.metadata.get("error")
            expired.move(JobStatus.FAILED)
            self.report.step_ended(expired)
        ended = Ended(plan.attempt_result, plan.error_type, plan.error)
        for sr in state.with_status(RUNNING):
            sr.end_attempt(ended, plan.job_status)
            self.tasks.cancel(sr.key)
            state.stopped.append(sr.label())
            self.report.attempt_ended(sr, ended)
        if plan.skip_reason is not None:
            for sr in state.with_status(WAITING_OR_PAUSED):
                self.tasks.cancel(sr.key)
                sr.skip(plan.skip_reason, plan.skip_root)
                self.report.step_ended(sr)
        if plan.run_status is not None:
            state.move(plan.run_status)
            state.metadata.update(plan.metadata)
            if plan.halt_reason is not None:
                state.halt_reason = plan.halt_reason
        if plan.skip_reason is not None:
            self._skip_dependents(roots, plan.skip_reason)
        if state.status in TERMINAL_RUN:
            self.tasks.cancel_all()  # pause timers, resume callbacks
            self.tasks.wake()
        return True

    def _skip_dependents(self, roots: list[tuple[str, str]], reason: str) -> None:
        definition = self.state.definition
        for found in dependents(definition, roots):
            if (found.step, found.scope) in self.state.step_runs:
                continue
            spec = job_spec(definition, found.step, found.scope, "[]", 0)
            sr = self.state.create(found.step, found.scope, "[]", spec, JobStatus.SKIPPED, self.clock.now())
            sr.skip_reason, sr.skip_root = reason, found.root
            self.report.step_ended(sr)

    def deadline_of_halted_run(self, timeout_seconds: float | None,
                               record: Callable[[StepRun, Outcome], float | None]) -> None:
        """The run deadline passed after the run halted. The halted run is not
        ended (a retry could revive it), but nothing of it may run on: attempts
        still running are stopped like attempts past their own timeout -- the
        rulebook decides what follows (held for a retry, or failed) -- and every
        other task ends. Paused step runs stay paused."""
        error = deadline(timeout_seconds).error
        for sr in self.state.with_status(RUNNING):
            self.tasks.cancel(sr.key)
            self.state.stopped.append(sr.label())
            record(sr, Outcome(AttemptResult.TIMED_OUT, None, TIMEOUT_ERROR_TYPE, error))
        self.tasks.cancel_all()
        self.tasks.wake()

