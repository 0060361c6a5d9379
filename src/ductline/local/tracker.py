"""Keeping the caller of an in-process run told: which step runs started, how each
attempt ended, and what a halt, a stop or a pause did to the rest (held, paused,
skipped, failed without running), read from the store where the engine wrote it.

The driver reports the attempts it ran; everything else the engine changed is
found by comparing each job's status with the last one reported (`sync`), which
the driver calls only after the engine did more than record plain completions.
"""

from __future__ import annotations

from typing import Any, Callable

from ductline.dsl.graph import Definition
from ductline.local.report import Reporter
from ductline.model import scopes
from ductline.model.states import AttemptResult, JobStatus
from ductline.store import Store
from ductline.store.records import ClaimedJob

_ENDED_WITHOUT_ATTEMPT = frozenset({JobStatus.SKIPPED, JobStatus.FAILED, JobStatus.CANCELLED})


def index_of(job: ClaimedJob) -> int | None:
    """The element index of a step run inside an expand (``None`` at top level)."""
    return scopes.element_index(job.scope) if job.scope else None


class Tracker:
    """The last status told for each job of one run.

    Args:
        report: where the caller is told.
        paused: called with each job row that became paused (its resume option).
    """

    def __init__(self, store: Store, definition: Definition, run_id: str, report: Reporter,
                 paused: Callable[[dict[str, Any]], None]) -> None:
        self.store = store
        self.definition = definition
        self.run_id = run_id
        self.report = report
        self.paused = paused
        self._told: dict[str, str] = {}  # job id -> status last told

    def started(self, job: ClaimedJob) -> None:
        self._told[job.job_id] = JobStatus.RUNNING.value
        self.report.attempt_started(job.step, job.scope, index_of(job), job.attempt)

    def ended(self, job: ClaimedJob, seconds: float, status: str, result: str, error_type: str | None,
              error: str | None) -> None:
        """An attempt of ``job`` ended after ``seconds``; its job is ``status`` now."""
        self._told[job.job_id] = status
        self.report.attempt_ended(job.step, job.scope, index_of(job), job.attempt, status, result, error_type,
                                  error, seconds)

    def ended_by_others(self, attempts: list[tuple[ClaimedJob, float]]) -> None:
        """Attempts (with their durations) that a stop recorded: told from their rows."""
        jobs = {row["id"]: row for row in self.store.run_jobs(self.run_id)}
        rows = {(row["job_id"], int(row["attempt"])): row for row in self.store.run_attempts(self.run_id)}
        for job, seconds in attempts:
            found = jobs.get(job.job_id)
            row = rows.get((job.job_id, job.attempt))
            if found is not None and row is not None:
                self.ended(job, seconds, found["status"], row["result"] or AttemptResult.CANCELLED.value,
                           row["error_type"], row["error"])

    def resumed(self, rows: list[dict[str, Any]], input_replaced: bool) -> None:
        for row in rows:
            self._told[row["id"]] = JobStatus.PENDING.value
            self.report.step_resumed(row, input_replaced)

    def sync(self) -> None:
        """Tell what the engine did to jobs no attempt of this run reported: held by
        a halt, paused, waiting for an event, skipped, or failed without running (an
        expired pause, a wait that timed out)."""
        for job in self.store.run_jobs(self.run_id):
            status = job["status"]
            before = self._told.get(job["id"])
            if status == before:
                continue
            self._told[job["id"]] = status
            if status == JobStatus.HELD:
                self.report.step_held(job)
            elif status == JobStatus.PAUSED:
                self.report.step_paused(job, self.definition.pauses.get(job["step"]))
                self.paused(job)
            elif status == JobStatus.DEFERRED:
                wait = self.definition.waits.get(job["step"])
                self.report.step_waiting(job, job.get("wait_event"), None if wait is None else wait.timeout)
            elif status in _ENDED_WITHOUT_ATTEMPT and before != JobStatus.RUNNING:
                self.report.step_ended(job)
