"""The claim of delayed jobs before their time: when a worker claims ahead of a
delayed job's not-before time, and how many such jobs it takes.

A delayed job is claimed `HORIZON_SECONDS` before its not-before time: the timer
fires that much early (`early_claim_time`), and a claim that found no more ready
jobs then also claims those of steps without limits that become ready within the
horizon (`ductline.store.claims`), at most `EARLY_PER_SLOT` per slot
(`early_room`). They wait apart in the queue ahead (`Ahead.add_early`) and start at
their time, when the database clock has surely passed it (`DatabaseClock.passed`),
with no claim transaction on the path; their attempts' clocks start then, as a
queued job's do (`ductline.runtime.claimer`). A job due later is left to the worker
that comes first.
"""

from __future__ import annotations

import logging

from ductline.clock import DatabaseClock
from ductline.errors import StoreError
from ductline.runtime.ahead import Ahead
from ductline.store import Store
from ductline.store.records import ClaimedJob
from ductline.store.store import Tx

log = logging.getLogger("ductline.worker")

# How long before its not-before time a delayed job is claimed (seconds): longer than
# a claim transaction takes on a busy machine (3 to 12 ms, tens under heavy load), so
# that the claim is over before the job is due; short, so that a job is held from
# other workers only for moments.
HORIZON_SECONDS = 0.05
# Jobs claimed before their time that a worker holds at most, per slot.
EARLY_PER_SLOT = 32
# The database clock's error bound (milliseconds) over which jobs just claimed before
# their time have the clock read once more on its own (`Horizon.tighten_clock`).
CLOCK_PROBE_ABOVE_MS = 0.5


class Horizon:
    """A worker's claims of jobs due within the horizon: whether a claim looks that
    far, how many jobs it takes there, and the clock read that follows them.

    Args:
        store: the worker's store (its clock is read on its own by `tighten_clock`).
        clock: the worker's database clock.
        worker_id: the claiming worker.
        pipelines: the names of the pipelines it serves.
        lease_ms: the lease a claim takes (milliseconds).
        queues: the queues it serves.
        definitions: the fingerprints of the definitions it serves
            (`ductline.dsl.graph.served_definitions`).
    """

    def __init__(self, store: Store, clock: DatabaseClock, worker_id: str, pipelines: list[str], *,
                 lease_ms: int, queues: list[str], definitions: list[str]) -> None:
        self._store = store
        self._clock = clock
        self._worker_id = worker_id
        self._pipelines = pipelines
        self._lease_ms = lease_ms
        self._queues = queues
        self._definitions = definitions
        # The next not-before time a claim saw (epoch ms, database clock): within the
        # horizon, a claim takes the jobs that become ready then too.
        self._upcoming_ms: int | None = None

    def saw(self, upcoming_ms: int | None) -> None:
        """A claim ran dry and read the next not-before time, ``upcoming_ms`` (epoch
        ms, database clock; ``None``: no job waits for its time)."""
        self._upcoming_ms = upcoming_ms

    def in_time(self, ahead: Ahead, usable: int) -> int:
        """How many jobs ``usable`` slots start within the horizon at the recent
        attempt length (`Ahead.started_within`)."""
        return ahead.started_within(usable, HORIZON_SECONDS)

    def claim(self, tx: Tx, unfilled: int, held: int, usable: int, in_time: int,
              sent: float) -> tuple[list[ClaimedJob], float | None]:
        """After a claim sent at ``sent`` (monotonic seconds) found ``unfilled`` fewer
        ready jobs than it wanted: the jobs due within the horizon it takes too, to
        start at their times (`early_room` says how many; ``held``, ``usable`` and
        ``in_time`` as it takes them), and up to when it looked for them (monotonic
        seconds, for `claim_time`; ``None``: it did not look within the horizon at
        all, the next not-before time is not that near)."""
        looked = unfilled > 0 and self._upcoming_soon()
        looked_until = sent + HORIZON_SECONDS if looked else None
        room = early_room(unfilled, held, usable, in_time) if looked else 0
        if not room:
            return [], looked_until
        return tx.claim(self._worker_id, self._pipelines, room, self._lease_ms, queues=self._queues,
                        definitions=self._definitions, horizon_ms=round(HORIZON_SECONDS * 1000)), looked_until

    def claim_time(self, due: float, now: float, looked_until: float | None) -> float | None:
        """When to claim for a job due at ``due`` before its time (monotonic seconds),
        or ``None``: at its time (`early_claim_time`, with `HORIZON_SECONDS`)."""
        return early_claim_time(due, now, looked_until, HORIZON_SECONDS)

    def tighten_clock(self) -> None:
        """Measure the database clock on its own when jobs were just claimed before
        their time and the kept measurement's error bound is over `CLOCK_PROBE_ABOVE_MS`:
        a held job waits that bound past its time (`DatabaseClock.passed`), and the
        bound of a claim's measurement is half the whole claim transaction (3 to 12 ms
        on a busy machine), or an older one's grown with its age. One read of the
        clock is one short round trip, so its bound is a fraction of a millisecond."""
        if self._clock.error_ms() <= CLOCK_PROBE_ABOVE_MS:
            return
        try:
            sent = self._clock.now()
            db_ms = self._store.now_ms()
            self._clock.measure(db_ms, sent, self._clock.now())
        except StoreError as exc:
            # The held jobs then start by the older measurement, later but never early.
            log.debug("Database clock not read (%s)", exc)

    def confirm(self, ahead: Ahead, jobs: list[ClaimedJob]) -> None:
        """Confirm the leases of held ``jobs`` whose time came, just queued in
        ``ahead`` (`Ahead.promote`), before any of them starts: one read that waits
        for a stop of their runs still open (`Store.confirm_leases`). A job whose
        lease is gone is dropped, never started. If the database cannot be asked,
        the jobs stay unconfirmed and wait for the heartbeat's renewal (`Ahead.stale`).

        Only once their time has surely passed, not a few milliseconds ahead of it:
        the confirmation's row locks are gone when its statement ends, and a stop
        that locks the rows after it but reads its instant before the job's time
        judges the job not begun (`ductline.model.stops.begun_by`) -- it would skip
        the step while this worker starts it.
        """
        if not jobs:
            return
        try:
            sent = self._clock.now()
            held = self._store.confirm_leases([(job.job_id, job.lease_token) for job in jobs])
        except StoreError as exc:
            log.debug("Leases of held jobs not confirmed (%s); the heartbeat renews them", exc)
            return
        for job in ahead.confirmed({job.lease_token for job in jobs}, held, sent):
            # Its run was stopped before the job's time, or it was rescued: never started.
            log.info("Lease of a job claimed ahead was lost; not starting it", extra={
                "run_id": job.run_id, "job_id": job.job_id, "step": job.step, "attempt": job.attempt})

    def _upcoming_soon(self) -> bool:
        """The next not-before time the last claim saw is within the horizon."""
        return HORIZON_SECONDS > 0 and self._upcoming_ms is not None and \
            self._upcoming_ms <= self._clock.db_now_ms() + HORIZON_SECONDS * 1000


def early_claim_time(due: float, now: float, looked_until: float | None, horizon: float) -> float | None:
    """When to claim a delayed job before its time (monotonic seconds), or ``None``:
    claim it at its time.

    Args:
        due: when the job becomes ready (monotonic seconds).
        now: the time the last claim ran dry (monotonic seconds).
        looked_until: the last claim looked for jobs due within the horizon, at least
            up to this instant (its start plus the horizon); ``None``: it did not.
        horizon: how long before its time a job is claimed (seconds).

    A job inside the window the last claim looked at was left by it on purpose (a
    limited step, or no room): claiming again before its time would spin. A job due
    after that window is claimed ``horizon`` before its time, or at once if that is
    past -- the window moves on while a claim runs, and the next job is often due
    just past it.
    """
    if horizon <= 0 or (looked_until is not None and due <= looked_until):
        return None
    return max(due - horizon, now)


def early_room(unfilled: int, held: int, usable_slots: int, in_time: int = 0) -> int:
    """How many jobs a claim may take before their not-before times: as many as it
    wanted and found no ready job for (its free slots, and the room of the queue
    ahead, which is none while attempts are long or not yet seen: `Ahead.room`), or
    as many as its slots start within the horizon at the recent attempt length
    (``in_time``, `Ahead.started_within`: short attempts, jobs due one after another),
    whichever is more, less the jobs already held for their times, at most
    `EARLY_PER_SLOT` per slot. A job held beyond that would wait for a slot after its
    time, taken from idle workers until the queue is given back as overdue."""
    return max(0, min(EARLY_PER_SLOT * usable_slots, max(unfilled, in_time)) - held)
