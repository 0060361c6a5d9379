"""Warnings about one ongoing condition (a database outage), logged once a while.

While the database is unreachable every phase of the worker fails and retries on
its own schedule; a warning for each failure floods the log with the same line.
A `FoldedWarning` logs the first one, then at most one per ``every`` seconds
saying how many it folded; the ones between go to the debug level.
"""

from __future__ import annotations

import logging
from typing import Any, Callable


class FoldedWarning:
    """Args:
        logger: where to log.
        every: seconds between two warnings (the ones between are folded).
        now: the monotonic clock (seconds).
    """

    def __init__(self, logger: logging.Logger, every: float, now: Callable[[], float]) -> None:
        self._log = logger
        self._every = every
        self._now = now
        self._warned_at: float | None = None
        self._folded = 0

    def warning(self, message: str, *args: Any) -> None:
        now = self._now()
        if self._warned_at is None or now - self._warned_at >= self._every:
            folded = f" ({self._folded} like it folded since the last)" if self._folded else ""
            self._log.warning(message + folded, *args)
            self._warned_at, self._folded = now, 0
        else:
            self._folded += 1
            self._log.debug(message, *args)
