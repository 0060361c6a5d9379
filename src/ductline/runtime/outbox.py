"""Outcomes a worker has seen but not yet recorded, and the back-off every phase
that needs the database shares while it is unavailable.

Outcomes are recorded in batches (one transaction for many completions). While
jobs claimed ahead keep every child busy, a batch may wait up to `HOLD_SECONDS`
for more outcomes (group commit); as soon as a child would go without work, or
the worker stops, it is recorded at once (with the claims that refill it). While
the database is down they wait here, and their leases are still renewed with the
running ones (`ductline.runtime.heartbeat`): a result recorded late is still the
result; one dropped would run the step again.

The recording transaction runs on a thread of its own (the recorder), one batch at
a time, so the worker's loop keeps serving its children -- handing out jobs claimed
ahead, collecting the next outcomes -- while the database works: the loop's own
CPU and the database's overlap instead of adding up. What a committed batch
changes in the worker (starting the attempts it claimed, retrying what it could not
record) is applied on the loop's thread (`flush`), never on the recorder's. A worker
with nothing else running, whose recording hands the next step over to itself, has
no work to overlap: there the loop records on its own thread.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ductline.clock import Clock
from ductline.dsl.graph import Definition
from ductline.errors import DatabaseReplaced, StoreError, StoreUnavailable
from ductline.model.outcomes import MAX_RELEASES
from ductline.model.states import AttemptResult
from ductline.runtime import faults
from ductline.engine.batch import Handoff, Outcome, job_extra, record_batch
from ductline.runtime.folding import FoldedWarning
from ductline.store import Store, payloads
from ductline.store.store import Tx

log = logging.getLogger("ductline.worker")

OUTAGE_BACKOFF_SECONDS = 0.5
OUTAGE_LOG_EVERY_SECONDS = 60.0
# The longest an outcome waits for others to share its commit (seconds), while
# every child still has work queued: it bounds what grouping adds to a hop.
HOLD_SECONDS = 0.005


class Outage:
    """Whether the database may be asked now. After a failure every phase that
    needs it waits `OUTAGE_BACKOFF_SECONDS`, so an outage does not make the loop
    spin on connection errors."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.until = 0.0  # monotonic seconds
        self._warning = FoldedWarning(log, OUTAGE_LOG_EVERY_SECONDS, clock.now)

    def ok(self) -> bool:
        return self._clock.now() >= self.until

    def now(self) -> float:
        return self._clock.now()

    def failed(self, what: str, exc: StoreError) -> None:
        """Back off after a failure; a database file that was deleted or replaced is
        no outage: it is raised on, and the worker stops rather than write into an
        orphan."""
        if isinstance(exc, DatabaseReplaced):
            log.error("Stopping: %s", exc)
            raise exc
        # One line when an outage begins, then one a minute: not one per retry of every phase.
        self._warning.warning("Database unavailable during %s: %s", what, exc)
        self.until = self._clock.now() + OUTAGE_BACKOFF_SECONDS


class ClaimIn(Protocol):
    """What claims inside a recording transaction (on the recorder's thread) and
    returns what starts the claimed attempts once it committed (on the loop's
    thread); its ``handoff``, if any, takes the batch's next steps as they are
    inserted (`ductline.engine.batch.Handoff`)."""

    handoff: Handoff | None

    def __call__(self, tx: Tx) -> Callable[[], None]: ...


@dataclass(slots=True)
class _Recorded:
    """What the recorder did with one batch, for the loop's thread to apply."""

    started: list[Callable[[], None]] = field(default_factory=list)
    claimed: bool = False  # it claimed (and said what to claim next), so the loop need not
    retry: list[Outcome] = field(default_factory=list)  # to record again
    unavailable: StoreUnavailable | None = None          # the database could not be reached


def _slow(outcome: Outcome) -> bool:
    """Whether recording ``outcome`` takes more than the batched statements of plain
    successes (`ductline.engine.batch.record_batch`)."""
    return outcome.result is not AttemptResult.SUCCEEDED or outcome.release or outcome.run_deadline


class Outbox:
    """The outcomes waiting to be recorded.

    Args:
        store: the database.
        definitions: the worker's pipelines, by name.
        retry_delay: the default ``retry_delay`` in seconds.
        limits: the worker's payload limits.
        outage: the shared back-off.
        now_ms: the database clock's time now (epoch ms; for job runtimes).
        recorded: called after a batch was recorded that claimed nothing in its
            transaction (completions may have made new jobs ready).
        wake: wakes the worker's loop without asking it to claim (called from the
            recorder's thread when a batch is done).
        origin: the worker's id, the payload of its recordings' notifications.
        timed: told how long each recording took (seconds, hand-over to commit).
        max_releases: the worker's ``max_releases`` setting: interrupted attempts in
            a row that halt a run (`ductline.model.outcomes.Budget.max_releases`).
    """

    def __init__(self, store: Store, definitions: dict[str, Definition], retry_delay: int,
                 limits: payloads.Limits, outage: Outage, now_ms: Callable[[], float],
                 recorded: Callable[[], None], wake: Callable[[], None] = lambda: None,
                 timed: Callable[[float], None] = lambda seconds: None, origin: str = "",
                 max_releases: int = MAX_RELEASES) -> None:
        self._store = store
        self._max_releases = max_releases
        self._origin = origin
        self._definitions = definitions
        self._retry_delay = retry_delay
        self._limits = limits
        self._outage = outage
        self._now_ms = now_ms
        self._recorded = recorded
        self._wake = wake
        self._timed = timed
        self._handed = 0.0  # monotonic: when the batch being recorded was handed over
        self.pending: list[Outcome] = []
        self._inflight: list[Outcome] = []  # the batch the recorder is recording
        self._future: Future[_Recorded] | None = None
        self._recorder: ThreadPoolExecutor | None = None
        self._since = 0.0  # monotonic: when the oldest pending outcome arrived
        self._claimed_first = False  # the last recording was a claim ahead of slow outcomes
        # Set by the worker: whether to record now rather than wait for more outcomes
        # (a child would go without work, or the worker stops).
        self.urgent: Callable[[], bool] = lambda: True
        # Set by the worker: plans, on the loop's thread, a claim for the slots the
        # batch freed, to run inside the recording transaction (None: nothing to claim).
        self.claim_in: Callable[[], ClaimIn | None] | None = None
        # Set by the worker: whether a slot is free (no attempt, nothing sent ahead).
        self.slot_free: Callable[[], bool] = lambda: True
        # Set by the worker: whether no attempt runs (nor waits in a child) anywhere in
        # it: a hand-over is then recorded on the loop's own thread (`flush`).
        self.alone: Callable[[], bool] = lambda: False

    def __len__(self) -> int:
        return len(self.pending) + len(self._inflight)

    @property
    def recording(self) -> bool:
        """A batch is being recorded (its transaction may claim too)."""
        return self._future is not None

    def add(self, outcome: Outcome) -> None:
        if not self.pending:
            self._since = self._outage.now()
        self.pending.append(outcome)

    def lease_tokens(self) -> list[str]:
        """The leases of the outcomes waiting to be recorded. Not those of the batch
        being recorded: a renewal would lock their job rows while the recording
        transaction holds others of them (a deadlock); if that batch fails, its
        outcomes wait here again and are renewed with the rest."""
        return [o.attempt.lease_token for o in self.pending]

    def retry_at(self) -> float | None:
        """When the loop must wake to record (monotonic), if it must: when the
        database's back-off ends, or when pending outcomes waited long enough.
        While a batch is being recorded the recorder wakes the loop when it is done."""
        if not self.pending or self._future is not None:
            return None
        return max(self._outage.until, self._since + HOLD_SECONDS)

    def flush(self) -> None:
        """Apply the batch the recorder finished, if any; then hand it what is
        pending, unless it is still busy, the database is backing off or the
        outcomes may still wait for others (`HOLD_SECONDS`)."""
        self._collect()
        if self._future is not None or not self.pending or not self._outage.ok():
            return
        slow = any(_slow(o) for o in self.pending)
        # A failure never waits for others to share its commit: the time from an
        # attempt's end (a kill at its deadline) to its record is what operators see.
        if self._outage.now() < self._since + HOLD_SECONDS and not slow and not self.urgent():
            return
        # The next jobs are claimed in the transaction that records these outcomes:
        # a child that just finished gets its next job without another commit, and
        # a chain's next step (inserted just before) can be claimed right away.
        # Not with failures while every slot is busy (the successor of an attempt
        # killed at its deadline was claimed ahead and started): the claim would only
        # fill the queue ahead, and it follows their commit (`recorded`).
        claim = None if self.claim_in is None or (slow and not self.slot_free()) else self.claim_in()
        if claim is not None and claim.handoff is None and not self._claimed_first and slow:
            # Failures are recorded one by one (a timed-out attempt that halts its run
            # takes several statements): the free slots get their jobs from a quick
            # claim first, and these outcomes are recorded right after it. Not on an
            # idle worker, which is not due to claim (a hand-off): there the claim
            # would find nothing, and the failure would wait for its empty commit.
            self._claimed_first = True
            self._submit([], claim)
            return
        self._claimed_first = False
        batch, self.pending = self.pending, []
        if claim is not None and claim.handoff is not None and self.alone():
            # Nothing else runs here: the loop has nobody to serve while the database
            # works, and recording on its own thread spares the hand-over its two
            # wake-ups (of the recorder, then of the loop to start the next attempt).
            self._record_here(batch, claim)
            return
        self._submit(batch, claim)

    def _record_here(self, batch: list[Outcome], claim: ClaimIn) -> None:
        """Record ``batch`` (and ``claim``) on the calling thread, the loop's, and
        apply what it did at once."""
        self._inflight = batch  # still at stake for the exit guard meanwhile
        self._handed = self._outage.now()
        try:
            done = self._record_batch(batch, claim)
        finally:
            self._inflight = []
        self._apply(done)

    def _submit(self, batch: list[Outcome], claim: ClaimIn | None) -> None:
        """Hand ``batch`` (and ``claim``) to the recorder's thread."""
        if self._recorder is None:
            self._recorder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ductline-recorder")
        self._inflight = batch
        self._handed = self._outage.now()
        self._future = self._recorder.submit(self._record_batch, batch, claim)
        self._future.add_done_callback(lambda _done: self._wake())

    def close(self) -> None:
        """Wait for the batch being recorded (applying it), then stop the recorder."""
        self._collect(wait=True)
        if self._recorder is not None:
            self._recorder.shutdown(wait=True)
            self._recorder = None

    def _collect(self, wait: bool = False) -> None:
        """On the loop's thread: apply what the recorder did with its batch."""
        if self._future is None or not (wait or self._future.done()):
            return
        future, self._future = self._future, None
        self._inflight = []
        self._apply(future.result())  # _record_batch returns what went wrong; a bug raises here

    def _apply(self, done: _Recorded) -> None:
        """On the loop's thread: apply what a recording did (`_record_batch`)."""
        self.pending = done.retry + self.pending
        if done.unavailable is not None:
            self._outage.failed("recording", done.unavailable)
            return
        self._timed(self._outage.now() - self._handed)
        for then in done.started:
            then()
        if not done.claimed:
            self._recorded()

    def _record_batch(self, batch: list[Outcome], claim: ClaimIn | None) -> _Recorded:
        """On the recorder's thread: record ``batch`` (and claim) in one transaction."""
        done = _Recorded()

        def then(tx: Tx) -> None:
            if claim is not None:
                done.started.append(claim(tx))
                done.claimed = True

        try:
            faults.checkpoint("before_record")
            self._record(batch, then, None if claim is None else claim.handoff)
        except StoreUnavailable as exc:
            return _Recorded(retry=batch, unavailable=exc)
        except Exception as exc:  # noqa: BLE001 - one bad outcome must not stall the rest
            done.started.clear()  # rolled back with the batch
            done.claimed = False
            done.retry = self._record_one_by_one(batch, exc)
        faults.checkpoint("after_record")
        return done

    def _record(self, batch: list[Outcome], then: Callable[[Tx], None] | None = None,
                handoff: Handoff | None = None) -> None:
        record_batch(self._store, batch, self._definitions, self._retry_delay, self._limits,
                     now_ms=self._now_ms, then=then, origin=self._origin, handoff=handoff,
                     max_releases=self._max_releases)

    def _record_one_by_one(self, batch: list[Outcome], first_error: Exception) -> list[Outcome]:
        """A batch failed for a reason other than an outage: record its outcomes one
        at a time, so one that cannot be recorded (and is logged and dropped: its
        lease expires and the job runs again) does not hold back the others.
        Returns those the database was unavailable for (to record again)."""
        log.warning("Recording a batch failed (%s); recording its %d outcome(s) one by one",
                    first_error, len(batch))
        again: list[Outcome] = []
        for outcome in batch:
            try:
                self._record([outcome])
            except StoreUnavailable:
                again.append(outcome)
            except Exception:  # noqa: BLE001
                log.exception("Cannot record this outcome; dropped (the job will run again)",
                              extra=job_extra(outcome.attempt))
        return again
