"""Prefetch: a busy child gets its next tasks before its attempt ends.

Without it, a child that finished sleeps until the worker's loop has read its
result and sent the next task: two wake-ups of two processes per attempt, which
on a busy machine were most of a short attempt's time in a slot. Here a slot
whose child runs an attempt takes up to `DEPTH` jobs from the head of the queue
of jobs claimed ahead (`ductline.runtime.ahead`) and sends them at once
(``NEXT``); the child starts the first as its attempt ends and says so with the
result (`ductline.execution.prefetch`).

A job sent ahead is held like a queued one -- its lease is renewed, it has not
started, nothing of it is recorded -- and keeps the queue's rules:

- its clocks start when the child starts it (``STARTED`` carries the instant);
- it is started only while its lease is known to be held, and not long after it
  was sent: what waited longer than `ahead.FRESH_SECONDS` behind an attempt that
  runs long is taken back (and nothing is sent ahead of an attempt already running
  that long), and so is everything sent to a child when a lease of one of its jobs
  was lost (a cancel), when its attempt is being killed (before the SIGTERM: a step
  that ends within the kill's grace must not start the next one) or when the
  worker stops;
- taking back never waits for the child, which may be busy for hours: the
  child's `Ledger` settles, under a lock, which tasks it started (their
  ``STARTED`` is on its way) and which are taken back (it will skip them);
- what is taken back, and what a child that died, was retired or abandoned never
  started, returns to the head of the queue, which gives it back to the database
  when the worker stops or when it waited too long; a job whose lease was lost
  is dropped, and if its child started it anyway, the attempt is killed;
- only plain jobs are sent ahead: a step that runs in a thread or needs a fresh
  process, and a job of a run with a deadline (whose start may move that deadline,
  `ductline.runtime.claimer`), wait in the queue for a free slot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from ductline.clock import DatabaseClock
from ductline.dsl.graph import Definition, find_node
from ductline.dsl.options import StepOptions
from ductline.execution import protocol
from ductline.execution.process import Child
from ductline.runtime.ahead import FRESH_SECONDS, Ahead, Queued
from ductline.runtime.slots import Slot
from ductline.store.records import ClaimedJob

log = logging.getLogger("ductline.worker")

# Jobs a busy child holds at most: with one, a child that finished its next attempt
# before the worker had read the result of the one before (a short attempt on a
# busy machine) often found nothing and slept.
DEPTH = 2


@dataclass(slots=True)
class Prefetched:
    """A job sent ahead to a slot's child, not known to have started there.

    Attributes:
        queued: the job as it waited in the queue ahead (when its lease was confirmed).
        child: the child it was sent to.
        seq: its number among the tasks sent to that child (`Ledger`).
        offset_ms: the database clock minus the monotonic clock (ms) sent with it.
        options: its step's options, if this worker knows the step.
        sent_at: when it was sent (monotonic seconds).
        lost: its lease was lost: never started, nor queued again.
        begun: its child's ledger says it started it (its ``STARTED`` is on the way).
    """

    queued: Queued
    child: Child
    seq: int
    offset_ms: float
    options: StepOptions | None
    sent_at: float
    lost: bool = False
    begun: bool = False

    @property
    def job(self) -> ClaimedJob:
        return self.queued.job


# Starts a prefetched job's attempt on a slot: (slot, the job as started, its
# monotonic start, its step's options).
Begin = Callable[[Slot, ClaimedJob, float, StepOptions | None], None]


class Prefetcher:
    """Sends queued jobs ahead to busy children and keeps track of them.

    Args:
        slots: the worker's slots.
        ahead: the queue of jobs claimed ahead (where prefetched jobs come from and return to).
        definitions: the worker's pipelines (a job's step options).
        begin: starts a prefetched job's attempt once its child said it started it.
        kill_lost: kills the attempt on a slot whose lease was lost (a job sent
            ahead that its child started before it could be taken back).
        killing: whether the attempt on a slot (by its index) is being killed.
        depth: how many jobs a busy child holds at most (0: no prefetch).
        release_begun: records a job that its child started and that died with the
            child before its attempt was taken (the child was being killed for what the
            attempt before it did): released, as begun, with its start (epoch ms).
        held: how many queued jobs are held for attempts about to be killed at their
            deadlines (`ductline.runtime.successors.Successors.held`): never sent ahead, they
            start on those attempts' slots when the kills free them.
    """

    def __init__(self, slots: list[Slot], ahead: Ahead, definitions: dict[str, Definition], *,
                 clock: DatabaseClock, begin: Begin, kill_lost: Callable[[Slot], None],
                 killing: Callable[[int], bool] = lambda index: False, depth: int = DEPTH,
                 release_begun: Callable[[ClaimedJob, int], None] = lambda job, started_ms: None,
                 held: Callable[[], int] = lambda: 0) -> None:
        self._slots = slots
        self._ahead = ahead
        self._definitions = definitions
        self._clock = clock
        self._begin = begin
        self._kill_lost = kill_lost
        self._killing = killing
        self._depth = depth
        self._release_begun = release_begun
        self._held = held

    def pending(self) -> list[Prefetched]:
        return [p for s in self._slots for p in s.sent]

    def offer(self) -> None:
        """Send the head of the queue to each busy child that holds fewer than ``depth``
        jobs; what one child gets goes out in one write (one wake-up of the child, one
        system call of the worker, however many jobs)."""
        if len(self._ahead) <= self._held():
            return
        now = self._clock.now()
        for slot in self._slots:
            child = slot.child
            if not slot.busy or slot.runner is not child or child is None or child.eof or slot.retiring \
                    or now - slot.started_at > FRESH_SECONDS or self._killing(slot.index):
                continue
            batch: list[Prefetched] = []
            messages: list[tuple[object, ...]] = []
            blocked = False  # the queue's head may not be sent ahead (or is not due): stop there
            while len(slot.sent) + len(batch) < self._depth and len(self._ahead) > self._held():
                queued = self._ahead.head(now)
                if queued is None:
                    blocked = True
                    break
                options = self._options(queued.job)
                if not _plain(queued.job, options):
                    blocked = True  # it waits for a free slot (the queue keeps its order)
                    break
                self._ahead.pop()
                offset_ms = self._clock.db_now_ms() - now * 1000
                timeout_ms = None if queued.job.timeout_seconds is None else queued.job.timeout_seconds * 1000
                seq = child.sent_ahead + len(batch) + 1
                messages.append(protocol.next_task(slot.task(queued.job, options), timeout_ms, offset_ms, seq))
                batch.append(Prefetched(queued, child, seq, offset_ms, options, now))
            if batch:
                try:
                    child.send_all(messages)
                except (OSError, ValueError):  # the child is dying; its death is handled as usual
                    for sent in reversed(batch):  # each goes back to the head: the first stays first
                        self._ahead.put_back(sent.queued)
                    return
                child.sent_ahead = batch[-1].seq
                slot.sent.extend(batch)
            if blocked:
                return

    def _options(self, job: ClaimedJob) -> StepOptions | None:
        node = find_node(self._definitions, job.pipeline, job.step)
        return node.options if node is not None else None

    def started(self, slot: Slot, token: str, at: float) -> None:
        """The slot's child started the job sent ahead with ``token`` at ``at`` (monotonic)."""
        sent = _take(slot, token)
        if sent is None:
            return
        if slot.busy:
            # The attempt before it was not taken: its child is being killed, and
            # started this one just before the kill took back what was sent ahead.
            # It dies with the child: recorded released (it began, so its next attempt
            # has the next number), never run again under this one.
            if not sent.lost:
                self._release_begun(sent.job, int(at * 1000 + sent.offset_ms))
            return
        started_ms = int(at * 1000 + sent.offset_ms)  # as the child worked it out (`protocol.next_task`)
        timeout = sent.job.timeout_seconds
        job = sent.job.starting(started_ms, None if timeout is None else started_ms + timeout * 1000, None)
        self._begin(slot, job, at, sent.options)
        if sent.lost:
            self._kill_lost(slot)

    def reconcile(self) -> None:
        """Jobs sent to a child that is no longer its slot's (it died, was retired
        or abandoned): those its ledger says it started died with it and are
        released as begun (their ``STARTED`` was never read: the child was killed
        for what it sent before); the others never started there: back to the queue."""
        for slot in self._slots:
            if slot.sent and (slot.child is not slot.sent[0].child or slot.undead):
                started = _last_started(slot.sent[0].child, slot.sent[-1].seq)
                for sent in reversed(slot.sent):  # each goes to the head: the first ends first
                    if (sent.begun or sent.seq <= started) and not sent.lost:
                        self._release_begun(sent.job, sent.job.started_ms)
                    else:
                        self._return(sent)
                slot.sent.clear()

    def _return(self, sent: Prefetched) -> None:
        if not sent.lost:
            self._ahead.put_back(sent.queued)

    def take_back(self, now: float, stopping: bool) -> None:
        """Take back from each child what may not start there now: everything when the
        worker stops, a lease of what it holds was lost or its attempt is being
        killed, else everything sent ahead of an attempt that runs long (sent more
        than `FRESH_SECONDS` ago). What its child started meanwhile stays, its
        ``STARTED`` on the way; a child that holds its ledger's lock right now is
        asked again on the next turn."""
        for slot in self._slots:
            waiting = [p for p in slot.sent if not p.begun]
            if not waiting or not (stopping or self._killing(slot.index) or any(
                    p.lost or now - p.sent_at > FRESH_SECONDS for p in waiting)):
                continue
            last_started = slot.sent[0].child.ledger.take_back(slot.sent[-1].seq)
            if last_started is None:
                continue
            kept = [p for p in slot.sent if p.seq <= last_started]
            for sent in reversed(slot.sent[len(kept):]):
                self._return(sent)
            for sent in kept:
                sent.begun = True
            slot.sent[:] = kept

    def due_at(self) -> float | None:
        """When the first job sent ahead must be taken back if it has not started (monotonic)."""
        return min((p.sent_at + FRESH_SECONDS for p in self.pending() if not p.begun), default=None)

    def tokens(self) -> list[str]:
        """The leases to renew: those of the jobs sent ahead that still hold one."""
        return [p.job.lease_token for p in self.pending() if not p.lost]

    def renewed(self, held: set[str], at: float) -> None:
        """A renewal sent at ``at`` kept the leases in ``held``; a job sent ahead whose
        lease it did not keep (cancelled, rescued) is never started (`take_back`)."""
        for sent in self.pending():
            if sent.lost:
                continue
            if sent.job.lease_token in held:
                sent.queued.confirmed = at
                continue
            sent.lost = True
            log.info("Lease of a job sent ahead to a child was lost; not starting it", extra={
                "run_id": sent.job.run_id, "job_id": sent.job.job_id, "step": sent.job.step,
                "attempt": sent.job.attempt})


def _last_started(child: Child, through: int) -> int:
    """The last task sent ahead that a child no longer its slot's started, the tasks up
    to ``through`` taken back if it still runs; a closed child's ledger is gone, and
    the child kept what it said as it closed."""
    if child.closed:  # its ledger's descriptor is closed (its number may be reused)
        return child.started_ahead
    taken = child.ledger.take_back(through)
    return child.ledger.last_started() if taken is None else taken


def _take(slot: Slot, token: str) -> Prefetched | None:
    for i, sent in enumerate(slot.sent):
        if sent.job.lease_token == token:
            return slot.sent.pop(i)
    return None  # another token than the jobs sent ahead: ignored


def _plain(job: ClaimedJob, options: StepOptions | None) -> bool:
    """Whether ``job`` may be sent ahead (see the module's docstring)."""
    return job.run_deadline_ms is None and (options is None or options.isolation == "process")
