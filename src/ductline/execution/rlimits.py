"""Per-attempt resource limits, applied in the child around the step's call.

``memory_limit`` caps the child's address space (``RLIMIT_AS``, bytes, the
interpreter included): an allocation past it fails and Python raises
`MemoryError`. ``cpu_limit`` sets ``RLIMIT_CPU`` to the CPU time the child has
used so far plus the limit, rounded up to a whole second (the kernel counts whole
seconds); past it the kernel sends ``SIGXCPU``, whose default action (restored
for the attempt) ends the process. Only soft limits are changed, so both are
lifted again when the step returns; the parent turns what happened into
``MemoryLimitExceeded`` or ``CpuLimitExceeded`` (`ductline.model.resources`).
"""

from __future__ import annotations

import math
import resource
import signal
from contextlib import contextmanager
from typing import Iterator


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
            _set_soft(resource.RLIMIT_AS, memory_limit)
        if cpu_limit is not None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            signal.signal(signal.SIGXCPU, signal.SIG_DFL)
            _set_soft(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + cpu_limit))
        yield
    finally:
        for which, limits in saved.items():
            try:
                resource.setrlimit(which, limits)
            except (ValueError, OSError):  # the step lowered the hard limit: the child is retired
                pass
        if xcpu is not None:
            signal.signal(signal.SIGXCPU, xcpu)


def _set_soft(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, hard))
