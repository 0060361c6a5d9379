"""Creating work inside a store transaction: runs and their jobs, and what frees a
limited job's slot."""

from __future__ import annotations

import json
from typing import Any

from ductline.store import claims
from ductline.store.records import AUTO_STATUS, NewJob, NewRun
from ductline.store.tx.base import TxBase



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


class WorkVerbs(TxBase):
    """The verbs that create runs and jobs."""

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
