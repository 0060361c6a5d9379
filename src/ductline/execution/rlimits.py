"""Per-attempt resource limits, applied in the child around the step's call.

``memory_limit`` caps the child's address space (``RLIMIT_AS``, bytes, the
interpreter included): an allocation past it fails and Python raises
`MemoryError`. ``cpu_limit`` sets ``RLIMIT_CPU`` to the CPU time the child has
used so far plus the limit, rounded up to a whole second (the kernel counts whole
seconds); at it the kernel sends ``SIGKILL``.

Both are set as *hard* limits (soft = hard), which only a process holding
``CAP_SYS_RESOURCE`` may raise; the child gives that capability up for good
before the step runs (its own sets, the bounding set a program it executes would
get its sets from, and the ambient set), so a step can lift neither limit, not
even as root. A child that ran a limited attempt is therefore never reused: it
is retired after the attempt (`ductline.execution.child`), and the parent turns
what happened into ``MemoryLimitExceeded`` or ``CpuLimitExceeded``
(`ductline.model.resources`).

A process the step starts inherits the limits as they are: its own CPU time counts
from zero against the child's, so it may use up to the child's CPU time so far plus
``cpu_limit``.
"""

from __future__ import annotations

import ctypes
import math
import resource
from contextlib import contextmanager
from typing import Iterator

from ductline.errors import ExecutionError

# Why a child that ran a limited attempt runs no other (sent with its result).
RETIRE_REASON = "it ran an attempt under hard resource limits, which it cannot lift again"

# Linux's numbers (linux/capability.h, linux/prctl.h).
CAP_SYS_RESOURCE = 24
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_LOWER = 3
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def limited(memory_limit: int | None, cpu_limit: float | None) -> bool:
    """Whether an attempt with these limits has any."""
    return memory_limit is not None or cpu_limit is not None


@contextmanager
def applied(memory_limit: int | None, cpu_limit: float | None) -> Iterator[None]:
    """Apply the limits as hard limits for the rest of the process's life (``None``:
    no limit). They are never lifted again: the caller retires the child.

    Raises:
        ExecutionError: the process holds ``CAP_SYS_RESOURCE`` and cannot give it up
            (the step could lift its limits), or a limit cannot be set.
    """
    if not limited(memory_limit, cpu_limit):
        yield
        return
    drop_resource_capability()
    try:
        if memory_limit is not None:
            _set_hard(resource.RLIMIT_AS, memory_limit)
        if cpu_limit is not None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            _set_hard(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + cpu_limit))
    except (ValueError, OSError) as exc:
        raise ExecutionError(f"cannot set the attempt's resource limits: {exc}") from exc
    yield


def _set_hard(which: int, value: int) -> None:
    """Soft and hard limit to ``value``, never above the hard limit in force."""
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        value = min(value, current)
    resource.setrlimit(which, (value, value))


def drop_resource_capability() -> None:
    """Give up ``CAP_SYS_RESOURCE`` for this thread and whatever it starts or executes.

    Capabilities are per thread on Linux; the step runs on the thread that calls this
    (a child's main thread), and threads it starts inherit the reduced sets. Elsewhere
    than Linux there is nothing to drop.

    Raises:
        ExecutionError: the capability is held and could not be given up.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        capget, capset, prctl = libc.capget, libc.capset, libc.prctl
    except (OSError, AttributeError):
        return
    # Each may fail when not held or not supported; what counts is checked below.
    prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_LOWER, CAP_SYS_RESOURCE, 0, 0)
    prctl(_PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if capget(ctypes.byref(header), data) != 0:
        return
    bit = 1 << CAP_SYS_RESOURCE
    if not (data[0].effective | data[0].permitted | data[0].inheritable) & bit:
        return
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[0], field, getattr(data[0], field) & ~bit)
    if capset(ctypes.byref(header), data) != 0:
        raise ExecutionError(f"cannot give up CAP_SYS_RESOURCE (errno {ctypes.get_errno()}): "
                             "the step could lift its resource limits")
