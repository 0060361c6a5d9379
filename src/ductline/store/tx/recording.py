"""Recording how attempts ended, inside a store transaction: each write is
conditional on the attempt's lease token (fencing)."""

from __future__ import annotations

import json

from ductline.model.outcomes import GIVEN_BACK_PATTERN
from ductline.model.states import AttemptResult
from ductline.store.records import JobBudget
from ductline.store.tx.base import TxBase


class RecordVerbs(TxBase):
    """The verbs that end attempts (fenced)."""

    def complete_jobs(self, items: list[tuple[str, str, str]]) -> set[str]:
        """Record succeeded attempts ``(job_id, lease_token, output)`` in one statement
        and close their attempt rows; returns the job ids whose lease was still held."""
        if not items:
            return set()
        rows = self.s.fetch("complete_jobs", {"items": json.dumps(
            [{"job_id": j, "lease_token": t, "output": o} for j, t, o in items])})
        done = {r["id"] for r in rows}
        return done

    def complete_and_close(self, items: list[tuple[str, int, str, str, int | None, int | None]],
                           lock_runs: list[str] | None = None) -> set[str]:
        """`complete_jobs` and `close_succeeded` for ``(job_id, attempt, lease_token,
        output, started_ms, deadline_ms)``; returns the job ids whose lease was still
        held (only their attempts are closed). ``lock_runs``: runs to lock first, as
        `lock_runs` does (on PostgreSQL in the same statement: one round trip less)."""
        if not items:
            self.lock_runs(lock_runs or [])
            return set()
        if not self._fused:
            # One writer at a time (SQLite's BEGIN IMMEDIATE took the database's write
            # lock): the runs are held already, and reading them, as `lock_runs` does,
            # would only cost a statement on every recording's path.
            self._locked_runs.update(lock_runs or [])
            held = self.complete_jobs([(j, t, o) for j, _, t, o, _, _ in items])
            self.close_succeeded([(j, a, t, st, dl) for j, a, t, _, st, dl in items if j in held])
            return held
        wanted = sorted(set(lock_runs or []) - self._locked_runs)
        rows = self.s.fetch("complete_close_jobs", {"run_ids": json.dumps(wanted), "items": json.dumps(
            [{"job_id": j, "attempt": a, "lease_token": t, "output": o, "started_ms": st, "deadline_ms": dl}
             for j, a, t, o, st, dl in items])})
        self._locked_runs.update(wanted)
        return {r["id"] for r in rows}

    def close_succeeded(self, items: list[tuple[str, int, str, int | None, int | None]]) -> None:
        """Close attempt rows ``(job_id, attempt, lease_token, started_ms, deadline_ms)``
        as succeeded; ``started_ms``, if not ``None``, is when the attempt really began,
        and ``deadline_ms`` the deadline it ran under (see `close_attempt`)."""
        if items:
            self.s.execute("close_succeeded_attempts", {"items": json.dumps(
                [{"job_id": j, "attempt": a, "lease_token": t, "started_ms": st, "deadline_ms": dl}
                 for j, a, t, st, dl in items])})

    def complete_job(self, job_id: str, lease_token: str, output: str) -> bool:
        return self.s.execute("complete_job", {"job_id": job_id, "lease_token": lease_token,
                                               "output": output}) == 1

    def retry_job(self, job_id: str, lease_token: str, delay_ms: int, *, crashed: bool = False,
                  charged: bool = True) -> bool:
        """Put a job back to pending ``delay_ms`` from now (held if its run is halted),
        charging one failure or crash (nothing when ``charged`` is false: a retry the
        step requested with `ductline.Retry`)."""
        changed = self.s.execute("retry_job", {
            "job_id": job_id, "lease_token": lease_token, "delay_ms": delay_ms,
            "failed": 1 if charged and not crashed else 0, "crashed": 1 if charged and crashed else 0,
        }) == 1
        if changed:
            self.notify()
        return changed

    def fail_job(self, job_id: str, lease_token: str, *, crashed: bool = False, released: bool = False) -> bool:
        """Fail a job for good, charging a crash, a release (``released``: its last
        attempt was interrupted by a shutdown) or else a failure."""
        return self.s.execute("fail_job", {
            "job_id": job_id, "lease_token": lease_token,
            "failed": 0 if crashed or released else 1, "crashed": 1 if crashed else 0,
            "released": 1 if released else 0,
        }) == 1

    def unstart_run(self, run_id: str) -> bool:
        """The run's only attempts were given back before they started: it goes back
        to pending, its start and deadline cleared (the next claim starts them)."""
        return self.s.execute("unstart_run", {"run_id": run_id, "given_back": GIVEN_BACK_PATTERN}) == 1

    def release_job(self, job_id: str, lease_token: str, *, counted: bool = False) -> bool:
        """Give a job back without charging the retry or crash budget (worker shutdown);
        ``counted``: one more consecutive release (counted against the ``max_releases`` setting)."""
        self._woke = True  # ready again (the recording's claim, or the next one, takes it)
        return self.s.execute("release_job", {"job_id": job_id, "lease_token": lease_token,
                                              "counted": 1 if counted else 0}) == 1

    def close_attempt(self, job_id: str, attempt: int, lease_token: str, result: AttemptResult,
                      error_type: str | None = None, error: str | None = None,
                      traceback: str | None = None, *, started_ms: int | None = None,
                      deadline_ms: int | None = None, finished_ms: int | None = None) -> None:
        """End an attempt row (fenced by its lease token). ``started_ms``: when the
        attempt really began, if not at its claim (a job claimed ahead waits in its
        worker's queue first); ``None`` keeps the claim time. ``deadline_ms``: the
        deadline it ran under, recorded with a ``started_ms`` later than the claim
        (its timeout counted from that start). ``finished_ms``: when it ended, if
        before now (`ductline.model.outcomes.Ended.finished_ms`); ``None``: now."""
        self.s.execute("close_attempt", {
            "job_id": job_id, "attempt": attempt, "lease_token": lease_token, "result": result.value,
            "error_type": error_type, "error": error, "traceback": traceback, "started_ms": started_ms,
            "deadline_ms": deadline_ms, "finished_ms": finished_ms,
        })

    def lease_state(self, job_id: str) -> tuple[str | None, str] | None:
        """``(lease_token, status)`` of a job, read in this transaction."""
        rows = self.s.fetch("lease_state", {"job_id": job_id})
        return None if not rows else (rows[0]["lease_token"], rows[0]["status"])

    def job_budget(self, job_id: str) -> JobBudget:
        """The job's counts and limits, and its lease (token and status), in one read."""
        row = self.s.fetch("job_budget", {"job_id": job_id})[0]
        return JobBudget(**row)
