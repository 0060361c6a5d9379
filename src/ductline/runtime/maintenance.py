"""Periodic maintenance: rescuing the jobs of workers that died, and retention.

A worker that dies (SIGKILL, OOM, power loss) stops renewing its leases. Once a
lease has expired on the database clock, any worker records the attempt
``crashed`` and re-queues the job under its crash budget. The write is fenced by
the lease token, so a slow-but-alive owner and a rescuer can never both win.

With the ``retention`` setting, the same thread deletes runs that ended longer ago
than that (`ductline.operations.prune`): whole runs, at most 1,000 rows per
transaction, completed, failed and cancelled runs only (never active, paused or
halted ones), and one worker of the fleet at a time (each transaction takes the
pruning turn first; a worker that does not get it tries again later).
"""

from __future__ import annotations

import logging
import threading

from ductline.clock import DatabaseClock
from ductline.dsl.graph import Definition, definition_for
from ductline.model.limits import step_limits
from ductline.model.outcomes import WORKER_LOST_TYPE, lease_expired
from ductline.model.states import AttemptResult
from ductline.operations.prune import prune
from ductline.engine.stop import expire_due, sweep_orphans
from ductline.observability.events import EventName, emit
from ductline.engine import record
from ductline.engine.batch import job_extra
from ductline.errors import StoreError
from ductline.runtime.folding import FoldedWarning
from ductline.runtime.outbox import OUTAGE_LOG_EVERY_SECONDS
from ductline.store import Store

log = logging.getLogger("ductline.worker")

# The soonest the maintenance thread looks at run deadlines again (seconds).
DEADLINE_RECHECK_SECONDS = 0.05


def rescue_expired(store: Store, definitions: dict[str, Definition], limit: int = 100) -> int:
    """Mark expired attempts crashed and re-queue or fail their jobs; returns how many."""
    rescued = 0
    for lease in store.expired_leases(limit):
        attempt = record.Attempt(lease.job_id, lease.run_id, lease.step, "", lease.attempt, lease.lease_token)
        with store.transaction() as tx:
            tx.lock_runs([lease.run_id])
            done = record.failure(tx, definition_for(definitions, lease.pipeline, lease.definition), attempt,
                                  lease_expired(lease.lease_expires_ms), None)
        if done.outcome is not record.Outcome.LOST:
            rescued += 1
            emit(EventName.JOB_COMPLETED, pipeline=lease.pipeline, step=lease.step, run_id=lease.run_id,
                 job_id=lease.job_id, attempt=lease.attempt, result=AttemptResult.CRASHED.value, runtime_seconds=None,
                 error_type=WORKER_LOST_TYPE, outcome=done.outcome, reason=done.reason)
            if done.halted:
                emit(EventName.PIPELINE_HALTED, pipeline=lease.pipeline, run_id=lease.run_id, reason=done.reason)
            log.warning("Job crashed: lease expired, %s", done.outcome, extra=job_extra(attempt))
            if done.halted:
                log.error("Pipeline halted: %s", done.reason, extra=job_extra(attempt))
    return rescued


class Maintainer:
    """Runs the periodic scans in a thread of their own, so that a slow scan (a big
    table, a degraded database) never sits on the path of ready jobs: the worker
    loop keeps claiming and recording meanwhile (docs/concepts/architecture.md, "The worker": ready work first).

    Args:
        interval: seconds between rounds.
        retention_seconds: delete runs that ended longer ago than this (``None``:
            keep them). A round prunes for at most ``interval`` seconds, so rescues
            are never more than a round late; with more left the next round starts
            at once, otherwise retention is looked at again `RETENTION_ROUNDS`
            rounds later.
    """

    RETENTION_ROUNDS = 10

    def __init__(self, store: Store, definitions: dict[str, Definition], interval: float,
                 retention_seconds: int | None = None, *, clock: DatabaseClock) -> None:
        self._store = store
        self._clock = clock  # the worker's: its database-clock offset is already measured
        self._retention = retention_seconds
        self._rounds_to_prune = 0  # the first round looks at retention
        self._definitions = definitions
        # Only a worker serving a limited step sweeps throttled jobs: the others would
        # take a write transaction every interval for nothing.
        self._limited = bool(step_limits(definitions))
        self._interval = interval
        self._wake = threading.Event()  # set by `stop` and by `watch`
        self._stopping = False
        self._watched = float("inf")  # the soonest deadline `watch` was told of (monotonic)
        self._thread = threading.Thread(target=self._run, daemon=True, name="ductline-maintenance")
        self._unavailable = FoldedWarning(log, OUTAGE_LOG_EVERY_SECONDS, clock.now)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=10)

    def watch(self, deadline_ms: int) -> None:
        """A run deadline this worker just learned of (epoch ms, database clock), e.g.
        from a claim: the thread looks at deadlines then, if that is sooner than it would.
        Then is when the database clock has surely reached it: looked at a moment
        early, the run is not due yet, and the look after that comes
        `DEADLINE_RECHECK_SECONDS` late -- while a worker holding a job of the run due
        just after the deadline may start it meanwhile, to be killed in flight
        instead of skipped (`ductline.model.stops.begun_by`)."""
        due = self._clock.passed(deadline_ms)
        if due < self._watched:
            self._watched = due
            self._wake.set()

    def _run(self) -> None:
        next_round = self._clock.now() + self._interval
        next_deadline = 0.0  # read at once
        while True:
            self._wake.wait(max(0.0, min(next_round, next_deadline, self._watched) - self._clock.now()))
            self._wake.clear()
            if self._stopping:
                return
            now = self._clock.now()
            if now < min(next_round, next_deadline, self._watched):
                continue  # told of a deadline: wait for it
            self._watched = float("inf")  # the read below sees it (its claim has committed)
            try:
                if now >= next_round:
                    next_round = now + self._interval
                    rescue_expired(self._store, self._definitions)
                    expire_due(self._store, self._definitions)
                    sweep_orphans(self._store)
                    if self._limited:
                        self._store.unthrottle_idle_keys()
                    if self._prune_due():
                        next_round = now
                else:
                    expire_due(self._store, self._definitions)
                next_deadline = self._next_deadline()
            except StoreError as exc:
                self._unavailable.warning("Maintenance skipped: database unavailable: %s", exc)
                next_deadline = next_round
            except Exception:  # keep maintaining; the next round may succeed
                log.exception("Maintenance failed")
                next_deadline = next_round

    def _next_deadline(self) -> float:
        """When the next run deadline or pause expiry of these pipelines is due
        (monotonic seconds; far ahead if none). The loop's own timer is set only when
        a claim runs dry: a worker whose slots stay busy would otherwise end a run
        with nothing running only at its next round, and might start one of its steps
        past the deadline meanwhile. A deadline that appears later (a run this worker
        starts) is told by `watch`; one another worker's claim starts, its own thread
        watches."""
        _, deadline_ms = self._store.next_wakeups(sorted(self._definitions))
        if deadline_ms is None:
            return float("inf")
        # Never sooner than DEADLINE_RECHECK_SECONDS from now: a deadline that cannot be
        # ended (its run is being stopped meanwhile) must not make this thread spin.
        return max(self._clock.passed(deadline_ms), self._clock.now() + DEADLINE_RECHECK_SECONDS)

    def _prune_due(self) -> bool:
        """Apply retention if it is time; ``True`` when more is left to prune now."""
        if self._retention is None:
            return False
        if self._rounds_to_prune > 0:
            self._rounds_to_prune -= 1
            return False
        report = prune(self._store, self._retention, max_seconds=self._interval, exclusive=True)
        if report.runs:
            log.info("Retention: deleted %d run(s) that ended more than %d s ago in %d transaction(s)",
                     report.runs, self._retention, report.transactions)
        if report.workers:
            log.info("Retention: deleted %d row(s) of workers gone more than %d s ago", report.workers,
                     self._retention)
        if report.complete or report.yielded:
            self._rounds_to_prune = self.RETENTION_ROUNDS
            return False
        return True
