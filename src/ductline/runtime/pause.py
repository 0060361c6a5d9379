"""Pausing before a step for a human, resuming, and pauses that expire.

``Pipeline.pause(before=step, timeout=None)`` (issue 8, after Ductwork Pro's
``dampen``): when the step's job is created it is inserted with status ``paused``
-- one row, no thread, no lease -- and the run's status becomes ``paused`` in the
same transaction. Other branches of the run (``divide``, ``expand``) keep running;
the run deadline keeps counting.

A resume (`ductline resume`, `RunHandle.resume`, the dashboard) makes the paused
jobs pending at once, optionally with a new input, and the run running again.

A pause with a timeout fails closed: once ``pause_expires_ms`` (database clock)
passes without a resume, the run ends ``failed`` with ``halt_reason``
``pause_expired`` and ``metadata["error"]`` saying which pause expired; the paused
job is recorded ``failed`` (it never ran: no attempt), in-flight attempts of other
branches are cancelled, waiting jobs and every dependent are skipped with reason
``pause expired``. Idle workers set their deadline timer to the earliest pause
expiry (`next_wakeups`), so the lateness is milliseconds while a worker is idle;
the maintenance scan (every ``DUCTLINE_HEALTH_CHECK_INTERVAL``, 5 s by default)
bounds it otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ductline import codec
from ductline.config import load_settings
from ductline.dsl.graph import Definition
from ductline.handle import NO_INPUT
from ductline.model.states import AttemptResult
from ductline.observability.events import EventName, emit
from ductline.store import Store, payloads
from ductline.store.records import NewJob
from ductline.store.store import Tx

log = logging.getLogger("ductline.worker")

PAUSE_EXPIRED = "pause_expired"       # the failed run's halt_reason
PAUSE_EXPIRED_SKIP = "pause expired"  # skip_reason of what can no longer run




def insert_paused(tx: Tx, definition: Definition, jobs: list[NewJob]) -> list[NewJob]:
    """Insert the jobs of paused steps now, as ``paused`` rows with their expiry,
    and pause their run; returns the other jobs, for the caller to insert."""
    paused = [dataclasses.replace(j, status="paused") for j in jobs if j.step in definition.pauses]
    if not paused:
        return jobs
    tx.insert_jobs(paused)
    tx.pause_jobs([(j.id, j.run_id, definition.pauses[j.step]) for j in paused])
    return [j for j in jobs if j.step not in definition.pauses]


def encode_input(value: Any) -> str:
    """The JSON list of arguments a resumed step receives: ``[value]``.

    Raises:
        TypeError: ``value`` does not round-trip through JSON (DESIGN.md, "Bad input").
    """
    return codec.dumps([value], what="resume input")


def resume(store: Store, run_id: str, input: Any = NO_INPUT) -> list[dict[str, Any]]:
    """Resume a paused run (see `Store.resume_run`).

    Args:
        input: the paused step's new single argument (any JSON value); omitted,
            the step runs with the input it was paused with.

    Returns:
        The resumed step runs (``step``, ``scope``, ``elem_index``, ...).

    Raises:
        TypeError: ``input`` does not round-trip through JSON; nothing is changed.
        PayloadTooLarge: ``[input]`` as JSON is above ``payload_max_bytes`` (this
            process's settings, as for trigger arguments); nothing is changed.
            Above ``payload_inline_bytes`` it is stored out of line with the run.
        RunNotFound: no such run.
        InvalidStateError: the run is not paused, its pause has expired, or an
            input was given while several step runs are paused.
    """
    limits = payloads.Limits.from_settings(load_settings())
    encoded = None
    if input is not NO_INPUT:
        encoded = encode_input(input)
        payloads.check_size(encoded, "resume input", limits.max_bytes)
    resumed = store.resume_run(run_id, encoded, limits=limits)
    pipeline = (store.get_run(run_id) or {}).get("pipeline")
    emit(EventName.PIPELINE_RESUMED, pipeline=pipeline, run_id=run_id,
         steps=sorted({r["step"] for r in resumed}), input_replaced=encoded is not None)
    # Debug, not info: the caller reports the resume (the CLI prints only its result).
    log.debug("Run resumed: %s", ", ".join(sorted({r["step"] for r in resumed})) or "no paused step",
              extra={"run_id": run_id})
    return resumed


def expiry_reason(step: str, seconds: int) -> str:
    return f"pause before step {step!r} expired after {seconds} s without a resume"


def expire_pause(tx: Tx, definition: Definition | None, row: dict[str, Any]) -> str | None:
    """Fail the run of one expired paused job (``row``: an `expired_pauses` row).

    Returns the reason if this call ended the run, else ``None``. Raises
    `abort.Unchanged` (roll back) when the job stopped being paused or the run
    ended meanwhile.
    """
    from ductline.runtime.abort import Unchanged, _skip_dependents

    info = tx.run_metadata(row["run_id"])
    if info is None or info["status"] not in ("pending", "running", "paused", "halted"):
        return None
    step = str(row["step"])
    seconds = definition.pauses.get(step) if definition is not None else None
    if seconds is None:  # the pipeline is not loaded here: from the row's own times
        seconds = max(0, round((int(row["pause_expires_ms"]) - int(row["created_ms"])) / 1000))
    reason = expiry_reason(step, seconds)
    open_jobs = tx.open_jobs(row["run_id"])
    # Lock order job -> attempt -> run, as recording a completion does: no deadlock.
    if not tx.expire_paused_job(row["id"], reason):
        raise Unchanged()
    tx.abort_running(row["run_id"], "cancelled", AttemptResult.CANCELLED, "PauseExpired",
                     f"cancelled because the {reason}")
    tx.skip_waiting(row["run_id"], PAUSE_EXPIRED_SKIP, step)
    metadata = {**info["metadata"], "pause_expired": True, "paused_step": step,
                "pause_timeout_seconds": seconds, "error": reason}
    if not tx.fail_paused_run(row["run_id"], metadata):
        raise Unchanged()
    _skip_dependents(tx, definition, row["run_id"], open_jobs, PAUSE_EXPIRED_SKIP)
    return reason


def expire_pauses(store: Store, definitions: dict[str, Definition], limit: int = 100) -> int:
    """Fail every run whose pause expired; returns how many this call ended."""
    from ductline.runtime.abort import Unchanged

    ended = 0
    for row in store.expired_pauses(limit):
        try:
            with store.transaction() as tx:
                reason = expire_pause(tx, definitions.get(row["pipeline"]), row)
        except Unchanged:
            continue
        if reason is not None:
            ended += 1
            log.error("Run failed: the %s", reason, extra={"run_id": row["run_id"], "step": row["step"]})
            emit(EventName.PIPELINE_FAILED, pipeline=row["pipeline"], run_id=row["run_id"], reason=PAUSE_EXPIRED)
    return ended
