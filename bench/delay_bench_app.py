"""Pipelines used by bench/delays.py. Workers import this file as the module
``delay_bench_app`` (``--app bench/delay_bench_app.py``); the benchmark driver
imports it by the same name, so both sides agree on the pipeline definitions."""

from __future__ import annotations

import time

from ductline import Pipeline


def stamp(x=None):
    """Return the wall-clock time (ms since the epoch) at which the step body ran.

    The database runs on the same host, so this clock is the database clock: the
    benchmark compares it with the job's not-before / created times to measure when
    the step really began, not only when its claim was written."""
    return int(time.time() * 1000)


bench_stamp = Pipeline("bench_delay_stamp").start(stamp)
