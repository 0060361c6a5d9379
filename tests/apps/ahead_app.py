"""Pipelines of the claim-ahead tests (tests/runtime/test_claim_ahead.py): a step
that is quick (so the worker claims ahead) unless its input asks it to sleep, and
that notes every call in the file named by AHEAD_MARKS."""

from __future__ import annotations

import os
import time

from ductline import Pipeline


def noted(x):
    with open(os.environ["AHEAD_MARKS"], "a", encoding="utf-8") as fh:
        fh.write(f"{x}\n")
    if isinstance(x, str) and x.startswith("sleep"):
        time.sleep(float(x[len("sleep"):]))
    return x


ahead = Pipeline("ahead_noted").start(noted)
