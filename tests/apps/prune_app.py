"""Pipelines whose runs the retention tests prune (driven in the test process)."""

from __future__ import annotations

from ductline import Pipeline


def fan(n):
    return list(range(n))


def square(x):
    return x * x


def total(xs):
    return sum(xs)


def big(n):
    return "x" * n  # above the inline limit: stored out of line in chunks


fanned = Pipeline("prune_fanned").start(fan).expand(to=square).collapse(into=total)
large = Pipeline("prune_large").start(big)
# A run under way with nothing claimed: its second step waits an hour.
paced = Pipeline("prune_paced").start(fan).chain(to=total, delay=3600)
