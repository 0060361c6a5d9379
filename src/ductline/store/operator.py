"""Operator actions on step runs in the store: the fenced write of a mark-succeeded
and the history rows (``ductline_operator_actions``) every action leaves."""

from __future__ import annotations

import uuid
from typing import Any

from ductline.store.session import Dialect
from ductline.store.tx import Tx


def mark_job_succeeded(tx: Tx, job_id: str, output: str) -> bool:
    """Record job ``job_id`` completed with ``output`` (stored JSON text) if it is still
    in a state that may be marked (`ductline.model.states.MARKABLE_JOB`); ``False``
    when it is not (nothing written)."""
    return tx.s.execute("mark_job_succeeded", {"job_id": job_id, "output": output}) == 1


def record_action(tx: Tx, *, run_id: str, job_id: str, step: str, scope: str, action: str, actor: str,
                  reason: str | None, previous_status: str, output: str) -> None:
    """Write one row of the run's history of operator actions, at the database clock."""
    tx.s.execute("insert_operator_action", {
        "id": uuid.uuid4().hex, "run_id": run_id, "job_id": job_id, "step": step, "scope": scope,
        "action": action, "actor": actor, "reason": reason, "previous_status": previous_status, "output": output,
    })


def revive_in(tx: Tx, run_id: str) -> bool:
    """Revive a halted run inside ``tx`` as a retry does (`ductline.store.Store.revive_run`:
    the run active again, its failed, held and cancelled jobs pending with fresh
    budgets, no boundary cleared); ``False`` when the run is not halted."""
    if tx.s.execute("revive_run", {"run_id": run_id}) != 1:
        return False
    tx.s.execute("revive_jobs", {"run_id": run_id, "force_steps": "[]"})
    return True


def actions_of_run(dialect: Dialect, run_id: str) -> list[dict[str, Any]]:
    """The run's operator actions, oldest first."""
    with dialect.reader() as s:
        return s.fetch("run_operator_actions", {"run_id": run_id})
