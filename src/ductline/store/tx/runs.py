"""Ending runs inside a store transaction: completed or halted by their steps,
or stopped whole (deadline, cancel, fail-fast)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from ductline.model.states import AttemptResult, JobStatus, RunStatus
from ductline.store.tx.base import TxBase


class RunVerbs(TxBase):
    """The verbs that read a run's state and end it."""

    # -- runs ------------------------------------------------------------------
    def run_status(self, run_id: str) -> str | None:
        rows = self.s.fetch("run_state", {"run_id": run_id})
        return rows[0]["status"] if rows else None

    def halt_run(self, run_id: str, reason: str, metadata: dict[str, Any]) -> bool:
        """Halt a pending or running run and hold its pending jobs. Returns whether
        this call halted it (a run halts once until it is retried)."""
        params = {"run_id": run_id, "reason": reason, "metadata": json.dumps(metadata)}
        if self._fused:  # one round trip for the three statements below
            rows = self.s.fetch("halt_hold_settle", params)
            self._note_parents(rows)
            return bool(rows)
        halted = self.s.execute("halt_run", params) == 1
        if halted:
            self.s.execute("hold_jobs", {"run_id": run_id})
            self.settled(run_id)
        return halted

    def complete_run(self, run_id: str, output: str) -> bool:
        completed = self.s.execute("complete_run", {"run_id": run_id, "output": output}) == 1
        if completed:
            self.settled(run_id)
        return completed

    def complete_runs(self, items: list[tuple[str, str]]) -> set[str]:
        """Complete running runs ``(run_id, output)`` in one statement and tell
        waiting clients at commit; returns the ids of the runs this call completed
        (a run that is not running, e.g. halted, is left as is)."""
        if not items:
            return set()
        rows = self.s.fetch("complete_runs", {"items": json.dumps(
            [{"run_id": r, "output": o} for r, o in items])})
        self._note_parents(rows)
        return {r["id"] for r in rows}  # the statement also notifies (notify_settled)

    def _note_parents(self, rows: list[dict[str, Any]]) -> None:
        """Keep the parents of the runs that ``rows`` (id, parent_run_id,
        parent_job_id) say this transaction ended (`ended_parents`)."""
        for r in rows:
            self.ended_parents[r["id"]] = None if r["parent_job_id"] is None else \
                (r["parent_run_id"], r["parent_job_id"])

    def settled(self, run_id: str) -> None:
        """Tell clients waiting for this run, at commit, that it stopped moving."""
        self.s.fetch("notify_settled", {"run_id": run_id})

    # -- ending a whole run (deadline, cancel, fail-fast) -----------------------
    def open_jobs(self, run_id: str) -> list[dict[str, Any]]:
        """Jobs of the run that have not finished: pending, held or running."""
        return self.s.fetch("open_jobs", {"run_id": run_id})

    def take_back_unstarted(self, run_id: str, *, lease_token: str | None = None,
                            until_ms: int | None = None) -> int:
        """Before a stop ends the run's running attempts: give back to waiting, with
        no attempt, the running jobs that have not begun (`ductline.model.stops.begun_by`)
        -- due after the stop's instant, or the one whose lease is ``lease_token`` (its
        worker did not start it). Returns how many.

        The instant is the database clock's now, read once the run's running jobs are
        locked (a renewal that let a worker start one committed before it, or finds the
        lease gone after the stop), or ``until_ms`` if earlier: a run deadline's stop
        passes the deadline (epoch ms), after which no worker starts a job of the run.
        """
        self.s.fetch("lock_running_jobs", {"run_id": run_id})
        at_ms = self.now_ms()  # one instant for both statements
        if until_ms is not None:
            at_ms = min(at_ms, int(until_ms))
        params = {"run_id": run_id, "at_ms": at_ms, "lease_token": lease_token}
        self.s.execute("drop_unstarted_attempts", params)
        return self.s.execute("take_back_unstarted_jobs", params)

    def abort_running(self, run_id: str, job_status: JobStatus, attempt_result: AttemptResult,
                      error_type: str, error: str) -> int:
        """End every running attempt of the run (their leases are revoked: the
        workers running them see it at their next heartbeat and kill the child)."""
        changed = self.s.execute("abort_running_jobs", {"run_id": run_id, "status": job_status.value,
                                                        "reason": error})
        self.s.execute("close_open_attempts", {"run_id": run_id, "result": attempt_result.value,
                                               "error_type": error_type, "error": error})
        self.s.fetch("notify_cancel")
        return changed

    def skip_waiting(self, run_id: str, reason: str, root: str | None) -> int:
        """Skip every pending or held job of the run."""
        return self.s.execute("skip_waiting_jobs", {"run_id": run_id, "reason": reason, "root": root})

    def insert_skipped(self, run_id: str, pipeline: str, jobs: list[tuple[str, str, int | None, str | None]],
                       reason: str) -> None:
        """Record never-created dependents as skipped: ``(step, scope, elem_index, root)``."""
        self.s.execute_many("insert_skipped_job", [{
            "id": uuid.uuid4().hex, "run_id": run_id, "pipeline": pipeline, "step": step, "scope": scope,
            "parent_scope": scope.rpartition("/")[0] if index is not None else None, "elem_index": index,
            "reason": reason, "root": root,
        } for step, scope, index, root in jobs])

    def stop_run(self, run_id: str, status: RunStatus, from_statuses: frozenset[RunStatus],
                 metadata: dict[str, Any], halt_reason: str | None = None) -> bool:
        """End a run early (deadline, cancel, expired pause: `ductline.model.stops`)
        if its status is one of ``from_statuses``; ``halt_reason`` replaces the
        run's when given. Returns whether this call ended it."""
        stopped = self.s.execute("stop_run", {
            "run_id": run_id, "status": status.value, "halt_reason": halt_reason,
            "metadata": json.dumps(metadata), "from_statuses": json.dumps(sorted(from_statuses)),
        }) == 1
        if stopped:
            self.settled(run_id)
        return stopped

    def run_pipeline(self, run_id: str) -> str | None:
        rows = self.s.fetch("get_run", {"run_id": run_id})
        return rows[0]["pipeline"] if rows else None

    def run_metadata(self, run_id: str, *, for_stop: bool = False) -> dict[str, Any] | None:
        """The run's status, timeout and metadata; ``for_stop`` locks the run
        exclusively first (a cancel, a deadline, an expired pause), so recording
        outcomes and claims of the run wait until the stop commits."""
        rows = self.s.fetch("lock_run_for_stop" if for_stop else "run_metadata", {"run_id": run_id})
        if not rows:
            return None
        row = rows[0]
        return {"metadata": json.loads(row["metadata"] or "{}"), "timeout_seconds": row["timeout_seconds"],
                "status": row["status"], "deadline_ms": row.get("deadline_ms")}
