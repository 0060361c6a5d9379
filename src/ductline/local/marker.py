"""The ``mark_succeeded`` option of `ductline.execute`: the in-process counterpart of
an operator's ``ductline mark-succeeded``. When the run has halted and nothing of it
runs, each step the option names has its first failed, held or cancelled step run
(in element order) marked succeeded with the given output by the engine's own mark
(`ductline.engine.mark`), which revives the run and advances it, as on a worker's
database. Each step is marked once."""

from __future__ import annotations

from typing import Any

from ductline.dsl.graph import Definition
from ductline.engine import mark
from ductline.model.states import MARKABLE_JOB, JobStatus
from ductline.observability.events import EventName, emit
from ductline.store import payloads
from ductline.store.store import Store

ACTOR = "ductline.execute (mark_succeeded option)"


def apply_marks(store: Store, definition: Definition, run_id: str, marks: dict[str, str], retry_delay: Any,
                limits: payloads.Limits) -> bool:
    """Mark what ``marks`` (``{step: output JSON}``, consumed) names and may be marked;
    ``True`` when anything was marked (the run moves on)."""
    marked = False
    for step in list(marks):
        jobs = sorted((j for j in store.run_jobs(run_id) if j["step"] == step
                       and JobStatus(j["status"]) in MARKABLE_JOB),
                      key=lambda j: -1 if j["elem_index"] is None else j["elem_index"])
        if not jobs:
            continue  # not failed (yet): kept for a later halt
        with store.transaction() as tx:
            mark.mark_succeeded(tx, definition, run_id, jobs[0], marks.pop(step), actor=ACTOR, reason=None,
                                retry_delay=retry_delay, limits=limits)
        emit(EventName.STEP_MARKED_SUCCEEDED, pipeline=definition.name, step=step, run_id=run_id)
        marked = True
    return marked
