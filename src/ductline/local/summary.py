"""The `WorkflowResult` of a finished in-process run, from its state."""

from __future__ import annotations

from typing import Any, cast

from ductline.local.results import RunStatusValue, StepResult, WorkflowResult
from ductline.local.state import RunState
from ductline.local.steprun import StepRun
from ductline.model.outcomes import TIMEOUT_ERROR_TYPE
from ductline.model.states import HaltReason, JobStatus, RunStatus
from ductline.model.stops import WORKFLOW_TIMEOUT


def step_result(sr: StepRun) -> StepResult:
    return StepResult(
        step=sr.name, index=sr.index, status=sr.status.value,
        output=sr.output if sr.status is JobStatus.COMPLETED else None, error_type=sr.error_type,
        error=sr.error, skip_reason=sr.skip_reason, attempts=sr.attempts, started_at=sr.started_at,
        finished_at=sr.finished_at, scope=sr.scope, skip_root=sr.skip_root, history=tuple(sr.history))


def _error(state: RunState) -> tuple[str | None, str | None]:
    """``(error, error_type)`` describing why the run did not complete."""
    meta = state.metadata
    if state.status is RunStatus.HALTED and state.halt is not None:
        halt, failed = state.halt, state.halt.step_run
        return (f"step {failed.label()!r} failed: {failed.error_type}: {halt.detail} ({halt.reason.value})",
                failed.error_type)
    if meta.get("timeout_exceeded"):
        error = f"{meta['error']} ({WORKFLOW_TIMEOUT})"
        if state.stopped:
            error += "; stopped: " + ", ".join(repr(label) for label in state.stopped)
        return error, TIMEOUT_ERROR_TYPE
    if state.halt_reason is HaltReason.PAUSE_EXPIRED:
        return meta.get("error"), "PauseExpired"
    if state.status is RunStatus.CANCELLED:
        return "the run was cancelled", "Cancelled"
    if state.status is not RunStatus.COMPLETED:  # pragma: no cover - a validated graph reaches its end
        return f"the run ended {state.status.value} without completing its last step", None
    return None, None


def workflow_result(state: RunState, timeout_seconds: float | None, duration_seconds: float) -> WorkflowResult:
    completed = state.status is RunStatus.COMPLETED
    error, error_type = _error(state)
    failed_step = None
    if state.halt is not None:
        failed_step = state.halt.step_run.name
    elif state.halt_reason is HaltReason.PAUSE_EXPIRED:
        failed_step = state.metadata.get("paused_step")
    metadata: dict[str, Any] = {
        "run_id": state.run_id, "pipeline": state.definition.name, "timeout_exceeded": False,
        "timeout_seconds": timeout_seconds, **state.metadata,
        "error": error, "error_type": error_type, "output": state.output if completed else None,
        "halt_reason": None if state.halt_reason is None else state.halt_reason.value,
        "failed_step": failed_step, "duration_seconds": duration_seconds,
    }
    return WorkflowResult(overall_status="success" if completed else "failed",
                          steps=[step_result(sr) for sr in state.ordered()], metadata=metadata,
                          status=cast(RunStatusValue, state.status.value))
