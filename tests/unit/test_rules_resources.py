"""What an attempt that ran out of its resource limits means (`ductline.model.resources`)."""

from __future__ import annotations

import signal

import pytest

from ductline.model.outcomes import Ended
from ductline.model.resources import CPU_LIMIT_TYPE, MEMORY_LIMIT_TYPE, ResourceLimits, over_limit
from ductline.model.states import AttemptResult

ERR, CRASH = AttemptResult.ERRORED, AttemptResult.CRASHED
MEMORY = ResourceLimits(memory_bytes=268435456)
CPU = ResourceLimits(cpu_seconds=1.5)
BOTH = ResourceLimits(268435456, 2)
NONE = ResourceLimits()
XCPU = -signal.SIGXCPU


@pytest.mark.parametrize("ended, limits, code, expected", [
    (Ended(ERR, "MemoryError", ""), MEMORY, None,
     Ended(ERR, MEMORY_LIMIT_TYPE, "attempt exceeded memory_limit=268435456 bytes")),
    (Ended(ERR, "MemoryError", ""), BOTH, None,
     Ended(ERR, MEMORY_LIMIT_TYPE, "attempt exceeded memory_limit=268435456 bytes")),
    (Ended(ERR, "MemoryError", "real"), NONE, None, Ended(ERR, "MemoryError", "real")),  # no limit: the step's own
    (Ended(ERR, "MemoryError", "x"), CPU, None, Ended(ERR, "MemoryError", "x")),
    (Ended(ERR, "ValueError", "x"), MEMORY, None, Ended(ERR, "ValueError", "x")),
    (Ended(CRASH, "ChildDied", "died"), CPU, XCPU, Ended(ERR, CPU_LIMIT_TYPE, "attempt exceeded cpu_limit=1.5 CPU seconds")),
    (Ended(CRASH, "ChildDied", "died"), BOTH, XCPU, Ended(ERR, CPU_LIMIT_TYPE, "attempt exceeded cpu_limit=2 CPU seconds")),
    (Ended(CRASH, "ChildDied", "died"), NONE, XCPU, Ended(CRASH, "ChildDied", "died")),
    (Ended(CRASH, "ChildDied", "died"), CPU, -signal.SIGKILL,  # the hard limit's SIGKILL
     Ended(ERR, CPU_LIMIT_TYPE, "attempt exceeded cpu_limit=1.5 CPU seconds")),
    (Ended(CRASH, "ChildDied", "died"), MEMORY, -signal.SIGKILL, Ended(CRASH, "ChildDied", "died")),
    (Ended(ERR, "MemoryError", "cache full"), MEMORY, None,  # the step's own message is kept
     Ended(ERR, MEMORY_LIMIT_TYPE, "attempt exceeded memory_limit=268435456 bytes (MemoryError: cache full)")),
    (Ended(CRASH, "ChildDied", "died"), MEMORY, XCPU, Ended(CRASH, "ChildDied", "died")),
    (Ended(ERR, "RuntimeError", "can't start new thread"), MEMORY, None,  # its stack did not fit the limit
     Ended(ERR, MEMORY_LIMIT_TYPE, "attempt exceeded memory_limit=268435456 bytes "
                                   "(RuntimeError: can't start new thread)")),
    (Ended(ERR, "RuntimeError", "can't start new thread"), NONE, None,
     Ended(ERR, "RuntimeError", "can't start new thread")),
    (Ended(ERR, "RuntimeError", "other"), MEMORY, None, Ended(ERR, "RuntimeError", "other")),
])
def test_over_limit(ended: Ended, limits: ResourceLimits, code: int | None, expected: Ended) -> None:
    assert over_limit(ended, limits, code) == expected
