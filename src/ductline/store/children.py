"""Child runs in the store: an awaiting job, its child runs, and the reads that find
the parents to wake and the children to cancel (``child_queries.sql``). Each verb
runs inside the caller's transaction (`ductline.store.tx.Tx`) or on a reader."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ductline.store.records import NewJob
from ductline.store.session import Session
from ductline.store.tx import Tx


@dataclass(frozen=True, slots=True)
class NewChild:
    """A child run to insert with its first job."""

    id: str
    pipeline: str
    args: str  # JSON list as stored (a reference when out of line)
    timeout_seconds: int | None
    delay_ms: int
    priority: int
    definition: str  # the fingerprint of the child pipeline's definition (its workers claim its jobs)
    parent_run_id: str
    parent_job_id: str
    child_index: int
    job: NewJob


def await_children(tx: Tx, job_id: str, lease_token: str, output: str) -> bool:
    """Move a running job to ``awaiting`` (fenced on its lease); ``False`` if the
    lease was lost or its run ended."""
    return tx.s.execute("await_children", {"job_id": job_id, "lease_token": lease_token, "output": output}) == 1


def insert_children(tx: Tx, children: list[NewChild]) -> list[str]:
    """Insert child runs and the first jobs of those that are new; returns the ids of
    the runs inserted (one that exists already is left as is)."""
    inserted: list[str] = []
    jobs: list[NewJob] = []
    for c in children:
        rows = tx.s.fetch("insert_child_run", {
            "id": c.id, "pipeline": c.pipeline, "args": c.args, "timeout_seconds": c.timeout_seconds,
            "delay_ms": c.delay_ms, "priority": c.priority, "definition": c.definition,
            "parent_run_id": c.parent_run_id, "parent_job_id": c.parent_job_id, "child_index": c.child_index})
        if rows:
            inserted.append(c.id)
            jobs.append(c.job)
    tx.insert_jobs(jobs)
    return inserted


def parents_of(tx: Tx, run_ids: list[str]) -> list[tuple[str, str]]:
    """``(parent_run_id, parent_job_id)`` of those of ``run_ids`` that are child runs,
    in that order, each once. The runs ``tx`` ended itself are answered from what the
    statement that ended them read (`Tx.ended_parents`); only the others are queried."""
    ids = sorted(set(run_ids))
    unknown = [i for i in ids if i not in tx.ended_parents]
    found = {p for i in ids if (p := tx.ended_parents.get(i)) is not None}
    if unknown:
        rows = tx.s.fetch("parents_of_runs", {"run_ids": json.dumps(unknown)})
        found.update((r["parent_run_id"], r["parent_job_id"]) for r in rows)
    return sorted(found)


def lock_awaiting(tx: Tx, job_id: str) -> dict[str, Any] | None:
    """The job if it still awaits its children (locked until the commit on
    PostgreSQL), else ``None``."""
    rows = tx.s.fetch("lock_awaiting", {"job_id": job_id})
    return rows[0] if rows else None


def children_of(tx: Tx, job_id: str) -> list[dict[str, Any]]:
    """The child runs of an awaiting job, in index order."""
    return tx.s.fetch("children_of_job", {"job_id": job_id})


def complete_awaiting(tx: Tx, job_id: str, output: str) -> bool:
    return tx.s.execute("complete_awaiting", {"job_id": job_id, "output": output}) == 1


def fail_awaiting(tx: Tx, job_id: str, reason: str) -> bool:
    return tx.s.execute("fail_awaiting", {"job_id": job_id, "reason": reason}) == 1


def wakeable(s: Session, limit: int = 100) -> list[dict[str, Any]]:
    """Awaiting jobs whose children have all ended (``id``, ``run_id``, ``pipeline``)."""
    return s.fetch("wakeable_awaiting", {"limit": limit})


def orphaned(s: Session, limit: int = 100) -> list[dict[str, Any]]:
    """Unfinished child runs whose parent run was stopped (``id``, ``pipeline``)."""
    return s.fetch("orphaned_children", {"limit": limit})


def child_runs(s: Session, run_id: str, limit: int = 1000) -> list[dict[str, Any]]:
    """A run's child runs, in the order they were started."""
    return s.fetch("child_runs", {"run_id": run_id, "limit": limit})


def parent_of(s: Session, run_id: str) -> dict[str, Any] | None:
    """The parent of a child run (``parent_run_id``, ``parent_job_id``,
    ``child_index``, ``parent_pipeline``, ``parent_step``), or ``None``."""
    rows = s.fetch("parent_of_run", {"run_id": run_id})
    return rows[0] if rows else None


def list_child_runs(s: Session, parent: str, status: str | None = None, pipeline: str | None = None,
                    limit: int = 50) -> list[dict[str, Any]]:
    """The child runs of ``parent``, newest first, as `ductline.store.Store.list_runs` lists runs."""
    return s.fetch("list_child_runs", {"parent": parent, "status": status, "pipeline": pipeline,
                                       "limit": limit})
