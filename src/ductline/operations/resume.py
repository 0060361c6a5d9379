"""Resuming a run paused for a person (``Pipeline.pause(before=step)``).

A resume makes the paused jobs pending at once (optionally with a new input for
the one paused step run) and the run running again, in one transaction. Of racing
resumes exactly one succeeds. A pause whose expiry (``pause_expires_ms``) passed on
the database clock is never resumed: it fails closed, whether or not a worker's
sweep has failed the run yet.
"""

from __future__ import annotations

import logging
from typing import Any

from ductline import codec
from ductline.config import load_settings
from ductline.errors import InvalidStateError, RunNotFound
from ductline.model.states import RunStatus
from ductline.observability.events import EventName, emit
from ductline.store import Store, payloads
from ductline.views import iso

log = logging.getLogger("ductline.worker")


class _NoInput:
    def __repr__(self) -> str:
        return "NO_INPUT"


NO_INPUT: Any = _NoInput()
"""A resume without ``input``: the step keeps the input it was paused with."""


def encode_input(value: Any) -> str:
    """The JSON list of arguments a resumed step receives: ``[value]``.

    Raises:
        TypeError: ``value`` does not round-trip through JSON (docs/howto/payloads.md).
    """
    return codec.dumps([value], what="resume input")


def resume(store: Store, run_id: str, input: Any = NO_INPUT) -> list[dict[str, Any]]:
    """Resume a paused run.

    Args:
        input: the paused step's new single argument (any value the codec accepts);
            `NO_INPUT` keeps the input it was paused with.

    Returns:
        The resumed step runs (``id``, ``step``, ``scope``, ``elem_index``, ``pause_expires_ms``).

    Raises:
        TypeError: ``input`` does not round-trip; nothing is changed.
        PayloadTooLarge: ``[input]`` as JSON is above ``payload_max_bytes`` (this
            process's settings); above ``payload_inline_bytes`` it is stored out of
            line with the run. Nothing is changed.
        RunNotFound: no such run.
        InvalidStateError: the run is not paused (of two racing resumes, the loser
            gets this), its pause has expired, or an input was given while several
            step runs are paused. Nothing is changed.
    """
    limits = payloads.Limits.from_settings(load_settings())
    encoded = None
    if input is not NO_INPUT:
        encoded = encode_input(input)
        payloads.check_size(encoded, "resume input", limits.max_bytes)
    with store.transaction() as tx:
        status = tx.lock_runs([run_id]).get(run_id)  # the run first, as stops and outcomes do
        if status is None:
            raise RunNotFound(f"run {run_id!r} not found")
        paused = tx.paused_jobs(run_id)
        # 'running' with a paused job: a pause committed just after a resume had read
        # the run (PostgreSQL, read committed). It is resumable all the same.
        if status != RunStatus.PAUSED and not (status == RunStatus.RUNNING and paused):
            raise InvalidStateError(f"run {run_id} is {status}; only a paused run can be resumed")
        now_ms = tx.now_ms()
        expired = sorted((int(p["pause_expires_ms"]), p["step"]) for p in paused
                         if p["pause_expires_ms"] is not None and int(p["pause_expires_ms"]) <= now_ms)
        if expired:
            expires_ms, step = expired[0]
            raise InvalidStateError(f"run {run_id} cannot be resumed: its pause before step {step!r} expired "
                                    f"at {iso(expires_ms)}; the run fails closed")
        if encoded is not None and len(paused) > 1:
            where = ", ".join(p["step"] + (f"[{p['elem_index']}]" if p["elem_index"] is not None else "")
                              for p in paused[:10])
            raise InvalidStateError(f"run {run_id} has {len(paused)} paused step runs ({where}); a new "
                                    "input replaces the input of one: resume without an input")
        # Jobs first, then the run: the lock order of cancel and of the run deadline.
        lost = f"run {run_id} is no longer paused (resumed, cancelled or expired meanwhile)"
        stored_input, pending = (None, None) if encoded is None else payloads.prepare(encoded, limits)
        if paused and tx.resume_jobs([p["id"] for p in paused], stored_input) != len(paused):
            raise InvalidStateError(lost)
        if pending is not None and paused:  # a large input is stored out of line with the run
            payloads.write(tx, run_id, pending, limits)
        if not tx.resume_run(run_id) and status == RunStatus.PAUSED and not paused:
            raise InvalidStateError(lost)
        tx.notify()
        pipeline = tx.run_pipeline(run_id)
    steps = sorted({p["step"] for p in paused})
    emit(EventName.PIPELINE_RESUMED, pipeline=pipeline, run_id=run_id, steps=steps,
         input_replaced=encoded is not None)
    # Debug, not info: the caller reports the resume (the CLI prints only its result).
    log.debug("Run resumed: %s", ", ".join(steps) or "no paused step", extra={"run_id": run_id})
    return paused
