"""What `ductline.execute` returns: a `WorkflowResult` with one `StepResult` per
step run, in declaration order, each with the history of its attempts.

States are the rulebook's (`ductline.model.states`), as their string values, so a
result reads like a worker's run (``ductline show --json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

# `JobStatus` values: "held", "paused", "deferred" and "awaiting" (child runs) remain in
# a halted run; "pending" and "running" are never left in a returned result.
StepStatus = Literal["pending", "held", "running", "paused", "deferred", "awaiting", "completed", "failed",
                     "skipped", "cancelled"]
# `RunStatus` values a finished in-process run can have.
RunStatusValue = Literal["completed", "halted", "failed", "cancelled"]
OverallStatus = Literal["success", "failed"]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record an attempt logged or printed (`ductline.execution.steplog`).

    Attributes:
        at: when the step made it (aware UTC).
        level: ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR`` or ``CRITICAL``.
        logger: the logger's name; ``stdout`` / ``stderr`` for printed lines,
            ``ductline`` for the mark of a cut (the attempt passed its cap).
        message: its text (with the traceback of a logged exception).
    """

    at: datetime
    level: str
    logger: str
    message: str


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a step run.

    Attributes:
        attempt: its number, from 1.
        result: an `AttemptResult` value: ``succeeded``, ``errored``,
            ``timed_out``, ``crashed`` or ``cancelled``.
        error_type: the recorded type of its error (e.g. ``"ValueError"``,
            ``"TimeoutError"``, ``"ductline.Retry"``), ``None`` if it succeeded.
        error: the error's message.
        started_at: when it started (aware UTC).
        finished_at: when it ended (aware UTC).
        logs: what it logged and printed, oldest first (`LogEntry`).
    """

    attempt: int
    result: str
    error_type: str | None
    error: str | None
    started_at: datetime
    finished_at: datetime
    logs: tuple[LogEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class StepResult:
    """The end state of one step run.

    Attributes:
        step: the step's name (``"__on_halt__"`` for the halt handler).
        index: the element index for a step inside an ``expand`` (the innermost
            one when expands nest); ``None`` at top level.
        status: the step run's `JobStatus` value: ``completed``, ``failed``,
            ``skipped``, ``cancelled``, or, in a halted run, ``held`` (it waits
            for a retry of the run) or ``paused``.
        output: the step's output (decoded JSON) when completed, else ``None``.
        error_type: the error type of the last attempt that did not succeed, e.g.
            ``"TimeoutError"`` (``None`` once the step run completed).
        error: that attempt's message.
        skip_reason: why a skipped step run never ran (``"workflow timeout"``,
            ``"cancelled"``, ``"pause expired"``); for a step whose pause expired,
            the expiry.
        attempts: how many attempts started.
        started_at: when the first attempt started (aware UTC), or ``None``.
        finished_at: when the step run reached its end state (aware UTC), or
            ``None`` (held, paused).
        scope: where the step run sits inside nested expands: ``""`` at top level,
            ``"2"`` for element 2, ``"2/0"`` for element 0 of an inner expand.
        skip_root: for a skipped step run that was never created, the step whose
            open step run it was reached from (`ductline.model.cascade`); for a
            waiting one skipped because a pause expired, the paused step.
        history: one `AttemptRecord` per attempt, in order.
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
    skip_root: str | None = None
    history: tuple[AttemptRecord, ...] = ()

    @property
    def logs(self) -> list[LogEntry]:
        """What every attempt of the step run logged and printed, attempt by attempt
        (each attempt's own records are in ``history[i].logs``)."""
        return [entry for attempt in self.history for entry in attempt.logs]


@dataclass(frozen=True, slots=True)
class WorkflowResult:
    """The outcome of one in-process run.

    Two status fields, one meaning: ``status`` is the run's own state, as a worker
    records it; ``overall_status`` only says whether it succeeded, for callers that
    branch on that alone (``"success"`` exactly when ``status`` is ``"completed"``).
    A ``halted`` run had a step fail for good (out of attempts, not safe to retry):
    on a worker an operator can retry it. A ``failed`` run was ended by time: its run
    deadline passed, or a pause expired without a resume; nothing revives it.

    Attributes:
        overall_status: ``"success"`` when the run completed, else ``"failed"``.
        steps: one `StepResult` per step run, in declaration order (an expanded
            step has one per element, in element order; the halt handler last).
        metadata: ``run_id``, ``pipeline``, ``timeout_exceeded`` (bool),
            ``timeout_seconds``, ``error`` and ``error_type`` (``None`` on
            success), ``output`` (the last step's output), ``halt_reason`` and
            ``failed_step`` (after a halt or an expired pause), ``duration_seconds``;
            after a halt ``halted_step`` and ``reasons`` (what ``on_halt`` gets);
            after a cancel ``cancelled``; after an expired pause ``pause_expired``,
            ``paused_step`` and ``pause_timeout_seconds``: the keys a worker records
            for the same run (`ductline show --json`), plus the executor's own.
        status: the run's `RunStatus` value: ``completed``, ``halted`` (a step
            failed for good), ``failed`` (the run deadline passed, or a pause
            expired) or ``cancelled``.
    """

    overall_status: OverallStatus
    steps: list[StepResult]
    metadata: dict[str, Any]
    status: RunStatusValue

    @property
    def output(self) -> Any:
        """The last step's output (``None`` unless the run completed)."""
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
