"""Backfill: start the runs of a schedule's past ticks over a range, each tick once.

Each tick of the range is claimed in ``ductline_schedule_ticks`` in the transaction
that inserts its run (idempotency key ``schedule:<name>:<tick>``, as a worker firing
the tick uses), so a tick never has two runs: not when a backfill is repeated (the
claim stays after the run ended), not when backfills race each other or a worker
firing the same tick (the primary key decides; the loser writes nothing). One
transaction per tick: a backfill stopped half-way keeps the ticks it started, and
the next one starts the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ductline import codec, faults
from ductline.dsl.pipeline import registered
from ductline.dsl.schedule import tick_iso, tick_key, ticks_between
from ductline.errors import ScheduleNotFound
from ductline.observability.events import EventName, emit
from ductline.operations.trigger import announce, insert, prepare
from ductline.store import schedules as rows

if TYPE_CHECKING:
    from ductline.store import Store

# The most ticks one backfill covers: a month of hourly ticks, a week of quarter-hours.
# A larger range is refused before anything is written (split it).
MAX_BACKFILL_TICKS = 1000


@dataclass(slots=True)
class BackfillReport:
    """What a backfill did: ``started`` and ``existing`` are ``(tick ISO 8601 UTC,
    run id)`` pairs, oldest tick first (``existing``: the tick had a run already)."""

    schedule: str
    started: list[tuple[str, str]] = field(default_factory=list)
    existing: list[tuple[str, str]] = field(default_factory=list)


def backfill(store: "Store", name: str, from_ms: int, to_ms: int) -> BackfillReport:
    """Start a run for every tick of schedule ``name`` in ``[from_ms, to_ms]`` (epoch
    ms, UTC) that has none, with the schedule's stored arguments.

    The schedule's pipeline must be defined in this process (its module imported):
    its first step is checked and its first job built as a trigger builds them. The
    schedule may be disabled or removed from code; a backfill is the operator's
    explicit request.

    Raises:
        ScheduleNotFound: no schedule is named ``name``.
        ductline.PipelineNotFound: its pipeline is not defined in this process.
        ValueError: ``from_ms`` after ``to_ms``, ``to_ms`` after now (the database's
            clock: a tick has one run ever, so a future one would never fire on
            time), or a range holding more than `MAX_BACKFILL_TICKS` ticks
            (nothing is written).
        TypeError: the stored arguments no longer fit the first step.
        StoreError: the database failed; ticks started before it stay started.
    """
    if from_ms > to_ms:
        raise ValueError(f"--from ({tick_iso(from_ms)}) is after --to ({tick_iso(to_ms)})")
    now_ms = store.now_ms()
    if to_ms > now_ms:
        # A tick has one run ever: a future tick started now would never fire on time.
        raise ValueError(f"--to ({tick_iso(to_ms)}) is in the future (now {tick_iso(now_ms)}): a backfill covers "
                         "past ticks; later ones fire on schedule")
    row = rows.get(store, name)
    if row is None:
        raise ScheduleNotFound(f"no schedule named {name!r} (a schedule is written when a worker serving its "
                               "pipeline starts: start one with the app that declares it first)")
    ticks = ticks_between(row["cron"], from_ms, to_ms, MAX_BACKFILL_TICKS)
    if len(ticks) > MAX_BACKFILL_TICKS:
        raise ValueError(f"the range holds more than {MAX_BACKFILL_TICKS} ticks of {row['cron']!r} (the limit of "
                         "one backfill); split it")
    definition = registered(row["pipeline"]).definition()
    structure = tuple(codec.structure(row["args"]))
    # Every tick is prepared (checked, encoded) before the first is written.
    prepared = [(tick, prepare(definition, structure, key=tick_key(name, tick), encoded_args=row["args"]))
                for tick in ticks]
    report = BackfillReport(name)
    had = rows.tick_runs(store, name, from_ms, to_ms)
    for tick, one in prepared:
        if tick in had:
            report.existing.append((tick_iso(tick), had[tick]))
            continue
        with store.transaction() as tx:
            if not rows.claim_tick(tx, name, tick, one.run.id):
                handle = None  # claimed since the read above: a racing backfill or worker
            else:
                handle = insert(tx, one)
                if handle.created:
                    rows.set_run_metadata(tx, handle.run_id, {"schedule": name, "tick": tick_iso(tick),
                                                              "backfill": True})
                else:  # an active run holds the tick's key: the tick is that run's
                    rows.set_tick_run(tx, name, tick, handle.run_id)
                faults.checkpoint("during_backfill")
        if handle is None:
            report.existing.append((tick_iso(tick), rows.tick_runs(store, name, tick, tick)[tick]))
        elif handle.created:
            announce(one, handle)
            report.started.append((tick_iso(tick), handle.run_id))
        else:
            report.existing.append((tick_iso(tick), handle.run_id))
    if report.started:
        emit(EventName.SCHEDULE_RUNS_STARTED, pipeline=row["pipeline"], schedule=name, reason="backfill",
             count=len(report.started))
    return report
