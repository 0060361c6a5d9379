"""Periodic maintenance: rescuing the jobs of workers that died.

A worker that dies (SIGKILL, OOM, power loss) stops renewing its leases. Once a
lease has expired on the database clock, any worker records the attempt
``crashed`` and re-queues the job under its crash budget. The write is fenced by
the lease token, so a slow-but-alive owner and a rescuer can never both win.
"""

from __future__ import annotations

import logging
import threading

from ductline.dsl.graph import Definition
from ductline.model.limits import step_limits
from ductline.model.outcomes import Ended
from ductline.model.states import AttemptResult
from ductline.operations.stop import expire_due, sweep_orphans
from ductline.observability.events import EventName, emit
from ductline.runtime import record
from ductline.runtime.outcomes import job_extra
from ductline.errors import StoreError
from ductline.store import Store

log = logging.getLogger("ductline.worker")


def rescue_expired(store: Store, definitions: dict[str, Definition], limit: int = 100) -> int:
    """Mark expired attempts crashed and re-queue or fail their jobs; returns how many."""
    rescued = 0
    for lease in store.expired_leases(limit):
        attempt = record.Attempt(lease.job_id, lease.run_id, lease.step, "", lease.attempt, lease.lease_token)
        with store.transaction() as tx:
            tx.lock_runs([lease.run_id])
            done = record.failure(tx, definitions.get(lease.pipeline), attempt,
                                  Ended(AttemptResult.CRASHED, "WorkerLost",
                                        "the lease expired: its worker stopped heartbeating"), None)
        if done.outcome != "lost":
            rescued += 1
            emit(EventName.JOB_COMPLETED, pipeline=lease.pipeline, step=lease.step, run_id=lease.run_id,
                 job_id=lease.job_id, attempt=lease.attempt, result=AttemptResult.CRASHED.value, runtime_seconds=None,
                 error_type="WorkerLost", outcome=done.outcome)
            if done.halted:
                emit(EventName.PIPELINE_HALTED, pipeline=lease.pipeline, run_id=lease.run_id, reason=done.reason)
            log.warning("Job crashed: lease expired, %s", done.outcome, extra=job_extra(attempt))
            if done.halted:
                log.error("Pipeline halted: %s", done.reason, extra=job_extra(attempt))
    return rescued


class Maintainer:
    """Runs the periodic scans in a thread of their own, so that a slow scan (a big
    table, a degraded database) never sits on the path of ready jobs: the worker
    loop keeps claiming and recording meanwhile (docs/concepts/architecture.md, "The worker": ready work first)."""

    def __init__(self, store: Store, definitions: dict[str, Definition], interval: float) -> None:
        self._store = store
        self._definitions = definitions
        # Only a worker serving a limited step sweeps throttled jobs: the others would
        # take a write transaction every interval for nothing.
        self._limited = bool(step_limits(definitions))
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ductline-maintenance")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                rescue_expired(self._store, self._definitions)
                expire_due(self._store, self._definitions)
                sweep_orphans(self._store)
                if self._limited:
                    self._store.unthrottle_idle_keys()
            except StoreError as exc:
                log.warning("Maintenance skipped: database unavailable: %s", exc)
            except Exception:  # keep maintaining; the next round may succeed
                log.exception("Maintenance failed")
