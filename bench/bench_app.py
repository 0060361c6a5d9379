"""Pipelines used by bench/core.py. Workers import this file as the module
``bench_app`` (``--app bench/bench_app.py``); the benchmark driver imports it by
the same name, so both sides agree on the pipeline definitions."""

from __future__ import annotations

import time

from ductline import Pipeline


# -- 1. drain: a single no-op step --------------------------------------------------
def noop(x=None):
    return x


bench_noop = Pipeline("bench_noop").start(noop)


# -- 2. hop latency: a three-step chain of no-ops -------------------------------------
def chain_a(x=None):
    return x


def chain_b(x=None):
    return x


def chain_c(x=None):
    return x


bench_chain3 = Pipeline("bench_chain3").start(chain_a).chain(to=chain_b).chain(to=chain_c)


# -- 3. expand / collapse ---------------------------------------------------------------
def expand_source(n):
    return list(range(n))


def expand_element(x):
    return x


def expand_count(items):
    return len(items)


bench_expand = (
    Pipeline("bench_expand")
    .start(expand_source)
    .expand(to=expand_element)
    .collapse(into=expand_count)
)


# -- limits (bench/limits.py) -----------------------------------------------------------
def limited_noop(x=None):
    return x


def keyed_noop(order=None):
    return order


def rated_noop(x=None):
    return x


# A limit that never binds at the benchmark's concurrency: the cost of enforcing it.
bench_capped = Pipeline("bench_capped").start(limited_noop, concurrency=1000)
# One running attempt per key: blocked jobs are throttled out of the ready index.
bench_keyed = Pipeline("bench_keyed").start(keyed_noop, concurrency=1, concurrency_key="k")
bench_rated = Pipeline("bench_rated").start(rated_noop, rate=50)


# -- the hop as a user sees it: marks taken inside the steps (bench/core.py "hop") --------
# Each mark is time.time() in the step's own process (all on one host): the previous
# step's mark just before it returns, the next step's mark as soon as it is called.
def mark_a(x=None):
    return [time.time()]


def mark_b(marks):
    called = time.time()
    return marks + [called, time.time()]


def mark_c(marks):
    return marks + [time.time()]


bench_marks3 = Pipeline("bench_marks3").start(mark_a).chain(to=mark_b).chain(to=mark_c)


# -- a burst of delayed runs (bench/core.py "burst"): the time the step was called -------
def called_at(x=None):
    return time.time()


bench_called = Pipeline("bench_called").start(called_at)


# -- the drain with thread isolation (bench/figures.py) ----------------------------------
def thread_noop(x=None):
    return x


bench_noop_thread = Pipeline("bench_noop_thread").start(thread_noop, isolation="thread")
