"""Pipelines and schedules for tests/schedules, imported by worker processes by path.

Never import this module in the pytest process: a worker built there (build_worker
serves every pipeline registered in the process) would also fire these schedules.

Which schedules exist is chosen by the environment: ``SCHED_SET`` is a comma list of
``every_second``, ``daily``, ``hourly`` and ``catching`` (daily, catch_up=3); ``SCHED_CRON`` overrides the cron of ``hourly``.
"""

from __future__ import annotations

import os

from sched_app_backlog import working  # noqa: F401  (the backlog pipeline)

import ductline
from ductline import Pipeline


def tick(*args):
    return list(args)


ticking = Pipeline("sched_ticking").start(tick)
daily = Pipeline("sched_daily").start(tick)
catching = Pipeline("sched_catching").start(tick)

WANTED = set(filter(None, os.environ.get("SCHED_SET", "").split(",")))

if "every_second" in WANTED:
    ductline.schedule(ticking, cron="* * * * * *", args=("s",), name="every_second")
if "daily" in WANTED:
    ductline.schedule(daily, cron="0 0 * * *", args=(1, {"a": "b"}), name="daily")
if "hourly" in WANTED:
    ductline.schedule(ticking, cron=os.environ.get("SCHED_CRON", "0 * * * *"), args=("h",), name="hourly")
if "catching" in WANTED:
    ductline.schedule(catching, cron="0 0 * * *", args=("c",), name="catching", catch_up=3)
