"""Recording an attempt's outcome: the rulebook decides (`ductline.model.outcomes.
decide`), this module applies the verdict in memory -- complete and route the
output on, wait again (pending, or held in a halted run), or fail and halt the run.

A halt (once per run) holds every waiting step run, cancels the running ones under
``on_failure="fail_fast"`` (`ductline.model.stops.fail_fast`), and starts the
``on_halt`` handler with the halt's reason; running siblings otherwise finish, and
what their completions create is held. Dependents that were never created are not
recorded: a halted run is not over, a worker's retry can revive it.
"""

from __future__ import annotations

import logging

from ductline import codec
from ductline.local.advance import Router
from ductline.local.outcome import Outcome
from ductline.local.report import Reporter
from ductline.local.state import Halt, RunState
from ductline.local.steprun import StepRun
from ductline.local.stop import Stops
from ductline.local.tasks import TaskSet
from ductline.model import stops
from ductline.model.outcomes import Ended, check_expand_output, decide
from ductline.model.states import AttemptResult, HaltReason, JobStatus, RunStatus, waiting_status

log = logging.getLogger("ductline.local")


class Recorder:
    """Applies the verdicts of one run's attempts."""

    def __init__(self, state: RunState, report: Reporter, router: Router, tasks: TaskSet,
                 stopper: Stops) -> None:
        self.state = state
        self.report = report
        self.router = router
        self.tasks = tasks
        self.stopper = stopper

    def record(self, sr: StepRun, outcome: Outcome) -> float | None:
        """Record how the open attempt of ``sr`` ended.

        Returns:
            Seconds until its next attempt, or ``None`` when its task is done
            (completed, failed, or held until a retry of the run).
        """
        ended = Ended(outcome.result, outcome.error_type, outcome.error)
        if outcome.result is AttemptResult.SUCCEEDED:
            assert outcome.output is not None
            value = codec.loads(outcome.output)
            refused = check_expand_output(sr.node, value)
            if refused is None:
                sr.complete(ended, outcome.output, value)
                self.report.attempt_ended(sr, ended)
                self.router.advance(sr)
                return None
            ended = refused
        verdict = decide(ended, sr.budget(), sr.node.options, handler=sr.handler)
        sr.charge(verdict.charge)
        if verdict.retries:
            waiting = waiting_status(self.state.status)
            sr.end_attempt(ended, waiting)
            self.report.attempt_ended(sr, ended)
            self.report.attempt_failed(sr, ended)
            return verdict.delay_ms / 1000 if waiting is JobStatus.PENDING else None
        sr.end_attempt(ended, JobStatus.FAILED)
        self.report.attempt_ended(sr, ended)
        self.report.attempt_failed(sr, ended)
        if verdict.halt is not None:
            self.halt(sr, verdict.halt, verdict.detail)
        return None

    def halt(self, sr: StepRun, reason: HaltReason, detail: str | None) -> None:
        """``sr`` failed for good: halt the run, unless it halted already (or ended)."""
        if not self.state.move(RunStatus.HALTED):
            return
        halt = Halt(reason, sr, detail)
        self.state.halt = halt
        self.state.halt_reason = reason
        log.error("Pipeline halted: %s", reason.value,
                  extra={"run_id": self.state.run_id, "job_id": sr.job_id, "step": sr.name,
                         "attempt": sr.attempts})
        for waiting in self.state.with_status({JobStatus.PENDING}):
            waiting.move(JobStatus.HELD)
            self.tasks.cancel(waiting.key)  # it waits for a delay or a slot: nothing to kill
            self.report.step_held(waiting)
        if self.state.definition.on_failure == "fail_fast":
            self.stopper.apply(stops.fail_fast(sr.name))
        handler = self.state.definition.on_halt
        if handler is not None:
            self.router.create(handler.name, "", self.router.on_halt_input(halt.details()),
                               status=JobStatus.PENDING)
