"""Events: a run waits for a named event before a step, and a sender delivers it
(the engine's half; the rules are in `ductline.model.events`).

``Pipeline.wait_for(event, before=step, timeout=None)``: when the step's job is
created it is inserted ``deferred`` -- one row naming the event, no slot, no
thread, no lease -- unless the run was sent that event already: then the kept
event is consumed at once and the job is created ready. A send (`send`) keeps the
event, and if a step run of that run waits for it, consumes it in the same
transaction and makes that job ready with the event's data as its input. Both take
the run's lock first (`Tx.lock_runs`), as recording an outcome does, so a send and
the completion that creates the wait take turns and the event is never missed.

A wait whose timeout passed on the database clock fails the run
(`ductline.engine.stop.expire_waits`); an event sent after that is kept, unused.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

from ductline import codec, faults
from ductline.dsl.graph import Definition
from ductline.errors import InvalidStateError, RunNotFound, TooManyKeptEvents
from ductline.model import events as rules
from ductline.model.states import JobStatus, RunStatus
from ductline.store import payloads
from ductline.store.records import AUTO_STATUS, NewJob
from ductline.store.store import Tx


@dataclass(frozen=True, slots=True)
class Sent:
    """What a send did.

    Attributes:
        event_id: the event's id (the earlier event's, for a duplicate).
        duplicate: the run had an event sent with this key already; nothing
            was written.
        step: the step the event released now (its job became ready), or
            ``None`` when the event is kept for a wait to come (or, for a
            duplicate, whatever the first send did is unchanged).
    """

    event_id: str
    duplicate: bool = False
    step: str | None = None


def encode_data(value: Any) -> str:
    """The JSON text an event's data is kept as.

    Raises:
        TypeError: ``value`` does not round-trip through JSON (docs/howto/payloads.md).
    """
    return codec.dumps(value, what="event data")


def insert_deferred(tx: Tx, definition: Definition, jobs: list[NewJob], limits: payloads.Limits) -> list[NewJob]:
    """Handle the ``deferred`` jobs among ``jobs`` (steps that wait for an event):
    one whose event the run was sent already consumes it and is returned ready, with
    the event's data as its input; the others are inserted now, deferred, with their
    expiry. Returns the jobs for the caller to insert."""
    rest: list[NewJob] = []
    waiting: list[NewJob] = []
    for job in jobs:
        wait = definition.waits.get(job.step)
        if job.status != JobStatus.DEFERRED or wait is None:
            rest.append(job)
            continue
        kept = tx.kept_event(job.run_id, wait.event)
        if kept is not None and tx.consume_event(kept["id"], job.id):
            stored = payloads.spill(tx, job.run_id, rules.step_input(kept["data"]), limits)
            rest.append(dataclasses.replace(job, status=AUTO_STATUS, input=stored))
        else:
            waiting.append(job)
    if waiting:
        tx.insert_jobs(waiting, notify=False)
        now_ms = tx.now_ms()
        tx.defer_jobs([(j.id, definition.waits[j.step].event,
                        rules.expires_ms(now_ms, definition.waits[j.step].timeout)) for j in waiting])
    return rest


def send(tx: Tx, run_id: str, name: str, data: str, key: str | None, limits: payloads.Limits, *,
         max_kept: int = rules.MAX_KEPT_EVENTS) -> Sent:
    """Send the event ``name`` with ``data`` (its JSON text, `encode_data`) to a run
    inside ``tx``.

    Args:
        key: an idempotency key: a second send with the same key to the same run
            writes nothing and returns ``duplicate=True``.
        limits: payload limits; a step input above the inline limit is stored out
            of line with the run.
        max_kept: the ``max_kept_events`` setting: the most unconsumed events the
            run keeps.

    Raises:
        RunNotFound: no such run.
        InvalidStateError: the run finished (completed, failed, cancelled) and
            this is no repeat of a keyed send; nothing is written.
        TooManyKeptEvents: no wait consumes the event now and the run keeps
            ``max_kept`` events already; nothing is written.
    """
    status = tx.lock_runs([run_id]).get(run_id)  # the run first, as outcomes and stops do
    if status is None:
        status = tx.run_status(run_id)  # locked by this transaction already
        if status is None:
            raise RunNotFound(f"run {run_id!r} not found")
    run = RunStatus(status)
    if key is not None:  # a repeat is a no-op even once the run finished: a sender's retry succeeds
        found = tx.event_by_key(run_id, key)
        if found is not None:
            return Sent(str(found["id"]), duplicate=True)
    if not rules.accepts_events(run):
        raise InvalidStateError(f"run {run_id} is {run.value}; an event can be sent only to an unfinished run "
                                "(pending, running, paused or halted)")
    job = tx.awaiting_job(run_id, name)
    if job is None:  # it would be kept: the run's kept events are capped
        kept = tx.count_kept_events(run_id)
        if not rules.keeps_another(kept, max_kept):
            raise TooManyKeptEvents(run_id, kept, max_kept)
    event_id = uuid.uuid4().hex
    if not tx.insert_event(event_id, run_id, name, key, data):
        found = tx.event_by_key(run_id, key) if key is not None else None
        return Sent(str(found["id"]) if found else event_id, duplicate=True)
    if job is None:
        return Sent(event_id)  # kept until a wait of the run consumes it
    stored, pending = payloads.prepare(rules.step_input(data), limits)
    if not tx.release_deferred_job(str(job["id"]), rules.released_status(run), stored):
        return Sent(event_id)  # its wait timed out meanwhile: it fails closed; the event is kept
    if pending is not None:
        payloads.write(tx, run_id, pending, limits)
    tx.consume_event(event_id, str(job["id"]))
    faults.checkpoint("during_send")
    tx.notify()
    return Sent(event_id, step=str(job["step"]))
