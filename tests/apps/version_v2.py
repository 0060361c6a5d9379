"""Version 2 of pipeline "versioned" (tests/versions): step b renamed b2 -> a
different fingerprint; a run of version 1 moves here with the mapping b=b2."""

from __future__ import annotations

from ductline import Pipeline


def a(x):
    return x + 1


def b2(x):
    return x * 2


def c(x):
    return {"value": x, "version": 2}


versioned = Pipeline("versioned").start(a).chain(to=b2).chain(to=c)
