"""Named fault-injection checkpoints for durability tests.

``DUCTLINE_FAULT=<name>`` makes the process SIGKILL itself the first time it passes
that checkpoint; unset (always, in production) a checkpoint costs one comparison.
Names: ``after_claim``, ``after_dispatch``, ``before_record``, ``after_record`` (the
worker loop), ``after_register`` (a worker recorded its queues and definitions, before
its first claim), ``during_prune`` (inside a prune's transaction, after some rows of
its runs were deleted and before it commits), ``during_catch_up`` (inside the
transaction firing a schedule's missed ticks, after a tick's run was inserted),
``during_backfill`` (inside a backfill's transaction for one tick, after its run was
inserted), ``during_send`` (inside a send's transaction, after the event was kept
and its waiting step released, before it commits), ``during_mark`` (inside a
mark-succeeded's transaction, after the step run was marked, the action written and
the run advanced), ``during_move`` (inside a move's transaction, after its first run
was moved), ``after_move`` (a batch of a move committed, before the next), and for
child runs (`ductline.engine.childruns`): ``children_started`` (inside the
transaction that starts a step's child runs), ``after_children_started`` (once it
committed) and ``before_parent_woken`` (inside the transaction that records a
parent's last child's end, before it wakes the parent).
"""

from __future__ import annotations

import os
import signal

_ARMED = os.environ.get("DUCTLINE_FAULT")


def checkpoint(name: str) -> None:
    if _ARMED == name:
        os.kill(os.getpid(), signal.SIGKILL)
