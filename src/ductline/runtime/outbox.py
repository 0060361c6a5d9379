"""Outcomes a worker has seen but not yet recorded, and the back-off every phase
that needs the database shares while it is unavailable.

Outcomes are recorded in batches (one transaction for many completions). While
jobs claimed ahead keep every child busy, a batch may wait up to `HOLD_SECONDS`
for more outcomes (group commit); as soon as a child would go without work, or
the worker stops, it is recorded at once (with the claims that refill it). While
the database is down they wait here, and their leases are still renewed with the
running ones (`ductline.runtime.heartbeat`): a result recorded late is still the
result; one dropped would run the step again.
"""

from __future__ import annotations

import logging
from typing import Callable

from ductline.clock import Clock
from ductline.dsl.graph import Definition
from ductline.errors import DatabaseReplaced, StoreError, StoreUnavailable
from ductline.runtime import faults
from ductline.runtime.outcomes import Outcome, job_extra, record_batch
from ductline.store import Store, payloads
from ductline.store.store import Tx

log = logging.getLogger("ductline.worker")

OUTAGE_BACKOFF_SECONDS = 0.5
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
        log.warning("Database unavailable during %s: %s", what, exc)
        self.until = self._clock.now() + OUTAGE_BACKOFF_SECONDS


class Outbox:
    """The outcomes waiting to be recorded.

    Args:
        store: the database.
        definitions: the worker's pipelines, by name.
        retry_delay: the default ``retry_delay`` in seconds.
        limits: the worker's payload limits.
        outage: the shared back-off.
        now_ms: the database clock's time now (epoch ms; for job runtimes).
        recorded: called after a batch was recorded (completions may have made
            new jobs ready).
    """

    def __init__(self, store: Store, definitions: dict[str, Definition], retry_delay: int,
                 limits: payloads.Limits, outage: Outage, now_ms: Callable[[], float],
                 recorded: Callable[[], None]) -> None:
        self._store = store
        self._definitions = definitions
        self._retry_delay = retry_delay
        self._limits = limits
        self._outage = outage
        self._now_ms = now_ms
        self._recorded = recorded
        self.pending: list[Outcome] = []
        self._since = 0.0  # monotonic: when the oldest pending outcome arrived
        # Set by the worker: whether to record now rather than wait for more outcomes
        # (a child would go without work, or the worker stops).
        self.urgent: Callable[[], bool] = lambda: True
        # Set by the worker: claims inside the recording transaction for the slots the
        # batch freed and returns what to do once it committed (start the attempts).
        self.claim_in: Callable[[Tx], Callable[[], None] | None] | None = None

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, outcome: Outcome) -> None:
        if not self.pending:
            self._since = self._outage.now()
        self.pending.append(outcome)

    def lease_tokens(self) -> list[str]:
        return [o.attempt.lease_token for o in self.pending]

    def retry_at(self) -> float | None:
        """When the loop must wake to record (monotonic), if it must: when the
        database's back-off ends, or when pending outcomes waited long enough."""
        if not self.pending:
            return None
        return max(self._outage.until, self._since + HOLD_SECONDS)

    def flush(self) -> None:
        """Record what is pending, unless the database is backing off or the
        outcomes may still wait for others (`HOLD_SECONDS`)."""
        if not self.pending or not self._outage.ok():
            return
        if self._outage.now() < self._since + HOLD_SECONDS and not self.urgent():
            return
        batch, self.pending = self.pending, []
        started: list[Callable[[], None]] = []

        def claim(tx: Tx) -> None:
            # The next jobs are claimed in the transaction that records these outcomes:
            # a child that just finished gets its next job without another commit, and
            # a chain's next step (inserted just above) can be claimed right away.
            then = self.claim_in(tx) if self.claim_in is not None else None
            if then is not None:
                started.append(then)

        try:
            faults.checkpoint("before_record")
            self._record(batch, claim)
        except StoreUnavailable as exc:
            self.pending = batch + self.pending
            self._outage.failed("recording", exc)
            return
        except Exception as exc:  # noqa: BLE001 - one bad outcome must not stall the rest
            started.clear()  # rolled back with the batch
            self._record_one_by_one(batch, exc)
        faults.checkpoint("after_record")
        for then in started:
            then()
        self._recorded()

    def _record(self, batch: list[Outcome], then: Callable[[Tx], None] | None = None) -> None:
        record_batch(self._store, batch, self._definitions, self._retry_delay, self._limits,
                     now_ms=self._now_ms, then=then)

    def _record_one_by_one(self, batch: list[Outcome], first_error: Exception) -> None:
        """A batch failed for a reason other than an outage: record its outcomes one
        at a time, so one that cannot be recorded (and is logged and dropped: its
        lease expires and the job runs again) does not hold back the others."""
        log.warning("Recording a batch failed (%s); recording its %d outcome(s) one by one",
                    first_error, len(batch))
        for outcome in batch:
            try:
                self._record([outcome])
            except StoreUnavailable:
                self.pending.append(outcome)
            except Exception:  # noqa: BLE001
                log.exception("Cannot record this outcome; dropped (the job will run again)",
                              extra=job_extra(outcome.attempt))
