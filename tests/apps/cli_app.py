"""Pipelines of the command-line tests (tests/cli; imported by workers as ``cli_app``
from tests/apps)."""

from __future__ import annotations

import asyncio
import logging
import sys

import ductline
from ductline import Pipeline

log = logging.getLogger("cli_app.steps")

# What a hostile step writes: a terminal title (OSC 0), a clipboard write (OSC 52), a
# line erased and the cursor sent home (CSI), the one-byte C1 CSI, a bell, a carriage
# return that overwrites the line, a bidi override, and a forged log line.
TITLE = "\x1b]0;pwned\x07"
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
ERASE = "\x1b[2K\x1b[1;1H"
C1_CSI = "\x9b31m"
FORGED = "\n2026-01-01 00:00:00,000 INFO ductline.worker: all good"
HOSTILE = f"before{TITLE}{CLIPBOARD}{ERASE}{C1_CSI}\rover\u202eevil{FORGED}"


def hostile(x):
    log.warning("logged %s", HOSTILE)
    print(f"printed {TITLE}{ERASE}\roverwritten")
    sys.stderr.write(f"to stderr {CLIPBOARD}{C1_CSI}\n")
    raise ValueError(f"failed {HOSTILE}")


hostile_pipeline = Pipeline("cli_hostile").start(hostile, max_attempts=1)


def add_one(x):
    return x + 1


def gives_up(x):
    raise RuntimeError(f"cannot handle {x}")


chain = Pipeline("cli_chain").start(add_one).chain(to=add_one, name="again")
gives_up_pipeline = Pipeline("cli_gives_up").start(add_one).chain(to=gives_up, max_attempts=2, retry_delay=0)
# A name long enough to be wrapped in a narrow table, never cut.
long_named = Pipeline("cli_a_pipeline_whose_name_is_rather_long_for_a_narrow_table").start(add_one)


# -- trigger-time binding: the first step's signature -----------------------------------
def pair(a, b):
    return [a, b]


def one_or_two(a, b=0):
    return a + b


async def async_pair(a, b):
    await asyncio.sleep(0)
    return [a, b]


class Pair(ductline.Step):
    def __init__(self, a, b):
        super().__init__(a, b)

    def execute(self):
        return list(self.args)


class Anything(ductline.Step):
    def execute(self):
        return list(self.args)


pair_pipeline = Pipeline("cli_pair").start(pair)
defaults_pipeline = Pipeline("cli_defaults").start(one_or_two)
async_pipeline = Pipeline("cli_async_pair").start(async_pair)
class_pipeline = Pipeline("cli_class_pair").start(Pair)
anything_pipeline = Pipeline("cli_anything").start(Anything)


# -- a skipped step's root: both branches stopped, the combine never created -------------
def branch_a(x):
    return x


def branch_b(x):
    return x


def joined(pair):
    return pair


branches = Pipeline("cli_branches").start(add_one).divide(to=[branch_a, branch_b]).combine(into=joined)
