"""Child runs, the engine's half: start them when a step returned
``ductline.children([...])``, wake the awaiting step run when its last child ends,
and carry a stop of the parent to its children (docs/howto/child-runs.md; the rules
are `ductline.model.children`).

- **Start.** In the transaction that records the parent's attempt: the job moves
  from ``running`` to ``awaiting`` (fenced on its lease, like a completion), the
  attempt is closed ``succeeded``, and each child run is inserted with its first job.
  A child's id is derived from (parent job, index), so a step that returns its
  children again (a retry after a lost lease, an operator's retry) starts none twice.
- **Wake.** Every engine write that ends a run (completed, halted, failed,
  cancelled) calls `settled` in its transaction; if the run is a child, its parent's
  job is locked and, once every child ended, completed with their outputs (and the
  parent run advanced) or failed (its run halts, ``child_run_failed``). The lock
  order is the child run, then the parent run, then the parent job: the order a stop
  of the child takes too.
- **Stops.** A stop of the parent (cancel, run deadline, expired pause) skips the
  awaiting job in its own transaction; its unfinished children are then cancelled
  each in a transaction of its own (`cancel_orphans`, right after the stop and on
  every maintenance pass), so the stop never holds a parent and a child lock in the
  order a child's end takes them the other way round.
- **Sweep.** A process that records a child's end without knowing the parent's
  pipeline leaves the parent awaiting; `wake_due`, run by maintenance in processes
  that know it, wakes it.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping

from ductline import codec, faults
from ductline.dsl.graph import Definition
from ductline.dsl.pipeline import registered_definition
from ductline.errors import InvalidStateError, RunNotFound
from ductline.model import children as rules
from ductline.model.outcomes import Ended
from ductline.model.states import AttemptResult, HaltReason, RunStatus
from ductline.observability.events import EventName, emit
from ductline.store import Store, payloads
from ductline.store import children as rows
from ductline.store.store import Tx

log = logging.getLogger("ductline.engine")

DEFAULT_RETRY_DELAY = 10


def _definition(name: str, known: Mapping[str, Definition] | None) -> Definition | None:
    found = known.get(name) if known else None
    return found if found is not None else registered_definition(name)


def start(tx: Tx, definition: Definition, a: Any, output: str, retry_delay: int,
          limits: payloads.Limits, definitions: Mapping[str, Definition] | None = None) -> Any:
    """Record an attempt whose step returned ``ductline.children([...])`` (``output``,
    its JSON text) and start its child runs, inside ``tx``; ``a`` is the attempt
    (`ductline.engine.record.Attempt`). Returns its `ductline.engine.record.Recorded`:
    ``AWAITING``, or ``LOST`` if the lease was lost, or the failure recorded when a
    child pipeline is not known here."""
    from ductline.engine import record
    from ductline.engine.start import new_run

    spec = codec.structure(output)
    runs = spec.get("runs") or []
    made: list[rows.NewChild] = []
    pendings: list[tuple[str, payloads.Pending]] = []
    for index, run in enumerate(runs):
        child_def = _definition(str(run["pipeline"]), definitions)
        if child_def is None:
            return record.failure(tx, definition, a, Ended(
                AttemptResult.ERRORED, "PipelineNotFound",
                f"step {a.step!r} started a child run of pipeline {run['pipeline']!r}, which the process recording "
                "its attempt does not define (import the module that defines it in the module of the parent's "
                "pipeline)"), None, retry_delay)
        run_id = rules.child_run_id(a.job_id, index)
        timeout = run.get("timeout_seconds")
        new = new_run(child_def, run_id, codec.structure_text(run["args"]),
                      timeout_seconds=child_def.timeout if timeout is None else timeout,
                      delay_ms=child_def.node(child_def.start).options.delay * 1000, not_before_ms=None,
                      retry_delay=retry_delay, limits=limits)
        made.append(rows.NewChild(run_id, child_def.name, new.run.args, new.run.timeout_seconds,
                                  new.run.delay_ms, new.run.priority, new.run.definition, a.run_id, a.job_id,
                                  index, new.job))
        if new.pending is not None:
            pendings.append((run_id, new.pending))
    tx.lock_runs([a.run_id])  # before any job row: the order stops take too
    if not rows.await_children(tx, a.job_id, a.lease_token, output):
        return record.LOST
    tx.close_attempt(a.job_id, a.attempt, a.lease_token, AttemptResult.SUCCEEDED, started_ms=a.started_ms,
                     deadline_ms=a.deadline_ms)
    inserted = set(rows.insert_children(tx, made))
    faults.checkpoint("children_started")  # inside the transaction: a kill rolls the start back
    for run_id, pending in pendings:
        if run_id in inserted:
            payloads.write(tx, run_id, pending, limits)
    for c in made:
        if c.id in inserted:
            _later(tx, EventName.PIPELINE_TRIGGERED, pipeline=c.pipeline, run_id=c.id, parent_run_id=a.run_id)
    # Children that ended already (none started, or all of them existed and ended:
    # an operator's retry of the parent) wake it at once.
    woken = wake(tx, a.run_id, a.job_id, definitions, retry_delay, limits)
    return record.Recorded(record.Outcome.COMPLETED if woken else record.Outcome.AWAITING,
                           enqueued={c.pipeline: 1 for c in made if c.id in inserted} or None)


def settled(tx: Tx, run_ids: Iterable[str], definitions: Mapping[str, Definition] | None = None,
            retry_delay: int = DEFAULT_RETRY_DELAY, limits: payloads.Limits | None = None) -> None:
    """Runs ``run_ids`` just ended in ``tx``: wake the parents whose last child they were."""
    ids = list(run_ids)
    if not ids:
        return
    for parent_run, parent_job in rows.parents_of(tx, ids):
        wake(tx, parent_run, parent_job, definitions, retry_delay, limits)


def wake(tx: Tx, run_id: str, job_id: str, definitions: Mapping[str, Definition] | None = None,
         retry_delay: int = DEFAULT_RETRY_DELAY, limits: payloads.Limits | None = None) -> bool:
    """Complete or fail the awaiting job ``job_id`` of run ``run_id`` if every child of
    it ended (`ductline.model.children.wake`); returns whether it did."""
    from ductline.engine import record
    from ductline.engine.advance import Completed, advance

    limits = limits or payloads.DEFAULT_LIMITS
    tx.lock_runs([run_id])
    job = rows.lock_awaiting(tx, job_id)
    if job is None:
        return False
    definition = _definition(str(job["pipeline"]), definitions)
    if definition is None:
        return False  # a process that knows the pipeline wakes it (wake_due)
    found = [rules.Child(str(c["id"]), str(c["pipeline"]), RunStatus(c["status"]),
                         None if c["output"] is None else payloads.load_in(tx, str(c["id"]), str(c["output"])),
                         c["halt_reason"], json.loads(c["metadata"] or "{}"))
             for c in rows.children_of(tx, job_id)]
    spec = codec.structure(job["output"]) if job["output"] else {}
    verdict = rules.wake(found, str(spec.get("on_failure") or "fail") if isinstance(spec, dict) else "fail")
    if verdict is None:
        return False
    faults.checkpoint("before_parent_woken")  # inside the child's end: a kill rolls that end back
    step, scope = str(job["step"]), str(job["scope"])
    if verdict.error is not None:
        if not rows.fail_awaiting(tx, job_id, verdict.error):
            return False
        if record.halt(tx, definition, run_id, HaltReason.CHILD_RUN_FAILED, step, verdict.error, retry_delay):
            _later(tx, EventName.PIPELINE_HALTED, pipeline=definition.name, run_id=run_id,
                   reason=HaltReason.CHILD_RUN_FAILED.value)
        log.error("Child run failed: %s", verdict.error, extra={"run_id": run_id, "job_id": job_id, "step": step})
        return True
    assert verdict.output is not None
    stored, pending = payloads.prepare(verdict.output, limits)
    if not rows.complete_awaiting(tx, job_id, stored):
        return False
    if pending is not None:
        payloads.write(tx, run_id, pending, limits)
    moved = advance(tx, definition, Completed(run_id, step, scope, stored,
                                              verdict.output if pending is not None else None),
                    retry_delay, None, limits)
    for created, count in moved.enqueued.items():
        _later(tx, EventName.JOB_ENQUEUED, pipeline=definition.name, step=created, run_id=run_id, count=count)
    if moved.run_completed:
        _later(tx, EventName.PIPELINE_COMPLETED, pipeline=definition.name, run_id=run_id)
    log.info("Child runs ended: step %r goes on with %d outputs", step, len(found),
             extra={"run_id": run_id, "job_id": job_id, "step": step})
    return True


def _later(tx: Tx, name: EventName, **attributes: Any) -> None:
    """Emit an event once ``tx`` committed (events tell what is true: `ductline.observability.events`)."""
    tx.after_commit.append(lambda: emit(name, **attributes))


def committed(tx: Tx) -> None:
    """Run what ``tx`` left for after its commit (call it after the ``with`` block)."""
    for then in tx.after_commit:
        then()
    tx.after_commit.clear()


def wake_due(store: Store, definitions: Mapping[str, Definition] | None = None,
             retry_delay: int = DEFAULT_RETRY_DELAY, limits: payloads.Limits | None = None) -> int:
    """Wake awaiting jobs whose children all ended but were left awaiting (their
    last child's end was recorded where their pipeline is unknown); returns how many."""
    with store.dialect.reader() as s:
        due = rows.wakeable(s)
    woken = 0
    for row in due:
        if _definition(str(row["pipeline"]), definitions) is None:
            continue
        with store.transaction() as tx:
            if wake(tx, str(row["run_id"]), str(row["id"]), definitions, retry_delay, limits):
                woken += 1
        committed(tx)
    return woken


def cancel_orphans(store: Store, definitions: Mapping[str, Definition] | None = None, rounds: int = 10) -> int:
    """Cancel the unfinished child runs of stopped runs (and theirs, down the tree,
    up to ``rounds`` levels per call), each in its own transaction; returns how many."""
    from ductline.engine.stop import cancel

    cancelled = 0
    for _ in range(rounds):
        with store.dialect.reader() as s:
            orphans = rows.orphaned(s)
        if not orphans:
            break
        for row in orphans:
            try:
                with store.transaction() as tx:
                    cancel(tx, _definition(str(row["pipeline"]), definitions), str(row["id"]))
            except (InvalidStateError, RunNotFound):  # it ended meanwhile, or was pruned
                continue
            committed(tx)
            cancelled += 1
            emit(EventName.PIPELINE_CANCELLED, pipeline=row["pipeline"], run_id=row["id"])
    return cancelled


def sweep(store: Store, definitions: Mapping[str, Definition] | None = None) -> int:
    """Maintenance: carry stops to children, then wake parents left awaiting."""
    return cancel_orphans(store, definitions) + wake_due(store, definitions)

