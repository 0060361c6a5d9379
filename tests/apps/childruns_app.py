"""Pipelines for the child-run tests (issue 37, item 2): a step that starts runs of
other pipelines and goes on with their outputs. Imported by workers as
``childruns_app`` from tests/apps."""

from __future__ import annotations

import os
import time
from pathlib import Path

import ductline
from ductline import Pipeline


def square(x):
    return x * x


def boom(x):
    raise ValueError(f"no {x}")


def slow(x):
    time.sleep(60)
    return x


def count_start(x):
    """Appends a line to the file named by CHILDRUNS_LOG each time it starts (a
    durability test counts the children's starts)."""
    log = os.environ.get("CHILDRUNS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"child {x}\n")
    return x + 1


def fan(n):
    return ductline.children([ductline.child(squares, i) for i in range(n)])


def fan_named(n):
    return ductline.children([ductline.child("childruns_square", i) for i in range(n)])


def fan_mixed(n):
    return ductline.children([ductline.child(squares, 1), ductline.child(failing, 2), ductline.child(squares, 3)],
                             on_failure="collect")


def fan_failing(n):
    return ductline.children([ductline.child(squares, 1), ductline.child(failing, 2)])


def fan_slow(n):
    return ductline.children([ductline.child(slows, i) for i in range(n)])


def fan_counted(n):
    log = os.environ.get("CHILDRUNS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"parent {n}\n")
    return ductline.children([ductline.child(counted, i) for i in range(n)])


def fan_nested(n):
    return ductline.children([ductline.child(parents, n), ductline.child(squares, n)])


def fan_none(n):
    return ductline.children([])


def summarize(outputs):
    return [o if not isinstance(o, ductline.ChildRunFailed) else f"{o.status}:{o.reason}" for o in outputs]


def total(outputs):
    return sum(outputs) if all(isinstance(o, int) for o in outputs) else outputs


squares = Pipeline("childruns_square").start(square)
failing = Pipeline("childruns_failing").start(boom, max_retry=0)
slows = Pipeline("childruns_slow").start(slow)
counted = Pipeline("childruns_counted").start(count_start)

parents = Pipeline("childruns_parent").start(fan).chain(to=total)
named = Pipeline("childruns_named").start(fan_named).chain(to=total)
mixed = Pipeline("childruns_mixed").start(fan_mixed).chain(to=summarize)
strict = Pipeline("childruns_strict").start(fan_failing).chain(to=total)
waiting = Pipeline("childruns_waiting").start(fan_slow).chain(to=total)
short = Pipeline("childruns_short", timeout=2).start(fan_slow).chain(to=total)
durable = Pipeline("childruns_durable").start(fan_counted).chain(to=total)
nested = Pipeline("childruns_nested").start(fan_nested).chain(to=total)
empty = Pipeline("childruns_empty").start(fan_none).chain(to=total)

APP = str(Path(__file__))


def fan_unknown(n):
    return ductline.children([ductline.child("childruns_no_such_pipeline", n)])


unknown = Pipeline("childruns_unknown").start(fan_unknown, max_retry=1).chain(to=total)
