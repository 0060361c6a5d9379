"""Per-attempt resource limits, applied in the child around the step's call.

``memory_limit`` caps the child's address space (``RLIMIT_AS``, bytes, the
interpreter included): an allocation past it fails and Python raises
`MemoryError`. ``cpu_limit`` sets ``RLIMIT_CPU`` to the CPU time the child has
used so far plus the limit, rounded up to a whole second (the kernel counts whole
seconds); past it the kernel sends ``SIGXCPU``, whose default action (restored
for the attempt) ends the process. A step that ignores or handles ``SIGXCPU`` is
killed one second later: the hard ``RLIMIT_CPU`` is set there, and the kernel
sends ``SIGKILL`` at it. Both limits are set back when the step returns (raising
a hard limit needs privileges; without them the child cannot restore it and is
retired, `ductline.execution.cleanstate`); the parent turns what happened into
``MemoryLimitExceeded`` or ``CpuLimitExceeded`` (`ductline.model.resources`).

A process the step starts inherits the limits as they are: its own CPU time counts
from zero against the child's, so it may use up to the child's CPU time so far plus
``cpu_limit``.
"""

from __future__ import annotations

import math
import resource
import signal
from contextlib import contextmanager
from typing import Iterator

# Seconds of CPU between the soft RLIMIT_CPU (SIGXCPU) and the hard one (SIGKILL).
HARD_CPU_MARGIN_SECONDS = 1


@contextmanager
def applied(memory_limit: int | None, cpu_limit: float | None) -> Iterator[None]:
    """Apply the limits for the duration of the block (``None``: no limit)."""
    if memory_limit is None and cpu_limit is None:
        yield
        return
    saved = {r: resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_CPU)}
    xcpu = signal.getsignal(signal.SIGXCPU)
    try:
        if memory_limit is not None:
            _lower(resource.RLIMIT_AS, memory_limit)
        if cpu_limit is not None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            signal.signal(signal.SIGXCPU, signal.SIG_DFL)
            soft = math.ceil(usage.ru_utime + usage.ru_stime + cpu_limit)
            _lower(resource.RLIMIT_CPU, soft, hard=soft + HARD_CPU_MARGIN_SECONDS)
        yield
    finally:
        for which, limits in saved.items():
            try:
                resource.setrlimit(which, limits)
            except (ValueError, OSError):  # the step lowered the hard limit: the child is retired
                pass
        if xcpu is not None:
            signal.signal(signal.SIGXCPU, xcpu)


def _lower(which: int, value: int, hard: int | None = None) -> None:
    """Set the soft limit to ``value`` (and the hard one to ``hard`` if given), never
    above the hard limit in force."""
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        value = min(value, current)
        hard = None if hard is None else min(hard, current)
    resource.setrlimit(which, (value, current if hard is None else hard))
