"""Ending a run early with a `ductline.model.stops.StopPlan`: a cancel, the run
deadline, an expired pause, fail-fast, and the sweep of jobs whose claim raced a stop.

One transaction per stop. The run row is locked first (exclusively), as recording
outcomes locks it first (`Tx.lock_runs`), so a stop and an outcome of the same run
take turns and never deadlock: an outcome recorded after a stop finds its run ended
and is dropped. Claims share-lock the run and skip a run being stopped.
"""

from __future__ import annotations

import logging
from typing import Any

from ductline.dsl.graph import Definition, definition_for
from ductline.errors import InvalidStateError, RunNotFound
from ductline.model import stops
from ductline.model.cascade import dependents
from ductline.model.states import UNFINISHED_RUN, HaltReason, RunStatus
from ductline.observability.events import EventName, emit
from ductline.store import Store
from ductline.store.store import Tx
from ductline.engine import childruns

log = logging.getLogger("ductline.engine")


class Unchanged(InvalidStateError):
    """The run ended or moved meanwhile: roll the transaction back (internal to
    stops; callers see `InvalidStateError` where it matters)."""


def apply_stop(tx: Tx, definition: Definition | None, run_id: str, plan: stops.StopPlan,
               metadata: dict[str, Any], roots: list[tuple[str, str]] | None = None, *,
               unstarted: str | None = None, until_ms: int | None = None) -> bool:
    """Apply ``plan`` to a run inside ``tx``: end its running attempts, skip what
    waits, end the run, and record its never-created dependents skipped.

    Args:
        definition: the pipeline, to walk for dependents (``None`` when this
            process does not know it: dependents are then not recorded).
        metadata: the run's metadata before the stop (the plan's is merged in).
        roots: step runs ``(step, scope)`` the stop ended itself before calling
            this (the expired paused step): their dependents are skipped too.
        unstarted: the lease token of a running job its worker did not start (one
            claimed after its run's deadline): it is waiting, as a job held for its
            not-before time is (`ductline.model.stops.begun_by`).
        until_ms: the stop's instant, if earlier than now (a run deadline: epoch
            ms), for `ductline.model.stops.begun_by`.

    Returns:
        ``True`` when the plan changed the run's status (always ``True`` for a
        plan that leaves the status alone).

    Raises:
        Unchanged: the run left ``plan.from_statuses`` meanwhile; roll back.
    """
    open_jobs = tx.open_jobs(run_id)
    # A job held by its worker for its not-before time is waiting, not in flight.
    tx.take_back_unstarted(run_id, lease_token=unstarted, until_ms=until_ms)
    tx.abort_running(run_id, plan.job_status, plan.attempt_result, plan.error_type, plan.error)
    if plan.skip_reason is not None:
        tx.skip_waiting(run_id, plan.skip_reason, plan.skip_root)
    if plan.run_status is not None:
        if not tx.stop_run(run_id, plan.run_status, plan.from_statuses, {**metadata, **plan.metadata},
                           None if plan.halt_reason is None else plan.halt_reason.value):
            raise Unchanged()
        childruns.settled(tx, [run_id])
    starts = [(j["step"], j["scope"]) for j in open_jobs] + list(roots or [])
    if plan.skip_reason is not None and definition is not None and starts:
        found = dependents(definition, starts)
        tx.insert_skipped(run_id, definition.name, [(d.step, d.scope, d.elem_index, d.root) for d in found],
                          plan.skip_reason)
    return True


def cancel(tx: Tx, definition: Definition | None, run_id: str) -> None:
    """Cancel an unfinished run (pending, running, paused or halted) inside ``tx``.

    Raises:
        RunNotFound: no such run.
        InvalidStateError: the run already finished (completed, failed, cancelled).
    """
    info = tx.run_metadata(run_id, for_stop=True)
    if info is None:
        raise RunNotFound(f"run {run_id!r} not found")
    if RunStatus(info["status"]) not in UNFINISHED_RUN:
        raise InvalidStateError(f"run {run_id} is {info['status']}; only an unfinished run can be cancelled")
    try:
        apply_stop(tx, definition, run_id, stops.cancel(), info["metadata"])
    except Unchanged:
        raise InvalidStateError(f"run {run_id} finished while it was being cancelled") from None


def expire(tx: Tx, definition: Definition | None, run_id: str, *, unstarted: str | None = None) -> bool:
    """End a run whose deadline passed: ``failed`` with ``timeout_exceeded``.
    ``unstarted``: as `apply_stop`'s.

    Returns whether this call ended it (``False`` if it had already ended).

    Raises:
        Unchanged: the run ended between the check and the write; roll back.
    """
    info = tx.run_metadata(run_id, for_stop=True)
    if info is None or RunStatus(info["status"]) not in stops.deadline(None).from_statuses:
        return False
    # Judged at the deadline: no worker starts a job of the run after it, however
    # late this stop runs.
    return apply_stop(tx, definition, run_id, stops.deadline(info["timeout_seconds"]), info["metadata"],
                      unstarted=unstarted, until_ms=info.get("deadline_ms"))


# The most run ids the line about runs expired past their deadline names.
NAMED_RUNS = 5


def expired_message(run_ids: list[str]) -> str:
    """The line about runs ended past their deadline: their count and their ids, the
    first `NAMED_RUNS` of them, then how many more."""
    named = ", ".join(run_ids[:NAMED_RUNS])
    more = f" and {len(run_ids) - NAMED_RUNS} more" if len(run_ids) > NAMED_RUNS else ""
    return f"Expired {len(run_ids)} run(s) past their deadline: {named}{more}"


def expire_due(store: Store, definitions: dict[str, Definition]) -> int:
    """Expire every run whose deadline passed and fail every run whose pause
    expired or whose wait for an event timed out, then carry stops to child runs and
    wake parents left awaiting (`childruns.sweep`); returns how many runs this call
    ended or woke. One line names the runs ended past their deadline (each expired
    pause or wait has a line of its own)."""
    expired: list[str] = []
    for row in store.due_deadlines():
        try:
            with store.transaction() as tx:
                done = expire(tx, definition_for(definitions, row["pipeline"], row["definition"]), row["id"])
        except Unchanged:
            continue
        childruns.committed(tx)
        if done:
            expired.append(row["id"])
            emit(EventName.PIPELINE_FAILED, pipeline=row["pipeline"], run_id=row["id"])
    if expired:
        log.info(expired_message(expired))
    ended = len(expired) + expire_pauses(store, definitions) + expire_waits(store, definitions)
    return ended + childruns.sweep(store, definitions)


def expire_pause(tx: Tx, definition: Definition | None, row: dict[str, Any]) -> str | None:
    """Fail the run of one expired paused job (``row``: an ``expired_pauses`` row):
    the paused job is recorded ``failed`` (it never ran), the run fails closed.

    Returns the reason if this call ended the run, else ``None``.

    Raises:
        Unchanged: the job stopped being paused or the run ended meanwhile.
    """
    info = tx.run_metadata(row["run_id"], for_stop=True)
    if info is None or RunStatus(info["status"]) not in UNFINISHED_RUN:
        return None
    step = str(row["step"])
    seconds = definition.pauses.get(step) if definition is not None else None
    if seconds is None:  # the pipeline is not loaded here: from the row's own times
        seconds = max(0, round((int(row["pause_expires_ms"]) - int(row["created_ms"])) / 1000))
    plan = stops.pause_expired(step, seconds)
    if not tx.expire_paused_job(row["id"], plan.metadata["error"]):
        raise Unchanged()
    apply_stop(tx, definition, row["run_id"], plan, info["metadata"], roots=[(step, str(row["scope"]))])
    return str(plan.metadata["error"])


def expire_pauses(store: Store, definitions: dict[str, Definition], limit: int = 100) -> int:
    """Fail every run whose pause expired; returns how many this call ended."""
    ended = 0
    for row in store.expired_pauses(limit):
        try:
            with store.transaction() as tx:
                reason = expire_pause(tx, definition_for(definitions, row["pipeline"], row["definition"]), row)
        except Unchanged:
            continue
        childruns.committed(tx)
        if reason is not None:
            ended += 1
            log.error("Run failed: the %s", reason, extra={"run_id": row["run_id"], "step": row["step"]})
            emit(EventName.PIPELINE_FAILED, pipeline=row["pipeline"], run_id=row["run_id"],
                 reason=HaltReason.PAUSE_EXPIRED.value)
    return ended


def expire_wait(tx: Tx, definition: Definition | None, row: dict[str, Any]) -> str | None:
    """Fail the run of one deferred job whose wait for an event timed out (``row``:
    an ``expired_waits`` row): the job is recorded ``failed`` (it never ran), the
    run fails (``event_timed_out``).

    Returns the reason if this call ended the run, else ``None``.

    Raises:
        Unchanged: the job stopped waiting or the run ended meanwhile.
    """
    info = tx.run_metadata(row["run_id"], for_stop=True)
    if info is None or RunStatus(info["status"]) not in UNFINISHED_RUN:
        return None
    step = str(row["step"])
    wait = definition.waits.get(step) if definition is not None else None
    seconds = wait.timeout if wait is not None else None
    if seconds is None:  # the pipeline is not loaded here: from the row's own times
        seconds = max(0, round((int(row["pause_expires_ms"]) - int(row["created_ms"])) / 1000))
    plan = stops.event_timed_out(step, str(row["wait_event"]), seconds)
    if not tx.expire_deferred_job(row["id"], plan.metadata["error"]):
        raise Unchanged()
    apply_stop(tx, definition, row["run_id"], plan, info["metadata"], roots=[(step, str(row["scope"]))])
    return str(plan.metadata["error"])


def expire_waits(store: Store, definitions: dict[str, Definition], limit: int = 100) -> int:
    """Fail every run whose wait for an event timed out; returns how many this call ended."""
    ended = 0
    for row in store.expired_waits(limit):
        try:
            with store.transaction() as tx:
                reason = expire_wait(tx, definitions.get(row["pipeline"]), row)
        except Unchanged:
            continue
        if reason is not None:
            ended += 1
            log.error("Run failed: the %s", reason, extra={"run_id": row["run_id"], "step": row["step"]})
            emit(EventName.PIPELINE_FAILED, pipeline=row["pipeline"], run_id=row["run_id"],
                 reason=HaltReason.EVENT_TIMED_OUT.value)
    return ended


def plan_for_ended(status: RunStatus, metadata: dict[str, Any], timeout_seconds: int | None) -> stops.StopPlan:
    """The stop that ended a run, told from its status and metadata."""
    if status is RunStatus.CANCELLED:
        return stops.cancel()
    if metadata.get("pause_expired"):
        return stops.pause_expired(str(metadata.get("paused_step")), int(metadata.get("pause_timeout_seconds") or 0))
    if metadata.get("event_timed_out"):
        return stops.event_timed_out(str(metadata.get("waiting_step")), str(metadata.get("event")),
                                     int(metadata.get("event_timeout_seconds") or 0))
    return stops.deadline(timeout_seconds)


def sweep_orphans(store: Store) -> int:
    """Finish the jobs of runs that ended while one of their jobs was being claimed
    (the claim committed just after the stop looked). Their leases are no longer
    renewed, so their workers kill the attempts; this records them as the stop
    that ended the run would have."""
    swept = 0
    for row in store.orphaned_runs():
        with store.transaction() as tx:
            info = tx.run_metadata(row["run_id"], for_stop=True)
            if info is None:
                continue
            plan = plan_for_ended(RunStatus(info["status"]), info["metadata"], info["timeout_seconds"])
            tx.take_back_unstarted(row["run_id"])
            tx.abort_running(row["run_id"], plan.job_status, plan.attempt_result, plan.error_type, plan.error)
            if plan.skip_reason is not None:
                tx.skip_waiting(row["run_id"], plan.skip_reason, None)
        swept += 1
    return swept


def fail_fast(tx: Tx, run_id: str, step: str) -> None:
    """``on_failure="fail_fast"``: cancel the siblings still running when ``step``
    halted the run; waiting jobs stay held, so a retry revives everything."""
    apply_stop(tx, None, run_id, stops.fail_fast(step), {})
