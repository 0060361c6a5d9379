"""The backlog pipeline of sched_app, importable by the pytest process (no schedules)."""

from __future__ import annotations

import time

from ductline import Pipeline


def work(n):
    time.sleep(0.1)
    return n


working = Pipeline("sched_working").start(work)
