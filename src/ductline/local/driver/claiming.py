"""Filling the in-process driver's free slots: claiming ready jobs and starting
their attempts."""

from __future__ import annotations

import asyncio

from ductline.local.attempts import Started
from ductline.local.clock import activity
from ductline.local.driver.base import DriverBase
from ductline.local.running import Running
from ductline.observability.events import EventName, emit

# Leases are the worker's defence against a dead worker; nothing here can die
# without the run, so a lease never runs out within one.
LEASE_MS = 100 * 365 * 86_400_000


class ClaimTurn(DriverBase):
    """The turn's claim: free slots are filled, each claimed job's attempt started."""

    def _claim(self) -> None:
        free = self.options.concurrency - len(self.running)
        if free <= 0:
            return
        # Every queue: execute is the whole fleet in one process.
        jobs = self.store.claim(self.worker_id, list(self.definitions), free, LEASE_MS, limits=self.step_limits,
                                queues=self.queues)
        for job in jobs:
            if job.run_id == self.run_id:
                self.deadline.started(job.run_deadline_ms)
            running = Running(job)
            self.running[job.job_id] = running
            running.task = asyncio.get_running_loop().create_task(
                self._attempt(running), name=f"ductline {job.step}[{job.scope}] attempt {job.attempt}")

    async def _attempt(self, running: Running) -> None:
        async with activity(self.clock):  # a fake clock waits while the attempt works
            try:
                running.outcome = await self._runner(running.job).run(running.job, lambda: self._begin(running))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - a bug of the executor: end the run with it
                self.bug = self.bug or exc
            finally:
                self.wake()

    def _begin(self, running: Running) -> Started:
        """The attempt begins now: it is bound by its step timeout and the run deadline."""
        job = running.job
        now_ms = self.store.now_ms()
        mine = job.run_id == self.run_id  # else a child run's: its deadline is the store's (_end_children_due)
        if mine and not self._begun:  # the run's clock starts with its first attempt, not its claim
            self._begun = True
            self.deadline.began(self.store.restart_run_deadline(job.run_id, job.job_id, job.attempt, now_ms))
        started = running.begin(self._runner(job).node(job.step), self.deadline.bound() if mine else None, now_ms,
                                self.clock.now())
        begun_ms = running.begun_ms or 0
        emit(EventName.ATTEMPT_STARTED, pipeline=job.pipeline, step=job.step, run_id=job.run_id,
             job_id=job.job_id, attempt=job.attempt, started_ms=begun_ms,
             pickup_latency_seconds=max(0.0, (begun_ms - job.not_before_ms) / 1000), deadline_ms=job.deadline_ms)
        if mine:
            self.tracker.started(job)
        return started
