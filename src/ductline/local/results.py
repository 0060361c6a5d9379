"""What `ductline.execute` returns: a `WorkflowResult` with one `StepResult` per
step run, in declaration order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

StepStatus = Literal["completed", "failed", "skipped", "cancelled", "pending"]
OverallStatus = Literal["success", "failed"]


@dataclass(frozen=True, slots=True)
class StepResult:
    """The end state of one step run.

    Attributes:
        step: the step's name.
        index: the element index for a step inside an ``expand`` (the innermost
            one when expands nest); ``None`` at top level, and for a step skipped
            before its expand produced any element.
        status: ``completed``, ``failed``, ``skipped``, ``cancelled`` or
            ``pending`` (the last is never left in a returned result).
        output: the step's output (decoded JSON) when completed, else ``None``.
        error_type: the exception type of the last failed attempt, e.g.
            ``"TimeoutError"``.
        error: the message of the last failed attempt.
        skip_reason: why a skipped step never ran: ``"workflow timeout"``, or the
            failed root step and the halt reason.
        attempts: how many attempts started.
        started_at: when the first attempt started (aware UTC), or ``None``.
        finished_at: when the step run reached its end state (aware UTC).
        scope: where the step run sits inside nested expands: ``""`` at top level,
            ``"2"`` for element 2, ``"2/0"`` for element 0 of an inner expand, and
            ``*`` for elements that were never created.
    """

    step: str
    index: int | None
    status: StepStatus
    output: Any = None
    error_type: str | None = None
    error: str | None = None
    skip_reason: str | None = None
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    scope: str = ""


@dataclass(frozen=True, slots=True)
class WorkflowResult:
    """The outcome of one in-process run.

    Attributes:
        overall_status: ``"success"`` or ``"failed"``.
        steps: one `StepResult` per step run, in declaration order (an expanded
            step has one per element, in element order).
        metadata: ``run_id``, ``pipeline``, ``timeout_exceeded`` (bool),
            ``timeout_seconds``, ``error`` (``None`` on success), ``output`` (the
            last step's output), ``halt_reason`` and ``failed_step`` (after a halt),
            ``duration_seconds``.
    """

    overall_status: OverallStatus
    steps: list[StepResult]
    metadata: dict[str, Any]

    @property
    def output(self) -> Any:
        """The last step's output (``None`` unless the run succeeded)."""
        return self.metadata.get("output")

    @property
    def timeout_exceeded(self) -> bool:
        return bool(self.metadata.get("timeout_exceeded"))

    def step(self, name: str, index: int | None = None) -> StepResult:
        """The result of step ``name`` (element ``index`` of an expanded step).

        Raises:
            KeyError: no such step run.
        """
        for result in self.steps:
            if result.step == name and (index is None or result.index == index):
                return result
        raise KeyError(f"no step run {name!r}" + ("" if index is None else f" [{index}]"))

    def statuses(self) -> dict[str, str]:
        """``{"name" or "name[scope]": status}`` for every step run (for quick checks)."""
        return {(r.step if not r.scope else f"{r.step}[{r.scope}]"): r.status for r in self.steps}
