"""Pipelines exercised by the step-delay tests (tests/delays). Workers import this
file as the module ``delay_app`` (``--app tests/apps/delay_app.py``); the tests
import it by the same name, so both sides agree on the definitions."""

from __future__ import annotations

import time

import ductline
from ductline import Pipeline


# -- chain ---------------------------------------------------------------------------
def first(x):
    return x + 1


def second(x):
    return x * 10


def third(x):
    return x - 1


# first -> (2 s) -> second -> (1 s) -> third
chain = Pipeline("delay_chain").start(first).chain(to=second, delay=2).chain(to=third, delay=1)


# -- start delay (definition default; trigger(delay=/delay_until=) override it) ------------
def started(x):
    return x


start_delayed = Pipeline("delay_start").start(started, delay=3)


# -- divide / combine ------------------------------------------------------------------------
def split(x):
    return x


def fast_branch(x):
    return f"fast{x}"


def slow_branch(x):
    time.sleep(1.0)
    return f"slow{x}"


def join(pair):
    return pair


# both branch heads get delay=1; combine waits 2 s after the LAST (slow) branch finished
divided = Pipeline("delay_divide").start(split).divide(to=[fast_branch, slow_branch], delay=1)
divided.combine(into=join, delay=2)


# -- expand / collapse ----------------------------------------------------------------------
def make_items(n):
    return list(range(n))


def sleepy_item(i):
    time.sleep(0.4 * (i % 3))  # the elements finish at different times
    return i * i


def gather(items):
    return items


# every element gets delay=1; collapse waits 2 s after the LAST element finished
expanded = (Pipeline("delay_expand").start(make_items).expand(to=sleepy_item, delay=1)
            .collapse(into=gather, delay=2))


# -- delay + timeout: the delay must not eat into the timeout ------------------------------
def slow_but_in_time(x):
    time.sleep(1.5)
    return x


delay_and_timeout = Pipeline("delay_timeout").start(slow_but_in_time, delay=2, timeout=2, max_retry=1)


# -- restart safety: a quick first step, then a delayed second step --------------------------
def quick(x):
    return x


def after_pause(x):
    return x


# Long enough that creating all 20 delayed jobs and stopping both workers fits inside
# it on a loaded machine: the test checks that nothing started before the restart.
RESTART_DELAY = 10
restart = Pipeline("delay_restart").start(quick).chain(to=after_pause, delay=RESTART_DELAY)


# -- a step that never runs during a test (one-row test) -----------------------------------------
def far_future(x):
    return x


def ready_now(x):
    return x


waiting = Pipeline("delay_waiting").start(far_future, delay=3600)
ready = Pipeline("delay_ready").start(ready_now)


# -- a step that keeps the only slot busy right after a timer wake-up ------------------------------
def hold_slot(seconds):
    time.sleep(seconds)
    return seconds


busy_after_timer = Pipeline("delay_busy").start(hold_slot, delay=1)


# -- revive a halted run while a delayed step waits ------------------------------------------------
def fork(x):
    return x


def fails_first_time(x):
    time.sleep(0.3)
    if ductline.context().attempt == 1:
        raise RuntimeError("first attempt fails")
    return "recovered"


def on_time(x):
    return "ok"


def later(x):
    return "later"


def merge(pair):
    return pair


revive = Pipeline("delay_revive").start(fork).divide(to=[fails_first_time, on_time], max_retry=1)
revive.branch(on_time).chain(to=later, delay=2)
revive.combine(into=merge)
