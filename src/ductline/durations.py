"""Validation of durations given to the DSL and to `trigger`.

Rule (docs/concepts/pipelines.md, "Validation", after Ductwork Pro's step timeout and step
delay documents): a duration is an `int` number of seconds or a
`datetime.timedelta` of whole seconds, stored as integer seconds. `float`, `str`,
`bool` and `None` where a value is required raise `TypeError`; a negative value
raises `ValueError`.
"""

from __future__ import annotations

from datetime import timedelta


# Far beyond any real delay, and far inside what databases and datetime can store.
MAX_SECONDS = 100 * 365 * 86400


def to_seconds(value: object, *, field: str, allow_zero: bool = True) -> int:
    """Convert a duration to whole seconds.

    Args:
        value: an ``int`` (seconds) or a ``timedelta`` of whole seconds.
        field: the option's name, used in error messages.
        allow_zero: ``False`` for options where 0 is meaningless (``timeout``).

    Returns:
        The duration in integer seconds.

    Raises:
        TypeError: for ``bool``, ``float``, ``str``, ``None`` or any other type, and
            for a ``timedelta`` with a fractional second.
        ValueError: for a negative value, or 0 when ``allow_zero`` is false.
    """
    # bool is a subclass of int; True seconds is always a mistake.
    if isinstance(value, bool) or not isinstance(value, (int, timedelta)):
        raise TypeError(
            f"{field} must be an int number of seconds or a datetime.timedelta, "
            f"not {type(value).__name__} ({value!r})"
        )
    if isinstance(value, timedelta):
        if value.microseconds:
            raise TypeError(f"{field} must be whole seconds, got {value!r}")
        seconds = value.days * 86400 + value.seconds
    else:
        seconds = value
    if seconds < 0:
        raise ValueError(f"{field} must not be negative, got {seconds} s")
    if seconds > MAX_SECONDS:
        raise ValueError(f"{field} must be at most {MAX_SECONDS} s (100 years), got {seconds} s")
    if seconds == 0 and not allow_zero:
        raise ValueError(f"{field} must be greater than 0 seconds")
    return seconds


def optional_seconds(value: object, *, field: str, allow_zero: bool = True) -> int | None:
    """Like `to_seconds`, but ``None`` means "not set" and is returned as is."""
    if value is None:
        return None
    return to_seconds(value, field=field, allow_zero=allow_zero)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_cli_duration(text: str, *, field: str) -> int:
    """Parse a CLI duration: ``30s``, ``5m``, ``2h``, ``1d`` or integer seconds.

    Raises:
        ValueError: for anything else, including negative or fractional values.
    """
    raw = text.strip().lower()
    unit = 1
    if raw and raw[-1] in _UNITS:
        unit = _UNITS[raw[-1]]
        raw = raw[:-1]
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError(
            f"{field}: expected whole seconds or a number with s/m/h/d (e.g. 30s, 5m), got {text!r}"
        )
    return int(raw) * unit


def seconds_text(seconds: int) -> str:
    """Whole seconds as a person reads them, in the largest unit that divides them
    exactly: ``"30 d"``, ``"12 h"``, ``"90 min"``, ``"1 s"`` (a bare ``1`` given on
    the command line is seconds: the text says so)."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
