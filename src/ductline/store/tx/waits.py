"""Waiting steps inside a store transaction: pauses (`.pause(before=)`) and
events (`.wait_for(event, before=)`)."""

from __future__ import annotations

import json
from typing import Any

from ductline.model.states import JobStatus
from ductline.store.tx.base import TxBase


class WaitVerbs(TxBase):
    """The verbs of paused and deferred jobs, and of the events sent to runs."""

    # -- pauses (`.pause(before=)`) -------------------------------------------------
    def pause_jobs(self, jobs: list[tuple[str, str, int | None]]) -> None:
        """Finish pausing jobs just inserted with status ``paused``: ``(job_id,
        run_id, timeout_seconds)``. Each gets its expiry (``None``: never) and its
        run becomes ``paused`` (a halted run stays halted)."""
        if not jobs:
            return
        self.s.execute_many("pause_job", [
            {"job_id": job_id, "timeout_ms": None if seconds is None else seconds * 1000}
            for job_id, _, seconds in jobs])
        self.s.execute_many("pause_run", [{"run_id": run_id} for run_id in sorted({r for _, r, _ in jobs})])

    def paused_jobs(self, run_id: str) -> list[dict[str, Any]]:
        """The run's paused step runs: ``id``, ``step``, ``scope``, ``elem_index``, ``pause_expires_ms``."""
        return self.s.fetch("run_paused_jobs", {"run_id": run_id})

    def resume_jobs(self, job_ids: list[str], input_json: str | None) -> int:
        """Make paused jobs pending now (``input_json``, a JSON list of arguments,
        replaces their input when given); returns how many were still paused."""
        return self.s.execute("resume_jobs", {"job_ids": json.dumps(job_ids), "input": input_json})

    def resume_run(self, run_id: str) -> bool:
        """A paused run with no paused job left becomes running."""
        return self.s.execute("resume_run", {"run_id": run_id}) == 1

    def expire_paused_job(self, job_id: str, reason: str) -> bool:
        """Record a paused job whose pause expired as ``failed`` (no attempt ran)."""
        return self.s.execute("expire_paused_job", {"job_id": job_id, "reason": reason}) == 1

    # -- events (`.wait_for(event, before=)`) ----------------------------------------
    def defer_jobs(self, jobs: list[tuple[str, str, int | None]]) -> None:
        """Finish deferring jobs just inserted with status ``deferred``: ``(job_id,
        event, expires_ms)`` (``None``: the wait never expires)."""
        if jobs:
            self.s.execute_many("defer_job", [{"job_id": job_id, "event": event, "expires_ms": expires_ms}
                                              for job_id, event, expires_ms in jobs])

    def insert_event(self, event_id: str, run_id: str, name: str, key: str | None, data: str) -> bool:
        """Keep an event sent to a run (``data``: its value's JSON text); ``False``
        when the run has an event with this ``key`` already (nothing is written)."""
        return self.s.execute("insert_event", {"id": event_id, "run_id": run_id, "name": name, "key": key,
                                               "data": data}) == 1

    def event_by_key(self, run_id: str, key: str) -> dict[str, Any] | None:
        """The run's event sent with ``key``: ``id``, ``name``, ``sent_ms``, ``job_id``, ``consumed_ms``."""
        rows = self.s.fetch("event_by_key", {"run_id": run_id, "key": key})
        return rows[0] if rows else None

    def kept_event(self, run_id: str, name: str) -> dict[str, Any] | None:
        """The run's oldest unconsumed event called ``name``: ``id``, ``data``."""
        rows = self.s.fetch("kept_event", {"run_id": run_id, "name": name})
        return rows[0] if rows else None

    def count_kept_events(self, run_id: str) -> int:
        """How many events sent to the run no wait has consumed yet."""
        return int(self.s.fetch("count_kept_events", {"run_id": run_id})[0]["n"])

    def consume_event(self, event_id: str, job_id: str) -> bool:
        """Mark an event consumed by ``job_id``; ``False`` if it was consumed already."""
        return self.s.execute("consume_event", {"id": event_id, "job_id": job_id}) == 1

    def awaiting_job(self, run_id: str, name: str) -> dict[str, Any] | None:
        """The run's deferred step run waiting for ``name`` (not timed out): ``id``, ``step``, ``scope``."""
        rows = self.s.fetch("awaiting_job", {"run_id": run_id, "name": name})
        return rows[0] if rows else None

    def release_deferred_job(self, job_id: str, status: JobStatus, input_json: str) -> bool:
        """A deferred job's event came: it becomes ``status`` (pending, or held in a
        halted run) with ``input_json`` as its input; ``False`` if it was no longer
        deferred or its wait had timed out."""
        return self.s.execute("release_deferred_job", {"job_id": job_id, "status": status.value,
                                                       "input": input_json}) == 1

    def expire_deferred_job(self, job_id: str, reason: str) -> bool:
        """Record a deferred job whose wait timed out as ``failed`` (no attempt ran)."""
        return self.s.execute("expire_deferred_job", {"job_id": job_id, "reason": reason}) == 1
