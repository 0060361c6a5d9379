"""`Tx`: the verbs available inside one write transaction of the `Store`.

Every verb that ends or moves an attempt is conditional on the attempt's lease
token (fencing): zero rows changed means the lease was lost.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable, Sequence

from ductline.dsl.options import DEFAULT_QUEUE
from ductline.model.outcomes import GIVEN_BACK_PATTERN
from ductline.model.states import AttemptResult, JobStatus, RunStatus
from ductline.store import claims
from ductline.store.records import AUTO_STATUS, ClaimedJob, JobBudget, NewJob, NewRun, StepLimit
from ductline.store.session import Session


# Rows per bulk insert statement: large enough that a fan-out or a bulk trigger pays
# few round trips, small enough that one statement's JSON stays a few megabytes.
INSERT_CHUNK = 2000


def shared_fields(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``rows`` (dicts with the same keys, at least one) as ``(common, items)``: the
    fields whose value every row shares, once, and each row with only the others.
    The bulk inserts read a field from the row, else from ``common``: an expand's
    elements share their run, step, budgets, queue and definition, and send only
    their id, scope, index and input (a fifth of the JSON to write and to parse)."""
    first = rows[0]
    common = {key: value for key, value in first.items() if all(row[key] == value for row in rows)}
    if not common:
        return common, rows
    own = [key for key in first if key not in common]
    return common, [{key: row[key] for key in own} for row in rows]


def served(queues: Sequence[str], definitions: Sequence[str] | None) -> dict[str, str | None]:
    """The ``:queues`` and ``:definitions`` parameters of the claim statements
    (``definitions`` ``None``: any definition)."""
    return {"queues": json.dumps(sorted(queues)),
            "definitions": None if definitions is None else json.dumps(sorted(definitions))}


def next_wakeups(s: Session, pipelines: list[str], queues: Sequence[str] = (DEFAULT_QUEUE,),
                 definitions: Sequence[str] | None = None) -> tuple[int | None, int | None]:
    """``(earliest pending not-before, earliest active run deadline)`` of ``pipelines``
    in one query (epoch ms; ``None``: there is none): what an idle worker's timers are
    set to. Only jobs of the served ``queues`` and ``definitions`` count (`Store.claim`)."""
    row = s.fetch("next_wakeups", {"pipelines": json.dumps(pipelines), **served(queues, definitions)})[0]
    return _wakeups(row["not_before_ms"], row["deadline_ms"])


def _wakeups(not_before_ms: Any, deadline_ms: Any) -> tuple[int | None, int | None]:
    return (None if not_before_ms is None else int(not_before_ms),
            None if deadline_ms is None else int(deadline_ms))


class Tx:
    """The verbs available inside one write transaction."""

    def __init__(self, session: Session, *, per_level_claims: bool = False, fused: bool = False) -> None:
        self.s = session
        self._per_level = per_level_claims  # the dialect claims one priority level per statement
        # The dialect runs some sequences as one statement (each statement is a round
        # trip to a server): claim_start_jobs, complete_close_jobs.
        self._fused = fused
        # The payload of this transaction's notifications: the recording worker's id,
        # so that worker ignores what it sent itself (`ductline.runtime.wakeup`).
        self.origin = ""
        self._locked_runs: set[str] = set()  # by lock_runs, until the commit
        # Runs this transaction ended, with their parent (run, awaiting job) if they are
        # child runs: read by the statement that ended them, so finding the parents
        # to wake needs no query of its own (`ductline.store.children.parents_of`).
        self.ended_parents: dict[str, tuple[str, str] | None] = {}
        self.claimed: set[str] = set()  # ids of the jobs this transaction claimed
        # What this transaction made ready or waiting, for `readied_only_claimed`: the
        # jobs it inserted, and whether anything else asked to wake the workers.
        self._inserted: set[str] = set()
        self._woke = False
        # What to do once this transaction committed (the engine's events of what it
        # changed besides its caller's own records: a parent woken by its last child).
        self.after_commit: list[Callable[[], None]] = []
        # What the last claim read for next_wakeups, for these pipelines and served
        # queues and definitions (taken by the next call; the claimers call it right
        # after the claim, before any write).
        self._wakeups: tuple[tuple[Any, ...], tuple[int | None, int | None]] | None = None

    def now_ms(self) -> int:
        """The database clock, read inside this transaction."""
        return int(self.s.fetch("now")[0]["now_ms"])

    def confirm_leases(self, leases: Sequence[tuple[str, str]]) -> set[str]:
        """`Store.confirm_leases` in this transaction: ``leases`` as ``(job id, lease
        token)`` pairs; the tokens still held."""
        rows = self.s.fetch("confirm_leases", {"job_ids": json.dumps([job_id for job_id, _ in leases]),
                                               "tokens": json.dumps([token for _, token in leases])})
        return {r["lease_token"] for r in rows}

    def notify(self) -> None:
        """Wake workers when this transaction commits: jobs became ready."""
        self._woke = True
        self.s.fetch("notify", {"origin": self.origin})

    def readied_only_claimed(self) -> bool:
        """Whether every job this transaction inserted so far was claimed by it and
        nothing else asked to wake the workers (no job went back to pending, no run
        was started): then a claim here could find only what was ready before."""
        return not self._woke and self._inserted <= self.claimed

    def next_wakeups(self, pipelines: list[str], queues: Sequence[str] = (DEFAULT_QUEUE,),
                     definitions: Sequence[str] | None = None) -> tuple[int | None, int | None]:
        """`Store.next_wakeups`, read inside this transaction. Right after a claim
        that found fewer jobs than it asked for, the claim's statement has read them
        already (PostgreSQL's claim_start_jobs) and no round trip is made."""
        read, self._wakeups = self._wakeups, None
        if read is not None and read[0] == (pipelines, served(queues, definitions)):
            return read[1]
        return next_wakeups(self.s, pipelines, queues, definitions)

    # -- claiming --------------------------------------------------------------
    def claim(self, worker_id: str, pipelines: list[str], limit: int, lease_ms: int, *,
              limits: dict[tuple[str, str], StepLimit] | None = None, fifo: bool = False,
              queues: Sequence[str] = (DEFAULT_QUEUE,), definitions: Sequence[str] | None = None,
              horizon_ms: int = 0) -> list[ClaimedJob]:
        """Claim up to ``limit`` ready jobs inside this transaction (see `Store.claim`).

        Args:
            horizon_ms: also claim jobs of steps without limits that become ready
                within this many milliseconds (`ductline.store.claims`); their
                attempts must not start before their not-before times.
        """
        self._wakeups = None
        jobs = self._claim(worker_id, pipelines, limit, lease_ms, limits=limits, fifo=fifo,
                           serving=served(queues, definitions), horizon_ms=horizon_ms)
        self.claimed.update(j.job_id for j in jobs)
        return jobs

    def _claim(self, worker_id: str, pipelines: list[str], limit: int, lease_ms: int, *,
               limits: dict[tuple[str, str], StepLimit] | None, fifo: bool,
               serving: dict[str, str | None], horizon_ms: int = 0) -> list[ClaimedJob]:
        if self._fused and not fifo:
            # With a horizon it is gated whatever the worker serves: a limited job due
            # within it must not be claimed ahead of its time (the candidate path skips it).
            claimed = self._claim_fused(worker_id, pipelines, limit, lease_ms, gated=bool(limits) or horizon_ms > 0,
                                        serving=serving, horizon_ms=horizon_ms)
            if claimed is not None:
                return claimed
            # A job of a limited step is among the next ones: the limits decide below.
        rows = claims.claim_rows(self.s, per_level=self._per_level, pipelines=pipelines,
                                 limit=limit, lease_ms=lease_ms, worker_id=worker_id,
                                 limits=limits or {}, fifo=fifo, serving=serving, horizon_ms=horizon_ms)
        return self._start_claimed(rows, worker_id)

    def _start_claimed(self, rows: list[dict[str, Any]], worker_id: str) -> list[ClaimedJob]:
        """Start the runs of claimed job ``rows`` (``claim_jobs`` columns), read their
        deadlines and insert the attempts; returns the claimed jobs."""
        if not rows:
            return []
        # One statement starts every run of the batch, one reads their deadlines:
        # the cost of a claim does not grow with the number of runs it touches.
        run_ids = json.dumps(sorted({row["run_id"] for row in rows}))
        first_ms = min(int(row["claimed_ms"]) for row in rows)
        deadlines = {r["id"]: r["deadline_ms"] for r in self.s.fetch("start_runs", {"run_ids": run_ids,
                                                                                   "now_ms": first_ms})
                     if not r["stale"]}
        rest = sorted({row["run_id"] for row in rows} - deadlines.keys())
        if rest:  # runs already under way (PostgreSQL's start_runs returns most of them too)
            deadlines.update({r["id"]: r["deadline_ms"]
                              for r in self.s.fetch("run_deadlines", {"run_ids": json.dumps(rest)})})
        claimed = []
        for row in rows:
            started = int(row["claimed_ms"])
            run_deadline = deadlines[row["run_id"]]
            claimed.append(_claimed(row, started, _attempt_deadline(row, started, run_deadline), run_deadline))
        # A job claimed before its not-before time begins no earlier: that time is its
        # attempt's start until the attempt ends (`close_attempt` writes the real one).
        # The claimed job keeps its claim's time: it measures the database clock.
        self.s.execute("insert_attempts", {"items": json.dumps([{
            "job_id": c.job_id, "attempt": c.attempt, "run_id": c.run_id, "lease_token": c.lease_token,
            "worker_id": worker_id, "started_ms": _begins(c.started_ms, c.not_before_ms), "deadline_ms": c.deadline_ms,
        } for c in claimed])})
        return claimed

    def _claim_fused(self, worker_id: str, pipelines: list[str], limit: int, lease_ms: int, *,
                     gated: bool, serving: dict[str, str | None], horizon_ms: int = 0) -> list[ClaimedJob] | None:
        """`claim` in one statement (claim_start_jobs): same rows, same deadlines.
        ``gated``: the worker serves limited steps; if the next ready jobs include one
        of them, nothing is claimed and ``None`` returned (the candidate path decides).
        ``horizon_ms``: as `claim`'s (with it, the caller gates: a claim ahead of time
        never takes a limited job)."""
        rows = self.s.fetch("claim_start_jobs", {"pipelines": json.dumps(pipelines), "limit": limit,
                                                 "lease_ms": lease_ms, "worker_id": worker_id,
                                                 "gated": gated, "horizon_ms": horizon_ms, **serving})
        if rows and rows[0]["limited"]:
            return None
        if rows and rows[0]["ran_dry"]:
            self._wakeups = ((pipelines, serving), _wakeups(rows[0]["next_not_before_ms"], rows[0]["next_deadline_ms"]))
        rows = [row for row in rows if row["id"] is not None]
        stale = sorted({row["run_id"] for row in rows if row["stale"]})
        fixed: dict[str, Any] = {}
        if stale:  # rare: a concurrent claim started these runs between snapshot and update
            fixed = {r["id"]: r["deadline_ms"]
                     for r in self.s.fetch("run_deadlines", {"run_ids": json.dumps(stale)})}
        claimed = []
        for row in rows:
            started = int(row["claimed_ms"])
            run_deadline = fixed[row["run_id"]] if row["stale"] else row["run_deadline_ms"]
            deadline = row["deadline_ms"]
            if row["stale"]:
                deadline = _attempt_deadline(row, started, run_deadline)
                self.s.execute("set_attempt_deadline", {"job_id": row["id"], "attempt": row["attempts"],
                                                        "lease_token": row["lease_token"], "deadline_ms": deadline})
            claimed.append(_claimed(row, started, deadline, run_deadline))
        return claimed

    # -- creating work ---------------------------------------------------------
    def insert_run(self, run: NewRun) -> bool:
        """Insert a run; ``False`` (nothing written) when ``run.idempotency_key`` is
        held by an active run of the same pipeline."""
        return self.s.execute("insert_run", {
            "id": run.id, "pipeline": run.pipeline, "args": run.args,
            "timeout_seconds": run.timeout_seconds, "delay_ms": run.delay_ms,
            "not_before_ms": run.not_before_ms, "idempotency_key": run.idempotency_key,
            "priority": run.priority, "definition": run.definition,
        }) == 1

    def insert_run_with_job(self, run: NewRun, job: NewJob) -> bool:
        """`insert_run`, then ``insert_jobs([job])`` if the run was inserted: a run's
        first job, ready (``job.status`` ``'pending'``) or waiting as it says, and the
        workers woken at commit. ``False``, and nothing written, when ``run.idempotency_key``
        is held by an active run of the same pipeline."""
        if not self._fused:
            if not self.insert_run(run):
                return False
            self.insert_jobs([job])
            return True
        # The run is new, so a job that takes its status from its run ('auto') is pending.
        status = "pending" if job.status == AUTO_STATUS else job.status
        self._woke = True  # the statement notifies
        # Its one row (none for a held key) is counted, not read: no row is built.
        return bool(self.s.execute("insert_run_with_job", {
            "id": run.id, "pipeline": run.pipeline, "args": run.args,
            "timeout_seconds": run.timeout_seconds, "delay_ms": run.delay_ms,
            "not_before_ms": run.not_before_ms, "idempotency_key": run.idempotency_key,
            "priority": run.priority, "definition": run.definition,
            "job_id": job.id, "step": job.step, "scope": job.scope, "parent_scope": job.parent_scope,
            "elem_index": job.elem_index, "job_status": status, "input": job.input,
            "job_not_before_ms": job.not_before_ms, "job_delay_ms": job.delay_ms,
            "max_retry": job.max_retry, "max_crash": job.max_crash,
            "retry_delay_seconds": job.retry_delay_seconds, "job_timeout_seconds": job.timeout_seconds,
            "job_priority": job.priority, "limit_key": job.limit_key, "phase": job.phase,
            "queue": job.queue, "origin": self.origin,
        }))

    def active_run_by_key(self, pipeline: str, key: str) -> str | None:
        """The id of the active run (pending, running, paused, halted) holding ``key``."""
        rows = self.s.fetch("active_run_by_key", {"pipeline": pipeline, "idempotency_key": key})
        return rows[0]["id"] if rows else None

    def insert_jobs(self, jobs: list[NewJob], *, notify: bool = True) -> None:
        """Create jobs; a job that already exists (same run, step, scope) is left as is.
        ``notify=False``: the caller wakes the workers itself (`notify_unclaimed`)."""
        if not jobs:
            return
        self._inserted.update(j.id for j in jobs)
        rows = [{
            "id": j.id, "run_id": j.run_id, "pipeline": j.pipeline, "step": j.step, "scope": j.scope,
            "parent_scope": j.parent_scope, "elem_index": j.elem_index, "status": j.status,
            "input": j.input, "delay_ms": j.delay_ms, "not_before_ms": j.not_before_ms,
            "max_retry": j.max_retry, "max_crash": j.max_crash,
            "retry_delay_seconds": j.retry_delay_seconds, "timeout_seconds": j.timeout_seconds,
            "priority": j.priority, "limit_key": j.limit_key, "phase": j.phase,
            "queue": j.queue, "definition": j.definition,
        } for j in jobs]
        if len(rows) == 1:
            self.s.execute("insert_job", rows[0])
        else:  # one statement per chunk, however many jobs (a fan-out of 10,000 elements)
            for start in range(0, len(rows), INSERT_CHUNK):
                common, items = shared_fields(rows[start:start + INSERT_CHUNK])
                self.s.execute("insert_jobs", {"items": json.dumps(items), "common": json.dumps(common)})
        if notify:
            self.notify()

    def insert_claimed(self, jobs: list[NewJob], worker_id: str, lease_ms: int, limit: int,
                       pipelines: frozenset[str], queues: frozenset[str] = frozenset({DEFAULT_QUEUE})
                       ) -> list[ClaimedJob]:
        """Insert ``jobs`` (as `insert_jobs`) and claim up to ``limit`` of them that are
        ready for ``worker_id`` at once (jobs of ``pipelines`` in ``queues``, those it serves), each
        with its first attempt: the hand-off of a run's next steps to the worker that
        recorded what made them ready, without reading the ready queues. Only a job ready now is given (no delay, no
        limit key, status ``pending`` or ``auto``) and only in an active run that
        is under way (not pending: its start is a claim's); any other job is just
        inserted. The caller holds the runs' locks (it recorded their completions)
        and wakes workers for what was not claimed (`notify_unclaimed`).

        Returns:
            The claimed jobs, a subset of ``jobs`` (in their order).
        """
        given = [j for j in jobs if j.pipeline in pipelines and j.queue in queues and handed_over(j)][:max(0, limit)]
        taken = {j.id for j in given}
        rest = [j for j in jobs if j.id not in taken]
        self.insert_jobs(rest, notify=False)
        if not given:
            return []
        if not self._fused:
            self.insert_jobs(given, notify=False)
            now = self.now_ms()
            rows = self.s.fetch("claim_by_ids", {"ids": json.dumps([j.id for j in given]), "now_ms": now,
                                                 "lease_ms": lease_ms, "worker_id": worker_id})
            order = {j.id: i for i, j in enumerate(given)}
            claimed = self._start_claimed(sorted(rows, key=lambda row: order[row["id"]]), worker_id)
        else:
            claimed = []
            self._inserted.update(j.id for j in given)
            for j in given:
                for row in self.s.fetch("insert_claimed_job", {
                        "id": j.id, "run_id": j.run_id, "pipeline": j.pipeline, "step": j.step, "scope": j.scope,
                        "parent_scope": j.parent_scope, "elem_index": j.elem_index, "input": j.input,
                        "max_retry": j.max_retry, "max_crash": j.max_crash,
                        "retry_delay_seconds": j.retry_delay_seconds, "timeout_seconds": j.timeout_seconds,
                        "priority": j.priority, "phase": j.phase, "lease_ms": lease_ms, "worker_id": worker_id,
                        "queue": j.queue, "definition": j.definition}):
                    claimed.append(_claimed(row, int(row["claimed_ms"]), row["deadline_ms"], row["run_deadline_ms"]))
        self.claimed.update(c.job_id for c in claimed)
        return claimed

    def notify_unclaimed(self, jobs: list[NewJob]) -> None:
        """Wake the workers for ``jobs`` (inserted with ``notify=False``) unless this
        transaction claimed every one of them: then no other worker could get any,
        and waking them all for each step of a chain would only cost them a claim."""
        if any(j.id not in self.claimed for j in jobs):
            self.notify()

    def insert_runs(self, runs: list[NewRun]) -> int:
        """Insert runs without idempotency keys in one statement per chunk; returns
        how many were inserted."""
        inserted = 0
        for start in range(0, len(runs), INSERT_CHUNK):
            inserted += self.s.execute("insert_runs", {"items": json.dumps([{
                "id": r.id, "pipeline": r.pipeline, "args": r.args, "timeout_seconds": r.timeout_seconds,
                "delay_ms": r.delay_ms, "not_before_ms": r.not_before_ms, "priority": r.priority,
                "definition": r.definition,
            } for r in runs[start:start + INSERT_CHUNK]])})
        return inserted

    def release_slots(self, job_ids: list[str]) -> None:
        """These limited jobs' attempts are gone: a job whose run was cancelled or
        expired meanwhile frees the slot it kept (`ductline.store.claims`)."""
        if job_ids:
            self.s.execute("release_slots", {"ids": json.dumps(job_ids)})

    def unthrottle(self, keys: list[str]) -> None:
        """Attempts of these limit keys ended (one entry per attempt): the next
        throttled job of each key becomes ready (`ductline.store.claims`)."""
        if keys and claims.unthrottle(self.s, keys):
            self.notify()

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

    def lock_runs(self, run_ids: list[str]) -> dict[str, str]:
        """Lock these runs for recording their attempts' outcomes (taken first, in
        id order); returns their statuses. Serializes outcomes with stops of the
        same runs (`lock_run_for_stop`); claims are not held up.

        A run this transaction locked already is not asked again (its lock holds
        until the commit), nor in the result: a batch locks all its runs first, and
        recording each outcome then costs no further round trip for it.
        """
        wanted = sorted(set(run_ids) - self._locked_runs)
        if not wanted:
            return {}
        rows = self.s.fetch("lock_runs", {"run_ids": json.dumps(wanted)})
        self._locked_runs.update(wanted)
        return {r["id"]: r["status"] for r in rows}

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

    # -- fan-in ----------------------------------------------------------------
    def create_fanin(self, run_id: str, step: str, scope: str, expected: int) -> None:
        self.s.execute("create_fanin", {"run_id": run_id, "step": step, "scope": scope,
                                        "expected": expected})

    def arrive_fanins(self, arrivals: list[tuple[str, str, str, int, int]]) -> set[tuple[str, str, str]]:
        """Count arrivals at fan-ins, ``(run_id, step, scope, expected, n)`` each (``n``
        arrivals; ``expected`` is used if this creates the row, -1 for a row that
        exists already), in one statement. Returns the ``(run_id, step, scope)`` of
        those these arrivals completed: each fan-in once, in the transaction whose
        count reaches its expected number."""
        if not arrivals:
            return set()
        # Two batches arriving at the same fan-ins must lock them in one order; the
        # statement's ORDER BY sets it (in the database's collation). Sorting here only
        # keeps the parameter the same for the same arrivals.
        rows = self.s.fetch("arrive_fanins", {"items": json.dumps([
            {"run_id": r, "step": st, "scope": sc, "expected": e, "n": n}
            for r, st, sc, e, n in sorted(arrivals)])})
        return {(row["run_id"], row["step"], row["scope"]) for row in rows
                if int(row["arrived"]) == int(row["expected"])}

    def gather_elements(self, run_id: str, step: str, parent_scope: str) -> list[str]:
        rows = self.s.fetch("gather_elements", {"run_id": run_id, "step": step,
                                                "parent_scope": parent_scope})
        return [r["output"] for r in rows]

    def gather_branches(self, run_id: str, scope: str, steps: list[str]) -> dict[str, str]:
        rows = self.s.fetch("gather_branches", {"run_id": run_id, "scope": scope,
                                                "steps": json.dumps(steps)})
        return {r["step"]: r["output"] for r in rows}


def handed_over(job: NewJob) -> bool:
    """Whether `Tx.insert_claimed` may claim ``job`` as it inserts it: ready now, without
    a limit (whose admission is the claim's), and not waiting for anything."""
    return (job.status in (AUTO_STATUS, JobStatus.PENDING.value) and job.delay_ms == 0
            and job.not_before_ms is None and job.limit_key is None)


def _begins(claimed_ms: int, not_before_ms: int) -> int:
    """When a claimed job's attempt begins, as recorded until it ends (epoch ms): at
    its claim, or at its not-before time if it was claimed before it (it never starts
    earlier: `ductline.runtime.horizon`)."""
    return max(claimed_ms, not_before_ms)


def _attempt_deadline(row: dict[str, Any], claimed_ms: int, run_deadline: Any) -> int | None:
    """The deadline of the attempt a claim of ``row`` starts at ``claimed_ms`` (epoch
    ms; ``None``: none): its step timeout counted from when it begins (`_begins`; as
    claim_start_jobs counts it), or its run's deadline if earlier."""
    begins = _begins(claimed_ms, int(row["not_before_ms"]))
    step_deadline = None if row["timeout_seconds"] is None else begins + row["timeout_seconds"] * 1000
    candidates = [int(d) for d in (step_deadline, run_deadline) if d is not None]
    return min(candidates) if candidates else None


def _claimed(row: dict[str, Any], started: int, deadline: Any, run_deadline: Any) -> ClaimedJob:
    return ClaimedJob(
        job_id=row["id"], run_id=row["run_id"], pipeline=row["pipeline"], step=row["step"],
        scope=row["scope"], input=row["input"], attempt=int(row["attempts"]),
        lease_token=row["lease_token"], timeout_seconds=row["timeout_seconds"],
        boundary=row["boundary"], not_before_ms=int(row["not_before_ms"]), started_ms=started,
        deadline_ms=None if deadline is None else int(deadline),
        run_deadline_ms=None if run_deadline is None else int(run_deadline),
        limit_key=row["limit_key"], priority=int(row["priority"]), phase=int(row["phase"]),
    )
