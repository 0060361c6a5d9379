"""Whether a connection reaches PostgreSQL through a connection pooler, and what
the dialect does about it when the ``database_pooling`` setting does not say.

A pooler (PgBouncer, and the others that speak PostgreSQL's protocol) answers the
client's connection itself and gives it a cancel key of its own making, so the
process id the connection was given (``conn.info.backend_pid``) is not the id of
the server process that runs its statements (``pg_backend_pid()``). On a direct
connection the two are the same process.

A pooler may lend a server session per transaction (PgBouncer's
``pool_mode = transaction``), where psycopg's prepared statements land in another
client's session and fail ("prepared statement ... does not exist"), and LISTEN
listens on a session that is lent to someone else. The dialect cannot ask the
pooler its mode, so an unset ``database_pooling`` behind a pooler is taken as
``"transaction"``, which is correct in every mode (a session pooler only loses
the prepared statements and the LISTEN it could have kept), and says so once
(`warn_detected`).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("ductline.store")

# The values of the ``database_pooling`` setting (`ductline.config.POOLING_MODES`).
DETECT = ""                 # unset: find out at the first connection
TRANSACTION = "transaction" # a server session lent per transaction: no prepared statements, no LISTEN
SESSION = "session"         # a server session per client for its whole life: as direct

_warned = False


def through_pooler(conn: Any) -> bool:
    """Whether ``conn`` (an open psycopg connection with tuple rows) reaches its
    server through a pooler: the process id its server announced differs from the
    one running its statements. One round trip (``SELECT pg_backend_pid()``)."""
    (served_by,) = conn.execute("SELECT pg_backend_pid()").fetchone()
    return int(served_by) != int(conn.info.backend_pid)


def warn_detected() -> None:
    """Log, once per process, that an unset ``database_pooling`` was taken as
    ``"transaction"`` because the URL leads to a pooler."""
    global _warned
    if _warned:
        return
    _warned = True
    log.warning("The database URL leads to PostgreSQL through a connection pooler (the server process that runs "
                "its statements is not the one the connection was given), and database_pooling is not set: "
                "working as with DUCTLINE_DATABASE_POOLING=transaction (no prepared statements; LISTEN only on "
                "DUCTLINE_LISTEN_DATABASE_URL, else polling). Set DUCTLINE_DATABASE_POOLING=transaction to say "
                "so, or =session if the pooler keeps each client on one server session")
