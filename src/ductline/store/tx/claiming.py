"""Claiming jobs inside a store transaction: the claim of ready jobs, the hand-off
of a run's next steps to the worker that made them ready, and the timers an idle
worker sets after a claim."""

from __future__ import annotations

import json
from typing import Any, Sequence

from ductline.dsl.options import DEFAULT_QUEUE
from ductline.model.states import JobStatus
from ductline.store import claims
from ductline.store.records import AUTO_STATUS, ClaimedJob, NewJob, StepLimit
from ductline.store.session import Session
from ductline.store.tx.creating import WorkVerbs


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


class ClaimVerbs(WorkVerbs):
    """The verbs that claim jobs (a hand-off inserts the jobs it claims: `WorkVerbs`)."""

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
