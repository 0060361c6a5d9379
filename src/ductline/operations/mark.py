"""Mark a step run succeeded: the operation the CLI (``ductline mark-succeeded``), the
JSON API and the dashboard call. The engine applies it (`ductline.engine.mark`) in
one transaction; the run then continues from that step as if its attempt had
succeeded with the operator's output."""

from __future__ import annotations

import getpass
import logging
import socket
from typing import Any

from ductline import codec
from ductline.config import load_settings
from ductline.dsl.graph import Definition
from ductline.engine import mark
from ductline.errors import InvalidStateError, RunNotFound
from ductline.model import marking
from ductline.model.states import MARKABLE_JOB, RunStatus, JobStatus
from ductline.observability.events import EventName, emit
from ductline.operations.revive import crossed_boundaries
from ductline.store import Store, payloads

log = logging.getLogger("ductline.operations")


def default_actor() -> str:
    """``user@host`` of this process, the actor a CLI action is recorded with."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _step_run(store: Store, run_id: str, step: str, index: int | None) -> dict[str, Any]:
    of_step = [j for j in store.run_jobs(run_id) if j["step"] == step]
    jobs = [j for j in of_step if index is None or j["elem_index"] == index]
    where = step if index is None else f"{step}[{index}]"
    if not jobs:
        indexes = marking.index_ranges([j["elem_index"] for j in of_step])
        known = f" (its step runs have indexes {indexes})" if indexes else ""
        raise InvalidStateError(f"run {run_id} has no step run {where}{known}")
    if len(jobs) > 1:
        markable = [j for j in jobs if JobStatus(j["status"]) in MARKABLE_JOB]
        if len(markable) != 1:
            runs = [(j["elem_index"], str(j["status"])) for j in jobs]
            raise InvalidStateError(f"run {run_id}: {marking.ambiguous(step, runs)}")
        return markable[0]
    return jobs[0]


def mark_succeeded(store: Store, definition: Definition, run_id: str, step: str, output: Any, *,
                   index: int | None = None, reason: str | None = None, actor: str | None = None) -> mark.Marked:
    """Record step ``step`` of run ``run_id`` succeeded with ``output``, without running it.

    Args:
        definition: the run's pipeline definition (the run advances by it).
        output: the step's output, any value the codec accepts (`ductline.codec`).
        index: the element index of the step run, for a step with several (an expand).
        reason: why, for the run's history (at most 1000 characters).
        actor: who, for the run's history (default: ``user@host`` of this process).

    Returns:
        `ductline.engine.mark.Marked`: whether a halted run was revived, the jobs
        created, whether the run completed.

    Raises:
        RunNotFound: no such run.
        InvalidStateError: the run is finished (completed, failed or cancelled) or
            past its deadline; the step run is completed, running, waiting or
            skipped; the step has several step runs and none was named; another
            failed step run of a halted run crossed a boundary (as a retry refuses).
            Nothing is changed.
        TypeError: the output does not round-trip (the JSON rule) or ``reason`` is not a str.
        ValueError: an output the step's transition cannot take, or a reason too long.
    """
    reason = marking.check_text(reason, "reason", marking.MAX_REASON_CHARS)
    actor = marking.check_text(actor, "actor", marking.MAX_ACTOR_CHARS) or default_actor()
    encoded = codec.dumps(output, what="mark-succeeded output")
    settings = load_settings()
    limits = payloads.Limits.from_settings(settings)
    payloads.check_size(encoded, "mark-succeeded output", limits.max_bytes)
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFound(f"run {run_id!r} not found")
    if run["pipeline"] != definition.name:
        raise InvalidStateError(f"run {run_id} is of pipeline {run['pipeline']!r}, not {definition.name!r}")
    if step not in definition.nodes:
        raise InvalidStateError(f"pipeline {definition.name!r} has no step {step!r}")
    job = _step_run(store, run_id, step, index)
    if run["status"] == RunStatus.HALTED:
        deadline_ms = run.get("deadline_ms")
        if deadline_ms is not None and deadline_ms <= store.now_ms():
            raise InvalidStateError(f"run {run_id} is past its deadline; revived it would be stopped at once")
        # The run is revived as a retry revives it: another failed step run past a
        # boundary would run again, which only an explicit `retry --force` may do.
        others = {s: w for s, w in crossed_boundaries(store, run_id).items() if s != step}
        if others:
            raise InvalidStateError(f"run {run_id} has other steps that crossed an irreversible boundary "
                                    f"({'; '.join(others.values())}); resolve them first")
    with store.transaction() as tx:
        marked = mark.mark_succeeded(tx, definition, run_id, job, encoded, actor=actor, reason=reason,
                                     retry_delay=settings.retry_delay, limits=limits)
    emit(EventName.STEP_MARKED_SUCCEEDED, pipeline=definition.name, step=step, run_id=run_id)
    # DEBUG, as a resume or a send: the caller says what it did, the run's history keeps it.
    log.debug("Step %s marked succeeded by %s%s", step, actor, f": {reason}" if reason else "",
             extra={"run_id": run_id})
    return marked
