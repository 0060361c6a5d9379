"""Pipelines for the pause tests (issue 8, item 1): a run that waits for a person
before a step. Imported by workers as ``pause_app`` from tests/apps."""

from __future__ import annotations

import time
from datetime import timedelta

from ductline import Pipeline


def prepare(x):
    return {"order": x}


def approve(request):
    return {"approved": request}


def finish(decision):
    return decision


def side(request):
    return {"side": request["order"]}


def slow_side(request):
    time.sleep(60)
    return "never"


def collect(outputs):
    return outputs


# prepare -> [pause] approve -> finish
chain = Pipeline("pause_chain").start(prepare).chain(to=approve).chain(to=finish).pause(before=approve)

# the same, with a pause that expires after one second
expiring = (Pipeline("pause_expiring").start(prepare).chain(to=approve).chain(to=finish)
            .pause(before="approve", timeout=1))

# a run deadline of 2 s; the pause itself has no timeout
deadline = (Pipeline("pause_deadline", timeout=2).start(prepare).chain(to=approve).chain(to=finish)
            .pause(before=approve))

# one branch pauses, the other finishes meanwhile
divided = (Pipeline("pause_divide").start(prepare).divide(to=[approve, side]).combine(into=collect)
           .pause(before=approve))

# one branch pauses for one second, the other is still running when the pause expires
expiring_divided = (Pipeline("pause_expiring_divide").start(prepare).divide(to=[approve, slow_side])
                    .combine(into=collect).pause(before=approve, timeout=1))

# a pause of one hour (a timedelta), to read its expiry
long = (Pipeline("pause_long").start(prepare).chain(to=approve)
        .pause(before=approve, timeout=timedelta(hours=1)))


def elements(x):
    return x


# every element of an expand pauses before approve
paused_elements = (Pipeline("pause_elements").start(elements).expand(to=approve).collapse(into=collect)
                   .pause(before=approve))


def broken(request):
    raise RuntimeError("boom")


# one branch pauses, the other fails for good (max_retry=0) and halts the run
halting = (Pipeline("pause_halting").start(prepare).divide(to=[approve, broken], max_retry=0)
           .combine(into=collect).pause(before=approve))
