"""Firing schedules (`ductline.schedule`): exactly one run per tick, across any
number of workers and hosts.

- **Definitions.** When a worker starts it writes the schedules its apps declare for
  the pipelines it serves (`sync`): new ones start at the first tick after now; a
  changed cron moves the next fire to the first tick of the new cron after now; a
  schedule of one of its pipelines that its code no longer declares is marked
  removed from code (``defined = 0``): kept with its history, never fired, and shown
  by ``ductline schedules``; declared again, it resumes from the first tick after
  now. The operator's switch (``ductline schedules disable/enable``) is never
  changed by a worker.
- **Exactly once.** A tick is fired in one transaction that moves ``next_fire_ms``
  on with a compare-and-set (the row still holds the tick this worker judged) and
  inserts the run with the idempotency key ``schedule:<name>:<tick ISO 8601 UTC>``.
  Racing workers: one update changes the row, the others change nothing and insert
  nothing.
- **Catch-up.** Bounded: when several ticks were missed (workers down, or every
  slot busy), the latest ``catch_up`` of them fire (default 1: the latest only; at
  most `ductline.dsl.schedule.MAX_CATCH_UP`), oldest first, in the one transaction
  of the compare-and-set, and the next fire moves to the first tick after now. Each
  run's metadata records ``schedule``, ``tick`` and ``skipped_ticks`` (the missed
  ticks not fired, counted up to 1000), and a log line says so.
- **A tick has one run.** Every tick fired claims its row in
  ``ductline_schedule_ticks`` in the transaction that inserts its run; a tick a
  backfill (`ductline.operations.backfill`) already ran is not run again.
- **After ready jobs.** The worker asks `Scheduler.fire_due` only when its claim
  found no more ready jobs for its free slots, so a backlog of ready work is served
  first; an idle worker sets its wake-up timer to the next fire, so a tick starts
  within milliseconds of its time.
"""

from __future__ import annotations

import logging
from typing import Any

from ductline import codec, faults
from ductline.clock import DatabaseClock
from ductline.dsl.graph import Definition
from ductline.dsl.pipeline import registered
from ductline.dsl.schedule import (count_ticks, last_ticks, latest_tick_ms, next_tick_ms, registered_schedules,
                                   tick_iso, tick_key)
from ductline.errors import StoreError
from ductline.store import Store
from ductline.store import schedules as rows
from ductline.observability.events import EventName, emit
from ductline.operations.trigger import announce, insert, prepare

log = logging.getLogger("ductline.worker")

SKIP_COUNT_CAP = 1000
BATCH = 50


class Scheduler:
    """Fires the due ticks of the schedules of one worker's pipelines.

    Args:
        store: the database.
        definitions: the pipelines the worker serves, by name.
        clock: the worker's clock (its estimate of the database clock, too).
        refresh_seconds: the longest it trusts its idea of the next fire without
            reading the table again (other workers and the CLI change it too).
        enabled: ``False`` for a worker that neither writes nor fires schedules
            (the embedded worker of ``ductline run``).
    """

    def __init__(self, store: Store, definitions: dict[str, Definition], clock: DatabaseClock,
                 refresh_seconds: float, *, enabled: bool = True) -> None:
        self.store = store
        self.pipelines = sorted(definitions)
        self.schedules = registered_schedules(self.pipelines) if enabled else []
        self._catch_up = {s.name: s.catch_up for s in self.schedules}
        self.synced = not enabled  # a disabled scheduler must not mark schedules removed
        self.next_fire_ms: int | None = None  # database clock; None: none known
        self._clock = clock
        self._refresh = refresh_seconds
        self._refresh_at = 0.0  # monotonic

    def sync(self) -> None:
        """Write this worker's schedule definitions (see the module docstring).

        Raises:
            StoreError: the database is unavailable (`fire_due` tries again).
        """
        removed = rows.sync(self.store, self.schedules, self.pipelines, next_tick_ms)
        self.synced = True
        self._refresh_at = 0.0
        if self.schedules or removed:
            log.info("Schedules: %s; %d removed from code (kept, not fired)",
                     ", ".join(f"{s.name} ({s.cron})" for s in self.schedules) or "none", removed)

    def start(self) -> None:
        try:
            self.sync()
        except StoreError as exc:
            log.warning("Could not write the schedules at start (%s); trying again later", exc)

    def fire_due(self) -> int:
        """Fire every due tick (one transaction each); returns how many runs started.

        Cheap when nothing is due: it reads the table only when the known next fire
        has come or its knowledge is older than ``refresh_seconds``.

        Raises:
            StoreError: the database is unavailable.
        """
        if not self.synced:
            self.sync()
        if not self.schedules:
            return 0  # this worker's code declares none: it fires none
        now = self._clock.now()
        if now < self._refresh_at and (self.next_fire_ms is None or self._clock.db_now_ms() < self.next_fire_ms):
            return 0
        upcoming = rows.upcoming(self.store, self.pipelines, BATCH)
        self._refresh_at = now + self._refresh
        fired = 0
        following: list[int] = []
        for row in upcoming:
            if row.next_fire_ms > row.now_ms:
                following.append(row.next_fire_ms)
                break
            started, next_fire = self._fire(row)
            fired += started
            following.append(next_fire)
        else:
            if len(upcoming) == BATCH:  # more may be due: look again at once
                self._refresh_at = 0.0
        self.next_fire_ms = min(following) if following else None
        return fired

    def _fire(self, row: rows.DueSchedule) -> tuple[int, int]:
        """Fire the latest due ticks of one schedule (up to its ``catch_up``);
        ``(runs started, next fire)``."""
        latest = latest_tick_ms(row.cron, row.now_ms)
        next_fire = next_tick_ms(row.cron, row.now_ms)
        if latest < row.next_fire_ms:  # no tick between the recorded fire and now
            with self.store.transaction() as tx:
                rows.advance(tx, row.name, row.cron, row.next_fire_ms, next_fire)
            return 0, next_fire
        ticks = last_ticks(row.cron, row.next_fire_ms, latest, self._catch_up.get(row.name, 1)) or [latest]
        skipped = count_ticks(row.cron, row.next_fire_ms, ticks[0], SKIP_COUNT_CAP)
        started: list[tuple[Any, Any, int]] = []
        try:
            pipeline = registered(row.pipeline)
            # The stored arguments pass on as they are: a worker parent builds no user value.
            structure = tuple(codec.structure(row.args))
            prepared = [(tick, prepare(pipeline.definition(), structure, key=tick_key(row.name, tick),
                                       encoded_args=row.args)) for tick in ticks]
            # The runs commit together with the compare-and-set of the tick.
            with self.store.transaction() as tx:
                if not rows.advance(tx, row.name, row.cron, row.next_fire_ms, next_fire, last_fire_ms=latest):
                    return 0, next_fire  # another worker owns this tick
                last_run = None
                for tick, one in prepared:
                    if not rows.claim_tick(tx, row.name, tick, one.run.id):
                        log.info("Schedule %s: tick %s has a run already (a backfill); not run again",
                                 row.name, tick_iso(tick))
                        continue
                    handle = insert(tx, one)
                    last_run = handle.run_id
                    if not handle.created:
                        rows.set_tick_run(tx, row.name, tick, handle.run_id)
                        log.warning("Schedule %s: tick %s already has an active run %s; nothing new started",
                                    row.name, tick_key(row.name, tick), handle.run_id)
                        continue
                    rows.set_run_metadata(tx, handle.run_id, {"schedule": row.name, "tick": tick_iso(tick),
                                                              "skipped_ticks": skipped})
                    started.append((one, handle, tick))
                    faults.checkpoint("during_catch_up")
                if last_run is not None:
                    rows.set_last_run(tx, row.name, last_run)
        except StoreError:
            raise
        except Exception:  # noqa: BLE001 - a tick that cannot start must not block the schedule
            log.exception("Schedule %s: could not start the run of tick %s; skipping the tick", row.name,
                          tick_key(row.name, latest))
            with self.store.transaction() as tx:
                rows.advance(tx, row.name, row.cron, row.next_fire_ms, next_fire, last_fire_ms=latest)
            return 0, next_fire
        for one, handle, tick in started:
            announce(one, handle)
            emit(EventName.SCHEDULE_RUNS_STARTED, pipeline=row.pipeline, schedule=row.name,
                 reason="tick" if tick == latest else "catch_up", count=1)
            late = (row.now_ms - tick) / 1000
            if skipped and tick == ticks[0]:
                log.warning("Schedule %s fired tick %s (%.3f s late) as run %s; %d missed tick(s) skipped "
                            "(catch-up runs the latest %d)", row.name, tick_iso(tick), late, handle.run_id,
                            skipped, self._catch_up.get(row.name, 1))
            else:
                log.info("Schedule %s fired tick %s (%.3f s late) as run %s", row.name, tick_iso(tick), late,
                         handle.run_id)
        return len(started), next_fire


def earliest(*times: int | None) -> int | None:
    """The earliest of some optional times (``None`` if all are ``None``)."""
    known = [t for t in times if t is not None]
    return min(known) if known else None


def describe(row: dict[str, Any]) -> str:
    """A schedule's state in words: enabled, disabled, or removed from code."""
    if not row["defined"]:
        return "removed from code"
    return "enabled" if row["enabled"] else "disabled"
