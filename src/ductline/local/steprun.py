"""One step run of an in-process run: the in-memory counterpart of a worker's job
row and its attempt rows.

Every status change goes through `StepRun.move`, which the rulebook's
`job_may_move` guards: a move the worker's store would refuse is a bug here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ductline.dsl.graph import Node
from ductline.local.results import AttemptRecord, LogEntry
from ductline.model import scopes
from ductline.model.outcomes import Budget, Charge, Ended
from ductline.model.routing import JobSpec
from ductline.model.states import TERMINAL_JOB, JobStatus, job_may_move

ON_HALT = "__on_halt__"  # the step name of the pipeline's on_halt handler


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(eq=False, slots=True)
class StepRun:
    """A step run: its job (status, input, budgets) and its attempts.

    Attributes:
        node: the step.
        scope: where it sits in nested expands (`ductline.model.scopes`).
        input: its input, a JSON list of positional arguments.
        spec: what its job carries (budgets, delay, limit key, pause).
        job_id: an id for events, spans and `ductline.context()`.
        status: its `JobStatus`.
        created_at: the executor clock's time it was created (a resumed step
            still waits out the rest of its delay, as on a worker).
        history: its closed attempts.
    """

    node: Node
    scope: str
    input: str
    spec: JobSpec
    job_id: str
    status: JobStatus
    created_at: float = 0.0
    output: Any = None
    output_json: str | None = None
    error_type: str | None = None
    error: str | None = None
    skip_reason: str | None = None
    skip_root: str | None = None
    attempts: int = 0
    failures: int = 0               # errored and timed-out attempts (max_retry)
    crashes: int = 0                # crashed attempts (max_crash)
    boundary: str | None = None     # set by ductline.cross_boundary()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempt_clock: float = 0.0      # the executor clock at the open attempt's start
    attempt_began: datetime | None = None
    history: list[AttemptRecord] = field(default_factory=list)
    attempt_logs: list[LogEntry] = field(default_factory=list)  # of the open attempt
    span: Any = None                # the open attempt's span, if tracing

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def key(self) -> tuple[str, str]:
        return (self.node.name, self.scope)

    @property
    def index(self) -> int | None:
        return scopes.element_index(self.scope) if self.node.depth > 0 else None

    @property
    def handler(self) -> bool:
        """It runs the pipeline's ``on_halt`` handler (whose failure halts nothing)."""
        return self.node.name == ON_HALT

    def label(self) -> str:
        return self.name if not self.scope else f"{self.name}[{self.scope}]"

    def move(self, to: JobStatus) -> None:
        """Change the status, as the rulebook allows.

        Raises:
            AssertionError: the rulebook forbids the move (a bug of the executor).
        """
        if not job_may_move(self.status, to):
            raise AssertionError(f"step run {self.label()} cannot move from {self.status} to {to}")
        self.status = to
        if to in TERMINAL_JOB:
            self.finished_at = utcnow()

    def budget(self) -> Budget:
        """What the rulebook's `decide` needs to know of this job."""
        spec = self.spec
        return Budget(failures=self.failures, crashes=self.crashes, max_retry=spec.max_retry,
                      max_crash=spec.max_crash, retry_delay_seconds=spec.retry_delay_seconds,
                      boundary=self.boundary)

    def charge(self, charge: Charge | None) -> None:
        if charge is Charge.FAILURE:
            self.failures += 1
        elif charge is Charge.CRASH:
            self.crashes += 1

    def begin_attempt(self, clock_now: float) -> None:
        self.move(JobStatus.RUNNING)
        self.attempts += 1
        self.attempt_began = utcnow()
        self.started_at = self.started_at or self.attempt_began
        self.attempt_clock = clock_now
        self.attempt_logs = []

    def add_logs(self, records: list[tuple[int, str, str, str]]) -> None:
        """Records ``(at_ms, level, logger, message)`` of the open attempt."""
        self.attempt_logs.extend(LogEntry(datetime.fromtimestamp(at_ms / 1000, timezone.utc), level, logger, message)
                                 for at_ms, level, logger, message in records)

    def end_attempt(self, ended: Ended, to: JobStatus) -> None:
        """Close the open attempt as ``ended`` and move the job to ``to``."""
        assert self.attempt_began is not None
        finished = utcnow()
        self.history.append(AttemptRecord(self.attempts, ended.result.value, ended.error_type, ended.error,
                                          self.attempt_began, finished, tuple(self.attempt_logs)))
        self.attempt_logs = []
        self.error_type, self.error = ended.error_type, ended.error
        self.attempt_began = None
        self.move(to)

    def complete(self, ended: Ended, output_json: str, value: Any) -> None:
        self.end_attempt(ended, JobStatus.COMPLETED)
        self.output_json, self.output = output_json, value
        self.error_type = self.error = None

    def skip(self, reason: str, root: str | None) -> None:
        self.skip_reason, self.skip_root = reason, root
        self.move(JobStatus.SKIPPED)
