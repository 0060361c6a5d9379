"""Whether ductline's log records reach anyone: ductline configures no logging as a
library (its loggers carry only a `logging.NullHandler`), so in a program that
configured none a warning logged is dropped. What an operator must read then goes
out as a Python warning instead (`warn`)."""

from __future__ import annotations

import logging
import warnings


def logs_somewhere(logger: logging.Logger) -> bool:
    """Whether a record of ``logger`` reaches a handler that shows it (not only
    ductline's `logging.NullHandler`)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(h, logging.NullHandler) for h in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def warn(logger: logging.Logger, message: str, stacklevel: int = 2) -> None:
    """``message`` at WARNING on ``logger`` if it reaches a handler, else as a
    `UserWarning` (``stacklevel`` as `warnings.warn` counts it, from the caller of
    this function)."""
    if logs_somewhere(logger):
        logger.warning(message)
    else:
        warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)
