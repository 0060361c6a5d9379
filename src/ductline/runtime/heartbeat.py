"""The worker's heartbeat: renewing the leases of everything it runs (and of the
outcomes it has not recorded yet), measuring the database clock on the way, and
killing attempts whose lease was lost.

It runs every third of the lease, and at once when a run was cancelled (the
cancel took the leases of that run's attempts: they are found lost and killed).
A database that cannot tell the worker of a cancel (SQLite, a PostgreSQL reached
only through a transaction pooler) is asked instead, with a read, every poll
interval while attempts run: a lease found lost brings the renewal forward, so a
cancel from another process stops its attempts within a poll, not a third of
the lease.
If the database cannot be reached the enforcer kills the children before their
leases can expire (`ductline.execution.enforcer`).
"""

from __future__ import annotations

import logging
from typing import Callable

from ductline.clock import DatabaseClock
from ductline.config import Settings
from ductline.errors import StoreError
from ductline.execution.enforcer import Enforcer, Reason
from ductline.model.workers import Condition
from ductline.runtime.ahead import Ahead
from ductline.runtime.outbox import Outage, Outbox
from ductline.engine.batch import job_extra
from ductline.engine.lost import Lost, report_lost
from ductline.runtime.prefetch import Prefetcher
from ductline.runtime.slots import Slot
from ductline.runtime.wakeup import Wakeup
from ductline.store import Store

log = logging.getLogger("ductline.worker")


class Heartbeat:
    """Renews a worker's leases.

    Args:
        worker_id: the worker.
        report: the worker's status and problem for its heartbeat row
            (`ductline.model.workers.condition`).
        ahead: the jobs claimed ahead (their leases are renewed too).
        prefetcher: the jobs sent ahead to busy children (renewed too).
        check_every: seconds between reads of whether the leases are still held
            (`Store.leases_held`), for a store that does not notify; ``None``: never.
        (the others are the worker's collaborators of the same names)
    """

    def __init__(self, store: Store, settings: Settings, worker_id: str, slots: list[Slot], *,
                 clock: DatabaseClock, enforcer: Enforcer, wakeup: Wakeup, outbox: Outbox, outage: Outage,
                 report: Callable[[], Condition], ahead: Ahead | None = None,
                 prefetcher: Prefetcher | None = None, check_every: float | None = None,
                 register: Callable[[], None] | None = None) -> None:
        self._store = store
        self._settings = settings
        self._worker_id = worker_id
        self._slots = slots
        self._clock = clock
        self._enforcer = enforcer
        self._wakeup = wakeup
        self._outbox = outbox
        self._outage = outage
        self._report = report
        self._ahead = ahead if ahead is not None else Ahead(depth=0)
        self._prefetcher = prefetcher
        self.next_at = 0.0  # monotonic
        self._check_every = check_every
        self._next_check = 0.0  # monotonic
        # Registers the worker again when its row is gone (`Store.renew_leases`).
        self._register = register

    def soon(self) -> None:
        """Renew on this turn of the loop (a queued job waits for its lease)."""
        self.next_at = 0.0

    def _queued_tokens(self) -> list[str]:
        """The leases of the jobs claimed ahead and of those sent ahead to children."""
        return self._ahead.tokens() + (self._prefetcher.tokens() if self._prefetcher is not None else [])

    def _lost_since_renewal(self) -> bool:
        """Read whether a lease of a running, queued or sent-ahead job was taken (a
        cancel) since the last renewal; a failed read says no (the renewal deals with
        outages)."""
        self._next_check = self._clock.now() + (self._check_every or 0.0)
        tokens = [s.job.lease_token for s in self._slots if s.busy and not s.undead and s.job is not None]
        # Jobs claimed ahead and sent ahead too: a queued job of a cancelled run must
        # not start, and starts without asking while its lease was confirmed lately.
        tokens += self._queued_tokens()
        if not tokens:
            return False
        try:
            return len(self._store.leases_held(tokens)) < len(tokens)
        except StoreError:
            return False

    def beat(self) -> None:
        """Renew the leases if it is time (or a cancel asks for it now)."""
        now = self._clock.now()
        if self._wakeup.take_cancel():
            self.next_at = now  # a run was cancelled: find lost leases now
        if now < self.next_at:
            if self._check_every is None or now < self._next_check or not self._lost_since_renewal():
                return
            self.next_at = now
        busy = [s for s in self._slots if s.busy and not s.undead]
        # Outcomes not yet recorded (the database was down) keep their leases too.
        queued = self._queued_tokens()
        tokens = [s.job.lease_token for s in busy if s.job is not None] + self._outbox.lease_tokens() + queued
        undead = sum(1 for s in self._slots if s.undead)
        condition = self._report()
        try:
            sent = self._clock.now()
            db_now, renewed, registered = self._store.renew_leases(
                self._worker_id, tokens, self._settings.lease_ms, busy=len(busy), undead=undead, status=condition.status.value,
                problem=condition.problem)
            if not registered and self._register is not None:
                # Retention deleted the row of a worker that could not heartbeat for
                # longer than it keeps lost workers: without a row it would run
                # unseen by `ductline workers`, the dashboard and the serving rule.
                log.warning("This worker's row was gone (deleted by retention while it could not reach the "
                            "database); registering again")
                self._register()
            self._clock.measure(db_now, sent, self._clock.now())
            self._enforcer.renewed(sent)
            self.next_at = now + self._settings.lease_seconds / 3
            if self._prefetcher is not None:
                self._prefetcher.renewed(renewed, sent)
            if queued:
                for job in self._ahead.renewed(renewed, sent):
                    # Its run was cancelled or ended, or it was rescued: never started.
                    log.info("Lease of a job claimed ahead was lost; not starting it", extra={
                        "run_id": job.run_id, "job_id": job.job_id, "step": job.step, "attempt": job.attempt})
            lost, extras = [], []
            for slot in busy:
                if slot.job is not None and slot.job.lease_token not in renewed:
                    job = slot.job
                    self._enforcer.kill(slot.index, Reason.LEASE, grace=0.0)
                    lost.append(Lost(job.pipeline, job.step, job.run_id, job.job_id, job.attempt))
                    extras.append(job_extra(slot.attempt()))
            # A stop's kill is reported as the attempt's recorded end, a real loss as
            # lease.lost: decided in one place (`ductline.engine.lost`), and logged so.
            took = report_lost(self._store, lost, tell=True)
            for x, extra in zip(lost, extras):
                _log_lost(took.get((x.job_id, x.attempt)), extra)
        except StoreError as exc:
            # The enforcer kills the children before their leases can expire.
            self._outage.failed("heartbeat", exc)
            self.next_at = now + 0.5


def _log_lost(stopped: str | None, extra: dict[str, object]) -> None:
    """One line for an attempt killed because its lease was taken: at INFO with the
    error the run's stop recorded (an operator's cancel, the run deadline reached
    elsewhere), at WARNING for a real loss (a rescue after missed renewals)."""
    if stopped is not None:
        log.info("Attempt stopped by its run (%s); killed it", stopped, extra=extra)
    else:
        log.warning("Lease lost (the job was rescued after missed renewals, or its lease expired); "
                    "killed the attempt", extra=extra)
