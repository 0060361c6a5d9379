"""Per-step options accepted by every transition, validated at definition time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ductline.dsl.timeouts import ScaledTimeout

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
            the configured default (``DUCTLINE_RETRY_DELAY``, 10 s).
        max_crash: budget for crashed attempts (worker died, lease expired).
        isolation: ``"process"`` (a killable child, the default) or ``"thread"``.
    """

    timeout: "int | ScaledTimeout | None" = None
    delay: int = 0
    max_retry: int = DEFAULT_MAX_RETRY
    retry_delay: int | None = None
    max_crash: int = DEFAULT_MAX_CRASH
    isolation: str = "process"


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__} ({value!r})")
    if value < 0:
        raise ValueError(f"{field} must not be negative, got {value}")
    return value


def build_options(
    *,
    timeout: Any = None,
    delay: Any = None,
    max_retry: Any = None,
    retry_delay: Any = None,
    max_crash: Any = None,
    isolation: Any = None,
) -> StepOptions:
    """Validate the keyword options of a transition (DESIGN.md's duration rule)."""
    iso = "process" if isolation is None else isolation
    if iso not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    from ductline.dsl.timeouts import ScaledTimeout

    return StepOptions(
        timeout=timeout if isinstance(timeout, ScaledTimeout)
        else optional_seconds(timeout, field="timeout", allow_zero=False),
        delay=0 if delay is None else to_seconds(delay, field="delay"),
        max_retry=DEFAULT_MAX_RETRY if max_retry is None else _count(max_retry, "max_retry"),
        retry_delay=optional_seconds(retry_delay, field="retry_delay"),
        max_crash=DEFAULT_MAX_CRASH if max_crash is None else _count(max_crash, "max_crash"),
        isolation=iso,
    )
