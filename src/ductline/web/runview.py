"""One run as the API gives it: the fields of ``ductline show --json``, with values
shown as what they are (`ductline.web.values`) and the failures of each step run
told apart (free before a boundary, paid after one: `ductline.web.failures`).

Values (the run's arguments and output, each step run's output) are `Data`: the
response leaves their strings as data (made storable), while every other string
of an answer is made safe to show (`ductline.web.api_support.ApiResponse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ductline import views
from ductline.errors import StoreError
from ductline.model import outcomes, serving, stops
from ductline.model.serving import LIVE_WITHIN_SECONDS
from ductline.model.states import WAITING_JOB, JobStatus
from ductline.web import failures, values
from ductline.web.reader import DashboardReader


@dataclass(frozen=True, slots=True)
class Data:
    """A value in an API answer, already in its API form (`values.api_value`)."""

    value: Any


def _loaded(reader: DashboardReader, run_id: str, text: str | None) -> Data:
    """A run's arguments or output, read back in full when stored out of line."""
    try:
        text = reader.payload_text(run_id, text)
    except (StoreError, UnicodeDecodeError) as exc:  # a payload missing or damaged: say so
        return Data({"type": "unreadable", "text": "<payload that cannot be read>", "error": str(exc)})
    return Data(values.api_value(values.decode(text)))


def _step_output(run_id: str, text: str | None) -> Data | None:
    """A step run's output; one stored out of line is its size and download link."""
    if text is None:
        return None
    shown = values.api_value(values.decode(text))
    if isinstance(shown, dict) and shown.get("type") == "payload" and "id" in shown:  # not a value tagged so
        shown["link"] = f"/api/runs/{run_id}/payloads/{shown['id']}"
    return Data(shown)


def build(reader: DashboardReader, run_id: str, lease_seconds: float = LIVE_WITHIN_SECONDS) -> dict[str, Any]:
    """The run as the API answers ``GET /api/runs/{run_id}``; a pending step no
    worker live within ``lease_seconds`` can claim says why in ``unserved``.

    Raises:
        RunNotFound: no such run (a unique prefix of 6 characters or more is taken).
    """
    run_id = reader.resolve(run_id)
    run = reader.run(run_id)
    attempt_rows = reader.run_attempts(run_id)
    logs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for entry in reader.step_logs(run_id):
        logs.setdefault((entry["job_id"], int(entry["attempt"])), []).append(
            {k: entry[k] for k in ("at", "level", "logger", "message")})
    attempts: dict[str, list[dict[str, Any]]] = {}
    for a in attempt_rows:
        attempts.setdefault(a["job_id"], []).append({
            "attempt": a["attempt"], "result": outcomes.shown_result(a["result"], a["error_type"]),
            "started_at": views.iso(a["started_ms"]),
            "finished_at": views.iso(a["finished_ms"]), "duration_ms": views.duration_ms(a["started_ms"],
                                                                                        a["finished_ms"]),
            "deadline": views.iso(a["deadline_ms"]), "error_type": a["error_type"], "error": a["error"],
            "traceback": a["traceback"], "logs": logs.get((a["job_id"], int(a["attempt"])), []),
        })
    jobs = views.in_run_order(reader.run_jobs(run_id), attempt_rows)  # as `ductline show`
    steps = []
    spent = failures.Failures()
    offers = reader.offers(lease_seconds) if any(j["status"] == JobStatus.PENDING for j in jobs) else []
    marks = reader.step_marks(run_id)
    for job in jobs:
        status = JobStatus(job["status"])
        tried = attempts.get(job["id"], [])
        failed = failures.of_step_run(job, [(a["result"], a["error_type"], a["error"]) for a in tried])
        spent = spent + failed
        steps.append({
            "step": job["step"], "index": job["elem_index"], "scope": job["scope"], "status": status.value,
            "not_before": views.iso(job["not_before_ms"]) if status in WAITING_JOB else None,
            "boundary": job["boundary"], "skip_reason": stops.shown_skip_reason(status, job["skip_reason"],
                                                                            job["attempts"]),
            # the step whose stop made this step run unreachable (null: skipped itself, or not skipped)
            "skip_root": job["skip_root"],
            "pause_expires": views.iso(job.get("pause_expires_ms")) if status is JobStatus.PAUSED else None,
            "waiting_for": job.get("wait_event") if status is JobStatus.DEFERRED else None,
            "wait_expires": views.iso(job.get("pause_expires_ms")) if status is JobStatus.DEFERRED else None,
            "priority": job["priority"], "limit_key": job["limit_key"],
            "throttled": bool(job["throttled"]) and status is JobStatus.PENDING,
            "queue": job["queue"],
            "unserved": serving.unserved(job["step"], job["queue"], job["definition"], offers)
            if status is JobStatus.PENDING and not job["throttled"] else None,
            "marked": marks.get(job["id"]) if status is JobStatus.COMPLETED else None,  # as ductline show
            "output": _step_output(run_id, job.get("output")),
            "failures": failed.as_dict(),
            "attempts": tried,
        })
    metadata = values.decode(run["metadata"] or "{}")
    if isinstance(metadata, dict):  # a move's time as every other time of the API (stored as at_ms)
        metadata = views.shown_metadata(metadata)
    return {
        "run_id": run["id"], "pipeline": run["pipeline"], "status": run["status"],
        "halt_reason": run["halt_reason"], "key": run.get("idempotency_key"), "priority": run["priority"],
        "tags": reader.run_tags(run_id),
        # who marked which step run succeeded, when and why (`ductline mark-succeeded`)
        "operator_actions": reader.operator_actions(run_id),
        "definition": run["definition"],
        # ductline's own JSON; shown as the other values are if it holds anything else
        "metadata": values.api_value(metadata),
        "args": _loaded(reader, run_id, run["args"]), "output": _loaded(reader, run_id, run["output"]),
        "not_before": views.iso(run["not_before_ms"]), "deadline": views.iso(run["deadline_ms"]),
        "created_at": views.iso(run["created_ms"]), "started_at": views.iso(run["started_ms"]),
        "finished_at": views.iso(run["finished_ms"]), "failures": spent.as_dict(), "steps": steps,
        "events": _events(reader, run_id, {j["id"]: j["step"] for j in jobs}),
        # the run that started this one, and the child runs this one's steps started
        **reader.family(run_id),
    }


def _events(reader: DashboardReader, run_id: str, steps: dict[str, str]) -> list[dict[str, Any]]:
    """The events sent to the run, as ``ductline show --json`` lists them."""
    return [{
        "id": e["id"], "name": e["name"], "key": e["key"], "data": Data(values.api_value(values.decode(e["data"]))),
        "sent_at": views.iso(e["sent_ms"]),
        "consumed_by": steps.get(e["job_id"]) if e["job_id"] is not None else None,
        "consumed_at": views.iso(e["consumed_ms"]),
    } for e in reader.sent_events(run_id)]

