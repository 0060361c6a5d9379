"""Pipelines whose steps wait in named queues, for tests/queues."""

from __future__ import annotations

import os

from ductline import Pipeline


def prepare(x):
    return x + 1


def render(x):
    # Which worker ran it: the test starts each worker with its own QUEUE_APP_ROLE.
    return {"value": x * 10, "role": os.environ.get("QUEUE_APP_ROLE", "")}


def report(result):
    return result


# The middle step needs a GPU: only workers serving queue "gpu" run it.
rendering = (Pipeline("q_render")
             .start(prepare)
             .chain(to=render, queue="gpu")
             .chain(to=report))
# Every step in the pipeline's queue, one step back in "default".
licensed = Pipeline("q_licensed", queue="licence").start(prepare).chain(to=report, queue="default")
# One attempt at a time of its only step, which waits in "gpu".
limited = Pipeline("q_limited", queue="gpu").start(prepare, concurrency=1)
