"""The worker parent: claims jobs, runs each attempt in a killable child, keeps its
leases alive, enforces deadlines and records outcomes.

One thread runs the loop below (outcomes are recorded on a thread of their own,
`ductline.runtime.outbox`). It never blocks on a child: it waits on the
children's pipes and process sentinels (and a wake-up pipe) with the nearest
deadline as its timeout, so a timeout fires at the deadline, not at the next poll.
Ready work comes first: recording and claiming happen before any periodic scan.

The worker composes its parts and runs their phases in order; each part owns one
thing: `Outbox` (outcomes to record), `Claimer` (claiming and starting attempts),
`Heartbeat` (leases), `ChildEvents` (what children do), `Spares` (warm children),
`ductline.execution.enforcer.Enforcer` (the kill path, in its own thread), and a
`ductline.clock.DatabaseClock` (every time it compares).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import uuid
from typing import Any, Callable

from ductline.clock import DatabaseClock
from ductline.config import Settings
from ductline.dsl.graph import Definition
from ductline.errors import StoreError
from ductline.execution.enforcer import LEASE_SAFETY_SHARE, Enforcer, Reason
from ductline.model.outcomes import GIVEN_BACK, KILLED_WITH_CHILD
from ductline.model.states import AttemptResult, WorkerStatus
from ductline.model.workers import Condition, condition
from ductline.observability import probes
from ductline.runtime import faults, maintenance
from ductline.runtime.ahead import Ahead
from ductline.runtime.children import ChildEvents
from ductline.runtime.claimer import Claimer
from ductline.runtime.deaths import DeathClock
from ductline.runtime.heartbeat import Heartbeat
from ductline.runtime.outbox import Outage, Outbox
from ductline.engine.batch import Outcome, job_extra
from ductline.runtime.prefetch import Prefetcher
from ductline.runtime.readiness import ready as wait_ready
from ductline.engine.record import Attempt
from ductline.runtime.scheduler import Scheduler
from ductline.runtime.shutdown import ExitGuard
from ductline.runtime.slots import Slot
from ductline.runtime.spares import Spares
from ductline.runtime.starts import Starts
from ductline.runtime.wakeup import Wakeup
from ductline.store import Store, payloads
from ductline.store.records import ClaimedJob, LoadedDefinition

log = logging.getLogger("ductline.worker")

# The longest the warm spares wait for the slots' children to be ready (seconds).
SPARES_AT_THE_LATEST_SECONDS = 5.0


class Worker:
    """A worker parent process.

    Args:
        store: the database.
        definitions: pipelines this worker runs, by name.
        apps: the app specs children import (``module`` or ``path.py``).
        concurrency: number of child slots.
        settings: engine settings (lease, grace, intervals).
        sys_path: folders children put on ``sys.path`` before importing the apps.
        fire_schedules: ``False`` for a worker that neither writes nor fires schedules.
        clock: the monotonic clock (default: the system's), read through the
            database-clock conversion the worker measures.

    Raises:
        ValueError: ``concurrency`` is below 1.
    """

    def __init__(self, store: Store, definitions: dict[str, Definition], apps: list[str],
                 concurrency: int, settings: Settings, sys_path: list[str] | None = None, *,
                 fire_schedules: bool = True, clock: DatabaseClock | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.store = store
        self.definitions = definitions
        self.pipelines = sorted(definitions)
        self.settings = settings
        self.id = uuid.uuid4().hex
        self.clock = clock if clock is not None else DatabaseClock()
        self.stopping = False
        self.interrupted = False  # a signal asked it to stop
        self._shutdown_deadline: float | None = None
        self._next_maintenance = 0.0
        self._spares_due: float | None = None  # monotonic: start the spares by then at the latest
        limits = payloads.Limits.from_settings(settings)
        self.slots = [Slot(i, limits.max_bytes, log_level=settings.step_log_level,
                           log_max_bytes=settings.step_log_max_bytes) for i in range(concurrency)]
        self.wakeup = Wakeup(origin=self.id)
        self.enforcer = Enforcer(settings.kill_grace_seconds, self.wakeup.wake, self.clock,
                                 lease_seconds=settings.lease_seconds,
                                 undead_after=settings.undead_after_seconds)
        # At most one spare per slot: slots that time out together (claimed together,
        # same timeout) each get a ready child at once.
        # Children that fail to start make the worker unhealthy: its row says so at once.
        self.starts = Starts(changed=lambda: self.heartbeat.soon(), clock=self.clock.now,
                             stopping=lambda: self.stopping)
        self.spares = Spares(apps, sys_path or [], min(concurrency, settings.spare_children), limits.message_cap,
                             self.starts)
        for slot in self.slots:
            slot.spares = self.spares
        self.outage = Outage(self.clock)
        self.ahead = Ahead()
        # Whether a cancel made in another process reaches this worker as a notification
        # (PostgreSQL LISTEN); if not, it is found by reading the leases.
        notified = bool(getattr(store.dialect, "listens", False))
        self.scheduler = Scheduler(store, definitions, self.clock, settings.poll_interval, enabled=fire_schedules)
        self.claimer = Claimer(store, definitions, settings, self.id, self.slots, clock=self.clock,
                               enforcer=self.enforcer, wakeup=self.wakeup, scheduler=self.scheduler,
                               outage=self.outage, healthy=lambda: self.undead_count() <= settings.max_undead,
                               ahead=self.ahead, renew_now=lambda: self.heartbeat.soon())
        self.outbox = Outbox(store, definitions, settings.retry_delay, limits, self.outage, self.clock.db_now_ms,
                             recorded=self.claimer.soon, wake=self.wakeup.nudge,
                             timed=self.ahead.observe_recording, origin=self.id,
                             max_releases=settings.max_releases)
        self.claimer.on_past_deadline = self._past_deadline
        self.deaths = DeathClock(self.clock)
        self.claimer.on_start = self.deaths.watch
        self.outbox.claim_in = lambda: None if self.stopping or not self.outage.ok() else self.claimer.claim_in()
        self.outbox.urgent = lambda: self.stopping or self.claimer.hungry()
        self.outbox.slot_free = lambda: any(s.free for s in self.slots)
        # Nor a job claimed ahead or held for its time: recording on the loop would hold
        # up its start (a burst of delayed runs waited for each other's commits).
        self.outbox.alone = lambda: not any(s.busy or s.sent for s in self.slots) \
            and not len(self.ahead) and not self.ahead.early()
        self.prefetcher = Prefetcher(self.slots, self.ahead, definitions, clock=self.clock,
                                     begin=self.claimer.begin_prefetched,
                                     kill_lost=lambda slot: self.enforcer.kill(slot.index, Reason.LEASE, grace=0.0),
                                     killing=self._killing, release_begun=self._release_begun,
                                     held=self.claimer.successors.held)
        self.heartbeat = Heartbeat(store, settings, self.id, self.slots, clock=self.clock, enforcer=self.enforcer,
                                   wakeup=self.wakeup, outbox=self.outbox, outage=self.outage,
                                   report=self.condition, ahead=self.ahead,
                                   prefetcher=self.prefetcher,
                                   check_every=None if notified else self.claimer.poll,
                                   register=self._register_row)
        # Unrecorded outcomes may wait for the database while their leases hold.
        self.exit_guard = ExitGuard(self.clock, grace=settings.shutdown_grace_seconds, at_stake=self._at_stake,
                                    overtime=settings.kill_grace_seconds + settings.lease_seconds * LEASE_SAFETY_SHARE
                                    + 1.0)
        self.events = ChildEvents(store, self.slots, limits, clock=self.clock, enforcer=self.enforcer,
                                  outbox=self.outbox, outage=self.outage, spares=self.spares, wakeup=self.wakeup,
                                  stopping=lambda: self.stopping, slot_ready=self.claimer.soon,
                                  attempt_ended=self.ahead.observe, prefetcher=self.prefetcher)
        self.events.died_at = self.deaths.died_at
        self.events.unstarted = self._unstarted

    # -- lifecycle -----------------------------------------------------------------------
    def request_stop(self, *, interrupt: bool = False) -> None:
        """Stop claiming; running attempts get ``shutdown_grace_seconds`` to finish.
        ``interrupt``: a Ctrl-C asked it, and a second one ends the grace at once: the
        line says so, as it says how long it waits and for which steps (a silent wait
        of the whole grace reads like a hang)."""
        if not self.stopping:
            self.stopping = True
            self._shutdown_deadline = self.clock.now() + self.settings.shutdown_grace_seconds
            steps = [s.job.step for s in self.slots if s.job is not None]
            if not steps:
                log.info("Worker stopping: no new claims, 0 attempt(s) running")
            else:
                shown = ", ".join(sorted(set(steps)))
                log.info("Worker stopping: no new claims, %d attempt(s) running (%s); waiting up to %s s "
                         "(shutdown_grace_seconds) for them to finish%s", len(steps), shown,
                         f"{self.settings.shutdown_grace_seconds:g}",
                         "; Ctrl-C again stops them now (they run again later)" if interrupt else "")
        self.wakeup.wake()

    def install_signal_handlers(self, *, bound_exit: bool = False, guard: ExitGuard | None = None) -> None:
        """SIGTERM and SIGINT stop the worker (`request_stop`); a second SIGINT ends the
        grace at once. ``bound_exit``: the process also ends when the database holds it
        past the grace (`ductline.runtime.shutdown.ExitGuard`; for a process that is
        only this worker). ``guard``: an exit guard already listening since the process
        started (`bound_startup`), handed to this worker instead of a new one."""
        def handler(signum: int, frame: Any) -> None:
            self.interrupted = True
            if self.stopping and signum == signal.SIGINT:
                self._shutdown_deadline = self.clock.now()  # second Ctrl-C: stop now
            self.request_stop(interrupt=signum == signal.SIGINT)

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        if guard is not None:
            guard.hand_over(self._at_stake, self.exit_guard.overtime)
            self.exit_guard = guard
        elif bound_exit:
            self.exit_guard.listen()

    def run(self, stop_when: Callable[[], bool] | None = None) -> None:
        """Run until stopped (signal, `request_stop`, or ``stop_when()`` true)."""
        if not self._register():
            return
        for slot in self.slots:
            slot.child = self.spares.new_child()
        self._spares_due = self.clock.now() + SPARES_AT_THE_LATEST_SECONDS
        listener = self.wakeup.listen(self.store)
        self.enforcer.start()
        maintainer = maintenance.Maintainer(self.store, self.definitions, self.settings.health_check_interval,
                                            self.settings.retention_seconds, clock=self.clock)
        self.claimer.on_run_deadline = maintainer.watch
        maintainer.start()
        self.scheduler.start()
        probes.watch(self.id, self._unhealthy)  # this process's /readyz, if it serves one
        next_stop_check = 0.0
        log.info("Worker %s started: %d slot(s), pipelines %s", self.id[:8], len(self.slots),
                 ", ".join(self.pipelines))
        try:
            while True:
                now = self.clock.now()
                if stop_when is not None and now >= next_stop_check:
                    next_stop_check = now + 0.1
                    if stop_when():
                        self.request_stop()
                self._give_back()
                self._flush()
                if self.stopping and self._finish_shutdown():
                    break
                if not self.stopping:
                    self._claim()
                self._expire_runs()
                self._heartbeat()
                self._maintain()
                self._warm_spares()
                self._wait()
                self._collect_undead()
        finally:
            probes.watch(self.id, None)
            self.exit_guard.finishing()  # stopping on its own: the guard gives it time to finish
            self.outbox.close()
            self.deaths.close()
            maintainer.stop()
            self.enforcer.stop()
            self.wakeup.close(listener)
            children = [c for c in [s.child for s in self.slots] + self.spares.children() if c]
            children += [c for s in self.slots for c in s.reap_retired()]
            for child in children:
                child.stop()
            for child in children:
                child.join(timeout=5)
            try:
                self.store.worker_stopped(self.id)
            except StoreError:
                pass
            log.info("Worker %s stopped", self.id[:8])

    def _at_stake(self) -> bool:
        """An attempt runs (or a child holds a job sent ahead) or an outcome waits to be
        recorded: read from the exit guard's thread, a snapshot is enough."""
        return bool(len(self.outbox)) or any((s.busy or s.sent) and not s.undead for s in list(self.slots))

    def _killing(self, index: int) -> bool:
        watch = self.enforcer.state(index)
        return watch is not None and watch.reason is not None

    def undead_count(self) -> int:
        return sum(s.undead for s in self.slots)

    def condition(self) -> Condition:
        """Its status and problem for its row (`ductline.model.workers.condition`)."""
        return condition(stopping=self.stopping, undead=self.undead_count(), max_undead=self.settings.max_undead,
                         failed_starts=self.starts.failures(), start_error=self.starts.error)

    def status(self) -> str:
        return self.condition().status.value

    def _unhealthy(self) -> str | None:
        """Why it is unhealthy (its row's words), or ``None``; read from a probe's thread."""
        said = self.condition()
        if said.status is not WorkerStatus.UNHEALTHY:
            return None
        return said.problem or f"{self.undead_count()} undead slots, more than max_undead {self.settings.max_undead}"

    def _register(self) -> bool:
        """Register with the database, waiting for it if it is down (a worker started
        before its database must not crash-loop). False if stopped meanwhile."""
        delay = 0.5
        while True:
            try:
                sent = self.clock.now()
                self._register_row()
                self.clock.measure(self.store.now_ms(), sent, self.clock.now())
                faults.checkpoint("after_register")
                return True
            except StoreError as exc:
                log.warning("Database unavailable at start (%s); retrying in %.1f s", exc, delay)
            deadline = self.clock.now() + delay
            while self.clock.now() < deadline:
                if self.stopping:
                    return False
                self.clock.sleep(0.05)
            delay = min(delay * 2, 10.0)

    def _register_row(self) -> None:
        """Write this worker's row: its host, process, slots, queues and definitions.

        Raises:
            StoreError: the database could not be written.
        """
        self.store.register_worker(self.id, self.settings.hostname or socket.gethostname(), os.getpid(),
                                   len(self.slots), queues=self.settings.queue_names,
                                   definitions=[LoadedDefinition.of(d) for d in self.definitions.values()])

    # -- the loop's phases (named, so a profile of the loop reads as its phases) -----------
    def _give_back(self) -> None:
        """Give back the jobs claimed ahead when the worker stops, or when they
        waited too long behind attempts that turned out long: released at once
        (nothing charged), so they need not wait for their leases to expire."""
        if self.stopping:
            self.prefetcher.take_back(self.clock.now(), stopping=True)  # to the queue, then given back
        if not (len(self.ahead) or self.ahead.early()):
            return
        if not self.stopping and not self.ahead.overdue(self.clock.now(), sum(1 for s in self.slots if not s.undead)):
            return
        jobs = self.ahead.drain(overdue=not self.stopping)
        why = "worker shut down" if self.stopping else "the attempts before it on its slot ran long"
        # Say what happened to the jobs in an operator's words (a job "claimed ahead" is
        # one reserved for a busy slot), and that nothing is lost. DEBUG: it is routine
        # scheduling, and at INFO it read like an error on a first run.
        log.debug("Returned %d job(s) reserved by this worker to the queue, not started (%s); "
                 "any worker may take them", len(jobs),
                 "worker shut down" if self.stopping else "the attempts before them ran long")
        for job in jobs:
            self._release(job, job.started_ms, begun=False, error=f"{GIVEN_BACK}: {why}")
        self.claimer.soon()

    def _release_begun(self, job: ClaimedJob, started_ms: int) -> None:
        """A job sent ahead that its child started just as the child was killed for the
        attempt before it (junk it sent, a timeout, a cancel): it died there, through
        no fault of its own.
        Recorded released (no budget charged) as an attempt that began, so the step
        runs again under the next attempt number, never twice under one."""
        attempt = self._release(job, started_ms, begun=True, error=KILLED_WITH_CHILD)
        log.warning("A job sent ahead started in a child being killed; released to run again",
                    extra=job_extra(attempt))
        self.claimer.soon()

    def _unstarted(self, job: ClaimedJob, confirmed: float) -> None:
        """A job whose task reached a child that retired before it began: queued again
        (its lease is held), to start on the next free slot with its clocks from then."""
        self.ahead.add([job], confirmed, run_deadline=lambda j: None if j.run_deadline_ms is None
                       else self.clock.to_monotonic(j.run_deadline_ms))

    def _past_deadline(self, job: ClaimedJob) -> None:
        """A job claimed after its run's deadline passed is not started: recorded as the
        deadline's stop (the run ends), as an attempt killed at it would be."""
        attempt = Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token,
                          job.started_ms, job.limit_key, job.deadline_ms, begun=False)
        log.info("Not starting a job claimed after its run's deadline", extra=job_extra(attempt))
        self.outbox.add(Outcome(attempt, job.pipeline, AttemptResult.TIMED_OUT, run_deadline=True))

    def _release(self, job: ClaimedJob, started_ms: int | None, *, begun: bool, error: str) -> Attempt:
        """Record a claimed job given back without charging a budget (`Released`)."""
        attempt = Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token,
                          started_ms, job.limit_key, job.deadline_ms, begun=begun)
        self.outbox.add(Outcome(attempt, job.pipeline, AttemptResult.CANCELLED, release=True, error=error))
        return attempt

    def _flush(self) -> None:
        self.outbox.flush()

    def _claim(self) -> None:
        # A batch being recorded claims in its own transaction; claiming beside it
        # would ask twice for the same free slots.
        if not self.outbox.recording:
            self.claimer.claim()

    def _expire_runs(self) -> None:
        self.claimer.expire_runs()

    def _heartbeat(self) -> None:
        self.heartbeat.beat()

    def _collect_undead(self) -> None:
        self.events.collect_undead()

    def _warm_spares(self) -> None:
        """Keep the warm spares: replace those taken (`Spares.fresh`), after this turn
        recorded and claimed, so a killed attempt's successor and its outcome never
        wait for a process to start.

        The first spares start once every slot's child is ready (or gone), not
        beside them: started together, they compete for the CPU with the children
        the first attempts wait for (on 2 cores, a worker with 2 slots and 2 spares
        started its first attempt about a third later). A slot child that never
        says it is ready delays them by `SPARES_AT_THE_LATEST_SECONDS` at most.

        While children keep failing to start, the next start waits its turn
        (`Starts.due_at`): a slot left without a child gets one here then."""
        if not self.stopping and self.starts.due_at() is None:
            for slot in self.slots:
                if slot.child is None and not slot.undead:
                    slot.child = self.spares.fresh()
        if self._spares_due is None:
            if not self.stopping:
                self.spares.fill()
            return
        settled = all(s.undead or s.child is None or s.child.ready or s.child.eof for s in self.slots)
        if settled or self.clock.now() >= self._spares_due:
            self._spares_due = None
            self.spares.fill()

    def _maintain(self) -> None:
        """Health check of the children (no database): idle children that died are
        replaced. Scans that query the database run in the `Maintainer` thread."""
        now = self.clock.now()
        if now < self._next_maintenance:
            return
        self._next_maintenance = now + self.settings.health_check_interval
        self.events.reap_retired()
        for slot in self.slots:
            slot.reap_retired()
            if slot.child is not None and not slot.busy and not slot.undead and slot.child.reap() is not None:
                slot.child = self.spares.fresh()

    def _wait(self) -> None:
        """Wait for the first of: a child's message or death, the wake-up pipe, or
        the nearest time something is due."""
        if not self.stopping:
            self._hand_out()  # a queued job whose lease was just renewed
        now = self.clock.now()
        self.prefetcher.take_back(now, stopping=self.stopping)
        # While a batch is being recorded the loop does not claim (the recording claims,
        # and wakes the loop when it is done): a due claim must not make it spin meanwhile.
        free = any(s.free for s in self.slots) and not self.outbox.recording
        horizon = [now + self.claimer.poll, self.heartbeat.next_at, self._next_maintenance,
                   *self.claimer.wake_times(free, self.stopping)]
        for due in (self.outbox.retry_at(), self._shutdown_deadline, self.ahead.due_at(), self.prefetcher.due_at(),
                    None if self.stopping else self.starts.due_at(),
                    None if self.stopping else self.ahead.next_start(self.clock.passed)):
            if due is not None:
                horizon.append(due)
        waitables: list[Any] = [self.wakeup.fileno()]
        for slot in self.slots:
            if slot.undead:
                continue
            if slot.child is not None:
                waitables.append(slot.child.sentinel)
                if not slot.busy and not slot.child.eof:
                    # Its READY message, news of the task sent ahead, or a RETIRE sent
                    # after its result (`ductline.execution.protocol.Task.result_first`):
                    # unread, the child would idle on with what its attempt left running.
                    waitables.append(slot.child.conn)
            if slot.busy and slot.runner is not None:
                if not slot.runner.eof:
                    waitables.append(slot.runner.conn)
                if slot.runner is not slot.child:  # its end is watched after its pipe's EOF too
                    waitables.append(slot.runner.sentinel)
        timeout = max(0.0, min(horizon) - now)
        for ready in wait_ready(waitables, timeout):
            self.events.handle(ready)
        if not self.stopping:
            # A child that just finished gets its next job now, before its result is
            # recorded (jobs claimed ahead; `ductline.runtime.ahead`).
            self._hand_out()

    def _hand_out(self) -> None:
        """Jobs claimed ahead go to free slots, then ahead to busy children
        (`ductline.runtime.prefetch`); what a replaced child never started first
        returns to the queue."""
        self.prefetcher.reconcile()
        self.claimer.fill_free()
        self.prefetcher.offer()

    def _finish_shutdown(self) -> bool:
        """True when the loop may end: nothing busy, or the grace ran out."""
        self.prefetcher.reconcile()
        busy = [s for s in self.slots if (s.busy or s.sent) and not s.undead]
        if not busy:
            if not self.outbox:
                return True
            # Outcomes wait for the database while their leases still hold: a result
            # recorded late is still the result; one dropped would run the step again.
            if self.clock.now() - self.enforcer.last_renewal < self.settings.lease_seconds * LEASE_SAFETY_SHARE:
                return False
            log.error("Stopping with %d outcome(s) unrecorded: the database stayed unavailable; "
                      "their jobs will be re-run when their leases expire", len(self.outbox))
            return True
        if self._shutdown_deadline is not None and self.clock.now() >= self._shutdown_deadline:
            self.exit_guard.finishing()  # on its way out on its own, not held by the database
            for slot in busy:
                if slot.busy:
                    self.enforcer.kill(slot.index, Reason.SHUTDOWN)
                else:  # its child started a task sent ahead and has not said so yet
                    slot.retire_child("the worker stops")
        return False
