"""Sending an event to a run (``.wait_for(event, before=step)``): the operation the
Python API, the CLI and the dashboard call. The engine applies it
(`ductline.engine.events.send`) in one transaction.
"""

from __future__ import annotations

import logging
from typing import Any

from ductline.config import load_settings
from ductline.dsl.graph import check_event_name
from ductline.engine import events
from ductline.engine.events import Sent
from ductline.observability.events import EventName, emit
from ductline.store import Store, payloads

log = logging.getLogger("ductline.operations")

__all__ = ["Sent", "send"]


def send(store: Store, run_id: str, event: str, data: Any = None, key: str | None = None) -> Sent:
    """Send the event ``event`` with ``data`` to a run.

    If a step run of the run waits for ``event``, it becomes ready at once with
    ``data`` as its single argument; otherwise the event is kept until the run
    reaches its wait (each event is consumed once, oldest first).

    Args:
        event: the event's name (1 to 200 characters, no control characters).
        data: any value the codec accepts (docs/howto/payloads.md).
        key: an idempotency key (same rules as a name): a second send with the
            same key to the same run writes nothing and says so (``duplicate``).

    Returns:
        What the send did (`Sent`: the event's id, ``duplicate``, the step it released).

    Raises:
        TypeError, ValueError: ``event`` or ``key`` is not a valid name, or
            ``data`` does not round-trip; nothing is written.
        PayloadTooLarge: ``data`` as JSON is above ``payload_max_bytes``; nothing is written.
        RunNotFound: no such run.
        InvalidStateError: the run finished (completed, failed, cancelled); nothing is written.
        TooManyKeptEvents: no step waits for ``event`` now and the run keeps
            ``max_kept_events`` events already (a subclass of `InvalidStateError`);
            nothing is written.
    """
    check_event_name(event)
    if key is not None:
        check_event_name(key, "a send's key")
    settings = load_settings()
    limits = payloads.Limits.from_settings(settings)
    encoded = events.encode_data(data)
    payloads.check_size(encoded, "event data", limits.max_bytes)
    with store.transaction() as tx:
        sent = events.send(tx, run_id, event, encoded, key, limits, max_kept=settings.max_kept_events)
        pipeline = tx.run_pipeline(run_id)
    if sent.duplicate:
        log.debug("Event %r already sent with key %r", event, key, extra={"run_id": run_id})
        return sent
    emit(EventName.EVENT_RECEIVED, pipeline=pipeline, run_id=run_id, event=event, step=sent.step)
    log.debug("Event %r sent%s", event, f": released step {sent.step!r}" if sent.step else ", kept",
              extra={"run_id": run_id})
    return sent
