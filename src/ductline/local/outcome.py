"""How one attempt ended as the in-process executor saw it, and the attempt's
movable step timeout. Shared by the places an attempt runs (a child, the event
loop, a thread) and the recorder that asks the rulebook what follows."""

from __future__ import annotations

from dataclasses import dataclass

from ductline.model.states import AttemptResult


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended.

    Attributes:
        result: the attempt's result.
        output: JSON text of the output when it succeeded.
        error_type, error, traceback: what it raised, else ``None``.
        reusable: the child process that ran it may run another attempt.
        route_key: ``str`` of the output as the process that ran the step rendered
            it (a divert routes on it).
    """

    result: AttemptResult
    output: str | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None
    reusable: bool = False
    route_key: str | None = None  # str(output), when the step is followed by a divert


@dataclass(slots=True)
class Limit:
    """An attempt's step timeout, movable while it runs (a scaled timeout is
    reported by the attempt once it has sized its input).

    Attributes:
        started: event-loop time the attempt started.
        seconds: the timeout in seconds, ``None`` for none.
    """

    started: float
    seconds: float | None

    @property
    def at(self) -> float | None:
        return None if self.seconds is None else self.started + self.seconds
