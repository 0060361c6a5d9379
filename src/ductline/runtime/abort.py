"""Ending a whole run early: the run deadline, a cancel, a fail-fast halt.

One path for all of them (DESIGN.md, "Whole-run timeout"; ADR-019): in-flight
attempts are ended and their leases revoked (the workers running them kill the
children at once: at the deadline by their own timer, on a cancel when told by
NOTIFY or at their next heartbeat), every waiting job is skipped, and the
never-created dependents are recorded skipped by a breadth-first walk over the
graph. Finished step runs are never touched, and no state goes from terminal
back to pending.
"""

from __future__ import annotations

from typing import Any

from ductline.dsl.cascade import dependents
from ductline.dsl.graph import Definition
from ductline.errors import InvalidStateError, RunNotFound
from ductline.model.states import AttemptResult
from ductline.observability.events import EventName, emit
from ductline.runtime import scopes
from ductline.store import Store
from ductline.store.store import Tx

WORKFLOW_TIMEOUT = "workflow timeout"
CANCELLED = "cancelled"


def _skip_dependents(tx: Tx, definition: Definition | None, run_id: str, open_jobs: list[dict[str, Any]],
                     reason: str) -> None:
    if definition is None or not open_jobs:
        return
    found = dependents(definition, [(j["step"], j["scope"]) for j in open_jobs])
    rows = []
    for step, scope, root in found:
        node = definition.nodes.get(step)
        index = scopes.element_index(scope) if node is not None and node.depth > 0 else None
        rows.append((step, scope, index, root))
    tx.insert_skipped(run_id, definition.name, rows, reason)


def expire(tx: Tx, definition: Definition | None, run_id: str) -> bool:
    """End a run whose deadline passed: ``failed`` with ``timeout_exceeded``.

    Returns whether this call ended it (``False`` if it had already ended).

    Raises:
        Unchanged: the run ended between the check and the write; the caller's
            transaction must roll back (`expire_due` and `record.run_deadline` do).
    """
    info = tx.run_metadata(run_id)
    if info is None or info["status"] not in ("pending", "running", "paused"):
        return False
    seconds = info["timeout_seconds"]
    error = f"the run exceeded its deadline of {seconds} s"
    open_jobs = tx.open_jobs(run_id)
    metadata = {**info["metadata"], "timeout_exceeded": True, "timeout_seconds": seconds, "error": error}
    # Lock order job -> attempt -> run, as recording a completion does: no deadlock.
    tx.abort_running(run_id, "failed", AttemptResult.TIMED_OUT, "TimeoutError",
                     f"cancelled at the run deadline: {error}")
    tx.skip_waiting(run_id, WORKFLOW_TIMEOUT, None)
    if not tx.expire_run(run_id, metadata):
        raise Unchanged()
    _skip_dependents(tx, definition, run_id, open_jobs, WORKFLOW_TIMEOUT)
    return True


class Unchanged(Exception):
    """The run finished meanwhile: roll the transaction back."""


def cancel(tx: Tx, definition: Definition | None, run_id: str) -> None:
    """Cancel a pending, running, paused or halted run.

    Raises:
        RunNotFound: no such run.
        InvalidStateError: the run already finished (completed, failed, cancelled).
    """
    info = tx.run_metadata(run_id)
    if info is None:
        raise RunNotFound(f"run {run_id!r} not found")
    if info["status"] not in ("pending", "running", "paused", "halted"):
        raise InvalidStateError(f"run {run_id} is {info['status']}; only an unfinished run can be cancelled")
    open_jobs = tx.open_jobs(run_id)
    # Lock order job -> attempt -> run, as recording a completion does: no deadlock.
    tx.abort_running(run_id, "cancelled", AttemptResult.CANCELLED, "Cancelled", "the run was cancelled")
    tx.skip_waiting(run_id, CANCELLED, None)
    if not tx.cancel_run(run_id, {**info["metadata"], "cancelled": True}):
        raise InvalidStateError(f"run {run_id} finished while it was being cancelled")
    _skip_dependents(tx, definition, run_id, open_jobs, CANCELLED)


def cancel_run(store: Store, run_id: str, definition: Definition | None = None) -> None:
    """Cancel a run in one transaction (see `cancel`)."""
    with store.transaction() as tx:
        cancel(tx, definition, run_id)
        pipeline = tx.run_pipeline(run_id)
    emit(EventName.PIPELINE_CANCELLED, pipeline=pipeline, run_id=run_id)


def fail_fast(tx: Tx, run_id: str, step: str) -> None:
    """``on_failure="fail_fast"``: cancel the siblings still running when a run halts.
    Waiting jobs stay held, so ``ductline retry`` can revive everything."""
    tx.abort_running(run_id, "cancelled", AttemptResult.CANCELLED, "Cancelled",
                     f"cancelled because step {step!r} failed (fail_fast)")


def expire_due(store: Store, definitions: dict[str, Definition]) -> int:
    """Expire every run whose deadline passed, and fail every run whose pause
    expired (`ductline.runtime.pause`); returns how many this call ended."""
    from ductline.runtime.pause import expire_pauses

    ended = 0
    for row in store.due_deadlines():
        try:
            with store.transaction() as tx:
                done = expire(tx, definitions.get(row["pipeline"]), row["id"])
        except Unchanged:
            continue
        if done:
            ended += 1
            emit(EventName.PIPELINE_FAILED, pipeline=row["pipeline"], run_id=row["id"])
    return ended + expire_pauses(store, definitions)


def sweep_orphans(store: Store) -> int:
    """Finish the jobs of runs that ended while one of their jobs was being claimed
    (the claim committed just after the cancel or deadline looked). Their leases are
    no longer renewed, so their workers kill the attempts; this records them."""
    swept = 0
    for row in store.orphaned_runs():
        with store.transaction() as tx:
            if row["status"] == "cancelled":
                tx.abort_running(row["run_id"], "cancelled", AttemptResult.CANCELLED, "Cancelled",
                                 "the run was cancelled")
                tx.skip_waiting(row["run_id"], CANCELLED, None)
            else:
                tx.abort_running(row["run_id"], "failed", AttemptResult.TIMED_OUT, "TimeoutError",
                                 "cancelled at the run deadline")
                tx.skip_waiting(row["run_id"], WORKFLOW_TIMEOUT, None)
        swept += 1
    return swept
