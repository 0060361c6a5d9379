"""Retrying a halted run ("revive"): its failed, cancelled and held step runs
become pending again with fresh budgets, and the run advances again.

A step that crossed a boundary (`ductline.cross_boundary`) is never re-run by a
plain retry (docs/howto/retries.md): the retry is refused and
names those steps, and only a retry that forces them by name re-runs them on purpose.
"""

from __future__ import annotations

from typing import Iterable

from ductline.errors import InvalidStateError, RunNotFound
from ductline.model.states import REVIVABLE_JOB, JobStatus, RunStatus
from ductline.store import Store


def crossed_boundaries(store: Store, run_id: str) -> dict[str, str]:
    """``{step: "step[index]: 'reason'"}`` of the run's revivable step runs that
    crossed a boundary (one entry per step, the first step run of each)."""
    found: dict[str, str] = {}
    for job in store.run_jobs(run_id):
        if job.get("boundary") and JobStatus(job["status"]) in REVIVABLE_JOB:
            where = job["step"] + ("" if job["elem_index"] is None else f"[{job['elem_index']}]")
            found.setdefault(job["step"], f"{where}: {job['boundary']!r}")
    return found


def retry_run(store: Store, run_id: str, *, force: Iterable[str] = ()) -> None:
    """Revive a halted run.

    Args:
        force: names of steps that crossed a boundary to re-run on purpose; every
            such step of the run must be named, or nothing is revived.

    Raises:
        RunNotFound: no such run.
        InvalidStateError: the run is not halted (also: it stopped being halted
            meanwhile), or its deadline has passed (docs/howto/deadlines-and-cancel.md),
            or it has a failed step run past a boundary whose step is not named in
            ``force`` (the message names them), or ``force`` names a step that
            crossed no boundary.
    """
    wanted = set(force)
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFound(f"run {run_id!r} not found")
    if run["status"] != RunStatus.HALTED:
        raise InvalidStateError(f"run {run_id} is {run['status']}; only a halted run can be retried")
    deadline_ms = run.get("deadline_ms")
    if deadline_ms is not None and deadline_ms <= store.now_ms():
        # Revived, it would be stopped at once, and what it started recorded as killed
        # by a deadline that had passed before it began: the run ends at its deadline.
        raise InvalidStateError(f"run {run_id} is past its deadline (timeout {run.get('timeout_seconds')} s); "
                                "a retry would be stopped at once: trigger a new run")
    crossed = crossed_boundaries(store, run_id)
    missing = [where for step, where in crossed.items() if step not in wanted]
    if missing:
        raise InvalidStateError(
            f"run {run_id} has steps that crossed an irreversible boundary ({'; '.join(missing)}); "
            f"retry with force naming them ({', '.join(s for s in crossed if s not in wanted)}) to re-run them "
            "on purpose")
    unknown = sorted(wanted - set(crossed))
    if unknown:
        raise InvalidStateError(f"run {run_id}: no failed step of {', '.join(unknown)} crossed a boundary; "
                                "force only names steps that did")
    if not store.revive_run(run_id, force_steps=wanted):
        raise InvalidStateError(f"run {run_id} is no longer halted")
