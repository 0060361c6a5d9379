"""Read models of runs for the CLI (and scripts): plain dicts, JSON-ready."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ductline import codec
from ductline.errors import RunNotFound
from ductline.model.states import JobStatus
from ductline.store import Store


def iso(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO 8601 UTC with millisecond precision."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def run_summary(row: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": row["id"], "pipeline": row["pipeline"], "status": row["status"],
            "halt_reason": row["halt_reason"], "created_at": iso(row["created_ms"]),
            "finished_at": iso(row["finished_ms"])}


def run_view(store: Store, run_id: str) -> dict[str, Any]:
    """The run as ``ductline show --json`` prints it.

    Raises:
        RunNotFound: no such run.
    """
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFound(f"run {run_id!r} not found")
    attempts: dict[str, list[dict[str, Any]]] = {}
    for a in store.run_attempts(run_id):
        attempts.setdefault(a["job_id"], []).append({
            "attempt": a["attempt"], "result": a["result"], "started_at": iso(a["started_ms"]),
            "finished_at": iso(a["finished_ms"]), "deadline": iso(a["deadline_ms"]),
            "error_type": a["error_type"], "error": a["error"], "traceback": a["traceback"],
        })
    steps = []
    for job in store.run_jobs(run_id):
        status = JobStatus(job["status"])
        steps.append({
            "step": job["step"], "index": job["elem_index"], "scope": job["scope"], "status": status.public,
            "not_before": iso(job["not_before_ms"]) if status in (JobStatus.PENDING, JobStatus.HELD) else None,
            "boundary": job["boundary"], "skip_reason": job["skip_reason"],
            "attempts": attempts.get(job["id"], []),
        })
    return {
        "run_id": run["id"], "pipeline": run["pipeline"], "status": run["status"],
        "halt_reason": run["halt_reason"], "key": run.get("idempotency_key"),
        "metadata": json.loads(run["metadata"] or "{}"),
        "args": codec.loads(run["args"]), "output": codec.loads(run["output"]),
        "not_before": iso(run["not_before_ms"]), "deadline": iso(run["deadline_ms"]),
        "created_at": iso(run["created_ms"]), "started_at": iso(run["started_ms"]),
        "finished_at": iso(run["finished_ms"]), "steps": steps,
    }
