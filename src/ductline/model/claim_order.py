"""The order in which claims take ready jobs.

1. **Higher priority first** (a job's priority is its run's plus its step's).
2. **Started runs first.** At equal priority, a job of a run already under way
   (`UNDER_WAY`: any step but the first) is claimed before the first step of a run
   (`FIRST_STEP`). A burst of new runs then queues behind the runs in flight instead
   of in front of their next steps: the hops of the runs already started stay short,
   and the number of runs in flight stays bounded by the workers' capacity rather
   than growing with every trigger.
3. **Oldest first**: within one priority and phase, the earliest not-before time.

Starvation is bounded: every `FIFO_EVERY`-th claim of a worker takes the oldest ready
jobs whatever their priority and phase, so a ready job is passed over by at most
``FIFO_EVERY - 1`` consecutive claims of any one worker once it is the oldest (first
steps of new runs included, however busy the runs in flight keep the workers).

A job's phase is fixed when it is created (`phase_of`) and stored on its row; the
ready index of each dialect is ordered by (priority, phase, not-before), so a claim
reads each (priority, phase) queue in not-before order and never scans delayed jobs.
The SQL of each dialect applies this order (`ductline.store.claims`).
"""

from __future__ import annotations

from ductline.dsl.graph import Definition

FIFO_EVERY = 8

UNDER_WAY = 0   # a job of a run already under way: claimed first at equal priority
FIRST_STEP = 1  # the first step of a run

PHASES = (UNDER_WAY, FIRST_STEP)  # in claim order


def phase_of(definition: Definition, step: str, scope: str) -> int:
    """The phase of a new job of ``step`` at ``scope``: `FIRST_STEP` for the run's
    first step (created by the trigger), `UNDER_WAY` for every job a completion, a
    halt or a stop creates."""
    return FIRST_STEP if step == definition.start and scope == "" else UNDER_WAY


def rank(priority: int, phase: int) -> tuple[int, int]:
    """Sort key of the claim order between ready jobs (rules 1 and 2; rule 3 is the
    order in which jobs of equal rank arrived): a lower key is taken first. Used where
    claimed jobs wait in the worker (`ductline.runtime.ahead`), as the SQL orders them."""
    return -priority, phase
