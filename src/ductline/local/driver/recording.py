"""Recording the in-process driver's finished attempts: handed to the engine in
one batch, as a worker records them."""

from __future__ import annotations

from ductline.engine.batch import Outcome as Recording, record_batch
from ductline.engine.record import Outcome as Recorded
from ductline.local.driver.stops import StopTurn
from ductline.local.running import Running
from ductline.model.states import JobStatus, RunStatus


class RecordTurn(StopTurn):
    """The turn's recording (a fail-fast halt or the run deadline it records reaps
    the siblings' attempts: `StopTurn`)."""

    def _record(self) -> None:
        """Hand the finished attempts to the engine, in one batch."""
        done = [r for r in self.running.values() if r.task is not None and r.task.done()]
        if not done:
            return
        for r in done:
            del self.running[r.job.job_id]
        done = [r for r in done if r.outcome is not None and not r.lost]
        if not done:
            return
        recordings = [self._recording(r) for r in done]
        results = record_batch(self.store, recordings, self.definitions, self.options.retry_delay,  # type: ignore[arg-type]
                               self.limits, now_ms=self.store.now_ms)
        waiting = None
        moved = False
        for r, recorded in zip(done, results):
            if recorded.outcome is Recorded.AWAITING:
                self._know_children(r.job.run_id)
            if r.job.run_id != self.run_id:  # a child run's attempt: the caller follows this run's steps
                moved = True  # its end may have woken a step run of this run
                continue
            if recorded.outcome is Recorded.RETRY and waiting is None:
                waiting = JobStatus.HELD if self.status() is RunStatus.HALTED else JobStatus.PENDING
            status = {Recorded.COMPLETED: JobStatus.COMPLETED, Recorded.RELEASED: JobStatus.PENDING,
                      Recorded.FAILED: JobStatus.FAILED, Recorded.AWAITING: JobStatus.AWAITING}.get(
                recorded.outcome, waiting)
            if recorded.outcome is Recorded.LOST:
                moved = True  # a stop recorded it (its run deadline): reported with the stop's result
                self.tracker.ended_by_others([(r.job, self._seconds(r))])
                continue
            assert r.outcome is not None and status is not None
            self.tracker.ended(r.job, self._seconds(r), status.value, r.outcome.result.value, r.outcome.error_type,
                               r.outcome.error)
            moved = moved or recorded.halted or recorded.run_failed or bool(recorded.paused or recorded.skipped
                                                                             or recorded.deferred)
        if moved:
            self._reap_lost()  # a fail-fast halt or the run deadline took the siblings' leases
            self.tracker.sync()

    def _recording(self, r: Running) -> Recording:
        """The engine's record of a finished attempt; one the run deadline killed ends
        the whole run (`ductline.engine.stop.expire`), as on a worker."""
        return r.recording(self._runner(r.job).node(r.job.step))
