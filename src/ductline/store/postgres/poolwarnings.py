"""Folding the connection pool's own warnings into one line.

While PostgreSQL is unreachable, ``psycopg_pool`` retries in the background and
logs a raw warning for every failed connection ("error connecting in 'ductline':
..."), many a minute, for as long as the outage lasts. `PoolWarnings` drops them
from the ``psycopg.pool`` logger and logs one ``ductline.store`` warning that says
what happened and that the pool keeps retrying; once a connection works again one
more line says so, with how many warnings were folded.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("ductline.store")
POOL_LOGGER = "psycopg.pool"


class PoolWarnings(logging.Filter):
    """A filter on the ``psycopg.pool`` logger (records below WARNING pass)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.folded = 0
        self._outage = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        with self._lock:
            self.folded += 1
            first, self._outage = not self._outage, True
        if first:
            log.warning("PostgreSQL connection pool: %s; it keeps retrying in the background (its further "
                        "warnings are folded into this line until a connection works again)", record.getMessage())
        return False

    def connected(self) -> None:
        """A connection worked: end the folded outage, if there was one."""
        if not self._outage:  # the common case, without the lock
            return
        with self._lock:
            if not self._outage:
                return
            folded, self.folded, self._outage = self.folded, 0, False
        log.warning("PostgreSQL connection pool connected again (%d pool warning(s) folded)", folded)


FOLD = PoolWarnings()


def install() -> PoolWarnings:
    """Put `FOLD` on the pool's logger (once per process)."""
    logger = logging.getLogger(POOL_LOGGER)
    if FOLD not in logger.filters:
        logger.addFilter(FOLD)
    return FOLD
