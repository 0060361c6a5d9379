"""Per-step options accepted by every transition, validated at definition time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ductline.dsl.timeouts import ScaledTimeout

from ductline.dsl.backoff import Backoff
from ductline.durations import optional_seconds, to_seconds

DEFAULT_MAX_RETRY = 3
DEFAULT_MAX_CRASH = 10
DEFAULT_MAX_FANOUT = 100_000
ISOLATIONS = ("process", "thread")


@dataclass(frozen=True, slots=True)
class StepOptions:
    """Options of one step, in integer seconds.

    Attributes:
        timeout: seconds an attempt may run before it is killed, a `ScaledTimeout`,
            or ``None`` for no limit.
        delay: seconds the step waits after its predecessor committed (0 = none).
        max_retry: shared budget for errored and timed-out attempts.
        retry_delay: seconds between a failed attempt and the next; ``None`` takes
            the configured default (``DUCTLINE_RETRY_DELAY``, 10 s). With a
            `Backoff` policy, its base.
        backoff: the `Backoff` policy given as ``retry_delay=``, else ``None``.
        retry_on: qualified names of exception types that are always retried,
            whatever is left of ``max_retry`` (they still count as failures).
        no_retry_on: qualified names of exception types never retried: the step
            fails at once and the run halts with ``non_retryable_error``.
        max_crash: budget for crashed attempts (worker died, lease expired).
        isolation: ``"process"`` (a killable child, the default) or ``"thread"``.
    """

    timeout: "int | ScaledTimeout | None" = None
    delay: int = 0
    max_retry: int = DEFAULT_MAX_RETRY
    retry_delay: int | None = None
    max_crash: int = DEFAULT_MAX_CRASH
    isolation: str = "process"
    backoff: Backoff | None = None
    retry_on: tuple[str, ...] = ()
    no_retry_on: tuple[str, ...] = ()


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__} ({value!r})")
    if value < 0:
        raise ValueError(f"{field} must not be negative, got {value}")
    return value


def error_type_name(kind: type) -> str:
    """The name a failed attempt records for an exception type: ``qualname`` for
    builtins, else ``module.qualname`` (`ductline.runtime.child.describe`)."""
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _error_types(value: Any, field: str) -> tuple[str, ...]:
    """Exception types or their qualified names, as the names attempts record.

    A name matches the recorded type exactly: subclasses are not included (the
    child records the raised type only), so list each type you mean.
    """
    if value is None:
        return ()
    items = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
    names = []
    for item in items:
        if isinstance(item, type) and issubclass(item, BaseException):
            names.append(error_type_name(item))
        elif isinstance(item, str) and item:
            names.append(item)
        else:
            raise TypeError(f"{field} takes exception types or their qualified names, got {item!r}")
    return tuple(sorted(set(names)))


def build_options(
    *,
    timeout: Any = None,
    delay: Any = None,
    max_retry: Any = None,
    retry_delay: Any = None,
    max_crash: Any = None,
    isolation: Any = None,
    retry_on: Any = None,
    no_retry_on: Any = None,
) -> StepOptions:
    """Validate the keyword options of a transition (DESIGN.md's duration rule).

    Raises:
        TypeError / ValueError: as the duration rule says; ``retry_on`` and
            ``no_retry_on`` that are not exception types or names, or that share
            a type.
    """
    iso = "process" if isolation is None else isolation
    if iso not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    from ductline.dsl.timeouts import ScaledTimeout

    always = _error_types(retry_on, "retry_on")
    never = _error_types(no_retry_on, "no_retry_on")
    if set(always) & set(never):
        raise ValueError(f"retry_on and no_retry_on both name {sorted(set(always) & set(never))}")
    backoff = retry_delay if isinstance(retry_delay, Backoff) else None

    return StepOptions(
        timeout=timeout if isinstance(timeout, ScaledTimeout)
        else optional_seconds(timeout, field="timeout", allow_zero=False),
        delay=0 if delay is None else to_seconds(delay, field="delay"),
        max_retry=DEFAULT_MAX_RETRY if max_retry is None else _count(max_retry, "max_retry"),
        retry_delay=backoff.base if backoff is not None else optional_seconds(retry_delay, field="retry_delay"),
        max_crash=DEFAULT_MAX_CRASH if max_crash is None else _count(max_crash, "max_crash"),
        isolation=iso,
        backoff=backoff,
        retry_on=always,
        no_retry_on=never,
    )
