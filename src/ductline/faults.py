"""Named fault-injection checkpoints for durability tests.

``DUCTLINE_FAULT=<name>`` makes the process SIGKILL itself the first time it passes
that checkpoint; unset (always, in production) a checkpoint costs one comparison.
Names: ``after_claim``, ``after_dispatch``, ``before_record``, ``after_record`` (the
worker loop) and ``during_prune`` (inside a prune's transaction, after some rows of
its runs were deleted and before it commits).
"""

from __future__ import annotations

import os
import signal

_ARMED = os.environ.get("DUCTLINE_FAULT")


def checkpoint(name: str) -> None:
    if _ARMED == name:
        os.kill(os.getpid(), signal.SIGKILL)
