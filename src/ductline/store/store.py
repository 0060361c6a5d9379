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

from ductline.store import claims, migrations, payloads
from ductline.store.records import ClaimedJob, ExpiredLease, StepLimit
from ductline.store.session import Dialect
from ductline.store.tx import Tx

__all__ = ["Store", "Tx"]


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
    def claim(self, worker_id: str, pipelines: list[str], limit: int, lease_ms: int, *,
              limits: dict[tuple[str, str], StepLimit] | None = None, fifo: bool = False) -> list[ClaimedJob]:
        """Claim up to ``limit`` ready jobs of the given pipelines for one worker.

        Higher priority first, then the oldest not-before time (`ductline.store.claims`).
        Each claimed job gets a new lease token and a new attempt row whose start is
        the claim time on the database clock; a pending run becomes running and its
        deadline (if any) starts counting now.

        Args:
            limits: ``{(pipeline, step): StepLimit}`` of the limited steps among
                ``pipelines``; their limits are enforced by this claim.
            fifo: take the oldest ready jobs whatever their priority (workers do
                every `claims.FIFO_EVERY`-th claim so, to bound starvation).
        """
        if limit <= 0:
            return []
        with self.dialect.transaction() as s:
            rows = claims.claim_rows(s, per_level=self.dialect.name == "sqlite", pipelines=pipelines,
                                     limit=limit, lease_ms=lease_ms, worker_id=worker_id,
                                     limits=limits or {}, fifo=fifo)
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
                    limit_key=row["limit_key"],
                ))
            s.execute_many("insert_attempt", [{
                "job_id": c.job_id, "attempt": c.attempt, "run_id": c.run_id, "lease_token": c.lease_token,
                "worker_id": worker_id, "started_ms": c.started_ms, "deadline_ms": c.deadline_ms,
            } for c in claimed])
            return claimed

    def unthrottle_idle_keys(self) -> int:
        """Make throttled jobs ready again where nothing of their limit key runs (a
        slot freed by a cancel, a deadline or a rescue); returns how many."""
        with self.dialect.transaction() as s:
            return s.execute("unthrottle_idle_keys")

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

    def next_wakeups(self, pipelines: list[str]) -> tuple[int | None, int | None]:
        """``(earliest pending not-before, earliest active run deadline)`` in one query:
        what an idle worker sets its timers to."""
        with self.dialect.reader() as s:
            row = s.fetch("next_wakeups", {"pipelines": json.dumps(pipelines)})[0]
        return (None if row["not_before_ms"] is None else int(row["not_before_ms"]),
                None if row["deadline_ms"] is None else int(row["deadline_ms"]))

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

    def resume_run(self, run_id: str, input_json: str | None = None, *,
                   limits: payloads.Limits = payloads.DEFAULT_LIMITS) -> list[dict[str, Any]]:
        """Resume a paused run: its paused jobs become pending now and the run
        running (workers are woken as for new jobs). Of racing resumes exactly one
        succeeds; the others raise and change nothing. A pause whose expiry
        (``pause_expires_ms``) has passed on the database clock is never resumed:
        it fails closed (the maintenance sweep fails the run), even before a
        worker has noticed.

        Args:
            input_json: a JSON list of arguments replacing the paused step's input
                (the step receives them as its positional arguments); ``None``
                keeps the input it was paused with. Above ``limits.inline_bytes``
                it is stored out of line with the run, in this transaction (the
                caller checks ``limits.max_bytes`` first: `runtime.pause.resume`).

        Returns:
            The resumed step runs (``id``, ``step``, ``scope``, ``elem_index``, ``pause_expires_ms``).

        Raises:
            RunNotFound: no such run.
            InvalidStateError: the run is not paused (also: it stopped being paused
                meanwhile), a pause of the run has expired, or ``input_json`` is
                given while several step runs are paused. Nothing is changed.
        """
        from ductline.errors import InvalidStateError, RunNotFound
        from ductline.views import iso

        with self.dialect.transaction() as s:
            tx = Tx(s)
            status = tx.run_status(run_id)
            if status is None:
                raise RunNotFound(f"run {run_id!r} not found")
            paused = tx.paused_jobs(run_id)
            # 'running' with a paused job: a pause committed just after a resume had
            # read the run (PostgreSQL, read committed). It is resumable all the same.
            if status != "paused" and not (status == "running" and paused):
                raise InvalidStateError(f"run {run_id} is {status}; only a paused run can be resumed")
            # Fail closed: an expired pause is not resumed, whether or not a worker's
            # sweep has failed the run yet (resume_jobs is fenced on the expiry too).
            now_ms = tx.now_ms()
            expired = sorted((int(p["pause_expires_ms"]), p["step"]) for p in paused
                             if p["pause_expires_ms"] is not None and int(p["pause_expires_ms"]) <= now_ms)
            if expired:
                expires_ms, step = expired[0]
                raise InvalidStateError(f"run {run_id} cannot be resumed: its pause before step {step!r} expired "
                                        f"at {iso(expires_ms)}; the run fails closed")
            if input_json is not None and len(paused) > 1:
                where = ", ".join(p["step"] + (f"[{p['elem_index']}]" if p["elem_index"] is not None else "")
                                  for p in paused[:10])
                raise InvalidStateError(f"run {run_id} has {len(paused)} paused step runs ({where}); a new "
                                        "input replaces the input of one: resume without an input")
            # Jobs first, then the run: the lock order of cancel and of the run deadline.
            lost = f"run {run_id} is no longer paused (resumed, cancelled or expired meanwhile)"
            stored_input, pending = (None, None) if input_json is None else payloads.prepare(input_json, limits)
            if paused and tx.resume_jobs([p["id"] for p in paused], stored_input) != len(paused):
                raise InvalidStateError(lost)
            if pending is not None and paused:  # a large input is stored out of line with the run
                payloads.write(tx, run_id, pending, limits)
            if not tx.resume_run(run_id) and status == "paused" and not paused:
                raise InvalidStateError(lost)
            s.fetch("notify")
            return paused

    def expired_pauses(self, limit: int = 100) -> list[dict[str, Any]]:
        """Paused jobs whose pause expired on the database clock, earliest first."""
        with self.dialect.reader() as s:
            return s.fetch("expired_pauses", {"limit": limit})

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
