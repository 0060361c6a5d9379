"""Level names for step logs (`ductline.execution.steplog`): the step option
``log_level=``, the worker setting ``step_log_level`` and the executor's
argument all take one of `LEVELS`, checked by `check_level`."""

from __future__ import annotations

from typing import Any

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LEVEL = "INFO"
DEFAULT_MAX_BYTES = 1_048_576  # per attempt, of message text (UTF-8)


def check_level(value: Any, field: str = "log_level") -> str:
    """A log level name, upper-cased.

    Args:
        value: ``"debug"``, ``"INFO"``, ``"warning"``, ``"error"`` or ``"critical"``
            (any case).
        field: the option's name, for the message.

    Raises:
        TypeError: ``value`` is not a string.
        ValueError: it names no level.
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a level name (one of {', '.join(LEVELS)}), "
                        f"not {type(value).__name__} ({value!r})")
    name = value.strip().upper()
    if name not in LEVELS:
        raise ValueError(f"unknown {field} {value!r}; use one of {', '.join(LEVELS)}")
    return name
