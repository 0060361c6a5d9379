"""What an attempt that ran out of its resource limits means.

A step may declare ``memory_limit=`` (bytes of address space) and ``cpu_limit=``
(CPU seconds) for each of its attempts (`ductline.dsl.options`). The child applies
them (`ductline.execution.rlimits`); the drivers report what they saw -- the error
the step raised, or the signal that ended the child -- and `over_limit` says
whether that was the limit, and with which error type and message. Such an
attempt is an error like any other: it consumes the ``max_retry`` budget
(`ductline.model.outcomes.decide`).

Rules:

- ``MemoryError`` raised by an attempt that has a ``memory_limit`` is recorded as
  ``MemoryLimitExceeded`` (an allocation past ``RLIMIT_AS`` fails; Python raises
  ``MemoryError``).
- A child ended by a ``SIGKILL`` its driver did not send while its attempt had a
  ``cpu_limit`` is recorded as ``CpuLimitExceeded``: the limit is a hard
  ``RLIMIT_CPU``, at which the kernel sends ``SIGKILL`` (an out-of-memory kill of
  such an attempt is recorded the same way). So is one ended by ``SIGXCPU`` (the
  kernel's signal at a soft limit below the hard one).
- A ``MemoryLimitExceeded`` keeps the step's own ``MemoryError`` message, if any.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from ductline.model.outcomes import Ended
from ductline.model.states import AttemptResult

MEMORY_LIMIT_TYPE = "MemoryLimitExceeded"
CPU_LIMIT_TYPE = "CpuLimitExceeded"


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """An attempt's limits: ``memory_bytes`` (int) and ``cpu_seconds`` (number), or ``None``."""

    memory_bytes: int | None = None
    cpu_seconds: float | None = None


def memory_message(limit: int) -> str:
    return f"attempt exceeded memory_limit={limit} bytes"


def cpu_message(limit: float) -> str:
    return f"attempt exceeded cpu_limit={limit:g} CPU seconds"


def _thread_refused(ended: Ended) -> bool:
    """A thread the step started could not get its stack: under an address-space
    limit, CPython says so with this RuntimeError, not a MemoryError."""
    return ended.error_type == "RuntimeError" and "can't start new thread" in (ended.error or "")


def over_limit(ended: Ended, limits: ResourceLimits, exit_code: int | None = None) -> Ended:
    """``ended``, or the limit error it really is.

    Args:
        ended: how the driver saw the attempt end.
        limits: the attempt's resource limits.
        exit_code: the child's exit status when it died before sending a result
            (negative: killed by that signal), else ``None``.

    Returns:
        An errored `Ended` of type ``MemoryLimitExceeded`` or ``CpuLimitExceeded``
        whose message names the limit, or ``ended`` unchanged.
    """
    if limits.memory_bytes is not None and ended.result is AttemptResult.ERRORED \
            and (ended.error_type == "MemoryError" or _thread_refused(ended)):
        own = f" ({ended.error_type}: {ended.error})" if ended.error else ""
        return Ended(AttemptResult.ERRORED, MEMORY_LIMIT_TYPE, memory_message(limits.memory_bytes) + own)
    if limits.cpu_seconds is not None and exit_code == -signal.SIGXCPU:
        return Ended(AttemptResult.ERRORED, CPU_LIMIT_TYPE, cpu_message(limits.cpu_seconds))
    if limits.cpu_seconds is not None and exit_code == -signal.SIGKILL and ended.result is AttemptResult.CRASHED:
        return Ended(AttemptResult.ERRORED, CPU_LIMIT_TYPE, cpu_message(limits.cpu_seconds))
    return ended
