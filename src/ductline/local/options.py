"""The options of an in-process run, checked before anything runs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Awaitable, Callable, Union

from ductline import codec
from ductline.config import load_settings
from ductline.model.events import MAX_KEPT_EVENTS
from ductline.dsl.graph import Definition, check_event_name
from ductline.errors import DefinitionError
from ductline.model.inputs import NO_INPUT
from ductline.local.clock import Clock, RealClock
from ductline.loglevels import DEFAULT_LEVEL, DEFAULT_MAX_BYTES, check_level

# ``{step: new_input}``, or ``(step, current_input) -> new_input`` (may be async).
Resume = Union[Mapping[str, Any], Callable[[str, Any], Union[Any, Awaitable[Any]]]]
OnUpdate = Callable[[dict[str, Any]], Any]

DEFAULT_CONCURRENCY = 4


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Checked options of one in-process run (seconds as floats)."""

    timeout: float | None
    on_update: OnUpdate | None
    clock: Clock
    concurrency: int
    retry_delay: float
    kill_grace: float
    tracer_provider: Any
    resume: Resume | None
    max_payload_bytes: int
    log_level: str = DEFAULT_LEVEL          # of steps without their own log_level
    log_max_bytes: int = DEFAULT_MAX_BYTES  # per attempt
    inline: bool = False                    # sync steps in threads of this process (ductline.testing)
    events: tuple[tuple[str, str], ...] = ()  # (name, data JSON) sent as the run begins
    marks: tuple[tuple[str, str], ...] = ()   # (step, output JSON) marked succeeded when the run halts
    max_kept_events: int = MAX_KEPT_EVENTS    # unconsumed events the run keeps (the setting)


def seconds(value: Any, field: str, *, allow_zero: bool) -> float:
    """A duration for the executor: ``int`` or ``float`` seconds, or a ``timedelta``.

    Raises:
        TypeError: not a number of seconds (``bool`` included) nor a ``timedelta``.
        ValueError: negative, not finite, or zero when ``allow_zero`` is false.
    """
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{field} must be a number of seconds or a datetime.timedelta, "
                        f"not {type(value).__name__} ({value!r})")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{field} must be {'at least 0' if allow_zero else 'greater than 0'} seconds, "
                         f"got {value!r}")
    return float(value)


def definition_of(pipeline: Any) -> Definition:
    """The definition of a `ductline.Pipeline` (or a `Definition` itself).

    Raises:
        TypeError: not a pipeline.
        DefinitionError: the pipeline is invalid.
    """
    if isinstance(pipeline, Definition):
        return pipeline
    definition = getattr(pipeline, "definition", None)
    if not callable(definition):
        raise TypeError(f"execute() needs a ductline Pipeline, got {type(pipeline).__name__}")
    return definition()  # type: ignore[no-any-return]


def run_options(definition: Definition, *, timeout: Any, on_update: OnUpdate | None, clock: Clock | None,
                concurrency: int | None, retry_delay: Any, kill_grace: Any, tracer_provider: Any,
                resume: Resume | None, log_level: str | None = None, inline: bool = False,
                events: Mapping[str, Any] | None = None,
                mark_succeeded: Mapping[str, Any] | None = None) -> RunOptions:
    """Check the options of `ductline.execute` (see there for their meaning).

    Raises:
        TypeError: an option has the wrong type, or a ``resume`` input does not
            round-trip through JSON.
        ValueError: a negative or zero timeout, a bad ``concurrency``, or a
            ``resume`` mapping that names a step the pipeline does not pause before,
            an ``events`` mapping that names an event the pipeline does not wait
            for, a ``mark_succeeded`` mapping that names a step it does not have,
            or a ``log_level`` that names no level.
    """
    limit = definition.timeout if timeout is None else timeout
    if concurrency is None:
        concurrency = DEFAULT_CONCURRENCY
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int of at least 1, got {concurrency!r}")
    settings = load_settings()
    _check_resume(definition, resume)
    return RunOptions(
        timeout=None if limit is None else seconds(limit, "timeout", allow_zero=False),
        on_update=on_update, clock=RealClock() if clock is None else clock, concurrency=concurrency,
        retry_delay=seconds(settings.retry_delay if retry_delay is None else retry_delay, "retry_delay",
                            allow_zero=True),
        kill_grace=seconds(settings.kill_grace_seconds if kill_grace is None else kill_grace, "kill_grace",
                           allow_zero=True),
        tracer_provider=tracer_provider, resume=resume, max_payload_bytes=int(settings.payload_max_bytes),
        log_level=settings.step_log_level if log_level is None else check_level(log_level),
        log_max_bytes=settings.step_log_max_bytes, inline=bool(inline), events=_check_events(definition, events),
        marks=_check_marks(definition, mark_succeeded), max_kept_events=settings.max_kept_events)


def _check_marks(definition: Definition, marks: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The ``mark_succeeded`` option as ``(step, output JSON)`` pairs, checked."""
    if marks is None:
        return ()
    if not isinstance(marks, Mapping):
        raise TypeError(f"mark_succeeded must be a mapping {{step: output}}, not {type(marks).__name__}")
    checked = []
    for step, output in marks.items():
        if step not in definition.nodes:
            raise ValueError(f"mark_succeeded names step {step!r}, but pipeline {definition.name!r} has no such "
                             "step")
        checked.append((step, codec.dumps(output, what=f"mark_succeeded output of {step!r}")))
    return tuple(checked)


def _check_events(definition: Definition, events: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The ``events`` option as ``(name, data JSON)`` pairs, checked."""
    if events is None:
        return ()
    if not isinstance(events, Mapping):
        raise TypeError(f"events must be a mapping {{event: data}}, not {type(events).__name__}")
    awaited = {w.event for w in definition.waits.values()}
    pairs = []
    for name, data in events.items():
        check_event_name(name)
        if name not in awaited:
            waited = ", ".join(repr(e) for e in sorted(awaited)) or "no event"
            raise ValueError(f"events names event {name!r}, but pipeline {definition.name!r} waits for {waited}")
        pairs.append((name, codec.dumps(data, what=f"data of event {name!r}")))
    return tuple(pairs)


def check_sendable(definition: Definition, events: Mapping[str, Any] | None) -> None:
    """A run that nobody outside can send events to (`ductline.execute`) must be
    given every event it waits for without a timeout.

    Raises:
        DefinitionError: a wait has no timeout and ``events`` does not give its event.
    """
    if events is not None and not isinstance(events, Mapping):
        return  # run_options refuses it with a TypeError
    given = set(events or ())
    missing = sorted(w.event for w in definition.waits.values() if w.timeout is None and w.event not in given)
    if missing:
        names = ", ".join(repr(e) for e in missing)
        raise DefinitionError(
            f"execute() cannot run pipeline {definition.name!r}: it waits for event {names} without a timeout, "
            "and nothing would send it. Pass events={event: data}, give the wait a timeout, or start it with "
            "ductline.local.start and send it with LocalRun.send")


def _check_resume(definition: Definition, resume: Resume | None) -> None:
    if resume is None or callable(resume):
        return
    if not isinstance(resume, Mapping):
        raise TypeError("resume must be a mapping {step: new_input} or a callable (step, input) -> new_input, "
                        f"not {type(resume).__name__}")
    for step, value in resume.items():
        if step not in definition.pauses:
            paused = ", ".join(repr(s) for s in definition.pauses) or "no step"
            raise ValueError(f"resume names step {step!r}, but pipeline {definition.name!r} pauses before "
                             f"{paused}")
        if value is not NO_INPUT:
            codec.dumps([value], what=f"resume input of step {step!r}")


def check_resumable(definition: Definition, resume: Resume | None) -> None:
    """A run that nobody outside can resume (`ductline.execute`) must get every
    pause without a timeout resumed by ``resume``.

    Raises:
        DefinitionError: a pause has no timeout and ``resume`` does not cover it.
    """
    waiting = [step for step, timeout in definition.pauses.items()
               if timeout is None and not covers(resume, step)]
    if not waiting:
        return
    steps = ", ".join(repr(s) for s in waiting)
    raise DefinitionError(
        f"execute() cannot run pipeline {definition.name!r}: it pauses before step {steps} without a "
        "timeout, and nothing would resume it. Pass resume={step: new_input} (ductline.handle.NO_INPUT "
        "keeps the input) or a resume callable, give the pause a timeout, or run it on a worker "
        "(trigger, then `ductline resume`)")


def covers(resume: Resume | None, step: str) -> bool:
    """Whether ``resume`` resumes the pauses before ``step``."""
    if resume is None:
        return False
    return step in resume if isinstance(resume, Mapping) else True
