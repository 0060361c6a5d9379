"""Pipelines for the event tests (issue 37, item 1): a run that waits for a named
event before a step. Imported by workers as ``events_app`` from tests/apps."""

from __future__ import annotations

import os
import time

from ductline import Pipeline


def prepare(x):
    return {"order": x}


def slow_prepare(x):
    time.sleep(1)
    return {"order": x}


def ship(payment):
    """Records each run of it in $EVENTS_APP_LOG (one line per call)."""
    path = os.environ.get("EVENTS_APP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"ship {payment!r}\n")
    return {"shipped": payment}


def finish(result):
    return result


def slow_side(order):
    time.sleep(60)
    return "never"


def side(order):
    return {"side": order["order"]}


def collect(outputs):
    return outputs


# prepare -> [wait for "paid"] ship -> finish
orders = Pipeline("events_orders").start(prepare).chain(to=ship).chain(to=finish).wait_for("paid", before=ship)

# the same, with a first step that takes a second (an event sent at once comes before the wait)
slow_orders = (Pipeline("events_slow_orders").start(slow_prepare).chain(to=ship).chain(to=finish)
               .wait_for("paid", before=ship))

# a wait that times out after one second; a divide whose other branch still runs then
expiring = (Pipeline("events_expiring").start(prepare).divide(to=[ship, slow_side]).combine(into=collect)
            .wait_for("paid", before=ship, timeout=1))

# a divide whose other branch finishes while the wait goes on
divided = (Pipeline("events_divided").start(prepare).divide(to=[ship, side]).combine(into=collect)
           .wait_for("paid", before=ship))

# a wait of an hour (a fake clock passes it at once)
hour_wait = (Pipeline("events_hour_wait").start(prepare).chain(to=ship).chain(to=finish)
             .wait_for("paid", before=ship, timeout=3600))
