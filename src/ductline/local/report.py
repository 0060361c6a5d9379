"""What an in-process run tells the outside: ``on_update`` events, OpenTelemetry
spans (`ductline.local.tracing`) and log lines.

Events (each with ``run_id``, ``pipeline`` and ``time``; step events with
``step``, ``index`` and ``scope``):

- ``workflow_start`` (``timeout_seconds``) and ``workflow_end`` (``status``:
  ``success``, ``failed``, ``timeout`` or ``cancelled``; ``run_status``; ``error``);
- ``step_start`` (``attempt``) and ``step_end`` after each attempt (``status``: the
  step run's status afterwards -- ``pending`` or ``held`` when it will be retried;
  ``result``, ``error_type``, ``error``, ``duration_seconds``) and when a step run
  ends without an attempt (skipped, or failed because its pause expired;
  ``skip_reason``, ``skip_root``);
- ``step_held`` (a waiting step run held by a halt), ``step_paused``
  (``pause_timeout_seconds``) and ``step_resumed`` (``input_replaced``).

An ``on_update`` that raises is logged and changes nothing.
"""

from __future__ import annotations

import inspect
import logging
from enum import StrEnum
from typing import Any, Callable

from ductline.local.clock import Clock
from ductline.local.steprun import StepRun, utcnow
from ductline.local.tracing import Tracing
from ductline.model.outcomes import Ended
from ductline.model.states import AttemptResult, JobStatus

log = logging.getLogger("ductline.local")


class EndStatus(StrEnum):
    """The ``status`` of a ``workflow_end`` event (and the run span's result)."""

    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


# The run span's ``cicd.pipeline.result`` (OpenTelemetry CI/CD conventions).
SPAN_RESULTS = {EndStatus.SUCCESS: "success", EndStatus.FAILED: "failure", EndStatus.TIMEOUT: "timeout",
                EndStatus.CANCELLED: "cancellation"}


class Reporter:
    """Events, spans and logs of one run."""

    def __init__(self, pipeline: str, run_id: str, on_update: Callable[[dict[str, Any]], Any] | None,
                 tracing: Tracing, clock: Clock) -> None:
        self.pipeline = pipeline
        self.run_id = run_id
        self.on_update = on_update
        self.tracing = tracing
        self.clock = clock
        self.span: Any = None

    def emit(self, event: dict[str, Any]) -> None:
        if self.on_update is None:
            return
        event = {"run_id": self.run_id, "pipeline": self.pipeline, "time": utcnow(), **event}
        try:
            returned = self.on_update(event)
        except Exception:
            log.exception("on_update raised on a %s event; ignored", event["type"])
            return
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()
            log.error("on_update must be a plain function; the awaitable it returned was dropped")

    def run_started(self, timeout_seconds: float | None) -> None:
        self.span = self.tracing.start_run(self.pipeline, self.run_id)
        self.emit({"type": "workflow_start", "timeout_seconds": timeout_seconds})

    def run_ended(self, status: EndStatus, run_status: str, *, error_type: str | None, error: str | None,
                  timeout_seconds: float | None) -> None:
        self.tracing.end_run(self.span, SPAN_RESULTS[status], error_type=error_type, error=error,
                             timeout_seconds=timeout_seconds)
        self.emit({"type": "workflow_end", "status": status.value, "run_status": run_status, "error": error})

    def attempt_started(self, sr: StepRun) -> None:
        sr.span = self.tracing.start_attempt(self.span, self.pipeline, self.run_id, sr.name, sr.job_id,
                                             sr.attempts, sr.index)
        self.emit({"type": "step_start", **_ident(sr), "attempt": sr.attempts})

    def attempt_ended(self, sr: StepRun, ended: Ended) -> None:
        self.tracing.end_attempt(sr.span, ended.result, ended.error_type, ended.error)
        sr.span = None
        self.emit({"type": "step_end", **_ident(sr), "attempt": sr.attempts, "status": sr.status.value,
                   "result": ended.result.value, "error_type": ended.error_type, "error": ended.error,
                   "duration_seconds": self.clock.now() - sr.attempt_clock})

    def attempt_failed(self, sr: StepRun, ended: Ended) -> None:
        """Log an attempt that did not succeed, as a worker does (docs/howto/observability.md): a timeout that will be retried logs "Job timed out"."""
        extra = _extra(sr, self.run_id)
        retrying = sr.status not in (JobStatus.FAILED, JobStatus.CANCELLED)
        if ended.result is AttemptResult.TIMED_OUT:
            log.log(logging.WARNING if retrying else logging.ERROR,
                    "Job timed out" if retrying else "Job exhausted retries and timed out", extra=extra)
        elif ended.result is AttemptResult.CRASHED:
            log.warning("Job crashed: %s", ended.error, extra=extra)
        elif ended.result is AttemptResult.ERRORED:
            log.warning("Job errored: %s: %s", ended.error_type, ended.error, extra=extra)

    def step_ended(self, sr: StepRun) -> None:
        """A step run ended without an attempt (skipped, or its pause expired)."""
        self.emit({"type": "step_end", **_ident(sr), "attempt": sr.attempts, "status": sr.status.value,
                   "result": None, "skip_reason": sr.skip_reason, "skip_root": sr.skip_root})

    def step_held(self, sr: StepRun) -> None:
        self.emit({"type": "step_held", **_ident(sr)})

    def step_paused(self, sr: StepRun) -> None:
        self.emit({"type": "step_paused", **_ident(sr), "pause_timeout_seconds": sr.spec.pause_timeout_seconds})
        log.info("Run paused before step %s: waiting for resume", sr.label(), extra=_extra(sr, self.run_id))

    def step_resumed(self, sr: StepRun, input_replaced: bool) -> None:
        self.emit({"type": "step_resumed", **_ident(sr), "input_replaced": input_replaced})


def _ident(sr: StepRun) -> dict[str, Any]:
    return {"step": sr.name, "index": sr.index, "scope": sr.scope}


def _extra(sr: StepRun, run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "job_id": sr.job_id, "step": sr.name, "attempt": sr.attempts}

