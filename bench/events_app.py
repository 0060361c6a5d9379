"""Pipelines used by bench/events.py. Workers import this file as the module
``events_app`` (``--app bench/events_app.py``); the benchmark driver imports it by
the same name, so both sides agree on the pipeline definitions."""

from __future__ import annotations

import time

from ductline import Pipeline


def begin(x=None):
    return x


def stamp(data=None):
    """The wall-clock time (ms since the epoch) at which the released step's body ran
    (the database runs on the same host: this clock is the database clock)."""
    return int(time.time() * 1000)


waiting = Pipeline("bench_event_wait").start(begin).chain(to=stamp).wait_for("go", before=stamp)
