"""An attempt whose lease another writer took: what its driver reports of it.

Two writers take a running attempt's lease, and each records the attempt in the same
transaction: a run's stop (its deadline records it ``timed_out``; a cancel, an expired
pause or wait and a fail-fast halt record it ``cancelled``) and a rescue (its lease
expired: ``crashed``, reported by the rescuer as ``job.completed``). The driver
running the attempt learns of it later -- a heartbeat that finds the lease gone, an
outcome whose fenced write finds it gone -- and reports it here, one rule for the
worker and `ductline.execute`:

- recorded by a stop: ``job.completed`` with the result recorded (so
  ``ductline_job_completed_total{result="timed_out"|"cancelled"}`` counts it, as
  the dashboard and ``show`` do), never ``lease.lost``;
- taken back by a stop before it began (held by its worker for its not-before
  time, `ductline.model.stops.begun_by`): its attempt row is gone and nothing ran,
  so nothing is reported;
- anything else (a rescue, a lease that expired, a row not closed): ``lease.lost``,
  the event operators alert on.

An attempt is reported once per process: its heartbeat and its outcome may both
find the same loss. `report_lost` also returns, for every attempt it was given, what
took its lease (a stop's recorded error, or ``None`` for a real loss), so the worker
logs a cancel or a deadline as what it is, and only a real loss as a warning.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from ductline.errors import StoreError
from ductline.model import stops
from ductline.model.states import AttemptResult
from ductline.observability.events import RESULT_LABELS, EventName, emit
from ductline.store import Store

log = logging.getLogger("ductline.engine")

# The results a run's stop records on the attempts it ends in flight (`ductline.model.stops`).
STOPPED_RESULTS = frozenset({AttemptResult.TIMED_OUT.value, AttemptResult.CANCELLED.value})
# How many reported attempts a process remembers, to report each once.
REMEMBERED = 10_000

_reported: OrderedDict[tuple[str, int], None] = OrderedDict()
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Lost:
    """An attempt its driver found without its lease."""

    pipeline: str
    step: str
    run_id: str
    job_id: str
    attempt: int


def _first_report(lost: Lost) -> bool:
    key = (lost.job_id, lost.attempt)
    with _lock:
        if key in _reported:
            return False
        _reported[key] = None
        while len(_reported) > REMEMBERED:
            _reported.popitem(last=False)
        return True


def _recorded(store: Store, x: Lost) -> tuple[bool, dict[str, Any] | None]:
    """Whether attempt ``x`` could be read, by its key (a run of an expand may hold
    thousands of attempts), and its row (``None``: there is none). An attempt that
    cannot be read is reported as a lost lease."""
    try:
        return True, store.get_attempt(x.job_id, x.attempt)
    except StoreError as exc:
        log.warning("cannot read attempt %d of job %s: %s", x.attempt, x.job_id, exc)
        return False, None


# What `report_lost` says of an attempt a stop took back before it began.
TAKEN_BACK = "its run was stopped before it began"


def report_lost(store: Store, lost: Sequence[Lost], *, tell: bool = False) -> dict[tuple[str, int], str | None]:
    """Emit, once per attempt, what the module docstring says of each of ``lost``.

    Args:
        store: where the attempts were recorded (each read by its key).
        lost: the attempts whose lease was found taken.
        tell: read an attempt reported before too, to return what took its lease
            (the worker's heartbeat logs it); without it, only the attempts reported
            now are read and returned.

    Returns:
        By ``(job_id, attempt)``, for each of ``lost`` read: the error the run's stop
        recorded on it (``"the run was cancelled"``, ``"stopped at the run
        deadline: ..."``; `TAKEN_BACK` for one taken back before it began), or
        ``None`` when no stop took it (a rescue, an expired lease, a row that
        cannot be read): a real lost lease.
    """
    found: dict[tuple[str, int], str | None] = {}
    for x in lost:
        fresh = _first_report(x)
        if not fresh and not tell:
            continue
        fields = {"pipeline": x.pipeline, "step": x.step, "run_id": x.run_id, "job_id": x.job_id,
                  "attempt": x.attempt}
        read, row = _recorded(store, x)
        if read and row is None:
            found[(x.job_id, x.attempt)] = TAKEN_BACK  # no attempt, nothing ran: nothing reported
            continue
        if row is None or not row.get("result") or row["result"] not in STOPPED_RESULTS:
            found[(x.job_id, x.attempt)] = None
            if fresh:
                emit(EventName.LEASE_LOST, **fields)
            continue
        found[(x.job_id, x.attempt)] = str(row.get("error") or row["result"])
        if not fresh:
            continue
        started, finished = row.get("started_ms"), row.get("finished_ms")
        runtime = None if started is None or finished is None else max(0.0, (int(finished) - int(started)) / 1000)
        deadline = stops.stopped_by_deadline(row["result"], row.get("error_type"), row.get("error"))
        emit(EventName.JOB_COMPLETED, **fields, result=RESULT_LABELS[row["result"]], runtime_seconds=runtime,
             error_type=row.get("error_type"), outcome=None, reason=stops.DEADLINE_REASON if deadline else None)
    return found
