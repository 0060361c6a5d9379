"""How an attempt ended: one account for both drivers.

A driver (the worker, the in-process executor) gathers the facts of an attempt in
a child -- the result the child reported, if it reported one and the driver took
it; else why the driver killed the child, if it did, and the child's exit status
-- and `ending` says what is recorded. Pure: no I/O, no clock.

Rules:

- A result the child reported and its driver took stands: ``DONE`` succeeded
  (errored with ``ductline.PayloadTooLarge`` if its output is over the run's
  limit: the child checks, the parent checks again), ``ERROR`` errored, or the
  resource limit error it really is (`ductline.model.resources.over_limit`);
  ``FATAL`` (a new child whose apps did not import) errored with its own type.
- Otherwise, by why the driver killed the child:
  ``TIMEOUT`` timed out (the run's deadline, when that is the deadline it had,
  else ``TimeoutError`` with the step timeout in seconds);
  ``SHUTDOWN`` cancelled and given back to the queue, interrupted (counted toward
  the consecutive releases of a job, `ductline.model.outcomes`);
  ``LEASE`` nothing at all (the lease is gone: whoever holds the job records it);
  ``OVERSIZED`` errored with ``ductline.PayloadTooLarge``;
  ``GARBLED`` crashed with ``ductline.ProtocolError`` and why (the child wrote
  what is not the protocol, or left a frame incomplete past `FRAME_BOUND_SECONDS`).
- A child that died unasked (or was cancelled by its executor) crashed
  (``ChildDied`` with its exit status), unless that death is a resource limit's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ductline.errors import PayloadTooLarge
from ductline.model.outcomes import (PAYLOAD_TOO_LARGE_TYPE, PROTOCOL_ERROR_TYPE, TIMEOUT_ERROR_TYPE, Ended,
                                     child_died_message, protocol_error_message, timeout_message)
from ductline.model.payloads import size_of
from ductline.model.resources import ResourceLimits, over_limit
from ductline.model.states import AttemptResult

# A frame a child began must keep arriving: one left incomplete with nothing more
# arriving for this long is bytes out of step with the protocol (a step wrote into
# the channel), never a result still on its way.
FRAME_BOUND_SECONDS = 1.0

CHILD_DIED_TYPE = "ChildDied"
SHUTDOWN_ERROR = "worker shut down before the attempt finished"


class KillReason(StrEnum):
    """Why a driver is killing an attempt's child."""

    TIMEOUT = "timeout"      # its deadline passed
    LEASE = "lease"          # its lease was lost, or could expire
    SHUTDOWN = "shutdown"    # the worker stops and the grace ran out
    CANCEL = "cancel"        # its run was cancelled (in-process executor)
    GARBLED = "garbled"      # it broke the message protocol
    OVERSIZED = "oversized"  # it sent a message longer than the parent reads


class Reported(StrEnum):
    """Which result frame a child sent."""

    DONE = "done"
    ERROR = "error"
    FATAL = "fatal"


@dataclass(frozen=True, slots=True)
class Report:
    """A result frame as its driver took it: the output (JSON text) of ``DONE``, the
    error of ``ERROR`` or ``FATAL``; ``route_key`` is ``str(output)`` as the child
    rendered it, when a divert follows the step."""

    kind: Reported
    output: str | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None
    route_key: str | None = None


@dataclass(frozen=True, slots=True)
class Facts:
    """What a driver knows of an attempt that is over.

    Attributes:
        step, attempt: the step's name and the attempt's number.
        limits: the attempt's resource limits.
        report: the result frame it took, or ``None``.
        max_output_bytes: the run's largest output (bytes), ``None`` for no check.
        kill: why the driver killed the child, ``None`` if it did not.
        exit_code: the child's exit status (negative: the signal that ended it),
            ``None`` if unknown (abandoned as undead).
        timeout_seconds: the step timeout it had, in seconds.
        run_deadline: the deadline it had was its run's.
        broken: why it broke the protocol, if it did.
        message_cap: the longest message its driver reads (bytes).
        parent: the driver, as the error of an oversized message names it.
    """

    step: str
    attempt: int
    limits: ResourceLimits = ResourceLimits()
    report: Report | None = None
    max_output_bytes: int | None = None
    kill: KillReason | None = None
    exit_code: int | None = None
    timeout_seconds: float | None = None
    run_deadline: bool = False
    broken: str | None = None
    message_cap: int = 0
    parent: str = "the worker"


@dataclass(frozen=True, slots=True)
class Ending:
    """What is recorded for the attempt (`ductline.engine.batch.Outcome`'s fields)."""

    result: AttemptResult
    output: str | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None
    route_key: str | None = None
    release: bool = False        # given back to the queue, charged nothing
    interrupted: bool = False    # by its worker's shutdown grace (`ductline.model.outcomes.Ended.interrupted`)
    run_deadline: bool = False   # its run's deadline ended it: the whole run ends


def ending(facts: Facts) -> Ending | None:
    """What to record for an attempt that is over; ``None``: nothing (its lease is
    gone, and whoever holds the job records it)."""
    if facts.report is not None:
        return _reported(facts, facts.report)
    kill = facts.kill
    if kill is KillReason.TIMEOUT:
        if facts.run_deadline:
            return Ending(AttemptResult.TIMED_OUT, run_deadline=True)
        return Ending(AttemptResult.TIMED_OUT, error_type=TIMEOUT_ERROR_TYPE,
                      error=timeout_message(facts.attempt, facts.step, facts.timeout_seconds))
    if kill is KillReason.SHUTDOWN:
        return Ending(AttemptResult.CANCELLED, error=SHUTDOWN_ERROR, release=True, interrupted=True)
    if kill is KillReason.LEASE:
        return None
    if kill is KillReason.OVERSIZED:
        return Ending(AttemptResult.ERRORED, error_type=PAYLOAD_TOO_LARGE_TYPE,
                      error=oversized_error(facts.step, facts.message_cap, facts.max_output_bytes or 0, facts.parent))
    if kill is KillReason.GARBLED:
        return Ending(AttemptResult.CRASHED, error_type=PROTOCOL_ERROR_TYPE,
                      error=protocol_error_message(facts.step, facts.broken or stalled_frame()))
    died = over_limit(Ended(AttemptResult.CRASHED, CHILD_DIED_TYPE, child_died_message(facts.exit_code)),
                      facts.limits, facts.exit_code)
    return Ending(died.result, error_type=died.error_type, error=died.error)


def _reported(facts: Facts, report: Report) -> Ending:
    if report.kind is Reported.DONE:
        size = 0 if report.output is None or facts.max_output_bytes is None else size_of(report.output)
        if facts.max_output_bytes is not None and size > facts.max_output_bytes:
            return Ending(AttemptResult.ERRORED, error_type=PAYLOAD_TOO_LARGE_TYPE, error=str(
                PayloadTooLarge(f"output of step {facts.step!r}", size, facts.max_output_bytes)))
        return Ending(AttemptResult.SUCCEEDED, output=report.output, route_key=report.route_key or None)
    if report.kind is Reported.FATAL:
        return Ending(AttemptResult.ERRORED, error_type=report.error_type, error=report.error,
                      traceback=report.traceback)
    ended = over_limit(Ended(AttemptResult.ERRORED, report.error_type, report.error), facts.limits)
    return Ending(ended.result, error_type=ended.error_type, error=ended.error, traceback=report.traceback)


def oversized_error(step: str, cap: int, max_bytes: int, parent: str = "the worker") -> str:
    """The error recorded for an attempt killed for a message longer than ``cap``
    (the payload limit ``max_bytes`` plus slack for the envelope)."""
    return (f"step {step!r} sent {parent} a message of more than {cap} bytes (payload_max_bytes "
            f"{max_bytes} plus {cap - max_bytes} for the envelope); the child was killed")


def stalled_frame() -> str:
    """Why an attempt whose child left a frame incomplete broke the protocol."""
    return (f"a frame left incomplete for {FRAME_BOUND_SECONDS:g} s: bytes out of step with the protocol, "
            "e.g. written into the channel by the step")
