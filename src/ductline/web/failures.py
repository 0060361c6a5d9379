"""Free and paid failures: what a failed attempt cost.

A step that calls `ductline.cross_boundary` records that it is about to do
something irreversible or paid (docs/howto/retries.md, "Safe-only retry"). A
failure *before* that point is **free**: the attempt is retried under the step's
budget. A failure *after* it is **paid**: the step is not run again by itself and
the run halts ``unsafe_to_retry`` until an operator decides.

From the stored rows: a failed attempt is one that ended ``errored``,
``timed_out`` or ``crashed``. A step run holding a crossed boundary that failed for
good paid for its last attempt (whatever ended it: an error, a timeout, a crash, a
worker's shutdown); its other failed attempts, and those of every other step run,
were free. The metrics count the same as it happens
(``ductline.job.failures.free`` and ``ductline.job.failures.paid``,
`ductline.observability.metrics`).

An attempt its run's deadline stopped in flight (recorded ``timed_out``,
``TimeoutError``, "stopped at the run deadline: ...":
`ductline.model.stops.stopped_by_deadline`) is neither: no retry follows it and it
used no retry, the whole run ended ``failed``. It is counted apart, as ``deadline``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ductline.model.states import AttemptResult, JobStatus
from ductline.model.stops import stopped_by_deadline

FAILED_RESULTS = frozenset({AttemptResult.ERRORED.value, AttemptResult.TIMED_OUT.value,
                            AttemptResult.CRASHED.value})


@dataclass(frozen=True, slots=True)
class Failures:
    """Failed attempts: ``free`` (before a boundary), ``paid`` (after one) and
    ``deadline`` (stopped in flight by their run's deadline)."""

    free: int = 0
    paid: int = 0
    deadline: int = 0

    def __add__(self, other: "Failures") -> "Failures":
        return Failures(self.free + other.free, self.paid + other.paid, self.deadline + other.deadline)

    @property
    def total(self) -> int:
        return self.free + self.paid + self.deadline

    def as_dict(self) -> dict[str, int]:
        return {"free": self.free, "paid": self.paid, "deadline": self.deadline}


# An attempt as `of_step_run` reads it: its stored result (``None`` while it runs),
# error type and error.
Tried = tuple[str | None, str | None, str | None]


def of_step_run(job: dict[str, Any], attempts: list[Tried]) -> Failures:
    """The failures of one step run.

    Args:
        job: its row (``status``, ``boundary``).
        attempts: its attempts' ``(result, error_type, error)``, oldest first.
    """
    stopped = sum(1 for a in attempts if stopped_by_deadline(*a))
    failed = sum(1 for a in attempts if a[0] in FAILED_RESULTS) - stopped
    last = attempts[-1] if attempts else None
    paid = bool(job.get("boundary")) and job.get("status") == JobStatus.FAILED and last is not None \
        and last[0] != AttemptResult.SUCCEEDED and not stopped_by_deadline(*last)
    if not paid:
        return Failures(failed, 0, stopped)
    return Failures(failed - (1 if last is not None and last[0] in FAILED_RESULTS else 0), 1, stopped)


def total(parts: Iterable[Failures]) -> Failures:
    out = Failures()
    for part in parts:
        out = out + part
    return out
