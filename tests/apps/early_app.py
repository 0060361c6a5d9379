"""Pipelines of the tests of jobs claimed before their time
(tests/runtime/test_claimed_before_due.py): a step that notes every call in the file
named by EARLY_MARKS and returns when it was called (epoch seconds)."""

from __future__ import annotations

import os
import time

from ductline import Pipeline


def called_at(x):
    with open(os.environ["EARLY_MARKS"], "a", encoding="utf-8") as fh:
        fh.write(f"{x}\n")
    return time.time()


# A step timeout and a run deadline, both counted from the step's real start.
early = Pipeline("early_called", timeout=60).start(called_at, timeout=30)



def handed_on(x):
    return x


# A run deadline that falls while the delayed second step is held by the worker that
# claimed it before its time (with the horizon widened to 4 s): 3 s from the run's
# start (the first step's claim), while the second step is due 5 s after the first
# one completed, so held from 1 s after it.
deadline_in_hold = Pipeline("early_deadline", timeout=3).start(handed_on).chain(to=called_at, delay=5)

# No run deadline: nothing on the start of its held first step writes to the database
# unless the worker confirms the step's lease.
plain = Pipeline("early_plain").start(called_at)

# A 1 s run deadline that starts at the first step's claim: a claim well before the
# step's time sets it before that time.
short_deadline = Pipeline("early_short_deadline", timeout=1).start(called_at)
