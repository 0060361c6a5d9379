"""What stops took away from the in-process driver's run, and what is due: attempts
whose leases a stop revoked are killed; the run deadline, expired pauses and waits,
and child runs past their deadlines are ended."""

from __future__ import annotations

from ductline.engine import childruns, stop
from ductline.engine.lost import Lost, report_lost
from ductline.local.driver.base import DriverBase
from ductline.observability.events import EventName, emit


class StopTurn(DriverBase):
    """The turn's stops: lost attempts reaped, what is due ended."""

    def _reap_lost(self) -> None:
        """Attempts whose leases a stop revoked (a cancel, the run deadline, an expired
        pause, a fail-fast halt) are killed; the stop recorded them already."""
        live = [r for r in self.running.values() if not r.lost]
        if not live:
            return
        held = self.store.leases_held([r.job.lease_token for r in live])
        lost = [r for r in live if r.job.lease_token not in held]
        if not lost:
            return
        self.tracker.ended_by_others([(r.job, self._seconds(r)) for r in lost])
        for r in lost:
            r.lost = True
            if r.task is not None and not r.task.done():
                r.task.cancel()  # it kills the child as it unwinds
        # Reported as the stop recorded them, as a worker reports them (`ductline.engine.lost`).
        report_lost(self.store, [Lost(r.job.pipeline, r.job.step, r.job.run_id, r.job.job_id, r.job.attempt)
                                 for r in lost])
        self.tracker.sync()

    def _end_due(self) -> None:
        """End what is due: the run deadline (on the store's clock, or in real time),
        expired pauses."""
        changed = False
        if self.deadline.due(self.store.now_ms):
            try:
                with self.store.transaction() as tx:
                    ended = stop.expire(tx, self.definition, self.run_id)
            except stop.Unchanged:
                ended = False
            if ended:
                changed = True
                emit(EventName.PIPELINE_FAILED, pipeline=self.definition.name, run_id=self.run_id)
        if stop.expire_pauses(self.store, self.definitions):
            changed = True
        if self.definition.waits and stop.expire_waits(self.store, self.definitions):
            changed = True
        if len(self.definitions) > 1 and self._end_children_due():
            changed = True
        if changed:
            self._reap_lost()
            self.tracker.sync()

    def _end_children_due(self) -> bool:
        """Child runs past their own deadlines are ended, stops of their parents carried
        to them, parents whose children ended woken (`childruns.sweep`)."""
        ended = 0
        for row in self.store.due_deadlines():
            if row["id"] == self.run_id:
                continue  # this run's deadline is the driver's (above)
            try:
                with self.store.transaction() as tx:
                    ended += stop.expire(tx, self.definitions.get(row["pipeline"]), row["id"])
            except stop.Unchanged:
                continue
            childruns.committed(tx)
        return bool(ended + childruns.sweep(self.store, self.definitions))
