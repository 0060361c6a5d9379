"""Jobs claimed ahead: a short queue of already-claimed jobs, so a child that
finished its attempt gets its next task at once, without waiting for a database
round trip (the parent records the result and claims more afterwards, for many
jobs in one transaction).

A queued job is claimed like a running one -- it holds a lease, its attempt row
exists, the heartbeat renews it -- but it has not started. That keeps the
delivery contract of a running attempt:

- a worker killed with queued jobs loses nothing: their leases expire and other
  workers take them, as for running attempts;
- a worker that stops gives them back at once (`ductline.runtime.worker`), so
  they do not wait for their leases to expire;
- a queued job never outlives its run's deadline unstarted: a job of a run with a
  deadline is given back, with the queue, halfway from its claim to that deadline,
  so another worker may run it in time. A run whose deadline the claim of its first
  step started then counts as not started (`ductline.engine.record`): the wait in
  the queue is never charged to it (its deadline counts from the first attempt's
  start; a queued first step that starts moves it there, `ductline.runtime.claimer`);
- a queued job is started only while its lease is known to be held: one not
  confirmed (by its claim or a renewal) within `FRESH_SECONDS` waits for the
  next renewal first, which the claimer asks for at once. A job whose run was
  cancelled meanwhile (the cancel took its lease) is dropped, never started; while
  a cancel's notification waits for that renewal (PostgreSQL), no queued job starts.

Claiming ahead pays off only for short attempts; behind a long one a queued job
would sit while other workers idle. So the queue is used only while the recent
attempts of this worker were short (`SHORT_SECONDS`, a moving average); a worker
running long steps claims one job per free slot, as it would without a queue.

How deep: the next claim rides with the recording of results, so the queue must
last the children while one recording transaction runs -- as many jobs per slot
as attempts fit in a recording (moving averages of both), at least `DEPTH` and at
most `CHAIN_DEPTH`. Deeper is faster while attempts are very short: a recording
costs about as much again whether it claims ten jobs or thirty, so bigger claims
(and the bigger batches of results they bring back) mean fewer transactions per
job. But a deeper queue makes a run's next step wait longer: it becomes ready in a
recording, waits for the recording that claims it (bigger with a deeper queue) and
queues behind what is there. So the queue goes deeper only while hardly any job the
worker claims readies a next step as it completes -- last steps of runs (a drain of
independent runs), elements of an expand (their collapse waits for all of them):
then it holds up to `AHEAD_SECONDS` of work per slot, at most `MAX_DEPTH` jobs. There
the children outrun the recordings, so a claim fills the queue for when it lands,
counting what is queued now as started by then (`Ahead.room`): a worker keeps at most
two queues' worth from the others.

Jobs claimed before their time: a delayed job due within a short horizon is claimed
ahead of its not-before time (`ductline.runtime.horizon`), so that at that time it
starts on a warm child with no claim on its path. Such a job is held apart
(`add_early`), not in the queue: it never starts, nor is it sent ahead to a child, before
its start time (`promote` moves it into the queue then). Held, it keeps the
contract of a queued job -- its lease is renewed, a stopping worker gives it back,
a killed worker's held jobs are taken by others when their leases expire, a lost
lease (a cancel) drops it; a run's stop before its time records its step skipped,
with no attempt (`ductline.model.stops.begun_by`) -- and its clocks (the attempt's timeout, a first step's
run deadline) start when it starts, as a queued job's do. Every worker confirms a
held job's lease once its time has come and before it starts
(`ductline.runtime.horizon.Horizon.confirm`): a cancel made before a delayed job's
time must keep its step from ever being called, as it did when the job was claimed
only after its time, and a cancel's notification comes only at its commit.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Callable

from ductline.model.claim_order import rank
from ductline.store.records import ClaimedJob

# Jobs queued per usable slot: at least (while attempts are short), at most while
# the claimed jobs ready next steps, and at most otherwise.
DEPTH = 4
CHAIN_DEPTH = 16
MAX_DEPTH = 64
# Work queued per usable slot while hardly any claimed job readies a next step
# (seconds of attempts, by their moving average): no-op attempts fill `MAX_DEPTH`,
# attempts of 10 ms queue 5.
AHEAD_SECONDS = 0.05
# Above this share of claimed jobs that ready a next step as they complete (a moving
# average), the queue holds what lasts one recording only.
HANDING_ON_SHARE = 0.05
# A queued job is started without asking the database first if its lease was
# confirmed this recently (seconds); it bounds how long after a cancel a queued
# job of the cancelled run could still start, like a claim made just before it.
FRESH_SECONDS = 0.5
# Claim ahead only while recent attempts took less than this (seconds, moving average).
SHORT_SECONDS = 0.1
# A queued job not started this long after its claim is given back (seconds).
OVERDUE_SECONDS = 5.0
# Once attempts turn long, a queue holding more than this much of them per slot is
# given back at once (seconds of attempts at their moving average), not after
# `OVERDUE_SECONDS`.
BACKLOG_SECONDS = 1.0
_WEIGHT = 0.2  # of the newest attempt in the moving average
_JOB_WEIGHT = 0.05  # of each newly claimed job in the share of those that hand on


@dataclass(slots=True)
class Queued:
    job: ClaimedJob
    confirmed: float  # monotonic seconds: when its lease was last known held
    claimed: float    # monotonic seconds: when it was claimed
    due: float        # monotonic seconds: given back (with the queue) if not started by then


class Ahead:
    """The worker's queue of jobs claimed ahead (in the claim order, then oldest claim first).

    Args:
        depth: jobs queued per usable slot (0: no claiming ahead).
    """

    def __init__(self, depth: int = DEPTH) -> None:
        self.depth = depth
        self._jobs: deque[Queued] = deque()
        # Jobs claimed before their not-before time, in not-before order (`add_early`).
        self._early: list[Queued] = []
        self._average: float | None = None  # seconds per attempt; None: none seen yet
        self._recording: float | None = None  # seconds per recording transaction
        self._handing_on = 1.0  # share of claimed jobs that ready a next step (moving average)

    def __len__(self) -> int:
        return len(self._jobs)

    def observe(self, seconds: float) -> None:
        """An attempt ran ``seconds`` (dispatch to result)."""
        self._average = seconds if self._average is None else \
            self._average + _WEIGHT * (seconds - self._average)

    def observe_recording(self, seconds: float) -> None:
        """A recording transaction (with its claim) took ``seconds``, hand-over to commit."""
        self._recording = seconds if self._recording is None else \
            self._recording + _WEIGHT * (seconds - self._recording)

    def observe_claim(self, jobs: int, handing_on: int) -> None:
        """A claim brought ``jobs`` jobs, ``handing_on`` of which ready a next step as
        they complete (`ductline.dsl.graph.Transition.hands_on`)."""
        if jobs:
            # Each job is an observation: a claim of many weighs more than a claim of
            # one, so a worker that starts on a backlog finds it within a few claims.
            weight = 1 - (1 - _JOB_WEIGHT) ** jobs
            self._handing_on += weight * (handing_on / jobs - self._handing_on)

    def room(self, usable_slots: int) -> int:
        """How many more jobs may be queued now."""
        if not self.depth or self._average is None or self._average >= SHORT_SECONDS:
            return 0
        # the attempts a slot runs while one recording commits (or in AHEAD_SECONDS), and the one after
        backlog = self._handing_on <= HANDING_ON_SHARE
        span = max(AHEAD_SECONDS if backlog else 0.0, self._recording or 0.0)
        depth = min(MAX_DEPTH if backlog else CHAIN_DEPTH,
                    max(self.depth, math.ceil(span / max(self._average, 1e-4)) + 1))
        full = depth * usable_slots
        if backlog:
            # The claim lands a recording from now. In a backlog the children outrun the
            # recordings (a short attempt takes a child well under a millisecond, a
            # recording tens of them), so by then they have started what is queued now,
            # up to a full queue: the claim fills the queue for then. Filled for now,
            # the queue ran dry at every claim, and each recording brought back and
            # claimed what one queue less its leftover held: fewer jobs per transaction,
            # and a slower drain. A worker then keeps at most two queues' worth.
            return max(0, min(full, 2 * full - len(self._jobs)))
        return max(0, full - len(self._jobs))

    def started_within(self, usable_slots: int, seconds: float) -> int:
        """How many attempts ``usable_slots`` slots start within the next ``seconds`` at
        the recent attempt length: the jobs due that soon they can start at their
        times. 0 while attempts are long (`SHORT_SECONDS`) or none was seen yet."""
        if self._average is None or self._average >= SHORT_SECONDS:
            return 0
        return math.ceil(usable_slots * seconds / max(self._average, 1e-4))

    def add(self, jobs: list[ClaimedJob], confirmed: float,
            run_deadline: Callable[[ClaimedJob], float | None] = lambda job: None) -> None:
        """Queue claimed jobs in the claim order (`ductline.model.claim_order`): a job of
        a run under way, or of a higher priority, goes ahead of queued jobs that a claim
        would have taken after it; at equal rank, the older claim first.

        Args:
            confirmed: when their claim was sent (monotonic seconds).
            run_deadline: a job's run deadline (monotonic seconds), if its run has
                one; the job is given back halfway there unstarted.
        """
        if not jobs:
            return
        for job in jobs:
            due = confirmed + OVERDUE_SECONDS
            deadline = run_deadline(job)
            if deadline is not None:
                due = min(due, confirmed + (deadline - confirmed) / 2)
            self._jobs.append(Queued(job, confirmed, confirmed, due))
        self._jobs = deque(sorted(self._jobs, key=lambda q: rank(q.job.priority, q.job.phase)))

    def add_early(self, jobs: list[ClaimedJob], confirmed: float) -> None:
        """Hold jobs claimed before their not-before time until it has passed (`promote`).

        Args:
            confirmed: when their claim was sent (monotonic seconds). A held job not
                started `OVERDUE_SECONDS` after it is given back with the queue (its
                run's deadline does not bring that nearer, as it does for a queued
                job: it was claimed for its own time, and is not given back before it).
        """
        for job in jobs:
            self._early.append(Queued(job, confirmed, confirmed, confirmed + OVERDUE_SECONDS))
        self._early.sort(key=lambda q: q.job.not_before_ms)

    def early(self) -> int:
        """How many jobs are held for their not-before times."""
        return len(self._early)

    def next_start(self, passed: Callable[[int], float]) -> float | None:
        """When the first held job may start (monotonic seconds).

        Args:
            passed: the first monotonic instant at which the database clock has
                surely reached a time (`ductline.clock.DatabaseClock.passed`).
        """
        return passed(self._early[0].job.not_before_ms) if self._early else None

    def promote(self, now: float, passed: Callable[[int], float], *, confirm: bool = False) -> list[ClaimedJob]:
        """Queue the held jobs whose not-before time has surely passed by ``now`` (by
        the clock's current reading: `passed` as in `next_start`), in the claim order;
        returns them.

        Args:
            confirm: their leases must be confirmed again before they start (`stale`
                until `confirmed` or a renewal says so), so that a run stopped before a
                held job's time never has that job start
                (`ductline.runtime.claimer.Claimer.fill_free`).
        """
        due = 0
        while due < len(self._early) and passed(self._early[due].job.not_before_ms) <= now:
            due += 1
        if not due:
            return []
        if confirm:
            for q in self._early[:due]:
                q.confirmed = -math.inf
        promoted = self._early[:due]
        self._jobs.extend(promoted)
        del self._early[:due]
        self._jobs = deque(sorted(self._jobs, key=lambda q: rank(q.job.priority, q.job.phase)))
        return [q.job for q in promoted]

    def confirmed(self, asked: set[str], held: set[str], at: float) -> list[ClaimedJob]:
        """A confirmation sent at ``at`` (monotonic seconds) asked after the leases in
        ``asked`` and found those in ``held`` still held: the queued jobs among them
        count as confirmed then, and those whose lease is gone (a stop, a rescue) are
        dropped and returned. The other queued jobs are left as they are."""
        lost = [q.job for q in self._jobs if q.job.lease_token in asked and q.job.lease_token not in held]
        if lost:
            self._jobs = deque(q for q in self._jobs if q.job.lease_token not in asked or q.job.lease_token in held)
        for q in self._jobs:
            if q.job.lease_token in held:
                q.confirmed = max(q.confirmed, at)
        return lost

    def take(self, now: float) -> ClaimedJob | None:
        """The next job to start, if its lease is fresh; ``None`` if the queue is
        empty or its head must be confirmed first (`stale`)."""
        return None if self.head(now) is None else self._jobs.popleft().job

    def head(self, now: float) -> Queued | None:
        """The job `take` would return, left in the queue (`pop` takes it)."""
        return None if not self._jobs or self.stale(now) else self._jobs[0]

    def pop(self) -> Queued:
        return self._jobs.popleft()

    def put_back(self, queued: Queued) -> None:
        """Queue again a job taken from the head and not started (`ductline.runtime.prefetch`)."""
        self._jobs.appendleft(queued)
        self._jobs = deque(sorted(self._jobs, key=lambda q: rank(q.job.priority, q.job.phase)))

    def stale(self, now: float) -> bool:
        """The head of the queue waits for a renewal of its lease."""
        return bool(self._jobs) and now - self._jobs[0].confirmed > FRESH_SECONDS

    def overdue(self, now: float, usable_slots: int = 1) -> bool:
        """A queued job waited longer than a short attempt explains (the attempts ahead
        of it turned out long), or is halfway to its run's deadline, or the attempts
        turned long (`SHORT_SECONDS`, by the moving average) while the queue holds more
        than `BACKLOG_SECONDS` of them for each of ``usable_slots`` slots: the queue
        should be given back, so other workers can run what it holds."""
        due = self.due_at()
        if due is not None and now >= due:
            return True
        # Not one long attempt among short ones (the average moves a fifth of the way
        # to each): attempts that stay long, behind which the queue would wait while
        # idle workers could run it -- up to two queues' worth in a backlog.
        return bool(self._jobs) and self._average is not None and self._average >= SHORT_SECONDS and \
            len(self._jobs) * self._average / max(usable_slots, 1) > BACKLOG_SECONDS

    def due_at(self) -> float | None:
        """When the queue is overdue if nothing of it starts (monotonic seconds)."""
        return min([q.due for q in self._jobs] + [q.due for q in self._early], default=None)

    def tokens(self) -> list[str]:
        """The leases to renew: the queued jobs' and the held jobs'."""
        return [q.job.lease_token for q in self._jobs] + [q.job.lease_token for q in self._early]

    def renewed(self, held: set[str], at: float) -> list[ClaimedJob]:
        """A renewal sent at ``at`` kept the leases in ``held``; the queued and held
        jobs whose lease it did not keep (cancelled, rescued) are dropped and returned."""
        lost = [q.job for q in self._jobs if q.job.lease_token not in held]
        lost += [q.job for q in self._early if q.job.lease_token not in held]
        self._jobs = deque(q for q in self._jobs if q.job.lease_token in held)
        self._early = [q for q in self._early if q.job.lease_token in held]
        for q in [*self._jobs, *self._early]:
            q.confirmed = at
        return lost

    def drain(self, *, overdue: bool = False) -> list[ClaimedJob]:
        """Empty the queue and the held jobs; returns what they held (to be given
        back). ``overdue``: emptied because jobs waited too long; no job is queued
        again until an attempt ends and shows how long attempts take now."""
        jobs = [q.job for q in self._jobs] + [q.job for q in self._early]
        self._jobs.clear()
        self._early.clear()
        if overdue:
            self._average = None
        return jobs
