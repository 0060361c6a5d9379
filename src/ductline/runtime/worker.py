"""The worker parent: claims jobs, runs each attempt in a killable child, keeps its
leases alive, enforces deadlines and records outcomes.

One thread runs the loop below. It never blocks on a child: it waits on the
children's pipes and process sentinels (and a wake-up pipe) with the nearest
deadline as its timeout, so a timeout fires at the deadline, not at the next poll.
Ready work comes first: recording and claiming happen before any periodic scan.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import time
import uuid
from multiprocessing.connection import wait
from typing import Any, Callable

from ductline.config import Settings
from ductline.dsl.graph import Definition
from ductline.errors import StoreError, StoreUnavailable
from ductline.runtime import abort, faults, maintenance
from ductline.runtime.outcomes import Outcome, job_extra, record_batch
from ductline.runtime.scheduler import Scheduler, earliest
from ductline.observability.events import EventName, emit
from ductline.runtime.children import SPARES, ChildEvents
from ductline.runtime.enforcer import Enforcer
from ductline.runtime.limits import step_limits
from ductline.runtime.slots import Child, Slot
from ductline.runtime.threads import ThreadAttempt
from ductline.runtime.wakeup import Wakeup
from ductline.store.claims import FIFO_EVERY
from ductline.store import Store, payloads
from ductline.store.records import ClaimedJob

log = logging.getLogger("ductline.worker")


class Worker(ChildEvents):
    """A worker parent process.

    Args:
        store: the database.
        definitions: pipelines this worker runs, by name.
        apps: the app specs children import (``module`` or ``path.py``).
        concurrency: number of child slots.
        settings: engine settings (lease, grace, intervals).
        sys_path: folders children put on ``sys.path`` before importing the apps.
    """

    def __init__(self, store: Store, definitions: dict[str, Definition], apps: list[str],
                 concurrency: int, settings: Settings, sys_path: list[str] | None = None, *,
                 fire_schedules: bool = True) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.store = store
        self.definitions = definitions
        self.pipelines = sorted(definitions)
        self.limits = step_limits(definitions)
        self._claims = 0  # every FIFO_EVERY-th claim is oldest-first (bounds starvation)
        self.apps = apps
        self.sys_path = sys_path or []
        self.settings = settings
        self.id = uuid.uuid4().hex
        self.payload_limits = payloads.Limits.from_settings(settings)
        self.slots = [Slot(i, max_output_bytes=self.payload_limits.max_bytes) for i in range(concurrency)]
        self.pending: list[Outcome] = []
        self.stopping = False
        self.interrupted = False  # a signal asked it to stop
        self.wakeup = Wakeup()
        self.enforcer = Enforcer(settings.kill_grace_seconds, settings.lease_seconds, self.wakeup.wake)
        self.scheduler = Scheduler(store, definitions, lambda: self._offset_ms + time.monotonic() * 1000,
                                   settings.poll_interval, enabled=fire_schedules)
        self._offset_ms = 0.0          # database clock minus monotonic clock, in ms
        self._next_heartbeat = 0.0
        self._next_maintenance = 0.0
        self._next_claim = 0.0
        self._timer: float | None = None
        self._deadline_timer: float | None = None
        self._shutdown_deadline: float | None = None
        self._store_backoff = 0.0
        self._spares: list[Child] = []
        self.spare_count = min(concurrency, SPARES)
        self._retired: list[ThreadAttempt] = []
        poll = settings.poll_interval
        # SQLite cannot notify other processes; poll it more often (the query is indexed).
        self._poll = min(poll, 0.25) if store.dialect.name == "sqlite" else poll

    # -- clock -------------------------------------------------------------------------
    def _measure_offset(self, db_ms: int, sent: float, received: float) -> None:
        self._offset_ms = db_ms - (sent + received) / 2 * 1000

    def to_monotonic(self, db_ms: int) -> float:
        """A database-clock time as this process's monotonic clock (seconds)."""
        return (db_ms - self._offset_ms) / 1000

    # -- lifecycle -----------------------------------------------------------------------
    def request_stop(self) -> None:
        """Stop claiming; running attempts get ``shutdown_grace_seconds`` to finish."""
        if not self.stopping:
            self.stopping = True
            self._shutdown_deadline = time.monotonic() + self.settings.shutdown_grace_seconds
            log.info("Worker stopping: no new claims, %d attempt(s) running",
                     sum(s.busy for s in self.slots))
        self.wakeup.wake()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: Any) -> None:
            self.interrupted = True
            if self.stopping and signum == signal.SIGINT:
                self._shutdown_deadline = time.monotonic()  # second Ctrl-C: stop now
            self.request_stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def run(self, stop_when: Callable[[], bool] | None = None) -> None:
        """Run until stopped (signal, `request_stop`, or ``stop_when()`` true)."""
        if not self._register():
            return
        for slot in self.slots:
            slot.child = Child(self.apps, self.sys_path)
        self._spares = [Child(self.apps, self.sys_path) for _ in range(self.spare_count)]
        listener = self.wakeup.listen(self.store)
        self.enforcer.start()
        maintainer = maintenance.Maintainer(self.store, self.definitions, self.settings.health_check_interval)
        maintainer.start()
        self.scheduler.start()
        next_stop_check = 0.0
        log.info("Worker %s started: %d slot(s), pipelines %s", self.id[:8], len(self.slots),
                 ", ".join(self.pipelines))
        try:
            while True:
                now = time.monotonic()
                if stop_when is not None and now >= next_stop_check:
                    next_stop_check = now + 0.1
                    if stop_when():
                        self.request_stop()
                self._flush()
                if self.stopping and self._finish_shutdown():
                    break
                if not self.stopping:
                    self._claim()
                self._expire_runs()
                self._heartbeat()
                self._maintain()
                self._wait()
                self._collect_undead()
        finally:
            maintainer.stop()
            self.enforcer.stop()
            self.wakeup.close(listener)
            children = [c for c in [s.child for s in self.slots] + self._spares if c]
            for child in children:
                child.stop()
            for child in children:
                child.join(timeout=5)
            try:
                self.store.worker_stopped(self.id)
            except StoreError:
                pass
            log.info("Worker %s stopped", self.id[:8])

    def undead_count(self) -> int:
        return sum(s.undead for s in self.slots)

    def status(self) -> str:
        if self.stopping:
            return "stopping"
        return "unhealthy" if self.undead_count() > self.settings.max_undead else "running"

    def _register(self) -> bool:
        """Register with the database, waiting for it if it is down (a worker started
        before its database must not crash-loop). False if stopped meanwhile."""
        delay = 0.5
        while True:
            try:
                sent = time.monotonic()
                self.store.register_worker(self.id, socket.gethostname(), os.getpid(), len(self.slots))
                self._measure_offset(self.store.now_ms(), sent, time.monotonic())
                return True
            except StoreError as exc:
                log.warning("Database unavailable at start (%s); retrying in %.1f s", exc, delay)
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                if self.stopping:
                    return False
                time.sleep(0.05)
            delay = min(delay * 2, 10.0)

    # -- phases ------------------------------------------------------------------------
    def _store_ok(self) -> bool:
        return time.monotonic() >= self._store_backoff

    def _store_failed(self, what: str, exc: StoreError) -> None:
        log.warning("Database unavailable during %s: %s", what, exc)
        self._store_backoff = time.monotonic() + 0.5

    def _flush(self) -> None:
        if not self.pending or not self._store_ok():
            return
        batch, self.pending = self.pending, []
        try:
            faults.checkpoint("before_record")
            record_batch(self.store, batch, self.definitions, self.settings.retry_delay, self.payload_limits)
        except StoreUnavailable as exc:
            self.pending = batch + self.pending
            self._store_failed("recording", exc)
            return
        except Exception as exc:  # noqa: BLE001 - one bad outcome must not stall the rest
            self._record_one_by_one(batch, exc)
        faults.checkpoint("after_record")
        self._next_claim = 0.0  # completions may have made new jobs ready

    def _record_one_by_one(self, batch: list[Outcome], first_error: Exception) -> None:
        """A batch failed for a reason other than an outage: record its outcomes one
        at a time, so one that cannot be recorded (and is logged and dropped: its
        lease expires and the job runs again) does not hold back the others."""
        log.warning("Recording a batch failed (%s); recording its %d outcome(s) one by one",
                    first_error, len(batch))
        for outcome in batch:
            try:
                record_batch(self.store, [outcome], self.definitions, self.settings.retry_delay,
                             self.payload_limits)
            except StoreUnavailable:
                self.pending.append(outcome)
            except Exception:  # noqa: BLE001
                log.exception("Cannot record this outcome; dropped (the job will run again)",
                              extra=job_extra(outcome.attempt))

    def _claim(self) -> None:
        if self.undead_count() > self.settings.max_undead:
            return  # unhealthy: stop claiming (the heartbeat reports it)
        free = [s for s in self.slots if not s.busy and s.child is not None and s.child.ready and not s.undead]
        now = time.monotonic()
        due = now >= self._next_claim or (self._timer is not None and now >= self._timer) \
            or self.wakeup.pending()
        if not free or not due or not self._store_ok():
            return
        self.wakeup.clear()
        self._timer = None  # fired (or superseded): the claim below sets the next one
        try:
            sent = time.monotonic()
            self._claims += 1
            jobs = self.store.claim(self.id, self.pipelines, len(free), self.settings.lease_ms,
                                    limits=self.limits, fifo=self._claims % FIFO_EVERY == 0)
            received = time.monotonic()
            if jobs:
                self._measure_offset(jobs[0].started_ms, sent, received)
                self.enforcer.renewed(sent)  # a claim is a fresh lease
                faults.checkpoint("after_claim")
            for slot, job in zip(free, jobs):
                self._start(slot, job)
                emit(EventName.ATTEMPT_STARTED, pipeline=job.pipeline, step=job.step, run_id=job.run_id,
                     job_id=job.job_id, attempt=job.attempt, deadline_ms=job.deadline_ms,
                     started_ms=job.started_ms,
                     pickup_latency_seconds=max(0, job.started_ms - job.not_before_ms) / 1000)
            if jobs:
                faults.checkpoint("after_dispatch")
            if len(jobs) == len(free):
                self._next_claim = 0.0  # there may be more
                return
            self._next_claim = now + self._poll
            # No ready job is left for a free slot: now (and only now) schedules fire.
            if self.scheduler.fire_due():
                self._next_claim = 0.0  # the runs just started have ready jobs
            upcoming, deadline = self.store.next_wakeups(self.pipelines)
            upcoming = earliest(upcoming, self.scheduler.next_fire_ms)
            # Small jitter spreads workers woken by the same not-before time.
            self._timer = None if upcoming is None else \
                self.to_monotonic(upcoming) + random.uniform(0.0005, 0.003)
            self._deadline_timer = None if deadline is None else self.to_monotonic(deadline)
        except StoreError as exc:
            self._store_failed("claiming", exc)

    def _expire_runs(self) -> None:
        """End runs whose deadline passed while none of their attempts ran here
        (e.g. during a delay); whichever worker notices first does it."""
        if self._deadline_timer is None or time.monotonic() < self._deadline_timer or not self._store_ok():
            return
        self._deadline_timer = None
        try:
            if abort.expire_due(self.store, self.definitions):
                log.info("Expired runs past their deadline")
        except StoreError as exc:
            self._store_failed("expiring runs", exc)
        self._next_claim = 0.0

    def _start(self, slot: Slot, job: ClaimedJob) -> None:
        deadline = None if job.deadline_ms is None else self.to_monotonic(job.deadline_ms)
        definition = self.definitions.get(job.pipeline)
        node = definition.nodes.get(job.step) if definition is not None else None
        runner: Any = slot.child
        if node is not None and node.options.isolation == "thread":
            runner = ThreadAttempt(slot.task(job))
        self.enforcer.watch(slot.index, runner, deadline)
        try:
            slot.assign(job, runner)
        except (OSError, ValueError):  # the child died before it got the task; its
            pass                       # sentinel reports the death as a crash


    def _heartbeat(self) -> None:
        now = time.monotonic()
        if self.wakeup.take_cancel():
            self._next_heartbeat = now  # a run was cancelled: find lost leases now
        if now < self._next_heartbeat:
            return
        busy = [s for s in self.slots if s.busy and not s.undead]
        # Outcomes not yet recorded (the database was down) keep their leases too.
        tokens = [s.job.lease_token for s in busy if s.job is not None] + \
            [o.attempt.lease_token for o in self.pending]
        try:
            sent = time.monotonic()
            db_now, renewed = self.store.renew_leases(
                self.id, tokens, self.settings.lease_ms, busy=len(busy),
                undead=self.undead_count(), status=self.status())
            self._measure_offset(db_now, sent, time.monotonic())
            self.enforcer.renewed(sent)
            self._next_heartbeat = now + self.settings.lease_seconds / 3
            for slot in busy:
                if slot.job is not None and slot.job.lease_token not in renewed:
                    log.warning("Lease lost; killing the attempt", extra=job_extra(self._attempt(slot)))
                    emit(EventName.LEASE_LOST, pipeline=slot.job.pipeline, **job_extra(self._attempt(slot)))
                    self.enforcer.kill(slot.index, "lease", grace=0.0)
        except StoreError as exc:
            # The enforcer kills the children before their leases can expire.
            self._store_failed("heartbeat", exc)
            self._next_heartbeat = now + 0.5

    def _maintain(self) -> None:
        """Health check of the children (no database). Scans that query the
        database run in the `Maintainer` thread."""
        now = time.monotonic()
        if now < self._next_maintenance:
            return
        self._next_maintenance = now + self.settings.health_check_interval
        self._retired = [t for t in self._retired if t.reap() is None]
        for slot in self.slots:  # idle children that died are replaced
            if slot.child is not None and not slot.busy and not slot.undead and slot.child.reap() is not None:
                slot.child = self._fresh_child()

    def _wait(self) -> None:
        now = time.monotonic()
        horizon = [now + self._poll, self._next_heartbeat, self._next_maintenance]
        free = any(not s.busy and not s.undead and s.child is not None and s.child.ready for s in self.slots)
        if self._timer is not None and free:  # with no free slot the timer cannot help
            horizon.append(self._timer)
        if self._deadline_timer is not None:
            horizon.append(self._deadline_timer)
        if self.pending:
            horizon.append(self._store_backoff)
        if self._shutdown_deadline is not None:
            horizon.append(self._shutdown_deadline)
        waitables: list[Any] = [self.wakeup.fileno()]
        for slot in self.slots:
            if slot.undead:
                continue
            if slot.child is not None:
                waitables.append(slot.child.sentinel)
                if not slot.busy and not slot.child.ready and not slot.child.eof:
                    waitables.append(slot.child.conn)  # its "ready" message
            if slot.busy and slot.runner is not None and not getattr(slot.runner, "eof", False):
                waitables.append(slot.runner.conn)
                if slot.runner is not slot.child:
                    waitables.append(slot.runner.sentinel)
        if free and not self.stopping and self._next_claim == 0.0:
            horizon.append(now)
        timeout = max(0.0, min(horizon) - now)
        for ready in wait(waitables, timeout):
            self._handle(ready)

    def _finish_shutdown(self) -> bool:
        """True when the loop may end: nothing busy, or the grace ran out."""
        busy = [s for s in self.slots if s.busy and not s.undead]
        if not busy:
            if not self.pending:
                return True
            # Outcomes wait for the database while their leases still hold: a result
            # recorded late is still the result; one dropped would run the step again.
            if time.monotonic() - self.enforcer.last_renewal < self.settings.lease_seconds * 0.75:
                return False
            log.error("Stopping with %d outcome(s) unrecorded: the database stayed unavailable; "
                      "their jobs will be re-run when their leases expire", len(self.pending))
            return True
        now = time.monotonic()
        if self._shutdown_deadline is not None and now >= self._shutdown_deadline:
            for slot in busy:
                self.enforcer.kill(slot.index, "shutdown")
        return False
