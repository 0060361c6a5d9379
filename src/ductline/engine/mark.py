"""An operator's "mark succeeded", applied: a step run that failed, is held or was
cancelled is recorded completed with the operator's output, without running it, and
the run advances from there through the engine's own `ductline.engine.advance`, as if
an attempt had succeeded with that output. A halted run is revived first, as a retry
revives it (its other failed, held and cancelled step runs run again). The action is
written to the run's history (who, when, why, the output, the status it replaced) in
the same transaction (`ductline.model.marking` decides what may be marked).
"""

from __future__ import annotations

from dataclasses import dataclass

from ductline import codec, faults
from ductline.dsl.graph import Definition, TransitionKind
from ductline.engine.advance import Completed, advance
from ductline.engine.record import needs_route_key
from ductline.errors import InvalidStateError, RunNotFound
from ductline.model import marking
from ductline.model.outcomes import check_expand_output
from ductline.model.states import RunStatus
from ductline.store import operator, payloads
from ductline.store.store import Tx


@dataclass(frozen=True, slots=True)
class Marked:
    """What a mark did: the run revived from a halt, jobs created by step, the run completed."""

    revived: bool
    enqueued: dict[str, int]
    run_completed: bool


def check_output(definition: Definition, step: str, output: str) -> None:
    """Refuse an output the step's transition could not take, as a succeeded attempt's
    would be refused (an expand's must be a list within its bound, a divert's must
    render as a route key); read as structure only.

    Raises:
        ValueError: naming the step and what its output must be.
    """
    node = definition.node(step)
    if node.next is not None and node.next.kind is TransitionKind.EXPAND:
        refused = check_expand_output(node, codec.structure(output))
        if refused is not None:
            raise ValueError(f"step {step!r} is followed by expand: {refused.error}")
    if needs_route_key(definition, step, output, None):
        raise ValueError(f"step {step!r} is followed by divert: give an output whose text names a route "
                         "(a plain JSON value)")


def mark_succeeded(tx: Tx, definition: Definition, run_id: str, job: dict[str, object], output: str, *,
                   actor: str, reason: str | None, retry_delay: int, limits: payloads.Limits) -> Marked:
    """Mark the step run ``job`` of run ``run_id`` (a row of `ductline.store.Store.run_jobs`) succeeded with
    ``output`` (JSON text of the value, `ductline.codec`) inside ``tx``.

    Raises:
        RunNotFound: the run is gone.
        InvalidStateError: the run or the step run may not be marked
            (`ductline.model.marking.refusal`), also when it changed since it was read.
        ValueError: an output the step's transition cannot take (`check_output`).
    """
    step, scope = str(job["step"]), str(job["scope"])
    where = step if job.get("elem_index") is None else f"{step}[{job['elem_index']}]"
    # Locked as a stop locks it: recordings and claims of the run wait for this commit.
    run = tx.run_metadata(run_id, for_stop=True)
    if run is None:
        raise RunNotFound(f"run {run_id!r} not found")
    status = tx.lease_state(str(job["id"]))
    job_status = str(job["status"]) if status is None else status[1]
    refused = marking.refusal(run["status"], job_status, where)
    if refused is not None:
        raise InvalidStateError(f"run {run_id}: {refused}")
    check_output(definition, step, output)
    stored, pending = payloads.prepare(output, limits)
    if not operator.mark_job_succeeded(tx, str(job["id"]), stored):
        raise InvalidStateError(f"run {run_id}: step {where} changed meanwhile; look again")
    if pending is not None:
        payloads.write(tx, run_id, pending, limits)
    operator.record_action(tx, run_id=run_id, job_id=str(job["id"]), step=step, scope=scope,
                           action=marking.ACTION, actor=actor, reason=reason, previous_status=job_status,
                           output=stored)
    revived = run["status"] == RunStatus.HALTED and operator.revive_in(tx, run_id)
    moved = advance(tx, definition, Completed(run_id, step, scope, stored, output if pending is not None else None),
                    retry_delay, None, limits)
    faults.checkpoint("during_mark")
    tx.notify()
    return Marked(revived, moved.enqueued, moved.run_completed)
