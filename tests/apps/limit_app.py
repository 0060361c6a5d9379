"""Pipelines with priorities and concurrency/rate limits, for tests/limits."""

from __future__ import annotations

import time

from ductline import Pipeline


def hold(x):
    time.sleep(0.3)
    return x


def hold_order(order):
    time.sleep(0.25)
    return order["n"]


def quick(x):
    return x


def note(x):
    return x


def first(x):
    return x


def second(x):
    return x


capped = Pipeline("capped").start(hold, concurrency=2)
per_customer = Pipeline("per_customer").start(quick, name="receive").chain(
    to=hold_order, concurrency=1, concurrency_key="customer")
rated = Pipeline("rated").start(quick, rate=4)
ranked = Pipeline("ranked", priority=1).start(note)
stepped = Pipeline("stepped").start(first, priority=10).chain(to=second, priority=-3)
relay = Pipeline("relay").start(first).chain(to=second).chain(to=note)


def slow(x):
    time.sleep(1.5)
    return x


single = Pipeline("single").start(slow, concurrency=1, max_crash=3)


def sleepy(x):
    """Notes its pid in $LIMIT_PIDS/<x> and sleeps: a test can tell whether it still runs."""
    import os

    with open(os.path.join(os.environ["LIMIT_PIDS"], str(x)), "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(3)
    return x


exclusive = Pipeline("exclusive").start(sleepy, concurrency=1)
