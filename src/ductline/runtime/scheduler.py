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
- **Catch-up.** Never a burst: when several ticks were missed (workers down, or
  every slot busy), one run fires, for the latest missed tick, and the next fire
  moves to the first tick after now. The run's metadata records ``schedule``,
  ``tick`` and ``skipped_ticks`` (the missed ticks not fired, counted up to 1000),
  and a log line says so.
- **After ready jobs.** The worker asks `Scheduler.fire_due` only when its claim
  found no more ready jobs for its free slots, so a backlog of ready work is served
  first; an idle worker sets its wake-up timer to the next fire, so a tick starts
  within milliseconds of its time.
"""

from __future__ import annotations

import logging
from typing import Any

from ductline import codec
from ductline.clock import DatabaseClock
from ductline.dsl.graph import Definition
from ductline.dsl.pipeline import registered
from ductline.dsl.schedule import (count_ticks, latest_tick_ms, next_tick_ms, registered_schedules, tick_iso,
                                   tick_key)
from ductline.errors import StoreError
from ductline.store import Store
from ductline.store import schedules as rows
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
        """Fire the latest due tick of one schedule; ``(runs started, next fire)``."""
        latest = latest_tick_ms(row.cron, row.now_ms)
        next_fire = next_tick_ms(row.cron, row.now_ms)
        if latest < row.next_fire_ms:  # no tick between the recorded fire and now
            with self.store.transaction() as tx:
                rows.advance(tx, row.name, row.cron, row.next_fire_ms, next_fire)
            return 0, next_fire
        skipped = count_ticks(row.cron, row.next_fire_ms, latest, SKIP_COUNT_CAP)
        key = tick_key(row.name, latest)
        try:
            pipeline = registered(row.pipeline)
            # The stored arguments pass on as they are: a worker parent builds no user value.
            prepared = prepare(pipeline.definition(), tuple(codec.structure(row.args)), key=key,
                               encoded_args=row.args)
            # The run commits together with the compare-and-set of the tick.
            with self.store.transaction() as tx:
                if not rows.advance(tx, row.name, row.cron, row.next_fire_ms, next_fire, last_fire_ms=latest):
                    return 0, next_fire  # another worker owns this tick
                handle = insert(tx, prepared)
                rows.set_last_run(tx, row.name, handle.run_id)
                if handle.created:
                    rows.set_run_metadata(tx, handle.run_id, {"schedule": row.name, "tick": tick_iso(latest),
                                                          "skipped_ticks": skipped})
        except StoreError:
            raise
        except Exception:  # noqa: BLE001 - a tick that cannot start must not block the schedule
            log.exception("Schedule %s: could not start the run of tick %s; skipping the tick", row.name, key)
            with self.store.transaction() as tx:
                rows.advance(tx, row.name, row.cron, row.next_fire_ms, next_fire, last_fire_ms=latest)
            return 0, next_fire
        if not handle.created:
            log.warning("Schedule %s: tick %s already has an active run %s; nothing new started",
                        row.name, key, handle.run_id)
            return 0, next_fire
        announce(prepared, handle)
        late = (row.now_ms - latest) / 1000
        if skipped:
            log.warning("Schedule %s fired tick %s (%.3f s late) as run %s; %d missed tick(s) skipped "
                        "(catch-up fires only the latest)", row.name, tick_iso(latest), late, handle.run_id, skipped)
        else:
            log.info("Schedule %s fired tick %s (%.3f s late) as run %s", row.name, tick_iso(latest), late, handle.run_id)
        return 1, next_fire


def earliest(*times: int | None) -> int | None:
    """The earliest of some optional times (``None`` if all are ``None``)."""
    known = [t for t in times if t is not None]
    return min(known) if known else None


def describe(row: dict[str, Any]) -> str:
    """A schedule's state in words: enabled, disabled, or removed from code."""
    if not row["defined"]:
        return "removed from code"
    return "enabled" if row["enabled"] else "disabled"
