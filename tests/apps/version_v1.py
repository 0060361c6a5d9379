"""Version 1 of pipeline "versioned" (tests/versions): a -> b -> c."""

from __future__ import annotations

from ductline import Pipeline


def a(x):
    return x + 1


def b(x):
    return x * 2


def c(x):
    return {"value": x, "version": 1}


versioned = Pipeline("versioned").start(a).chain(to=b).chain(to=c)
