"""Pipelines of the claim-ahead tests (tests/runtime/test_claim_ahead.py): a step
that is quick (so the worker claims ahead) unless its input is "hold", and that
notes every call in the file named by AHEAD_MARKS. A held call returns once the
test creates the release file (AHEAD_MARKS + ".release"), so the slot stays busy
for as long as the test needs, however slow the machine."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ductline import Pipeline


def noted(x):
    with open(os.environ["AHEAD_MARKS"], "a", encoding="utf-8") as fh:
        fh.write(f"{x}\n")
    if x == "hold":
        release = Path(os.environ["AHEAD_MARKS"] + ".release")
        end = time.monotonic() + 300  # a bound, so a failing test cannot leave it forever
        while not release.exists() and time.monotonic() < end:
            time.sleep(0.01)
    return x


# A timeout far past any hold: a queued job's deadline counts from its start (the test reads it).
ahead = Pipeline("ahead_noted").start(noted, timeout=600)


def plus_one(x):
    return x + 1


# A chain alone (tests/runtime/test_recorder.py): each hop is claimed by the recording of the last.
chain = Pipeline("ahead_chain").start(plus_one, name="hop_0")
for _i in range(1, 20):
    chain.chain(to=plus_one, name=f"hop_{_i}")


def noted_or_failed(x):
    noted(x)
    if x == "fail":
        raise RuntimeError("fails on purpose")
    return x


# A failure and the job after it (tests/runtime/test_recorder.py): one attempt, no retry.
failing = Pipeline("ahead_failing").start(noted_or_failed, max_retry=0)
