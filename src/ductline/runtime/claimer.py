"""Claiming ready jobs for a worker's free slots and starting their attempts.

Ready work first (docs/howto/schedules.md, where schedules fire): a claim that
fills every free slot claims again at once; only when no ready job is left for a free slot do
schedules fire and does the worker learn when to wake next -- the earliest
not-before time or schedule tick (a timer, so a delay ends within milliseconds)
and the earliest run deadline (so a run past its deadline while none of its
attempts runs here is ended on time).

While attempts are short, a claim also fills a small queue of jobs claimed ahead
(`ductline.runtime.ahead`): a slot whose child finished takes its next job from
there at once (`fill_free`), and the claims that refill the queue ride along with
the recording of results (`claim_in`).

An attempt about to be killed at its deadline gets its slot's next job claimed
ahead too (`ductline.runtime.successors`), and a delayed job is claimed shortly
before its not-before time (`ductline.runtime.horizon`): a claim that found no
more ready jobs also takes those; their attempts' clocks start when they start, as
a queued job's do (`_start_queued`).
"""

from __future__ import annotations

import random
from typing import Callable

from ductline.clock import DatabaseClock
from ductline.config import Settings
from ductline.dsl.graph import Definition, find_node, served_definitions
from ductline.dsl.options import StepOptions
from ductline.errors import StoreError
from ductline.execution.enforcer import Enforcer
from ductline.model.claim_order import FIRST_STEP
from ductline.model.limits import step_limits
from ductline.observability.events import EventName, emit
from ductline.engine.batch import Handoff
from ductline.engine.stop import expire_due
from ductline.runtime import faults
from ductline.runtime.ahead import Ahead
from ductline.runtime.horizon import Horizon
from ductline.runtime.outbox import Outage
from ductline.runtime.scheduler import Scheduler
from ductline.runtime.slots import Runner, Slot
from ductline.runtime.successors import Successors
from ductline.runtime.threads import ThreadAttempt
from ductline.runtime.wakeup import Wakeup
from ductline.store import Store
from ductline.store.claims import FIFO_EVERY
from ductline.store.records import ClaimedJob
from ductline.store.store import Tx


class Claimer:
    """Claims jobs for free slots and hands them to the slots' children.

    Args:
        worker_id: the claiming worker.
        slots: the worker's slots.
        healthy: whether the worker may claim (not too many undead slots).
        ahead: the queue of jobs claimed ahead.
        renew_now: asks the heartbeat to renew the leases on this turn of the loop
            (a queued job waits for its lease to be confirmed).
        (the others are the worker's collaborators of the same names)
    """

    def __init__(self, store: Store, definitions: dict[str, Definition], settings: Settings, worker_id: str,
                 slots: list[Slot], *, clock: DatabaseClock, enforcer: Enforcer, wakeup: Wakeup,
                 scheduler: Scheduler, outage: Outage, healthy: Callable[[], bool],
                 ahead: Ahead | None = None, renew_now: Callable[[], None] = lambda: None) -> None:
        self._store = store
        self._definitions = definitions
        self._pipelines = sorted(definitions)
        self._served = frozenset(definitions)
        # What this worker serves: its queues, and the definitions it loaded (with
        # "", the runs started before versions were recorded).
        self._queues = settings.queue_names
        self._versions = served_definitions(definitions)
        self._limits = step_limits(definitions)
        self._settings = settings
        self._worker_id = worker_id
        self._slots = slots
        self._clock = clock
        self._enforcer = enforcer
        self._wakeup = wakeup
        self._scheduler = scheduler
        self._outage = outage
        self._healthy = healthy
        self.ahead = ahead if ahead is not None else Ahead(depth=0)
        self.successors = Successors(slots, enforcer, self.ahead, renew_now)
        self._horizon = Horizon(store, clock, worker_id, self._pipelines, lease_ms=settings.lease_ms,
                                queues=self._queues, definitions=self._versions)
        # Told of the run deadlines of the jobs it starts (epoch ms, database clock):
        # the worker's maintenance thread ends a run with nothing running at its deadline.
        self.on_run_deadline: Callable[[int], None] = lambda deadline_ms: None
        # A claimed job whose run's deadline has passed: recorded as stopped by it, never started.
        self.on_past_deadline: Callable[[ClaimedJob], None] = lambda job: None
        self.on_start: Callable[[Runner], None] = lambda runner: None  # an attempt's runner begins
        self._renew_now = renew_now
        self._claims = 0  # every FIFO_EVERY-th claim is oldest-first (bounds starvation)
        # SQLite cannot notify other processes; poll it more often (the query is indexed).
        self.poll = min(settings.poll_interval, 0.25) if store.dialect.name == "sqlite" \
            else settings.poll_interval
        self.next_claim = 0.0                 # monotonic; 0.0: claim at once
        self.timer: float | None = None       # the next not-before time or schedule tick
        self.deadline_timer: float | None = None  # the next run deadline

    def soon(self) -> None:
        """Claim on the next turn of the loop (a slot became usable, or work may be ready)."""
        self.next_claim = 0.0

    def wake_times(self, free: bool, stopping: bool) -> list[float]:
        """When the loop must wake for claiming or expiring (monotonic)."""
        times = [] if self.deadline_timer is None else [self.deadline_timer]
        if free and self.timer is not None:  # with no free slot the timer cannot help
            times.append(self.timer)
        if free and not stopping and self.next_claim == 0.0:
            times.append(self._clock.now())
        if not stopping:
            times += self.successors.wake_times(self._clock.now())
        return times

    def _usable(self) -> int:
        return sum(1 for s in self._slots if not s.undead)

    def hungry(self) -> bool:
        """A claim now keeps a child from idling: a slot is free, or fewer jobs are
        queued ahead than there are slots to take them."""
        if any(s.free for s in self._slots) or self.successors.ending(self._clock.now()):
            return True
        usable = self._usable()
        return len(self.ahead) < usable and self.ahead.room(usable) > 0

    def _wanted(self, free: list[Slot]) -> int:
        """Jobs to claim: one per free slot, plus those to queue ahead -- what the
        queue has room for, or one per attempt about to be killed
        (`Successors.wanted`), which then counts as covered."""
        successors = self.successors.wanted(self._clock.now())
        return len(free) + max(self.ahead.room(self._usable()), successors)

    def fill_free(self) -> None:
        """Start queued jobs on the free slots, in the queue's order (the claim order). A queued job
        whose lease was not confirmed lately waits for the heartbeat, asked now."""
        # Jobs claimed before their time whose time came, their leases confirmed first
        # even where cancels are notified: a stop that began before their time takes
        # them back as never begun (`ductline.model.stops.begun_by`) and notifies only
        # at its commit; the confirmation waits for that commit and finds the lease gone.
        self._horizon.confirm(self.ahead, self.ahead.promote(self._clock.now(), self._clock.passed, confirm=True))
        if not len(self.ahead):
            return
        if self._wakeup.cancel_pending():
            # A run was cancelled (its notification came with what freed the slot, such
            # as the kill of an attempt whose successor is queued): its queued jobs must
            # not start, so the renewal that finds their leases lost comes first.
            self._renew_now()
            return
        now = self._clock.now()
        for slot in self._slots:
            if not slot.free:
                continue
            job = self.ahead.take(now)
            if job is None:
                if self.ahead.stale(now):
                    self._renew_now()
                return
            self._start_queued(slot, job)

    def _start_queued(self, slot: Slot, job: ClaimedJob) -> None:
        """A queued job's attempt starts now: its step timeout counts from here, not
        from its claim (docs/howto/timeouts.md, "What counts": the clock starts when the step begins executing)."""
        started = int(self._clock.db_now_ms())
        step_deadline = None if job.timeout_seconds is None else started + job.timeout_seconds * 1000
        run_deadline = job.run_deadline_ms
        if run_deadline is not None and job.phase == FIRST_STEP:
            run_deadline = self._restart_run_deadline(job, started)
            if run_deadline is not None:
                self.on_run_deadline(run_deadline)
        deadlines = [d for d in (step_deadline, run_deadline) if d is not None]
        job = job.starting(started, min(deadlines) if deadlines else None, run_deadline)
        if self.start(slot, job):
            _started(job)

    def begin_prefetched(self, slot: Slot, job: ClaimedJob, at: float, options: StepOptions | None) -> None:
        """A job sent ahead started on ``slot``'s child at ``at`` (monotonic seconds;
        ``job`` already carries that start and its deadline: `ductline.runtime.prefetch`)."""
        self.start(slot, job, at=at, sent=True)
        _started(job)

    def _run_deadline(self, job: ClaimedJob) -> float | None:
        """``job``'s run deadline (monotonic seconds), if its run has one: `Ahead.add`
        gives the job back unstarted well before it, for an idle worker to run."""
        return None if job.run_deadline_ms is None else self._clock.to_monotonic(job.run_deadline_ms)

    def _restart_run_deadline(self, job: ClaimedJob, started: int) -> int | None:
        """The run deadline of a queued first-step attempt starting at ``started``:
        moved to count from now if its claim started the run (the wait in the queue is
        not the run's time; `Store.restart_run_deadline`). If the database cannot be
        asked, the deadline from the claim stands (earlier: never later than promised)."""
        try:
            moved = self._store.restart_run_deadline(job.run_id, job.job_id, job.attempt, started)
        except StoreError as exc:
            self._outage.failed("moving a run deadline", exc)
            return job.run_deadline_ms
        return job.run_deadline_ms if moved is None else moved

    def claim(self) -> None:
        if not self._healthy():
            return  # unhealthy: stop claiming (the heartbeat reports it)
        free = [s for s in self._slots if s.free]
        now = self._clock.now()
        # A queue waiting for its leases to be confirmed is served first (this turn).
        if not self.hungry() or self.ahead.stale(now) or not self._due(now) or not self._outage.ok():
            return
        wanted = self._wanted(free)
        self._wakeup.clear()
        self.timer = None  # fired (or superseded): the claim below sets the next one
        try:
            sent = self._clock.now()
            self._claims += 1
            with self._store.transaction() as tx:
                jobs = tx.claim(self._worker_id, self._pipelines, wanted, self._settings.lease_ms,
                                limits=self._limits, fifo=self._claims % FIFO_EVERY == 0,
                                queues=self._queues, definitions=self._versions)
                unfilled = wanted - len(jobs)
                usable = self._usable()
                early, looked_until = self._horizon.claim(tx, unfilled, self.ahead.early(), usable,
                                                          self._horizon.in_time(self.ahead, usable), sent)
                jobs += early
                received = self._clock.now()
                # When to wake next is read in the claim's transaction (as the recording's
                # claim does), not after the dispatch: a read there kept the loop from the
                # result of an attempt that had just started.
                wakeups = None if not unfilled else tx.next_wakeups(self._pipelines, self._queues, self._versions)
            self._dispatch(jobs, sent, received)
            if wakeups is None:
                self.next_claim = 0.0  # there may be more
                return
            self._ran_dry(now, wakeups, looked_until=looked_until)
        except StoreError as exc:
            self._outage.failed("claiming", exc)

    def _due(self, now: float) -> bool:
        """Whether the loop claims now: its poll came, a timer fired, or it was woken."""
        return now >= self.next_claim or (self.timer is not None and now >= self.timer) or \
            self._wakeup.pending() or bool(self.successors.ending(now))

    def _ran_dry(self, now: float, wakeups: tuple[int | None, int | None], *,
                 looked_until: float | None = None) -> None:
        """A claim found fewer ready jobs than it asked for: poll again later, fire
        the schedules that are due (now, and only now), and set the timers to
        ``wakeups`` (`Store.next_wakeups`, read after the claim). ``looked_until``:
        the claim looked for jobs due within the horizon too, at least up to this
        monotonic instant (`_timer_for`); ``None``: it did not."""
        self.next_claim = now + self.poll
        if self._scheduler.fire_due():
            self.next_claim = 0.0  # the runs just started have ready jobs
        upcoming, deadline = wakeups
        self._horizon.saw(upcoming)
        tick = self._scheduler.next_fire_ms
        timers = [] if upcoming is None else [self._timer_for(upcoming, now, looked_until)]
        if tick is not None:
            timers.append(_at(self._clock.to_monotonic(tick)))
        self.timer = min(timers, default=None)
        self.deadline_timer = None if deadline is None else self._clock.passed(deadline)

    def _timer_for(self, upcoming_ms: int, now: float, looked_until: float | None) -> float:
        """When to claim for the next not-before time (monotonic): within the horizon
        before it, to claim the job before its time, or at once if that is past; at
        the time itself if the claim just now looked that far and left the job (one
        of a limited step, or no room for more jobs claimed early): asking again
        before then would spin. A job due after ``looked_until`` was beyond the
        window that claim looked at -- the window moves on while a claim runs, and a
        job due just past it is claimed at once, not at its time (`Horizon.claim_time`)."""
        due = self._clock.to_monotonic(upcoming_ms)
        early = self._horizon.claim_time(due, now, looked_until)
        return _at(due) if early is None else early

    def claim_in(self) -> "Planned | None":
        """Plan a claim for the free slots (and the queue ahead), to run inside the
        transaction that records the outcomes that freed them; ``None`` if nothing
        is wanted. Planned here, on the loop's thread; the returned function runs in
        that transaction (on the recorder's thread) and returns what starts the
        attempts once it committed (on the loop's thread again). Nothing changes
        here until then: if the transaction rolls back, the claim never happened.

        It stands for the loop's claim: it runs after the batch made its jobs ready,
        so when it finds fewer than it asked for, no other job was ready then, and
        the same transaction reads when to wake next (as `claim` does); the loop
        does not claim again after it, nor for this worker's own notifications.

        An idle worker hands over instead (`ductline.engine.batch.Handoff`): when the
        loop would not claim now (its last claim found no more ready jobs and nothing
        woke it since) and nothing is queued ahead, the next steps the recording makes
        ready are inserted already claimed for the free slots, and the claim runs only
        if the transaction made anything else ready (`Tx.readied_only_claimed`): a
        chain's next step starts without a claim reading the ready queues."""
        free = [s for s in self._slots if s.free]
        wanted = self._wanted(free)
        if len(self.ahead):
            # Claim even with the queue full: a run's next step that this recording
            # makes ready is then claimed by it (ahead of the queued first steps),
            # not by a later recording.
            wanted = max(wanted, self._usable())
        if not wanted or not self._healthy():
            return None
        handoff = None
        if free and not len(self.ahead) and not self._due(self._clock.now()):
            handoff = Handoff(self._worker_id, self._settings.lease_ms, len(free), self._served,
                              queues=frozenset(self._queues))
        else:
            self._wakeup.clear()  # what woke the loop until now, this claim sees
        self._claims += 1
        fifo = self._claims % FIFO_EVERY == 0
        held_early, usable = self.ahead.early(), self._usable()  # read here, on the loop's thread
        in_time = self._horizon.in_time(self.ahead, usable)

        def claim(tx: Tx) -> Callable[[], None]:
            sent = self._clock.now()
            given = [] if handoff is None else list(handoff.claimed)
            if handoff is not None and tx.readied_only_claimed():
                def handed() -> None:  # the timers and the next poll stay as the last claim set them
                    self._dispatch(given, sent, sent, handed=len(given), claimed=False)
                return handed
            more = wanted - len(given)
            jobs = given + (tx.claim(self._worker_id, self._pipelines, more, self._settings.lease_ms,
                                     limits=self._limits, fifo=fifo, queues=self._queues,
                                     definitions=self._versions) if more > 0 else [])
            # A busy worker claims in its recordings, not on its timer: they claim the
            # jobs due within the horizon too, as the loop's claim does.
            unfilled = wanted - len(jobs)
            early, looked_until = self._horizon.claim(tx, unfilled, held_early, usable, in_time, sent)
            jobs += early
            received = self._clock.now()
            wakeups = None if not unfilled else tx.next_wakeups(self._pipelines, self._queues, self._versions)

            def started() -> None:
                self._dispatch(jobs, sent, received, handed=len(given))
                if wakeups is None:
                    self.next_claim = 0.0  # there may be more
                else:
                    self._ran_dry(received, wakeups, looked_until=looked_until)
            return started
        return Planned(claim, handoff)

    def _dispatch(self, jobs: list[ClaimedJob], sent: float, received: float, *, handed: int = 0,
                  claimed: bool = True) -> None:
        """Start claimed ``jobs`` on the slots free now (after the claim committed;
        the slots free when it was planned may have taken queued jobs meanwhile).
        The first ``handed`` of them were handed over before ``sent``; the others
        were claimed between ``sent`` and ``received`` (``claimed``: a claim ran)."""
        free = [s for s in self._slots if s.free]
        if claimed:
            emit(EventName.CLAIM, asked=len(free), claimed=len(jobs) - handed, duration_seconds=received - sent)
        deadlines = [j.run_deadline_ms for j in jobs if j.run_deadline_ms is not None]
        if deadlines:
            self.on_run_deadline(min(deadlines))
        self.ahead.observe_claim(len(jobs), sum(self._hands_on(job) for job in jobs))
        if len(jobs) > handed:
            # Only a claim's start measures the database clock; a hand-over started
            # before ``sent`` and renews nothing the enforcer counts on.
            self._clock.measure(jobs[handed].started_ms, sent, received)
            self._enforcer.renewed(sent)  # a claim is a fresh lease
        if jobs:
            faults.checkpoint("after_claim")
        # Jobs claimed before their not-before time wait apart until it has passed.
        early = [job for job in jobs if job.not_before_ms > job.started_ms]
        if early:
            jobs = [job for job in jobs if job.not_before_ms <= job.started_ms]
            self.ahead.add_early(early, sent)
            self._horizon.tighten_clock()
        # Jobs beyond the free slots wait in the queue ahead, their leases held since the claim.
        self.ahead.add(jobs[len(free):], sent, run_deadline=self._run_deadline)
        for slot, job in zip(free, jobs):
            if self.start(slot, job):
                _started(job)
        if jobs:
            faults.checkpoint("after_dispatch")

    def _hands_on(self, job: ClaimedJob) -> bool:
        """Whether ``job``'s completion readies its run's next step at once."""
        node = find_node(self._definitions, job.pipeline, job.step)
        return node is not None and node.next is not None and node.next.hands_on

    def start(self, slot: Slot, job: ClaimedJob, *, at: float | None = None, sent: bool = False) -> bool:
        """Start ``job``'s attempt on ``slot``: in its child, or in a thread for a
        thread-isolated step; the enforcer watches it from now on.

        Args:
            at: when it started (monotonic seconds), if not now.
            sent: the child already has the task (sent ahead) and started it.
        """
        if not sent and job.run_deadline_ms is not None and self._clock.db_now_ms() >= job.run_deadline_ms:
            # Its run is over (a job given back and claimed again, or one queued
            # behind long attempts): no attempt starts after its run's deadline.
            self.on_past_deadline(job)
            return False
        deadline = None if job.deadline_ms is None else self._clock.to_monotonic(job.deadline_ms)
        node = find_node(self._definitions, job.pipeline, job.step)
        options = node.options if node is not None else None
        if slot.needs_fresh_child(options):
            slot.retire_child("isolation='fresh' needs a child that ran no attempt")
        runner: Runner | None = slot.child
        if options is not None and options.isolation == "thread":
            runner = ThreadAttempt(slot.task(job))
        assert runner is not None  # only a slot with a ready child is free
        self._enforcer.watch(slot.index, runner, deadline)
        self.on_start(runner)
        slot.started_at = self._clock.now() if at is None else at
        try:
            slot.assign(job, runner, options, sent=sent)
        except (OSError, ValueError):  # the child died before it got the task; its
            pass                       # sentinel reports the death as a crash
        return True

    def expire_runs(self) -> None:
        """End runs whose deadline passed while none of their attempts ran here
        (e.g. during a delay); whichever worker notices first does it."""
        if self.deadline_timer is None or self._clock.now() < self.deadline_timer or not self._outage.ok():
            return
        self.deadline_timer = None
        try:
            expire_due(self._store, self._definitions)  # it names the runs it expired
        except StoreError as exc:
            self._outage.failed("expiring runs", exc)
        self.next_claim = 0.0


class Planned:
    """A claim planned for a recording transaction (`Claimer.claim_in`): called in
    it (after ``handoff``, if any, took the batch's next steps), it returns what
    starts the attempts once the transaction committed."""

    __slots__ = ("_claim", "handoff")

    def __init__(self, claim: Callable[[Tx], Callable[[], None]], handoff: Handoff | None) -> None:
        self._claim = claim
        self.handoff = handoff

    def __call__(self, tx: Tx) -> Callable[[], None]:
        return self._claim(tx)


def _at(time: float) -> float:
    """A timer for ``time`` (monotonic seconds), with a small jitter that spreads workers
    woken by the same instant; at least 0.5 ms, so the database clock has passed it
    when the claim reads it."""
    return time + random.uniform(0.0005, 0.0015)


def _started(job: ClaimedJob) -> None:
    emit(EventName.ATTEMPT_STARTED, pipeline=job.pipeline, step=job.step, run_id=job.run_id,
         job_id=job.job_id, attempt=job.attempt, deadline_ms=job.deadline_ms, started_ms=job.started_ms,
         pickup_latency_seconds=max(0, job.started_ms - job.not_before_ms) / 1000)
