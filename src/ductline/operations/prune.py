"""Retention: deleting old finished runs whole, in bounded transactions.

``ductline prune --older-than 30d`` and the ``retention`` setting (applied by the
workers' maintenance thread) delete runs finished before the cutoff (database
clock) with everything that belongs to them: jobs, attempts, payloads and their
chunks, run context, fan-in counters. By default only ended runs go (completed,
failed, cancelled); active, paused and halted runs are pruned only when their
status is named explicitly, and their age is then counted from their creation.

A run with a job a worker has claimed (an attempt running, or a dead worker's
attempt not yet rescued) is never deleted, whatever its status: the attempt would
go on writing for a run that is gone. It is left whole and counted in ``busy``;
cancel it first (`ductline.operations.cancel`), then prune it as cancelled.

After the runs, the rows of workers gone longer ago than the same age go too
(``ductline_workers``): a stopped worker's, and a lost worker's (it never said it
stopped) once its last heartbeat is also a day old (`ductline.model.workers.prune_cutoffs`).
Every ``ductline run`` and every restarted worker leaves a row; without this they
were kept for ever.

Each transaction deletes whole runs holding at most ``max_rows`` rows in all (a
single run larger than that is deleted alone, in one transaction): a prune
interrupted at any point leaves no run half-deleted, and never holds locks for long.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from ductline.model.states import TERMINAL_RUN, RunStatus
from ductline.store import Store
from ductline.model.workers import prune_cutoffs as worker_cutoffs
from ductline.store.retention import (Candidate, candidates, delete_runs, delete_workers, lockable_runs,
                                      prunable_workers, take_turn)

log = logging.getLogger("ductline.prune")

MAX_ROWS_PER_TRANSACTION = 1_000
DEFAULT_STATUSES = tuple(sorted(TERMINAL_RUN))
_PAGE = 500


@dataclass(slots=True)
class PruneReport:
    """What a prune deleted (or, for a dry run, would delete)."""

    runs: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    transactions: int = 0
    complete: bool = True  # False when stopped by ``max_seconds`` with more to do
    busy: int = 0  # runs left whole because a worker had claimed one of their jobs
    workers: int = 0  # rows of workers gone long ago (ductline.model.workers.prune_cutoffs)
    yielded: bool = False  # an ``exclusive`` prune found another maintainer pruning

    def add(self, counts: dict[str, int]) -> None:
        for table, n in counts.items():
            self.rows[table] = self.rows.get(table, 0) + n


def check_statuses(statuses: list[str] | tuple[str, ...] | None) -> list[str]:
    """The statuses to prune (default: ended runs).

    Raises:
        ValueError: an unknown status.
    """
    if not statuses:
        return list(DEFAULT_STATUSES)
    known = {s.value for s in RunStatus}
    unknown = sorted(set(statuses) - known)
    if unknown:
        raise ValueError(f"unknown run status {', '.join(unknown)}: use {', '.join(sorted(known))}")
    return sorted(set(statuses))


def _batches(found: list[Candidate], max_rows: int) -> list[list[Candidate]]:
    """Runs packed into transactions of at most ``max_rows`` rows (a run larger than
    that goes alone)."""
    batches: list[list[Candidate]] = []
    current: list[Candidate] = []
    rows = 0
    for candidate in found:
        if current and rows + candidate.weight > max_rows:
            batches.append(current)
            current, rows = [], 0
        current.append(candidate)
        rows += candidate.weight
    if current:
        batches.append(current)
    return batches


def prune(store: Store, older_than_seconds: int, *, statuses: list[str] | tuple[str, ...] | None = None,
          dry_run: bool = False, max_rows: int = MAX_ROWS_PER_TRANSACTION, max_seconds: float | None = None,
          exclusive: bool = False, clock: Callable[[], float] = time.monotonic) -> PruneReport:
    """Delete runs of ``statuses`` finished more than ``older_than_seconds`` ago, then
    the rows of workers gone that long (see the module docstring).

    Args:
        older_than_seconds: how long ago a run ended (for a run that has not
            ended: was created), on the database clock (>= 0).
        statuses: run statuses to prune (default completed, failed, cancelled).
            A run with a claimed job is left whatever its status (``busy``).
        dry_run: count what would be deleted; delete nothing.
        max_rows: the most rows one transaction deletes (whole runs only).
        max_seconds: stop after about this long (the maintenance thread's budget);
            ``complete`` is then ``False`` if more was left.
        exclusive: each transaction first takes the fleet-wide pruning turn (the
            workers' retention: one maintainer at a time); if another holds it,
            the prune stops with ``yielded`` and ``complete`` ``False``.

    Raises:
        ValueError: a negative age or an unknown status.
        StoreError: the database failed; what was committed stays deleted.
    """
    if isinstance(older_than_seconds, bool) or not isinstance(older_than_seconds, int) or older_than_seconds < 0:
        raise ValueError(f"older_than must be a whole number of seconds >= 0, got {older_than_seconds!r}")
    wanted = check_statuses(statuses)
    now_ms = store.now_ms()
    cutoff_ms = now_ms - older_than_seconds * 1000
    report = PruneReport()
    started = clock()

    def out_of_time() -> bool:
        if max_seconds is not None and clock() - started >= max_seconds:
            report.complete = False
            return True
        return False

    if _prune_runs(store, wanted, cutoff_ms, report, dry_run, max_rows, exclusive, out_of_time):
        _prune_workers(store, worker_cutoffs(now_ms, older_than_seconds * 1000), report, dry_run, max_rows,
                       exclusive, out_of_time)
    return report


def _prune_runs(store: Store, wanted: list[str], cutoff_ms: int, report: PruneReport, dry_run: bool,
                max_rows: int, exclusive: bool, out_of_time: Callable[[], bool]) -> bool:
    """The runs' part of `prune`; ``False`` when it stopped with more left (time,
    or another maintainer's turn)."""
    after = (-1, "")
    while True:
        found = candidates(store, wanted, cutoff_ms, after, _PAGE)
        if not found:
            return True
        after = (found[-1].age_ms, found[-1].run_id)
        for batch in _batches(found, max_rows):
            if out_of_time():
                return False
            if dry_run:  # the same runs a prune would take, locked a moment and left as they are
                with store.transaction() as tx:
                    taken, busy = lockable_runs(tx, [c.run_id for c in batch], wanted)
                report.runs += len(taken)
                report.busy += busy
                report.add({"rows": sum(c.weight for c in batch if c.run_id in set(taken))})
                continue
            with store.transaction() as tx:
                if exclusive and not take_turn(tx):
                    report.complete, report.yielded = False, True
                    return False
                counts = delete_runs(tx, [c.run_id for c in batch], wanted)
            report.busy += counts.pop("busy", 0)
            report.transactions += 1
            report.runs += counts["runs"]
            report.add(counts)


def _prune_workers(store: Store, cutoffs: tuple[int, int], report: PruneReport, dry_run: bool, max_rows: int,
                   exclusive: bool, out_of_time: Callable[[], bool]) -> None:
    """The worker rows' part of `prune`, after the runs: rows of workers that
    stopped, or were lost, longer ago than the retention (`prune_cutoffs`)."""
    if dry_run:
        report.workers = prunable_workers(store, *cutoffs)
        return
    while not out_of_time():
        with store.transaction() as tx:
            if exclusive and not take_turn(tx):
                report.complete, report.yielded = False, True
                return
            deleted = delete_workers(tx, *cutoffs, max_rows)
        report.transactions += 1
        report.workers += deleted
        if deleted < max_rows:
            return
