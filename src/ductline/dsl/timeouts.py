"""Timeouts that scale with a step's input (docs/howto/timeouts.md; the
killable-child lesson: "a floor of about 30 minutes, scaled up by the source's
size, capped at a few hours")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ductline.dsl.steps import reference
from ductline.durations import to_seconds


@dataclass(frozen=True)
class ScaledTimeout:
    """A timeout of ``clamp(floor, size(input) / unit * seconds_per_unit, cap)`` seconds.

    Args:
        floor: the least time an attempt gets (int seconds or whole-second timedelta, > 0).
        cap: the most time an attempt gets (>= ``floor``).
        size: an importable module-level function called with the step's arguments
            that returns a number of units (e.g. bytes of the source). It runs in
            the step's child, under the ``floor`` deadline, so a size function that
            hangs is killed like the step would be.
        seconds_per_unit: seconds granted per unit (a finite number > 0).
        unit: how many of ``size``'s units make one unit (e.g. 1_000_000 for MB).

    Example: ``ScaledTimeout(floor=timedelta(minutes=30), cap=timedelta(hours=4),
    size=source_bytes, seconds_per_unit=1, unit=1_000_000)`` -- 1 s per MB.

    Raises:
        TypeError / ValueError: invalid durations, rate or unit (definition time);
        DefinitionError: ``size`` is not importable by name.
    """

    floor: Any
    cap: Any
    size: Callable[..., Any]
    seconds_per_unit: float = 1.0
    unit: int = 1
    size_ref: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        floor = to_seconds(self.floor, field="ScaledTimeout.floor", allow_zero=False)
        cap = to_seconds(self.cap, field="ScaledTimeout.cap", allow_zero=False)
        if cap < floor:
            raise ValueError(f"ScaledTimeout.cap ({cap} s) is below its floor ({floor} s)")
        rate = self.seconds_per_unit
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"ScaledTimeout.seconds_per_unit must be a finite number > 0, got {rate!r}")
        if isinstance(self.unit, bool) or not isinstance(self.unit, int) or self.unit < 1:
            raise ValueError(f"ScaledTimeout.unit must be a positive int, got {self.unit!r}")
        object.__setattr__(self, "floor", floor)
        object.__setattr__(self, "cap", cap)
        object.__setattr__(self, "size_ref", reference(self.size))

    def seconds_for(self, args: tuple[Any, ...]) -> int:
        """The timeout in whole seconds for one attempt's arguments: ``cap`` for a
        size too large for a float or infinite.

        Raises:
            TypeError: the size function returned something other than a number >= 0
                (NaN included).
        """
        units = self.size(*args)
        if isinstance(units, bool) or not isinstance(units, (int, float)) \
                or (isinstance(units, float) and math.isnan(units)) or units < 0:
            raise TypeError(f"the size function {self.size_ref} must return a number >= 0, got {units!r}")
        try:
            scaled = units / self.unit * self.seconds_per_unit
        except OverflowError:  # an int too large for a float: past any cap
            return int(self.cap)
        if not math.isfinite(scaled):  # an infinite size: the cap
            return int(self.cap)
        return int(min(self.cap, max(self.floor, math.ceil(scaled))))
