"""The `WorkflowResult` of a finished in-process run, read from its store: the run
row, its jobs, their attempts and step logs, as a worker's run reads in
``ductline show --json``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, cast

from ductline import codec
from ductline.dsl.graph import Definition
from ductline.engine.record import ON_HALT_STEP
from ductline.local.results import AttemptRecord, LogEntry, RunStatusValue, StepResult, WorkflowResult
from ductline.model import scopes
from ductline.model.states import AttemptResult, HaltReason, JobStatus, RunStatus
from ductline.model import stops
from ductline.store import Store, payloads, steplogs
from ductline.store.run_errors import run_error


def _at(ms: Any) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(int(ms) / 1000, timezone.utc)


def _value(store: Store, run_id: str, text: str | None) -> Any:
    loaded = payloads.load(store, run_id, text)
    return None if loaded is None else codec.loads(loaded)


def _order(definition: Definition) -> dict[str, int]:
    order = {name: i for i, name in enumerate(definition.nodes)}
    order[ON_HALT_STEP] = len(order)
    return order


def step_results(store: Store, definition: Definition, run_id: str) -> list[StepResult]:
    """One `StepResult` per step run, in declaration order, then element order."""
    history: dict[str, list[dict[str, Any]]] = {}
    for row in store.run_attempts(run_id):
        history.setdefault(row["job_id"], []).append(row)
    logs: dict[tuple[str, int], list[LogEntry]] = {}
    for record in steplogs.of_run(store.dialect, run_id):
        logs.setdefault((record.job_id, record.attempt), []).append(
            LogEntry(cast(datetime, _at(record.at_ms)), record.level, record.logger, record.message))
    order = _order(definition)
    jobs = sorted(store.run_jobs(run_id), key=lambda j: (order.get(j["step"], len(order)),
                                                         scopes.sort_key(j["scope"] or "")))
    results = []
    for job in jobs:
        attempts = sorted(history.get(job["id"], []), key=lambda a: int(a["attempt"]))
        records = tuple(AttemptRecord(int(a["attempt"]), a["result"], a["error_type"], a["error"],
                                      cast(datetime, _at(a["started_ms"])),
                                      cast(datetime, _at(a["finished_ms"] or a["started_ms"])),
                                      tuple(logs.get((job["id"], int(a["attempt"])), ())))
                        for a in attempts if a["result"] is not None)
        status = JobStatus(job["status"])
        failed = [a for a in records if a.result != AttemptResult.SUCCEEDED]
        last = failed[-1] if failed and status is not JobStatus.COMPLETED else None
        results.append(StepResult(
            step=job["step"], index=job["elem_index"], status=status.value,
            output=_value(store, run_id, job["output"]) if status is JobStatus.COMPLETED else None,
            error_type=None if last is None else last.error_type, error=None if last is None else last.error,
            skip_reason=stops.shown_skip_reason(status, job["skip_reason"], job["attempts"] or 0),
            attempts=int(job["attempts"] or 0),
            started_at=records[0].started_at if records else None,
            finished_at=_at(job["finished_ms"]) if status.value in _ENDED else None,
            scope=job["scope"] or "", skip_root=job["skip_root"], history=records))
    return results


_ENDED = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.SKIPPED, JobStatus.CANCELLED})


def workflow_result(store: Store, definition: Definition, run_id: str, duration_seconds: float) -> WorkflowResult:
    """The run's result, read from the store its driver recorded it in (the same
    rows a worker writes: `ductline.execute` and the parity tests read a worker's
    runs with it)."""
    run = store.get_run(run_id)
    assert run is not None, f"run {run_id} is not in its own store"
    status = RunStatus(run["status"])
    meta: dict[str, Any] = json.loads(run["metadata"] or "{}")
    steps = step_results(store, definition, run_id)
    completed = status is RunStatus.COMPLETED
    halt_reason = run["halt_reason"]
    error, error_type = run_error(store, run)
    failed_step = meta.get("halted_step")
    if failed_step is None and halt_reason == HaltReason.PAUSE_EXPIRED:
        failed_step = meta.get("paused_step")
    if failed_step is None and halt_reason == HaltReason.EVENT_TIMED_OUT:
        failed_step = meta.get("waiting_step")
    metadata: dict[str, Any] = {
        "run_id": run_id, "pipeline": definition.name, "timeout_exceeded": False,
        "timeout_seconds": run["timeout_seconds"], **meta,
        "error": error, "error_type": error_type,
        "output": _value(store, run_id, run["output"]) if completed else None,
        "halt_reason": halt_reason, "failed_step": failed_step, "duration_seconds": duration_seconds,
    }
    return WorkflowResult(overall_status="success" if completed else "failed", steps=steps, metadata=metadata,
                          status=cast(RunStatusValue, status.value))
