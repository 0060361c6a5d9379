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
