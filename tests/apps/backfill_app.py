"""A pipeline for backfill tests (tests/schedules/test_schedule_backfill.py): its
schedule row is written by the test, so importing this declares no schedule."""

from __future__ import annotations

from ductline import Pipeline


def tick(*args):
    return list(args)


backfilled = Pipeline("bf_pipeline").start(tick)
