"""Retry backoff policies: how long a job waits before its next attempt after an
errored or timed-out attempt (``retry_delay=`` of any transition).

A policy is validated when it is built, i.e. when the module defining the pipeline
is imported, with the same duration rule as every other option (`ductline.durations`:
``int`` seconds or a whole-second ``timedelta``). The delay itself is computed when
a failure is recorded, in milliseconds, and counted on the database clock.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable

from ductline.durations import optional_seconds, to_seconds

KINDS = ("fixed", "linear", "exponential")


def _jitter(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"jitter must be a number between 0 and 1, not {type(value).__name__} ({value!r})")
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"jitter must be between 0 and 1, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Backoff:
    """A retry delay that depends on how many attempts of the job failed.

    Build one with `fixed`, `linear` or `exponential`; pass it as ``retry_delay=``.
    For the n-th failed attempt of a job (n = 1, 2, …) the delay before the next
    attempt is:

    - fixed: ``base``;
    - linear: ``base * n``;
    - exponential: ``base * 2 ** (n - 1)``;

    then limited to ``cap`` (if given), then, with ``jitter`` j in [0, 1], drawn
    uniformly from ``[delay * (1 - j), delay]`` so that jobs failing together do not
    retry together (j = 1 is "full jitter"). Jitter never lengthens a delay, so
    ``cap`` stays an upper bound.

    Attributes:
        kind: ``"fixed"``, ``"linear"`` or ``"exponential"``.
        base: seconds (int).
        cap: seconds (int) or ``None`` for no limit.
        jitter: fraction of the delay that may be taken off at random.
    """

    kind: str
    base: int
    cap: int | None = None
    jitter: float = 0.0

    @classmethod
    def fixed(cls, delay: Any, *, jitter: Any = 0.0) -> "Backoff":
        """The same ``delay`` (int seconds or ``timedelta``) after every failure.

        Raises:
            TypeError / ValueError: ``delay`` is not a duration, ``jitter`` not in [0, 1].
        """
        return cls("fixed", to_seconds(delay, field="Backoff.fixed delay"), None, _jitter(jitter))

    @classmethod
    def linear(cls, base: Any, *, cap: Any = None, jitter: Any = 0.0) -> "Backoff":
        """``base * n`` seconds after the n-th failure, at most ``cap``.

        Raises:
            TypeError / ValueError: invalid durations, ``cap`` below ``base``, or
                ``jitter`` not in [0, 1].
        """
        return cls._build("linear", base, cap, jitter)

    @classmethod
    def exponential(cls, base: Any, *, cap: Any = None, jitter: Any = 0.0) -> "Backoff":
        """``base * 2 ** (n - 1)`` seconds after the n-th failure, at most ``cap``.

        Raises:
            TypeError / ValueError: invalid durations, ``cap`` below ``base``, or
                ``jitter`` not in [0, 1].
        """
        return cls._build("exponential", base, cap, jitter)

    @classmethod
    def _build(cls, kind: str, base: Any, cap: Any, jitter: Any) -> "Backoff":
        base_s = to_seconds(base, field=f"Backoff.{kind} base", allow_zero=False)
        cap_s = optional_seconds(cap, field=f"Backoff.{kind} cap", allow_zero=False)
        if cap_s is not None and cap_s < base_s:
            raise ValueError(f"Backoff.{kind} cap ({cap_s} s) is below its base ({base_s} s)")
        return cls(kind, base_s, cap_s, _jitter(jitter))

    def delay_ms(self, failures: int, rng: Callable[[], float] = random.random) -> int:
        """The delay in milliseconds after the ``failures``-th failed attempt (>= 1).

        Args:
            failures: failed attempts of the job so far, including the one just recorded.
            rng: a source of floats in [0, 1) (injected by tests).
        """
        n = max(1, failures)
        if self.kind == "fixed":
            seconds = float(self.base)
        elif self.kind == "linear":
            seconds = float(self.base * n)
        else:
            # Past 2**62 the cap (or any real wait) has long been reached; keep ints small.
            seconds = float(self.base) * 2.0 ** min(n - 1, 62)
        if self.cap is not None:
            seconds = min(seconds, float(self.cap))
        ms = seconds * 1000
        if self.jitter:
            ms -= ms * self.jitter * rng()
        return int(min(ms, 2**53))
