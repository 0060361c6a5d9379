"""The steps of the three versions of pipeline "rolling" (bench/rolling_deploy.py)."""

from __future__ import annotations

import random
import time


def work(x: int) -> int:
    time.sleep(random.uniform(0.02, 0.06))  # a short step: runs stay in flight through the deploy
    return x + 1


def a(x: int) -> int:
    return work(x)


def b(x: int) -> int:
    return work(x)


def b2(x: int) -> int:
    return work(x)


def c(x: int) -> int:
    return work(x)


def d(x: int) -> int:
    return work(x)
