"""`Store`: the one place that reads and writes ductline's tables.

Its verbs are the state transitions of runs, jobs and attempts. Every verb that
ends or moves an attempt is conditional on the attempt's lease token (fencing): if
zero rows change, the lease was lost and the caller must drop its result.
Both dialects run the same verbs over their own named statements.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

from ductline.model.states import AttemptResult
from ductline.store import migrations
from ductline.store.records import ClaimedJob, ExpiredLease, JobBudget, NewJob, NewRun
from ductline.store.session import Dialect, Session


class Tx:
    """The verbs available inside one write transaction."""

    def __init__(self, session: Session) -> None:
        self.s = session

    def now_ms(self) -> int:
        """The database clock, read inside this transaction."""
        return int(self.s.fetch("now")[0]["now_ms"])

    # -- creating work ---------------------------------------------------------
    def insert_run(self, run: NewRun) -> bool:
        """Insert a run; ``False`` (nothing written) when ``run.idempotency_key`` is
        held by an active run of the same pipeline."""
        return self.s.execute("insert_run", {
            "id": run.id, "pipeline": run.pipeline, "args": run.args,
            "timeout_seconds": run.timeout_seconds, "delay_ms": run.delay_ms,
            "not_before_ms": run.not_before_ms, "idempotency_key": run.idempotency_key,
        }) == 1

    def active_run_by_key(self, pipeline: str, key: str) -> str | None:
        """The id of the active run (pending, running, paused, halted) holding ``key``."""
        rows = self.s.fetch("active_run_by_key", {"pipeline": pipeline, "idempotency_key": key})
        return rows[0]["id"] if rows else None

    def insert_jobs(self, jobs: list[NewJob]) -> None:
        """Create jobs; a job that already exists (same run, step, scope) is left as is."""
        if not jobs:
            return
        self.s.execute_many("insert_job", [{
            "id": j.id, "run_id": j.run_id, "pipeline": j.pipeline, "step": j.step, "scope": j.scope,
            "parent_scope": j.parent_scope, "elem_index": j.elem_index, "status": j.status,
            "input": j.input, "delay_ms": j.delay_ms, "not_before_ms": j.not_before_ms,
            "max_retry": j.max_retry, "max_crash": j.max_crash,
            "retry_delay_seconds": j.retry_delay_seconds, "timeout_seconds": j.timeout_seconds,
        } for j in jobs])
        self.s.fetch("notify")

    # -- ending attempts (fenced) ----------------------------------------------
    def complete_jobs(self, items: list[tuple[str, str, str]]) -> set[str]:
        """Record succeeded attempts ``(job_id, lease_token, output)`` in one statement
        and close their attempt rows; returns the job ids whose lease was still held."""
        if not items:
            return set()
        rows = self.s.fetch("complete_jobs", {"items": json.dumps(
            [{"job_id": j, "lease_token": t, "output": o} for j, t, o in items])})
        done = {r["id"] for r in rows}
        return done

    def close_succeeded(self, items: list[tuple[str, int, str]]) -> None:
        """Close attempt rows ``(job_id, attempt, lease_token)`` as succeeded."""
        if items:
            self.s.execute("close_succeeded_attempts", {"items": json.dumps(
                [{"job_id": j, "attempt": a, "lease_token": t} for j, a, t in items])})

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
            self.s.fetch("notify")
        return changed

    def fail_job(self, job_id: str, lease_token: str, *, crashed: bool = False) -> bool:
        return self.s.execute("fail_job", {
            "job_id": job_id, "lease_token": lease_token,
            "failed": 0 if crashed else 1, "crashed": 1 if crashed else 0,
        }) == 1

    def release_job(self, job_id: str, lease_token: str) -> bool:
        """Give a job back without charging any budget (worker shutdown)."""
        return self.s.execute("release_job", {"job_id": job_id, "lease_token": lease_token}) == 1

    def close_attempt(self, job_id: str, attempt: int, lease_token: str, result: AttemptResult,
                      error_type: str | None = None, error: str | None = None,
                      traceback: str | None = None) -> None:
        self.s.execute("close_attempt", {
            "job_id": job_id, "attempt": attempt, "lease_token": lease_token, "result": result.value,
            "error_type": error_type, "error": error, "traceback": traceback,
        })

    def lease_state(self, job_id: str) -> tuple[str | None, str] | None:
        """``(lease_token, status)`` of a job, read in this transaction."""
        rows = self.s.fetch("lease_state", {"job_id": job_id})
        return None if not rows else (rows[0]["lease_token"], rows[0]["status"])

    def job_budget(self, job_id: str) -> JobBudget:
        row = self.s.fetch("job_budget", {"job_id": job_id})[0]
        return JobBudget(**row)

    # -- runs ------------------------------------------------------------------
    def run_status(self, run_id: str) -> str | None:
        rows = self.s.fetch("run_state", {"run_id": run_id})
        return rows[0]["status"] if rows else None

    def halt_run(self, run_id: str, reason: str, metadata: dict[str, Any]) -> bool:
        """Halt a pending or running run and hold its pending jobs. Returns whether
        this call halted it (a run halts once until it is retried)."""
        halted = self.s.execute("halt_run", {"run_id": run_id, "reason": reason,
                                             "metadata": json.dumps(metadata)}) == 1
        if halted:
            self.s.execute("hold_jobs", {"run_id": run_id})
        return halted

    def complete_run(self, run_id: str, output: str) -> bool:
        return self.s.execute("complete_run", {"run_id": run_id, "output": output}) == 1

    # -- ending a whole run (deadline, cancel, fail-fast) -----------------------
    def open_jobs(self, run_id: str) -> list[dict[str, Any]]:
        """Jobs of the run that have not finished: pending, held or running."""
        return self.s.fetch("open_jobs", {"run_id": run_id})

    def abort_running(self, run_id: str, job_status: str, attempt_result: AttemptResult,
                      error_type: str, error: str) -> int:
        """End every running attempt of the run (their leases are revoked: the
        workers running them see it at their next heartbeat and kill the child)."""
        changed = self.s.execute("abort_running_jobs", {"run_id": run_id, "status": job_status,
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
        import uuid

        self.s.execute_many("insert_skipped_job", [{
            "id": uuid.uuid4().hex, "run_id": run_id, "pipeline": pipeline, "step": step, "scope": scope,
            "parent_scope": scope.rpartition("/")[0] if index is not None else None, "elem_index": index,
            "reason": reason, "root": root,
        } for step, scope, index, root in jobs])

    def expire_run(self, run_id: str, metadata: dict[str, Any]) -> bool:
        return self.s.execute("expire_run", {"run_id": run_id, "metadata": json.dumps(metadata)}) == 1

    def cancel_run(self, run_id: str, metadata: dict[str, Any]) -> bool:
        return self.s.execute("cancel_run", {"run_id": run_id, "metadata": json.dumps(metadata)}) == 1

    def run_pipeline(self, run_id: str) -> str | None:
        rows = self.s.fetch("get_run", {"run_id": run_id})
        return rows[0]["pipeline"] if rows else None

    def run_metadata(self, run_id: str) -> dict[str, Any] | None:
        rows = self.s.fetch("run_metadata", {"run_id": run_id})
        if not rows:
            return None
        row = rows[0]
        return {"metadata": json.loads(row["metadata"] or "{}"), "timeout_seconds": row["timeout_seconds"],
                "status": row["status"]}

    # -- fan-in ----------------------------------------------------------------
    def create_fanin(self, run_id: str, step: str, scope: str, expected: int) -> None:
        self.s.execute("create_fanin", {"run_id": run_id, "step": step, "scope": scope,
                                        "expected": expected})

    def arrive_fanin(self, run_id: str, step: str, scope: str, expected: int) -> bool:
        """Count one arrival; ``True`` exactly once, for the arrival that completes it."""
        row = self.s.fetch("arrive_fanin", {"run_id": run_id, "step": step, "scope": scope,
                                            "expected": expected})[0]
        return int(row["arrived"]) == int(row["expected"])

    def gather_elements(self, run_id: str, step: str, parent_scope: str) -> list[str]:
        rows = self.s.fetch("gather_elements", {"run_id": run_id, "step": step,
                                                "parent_scope": parent_scope})
        return [r["output"] for r in rows]

    def gather_branches(self, run_id: str, scope: str, steps: list[str]) -> dict[str, str]:
        rows = self.s.fetch("gather_branches", {"run_id": run_id, "scope": scope,
                                                "steps": json.dumps(steps)})
        return {r["step"]: r["output"] for r in rows}


class Store:
    """Durable state of ductline over one database (SQLite or PostgreSQL).

    Create one with `ductline.store.open_store(url)`.
    """

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    @property
    def url(self) -> str:
        return self.dialect.url

    # -- schema ------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied."""
        return migrations.migrate(self.dialect)

    def schema_version(self) -> int:
        return migrations.current_version(self.dialect)

    def close(self) -> None:
        self.dialect.close()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        with self.dialect.transaction() as session:
            yield Tx(session)

    # -- clock -------------------------------------------------------------------
    def now_ms(self) -> int:
        """The database clock, in milliseconds since the Unix epoch."""
        with self.dialect.reader() as s:
            return int(s.fetch("now")[0]["now_ms"])

    # -- claiming ------------------------------------------------------------------
    def claim(self, worker_id: str, pipelines: list[str], limit: int, lease_ms: int) -> list[ClaimedJob]:
        """Claim up to ``limit`` ready jobs of the given pipelines for one worker.

        Each claimed job gets a new lease token and a new attempt row whose start is
        the claim time on the database clock; a pending run becomes running and its
        deadline (if any) starts counting now.
        """
        if limit <= 0:
            return []
        with self.dialect.transaction() as s:
            rows = s.fetch("claim_jobs", {"pipelines": json.dumps(pipelines), "limit": limit,
                                          "lease_ms": lease_ms, "worker_id": worker_id})
            if not rows:
                return []
            # One statement starts every run of the batch, one reads their deadlines:
            # the cost of a claim does not grow with the number of runs it touches.
            run_ids = json.dumps(sorted({row["run_id"] for row in rows}))
            first_ms = min(int(row["claimed_ms"]) for row in rows)
            s.execute("start_runs", {"run_ids": run_ids, "now_ms": first_ms})
            deadlines = {r["id"]: r["deadline_ms"] for r in s.fetch("run_deadlines", {"run_ids": run_ids})}
            claimed = []
            for row in rows:
                started = int(row["claimed_ms"])
                run_deadline = deadlines[row["run_id"]]
                step_deadline = None if row["timeout_seconds"] is None else started + row["timeout_seconds"] * 1000
                candidates = [d for d in (step_deadline, run_deadline) if d is not None]
                claimed.append(ClaimedJob(
                    job_id=row["id"], run_id=row["run_id"], pipeline=row["pipeline"], step=row["step"],
                    scope=row["scope"], input=row["input"], attempt=int(row["attempts"]),
                    lease_token=row["lease_token"], timeout_seconds=row["timeout_seconds"],
                    boundary=row["boundary"], not_before_ms=int(row["not_before_ms"]), started_ms=started,
                    deadline_ms=min(candidates) if candidates else None, run_deadline_ms=run_deadline,
                ))
            s.execute_many("insert_attempt", [{
                "job_id": c.job_id, "attempt": c.attempt, "run_id": c.run_id, "lease_token": c.lease_token,
                "worker_id": worker_id, "started_ms": c.started_ms, "deadline_ms": c.deadline_ms,
            } for c in claimed])
            return claimed

    def renew_leases(self, worker_id: str, tokens: list[str], lease_ms: int, *, busy: int = 0,
                     undead: int = 0, status: str = "running") -> tuple[int, set[str]]:
        """Heartbeat: extend the given leases and the worker's row.

        Returns:
            ``(database_now_ms, tokens_still_held)``; a token missing from the set
            was lost (rescued, cancelled) and its attempt must be stopped.
        """
        with self.dialect.transaction() as s:
            renewed: set[str] = set()
            if tokens:
                rows = s.fetch("renew_leases", {"tokens": json.dumps(tokens), "lease_ms": lease_ms})
                renewed = {r["lease_token"] for r in rows}
            beat = s.fetch("worker_heartbeat", {"id": worker_id, "busy": busy, "undead": undead,
                                                "status": status})
            now = int(beat[0]["now_ms"]) if beat else int(s.fetch("now")[0]["now_ms"])
        return now, renewed

    def expired_leases(self, limit: int = 100) -> list[ExpiredLease]:
        """Attempts whose lease ran out on the database clock (their worker died)."""
        with self.dialect.reader() as s:
            rows = s.fetch("expired_leases", {"limit": limit})
        return [ExpiredLease(r["id"], r["run_id"], r["pipeline"], r["step"], int(r["attempts"]),
                             r["lease_token"]) for r in rows]

    def mark_boundary(self, job_id: str, lease_token: str, reason: str) -> bool:
        """Record that an attempt crossed an irreversible boundary (committed on return)."""
        with self.dialect.transaction() as s:
            return s.execute("mark_boundary", {"job_id": job_id, "lease_token": lease_token,
                                               "boundary": reason}) == 1

    def orphaned_runs(self, limit: int = 100) -> list[dict[str, Any]]:
        """Ended runs that still have unfinished jobs (a claim raced their end)."""
        with self.dialect.reader() as s:
            return s.fetch("orphaned_runs", {"limit": limit})

    def due_deadlines(self, limit: int = 100) -> list[dict[str, Any]]:
        """Pending or running runs whose deadline has passed on the database clock."""
        with self.dialect.reader() as s:
            return s.fetch("due_deadlines", {"limit": limit})

    def next_run_deadline(self, pipelines: list[str]) -> int | None:
        """The earliest deadline of any active run of these pipelines."""
        with self.dialect.reader() as s:
            rows = s.fetch("next_run_deadline", {"pipelines": json.dumps(pipelines)})
        value = rows[0]["deadline_ms"] if rows else None
        return None if value is None else int(value)

    def set_attempt_deadline(self, job_id: str, attempt: int, lease_token: str, deadline_ms: int) -> bool:
        """Record a scaled deadline reported when the attempt started."""
        with self.dialect.transaction() as s:
            return s.execute("set_attempt_deadline", {"job_id": job_id, "attempt": attempt,
                                                      "lease_token": lease_token, "deadline_ms": deadline_ms}) == 1

    def next_not_before(self, pipelines: list[str]) -> int | None:
        """The earliest not-before time of any pending job (the wake-up timer)."""
        with self.dialect.reader() as s:
            rows = s.fetch("next_not_before", {"pipelines": json.dumps(pipelines)})
        value = rows[0]["not_before_ms"] if rows else None
        return None if value is None else int(value)

    # -- workers -------------------------------------------------------------------
    def register_worker(self, worker_id: str, host: str, pid: int, concurrency: int) -> None:
        with self.dialect.transaction() as s:
            s.execute("upsert_worker", {"id": worker_id, "host": host, "pid": pid,
                                        "concurrency": concurrency})

    def worker_stopped(self, worker_id: str) -> None:
        with self.dialect.transaction() as s:
            s.execute("worker_heartbeat", {"id": worker_id, "busy": 0, "undead": 0, "status": "stopped"})

    # -- run context ---------------------------------------------------------------
    def context_get(self, run_id: str, key: str) -> str | None:
        with self.dialect.reader() as s:
            rows = s.fetch("context_get", {"run_id": run_id, "key": key})
        return rows[0]["value"] if rows else None

    def context_set(self, run_id: str, key: str, value: str, *, overwrite: bool) -> bool:
        """Store a value; without ``overwrite`` an existing key is kept and ``False`` returned."""
        with self.dialect.transaction() as s:
            name = "context_upsert" if overwrite else "context_insert"
            return s.execute(name, {"run_id": run_id, "key": key, "value": value}) == 1

    # -- operator actions ----------------------------------------------------------
    def revive_run(self, run_id: str, *, force: bool = False) -> bool:
        """Revive a halted run: failed and held jobs become pending with fresh budgets."""
        with self.dialect.transaction() as s:
            if s.execute("revive_run", {"run_id": run_id}) != 1:
                return False
            s.execute("revive_jobs", {"run_id": run_id, "force": force})
            s.fetch("notify")
            return True

    # -- reads -----------------------------------------------------------------------
    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self.dialect.reader() as s:
            rows = s.fetch("get_run", {"run_id": run_id})
        return rows[0] if rows else None

    def list_runs(self, status: str | None = None, pipeline: str | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        with self.dialect.reader() as s:
            return s.fetch("list_runs", {"status": status, "pipeline": pipeline, "limit": limit})

    def runs_with_prefix(self, prefix: str) -> list[str]:
        """Run ids starting with ``prefix`` (at most 5), by an index range scan."""
        with self.dialect.reader() as s:
            rows = s.fetch("runs_with_prefix", {"prefix": prefix, "upper": prefix + "\uffff"})
        return [r["id"] for r in rows]

    def run_jobs(self, run_id: str) -> list[dict[str, Any]]:
        with self.dialect.reader() as s:
            return s.fetch("run_jobs", {"run_id": run_id})

    def run_attempts(self, run_id: str) -> list[dict[str, Any]]:
        with self.dialect.reader() as s:
            return s.fetch("run_attempts", {"run_id": run_id})

    def run_progress(self, run_id: str) -> dict[str, int]:
        with self.dialect.reader() as s:
            return {r["status"]: int(r["n"]) for r in s.fetch("run_progress", {"run_id": run_id})}

    def list_workers(self, limit: int = 100) -> list[dict[str, Any]]:
        with self.dialect.reader() as s:
            return s.fetch("list_workers", {"limit": limit})

    def lease_state(self, job_id: str) -> dict[str, Any] | None:
        with self.dialect.reader() as s:
            rows = s.fetch("lease_state", {"job_id": job_id})
        return rows[0] if rows else None

    def running_steps(self, run_id: str) -> list[str]:
        with self.dialect.reader() as s:
            return [r["step"] for r in s.fetch("running_steps", {"run_id": run_id})]
