"""Steps for bench/deadline.py: a run whose two branches are stuck in C at the deadline."""

import ctypes

from ductline import Pipeline


def fan(x):
    return x


def stuck_a(x):
    ctypes.CDLL(None).sleep(60)


def stuck_b(x):
    ctypes.CDLL(None).sleep(60)


def joined(pair):
    return pair


pipeline = (Pipeline("bench_deadline", timeout=1).start(fan)
            .divide(to=[stuck_a, stuck_b]).combine(into=joined))
