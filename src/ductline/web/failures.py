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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ductline.model.states import AttemptResult, JobStatus

FAILED_RESULTS = frozenset({AttemptResult.ERRORED.value, AttemptResult.TIMED_OUT.value,
                            AttemptResult.CRASHED.value})


@dataclass(frozen=True, slots=True)
class Failures:
    """Failed attempts: ``free`` (before a boundary) and ``paid`` (after one)."""

    free: int = 0
    paid: int = 0

    def __add__(self, other: "Failures") -> "Failures":
        return Failures(self.free + other.free, self.paid + other.paid)

    @property
    def total(self) -> int:
        return self.free + self.paid

    def as_dict(self) -> dict[str, int]:
        return {"free": self.free, "paid": self.paid}


def of_step_run(job: dict[str, Any], results: list[str | None]) -> Failures:
    """The failures of one step run.

    Args:
        job: its row (``status``, ``boundary``).
        results: its attempts' results, oldest first (``None`` while one runs).
    """
    failed = sum(1 for r in results if r in FAILED_RESULTS)
    last = results[-1] if results else None
    paid = bool(job.get("boundary")) and job.get("status") == JobStatus.FAILED and last is not None \
        and last != AttemptResult.SUCCEEDED
    if not paid:
        return Failures(failed, 0)
    return Failures(failed - (1 if last in FAILED_RESULTS else 0), 1)


def total(parts: Iterable[Failures]) -> Failures:
    out = Failures()
    for part in parts:
        out = out + part
    return out
