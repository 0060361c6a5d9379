"""Pipelines of the observability tests (imported by workers as ``obs_app`` from tests/apps)."""

from __future__ import annotations

import ctypes

import ductline
from ductline import Pipeline


def stubborn(x):
    """Blocks in C (killable only from outside) on attempts 1 and 2; returns on 3."""
    attempt = ductline.context().attempt
    if attempt < 3:
        ctypes.CDLL(None).sleep(30)
    return {"x": x, "attempt": attempt}


timeout_then_ok = Pipeline("obs_timeout_then_ok").start(stubborn, timeout=1, max_retry=3, retry_delay=0)


def echo(x):
    return x


def later(x):
    return x


# A first step that finishes at once and a second one delayed for an hour: the
# queue gauges see one delayed job.
delayed_chain = Pipeline("obs_delayed").start(echo).chain(to=later, delay=3600)


def waits(x):
    return x


# A one-second whole-run deadline (the tracing test claims the job and lets it pass).
deadline_pipeline = Pipeline("obs_deadline", timeout=1).start(waits)
