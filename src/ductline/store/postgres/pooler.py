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
the prepared statements and the LISTEN it could have kept), and says so once per
process (`warn_detected`), loudly only in a process that stays up.
"""

from __future__ import annotations

import logging
from typing import Any

from ductline.store import notices

log = logging.getLogger("ductline.store")

# The values of the ``database_pooling`` setting (`ductline.config.POOLING_MODES`).
DETECT = ""                 # unset: find out at the first connection
TRANSACTION = "transaction" # a server session lent per transaction: no prepared statements, no LISTEN
SESSION = "session"         # a server session per client for its whole life: as direct

# The key of its notice (`ductline.store.notices`: said once per process).
NOTICE = "pooler"


def through_pooler(conn: Any) -> bool:
    """Whether ``conn`` (an open psycopg connection with tuple rows) reaches its
    server through a pooler: the process id its server announced differs from the
    one running its statements. One round trip (``SELECT pg_backend_pid()``)."""
    (served_by,) = conn.execute("SELECT pg_backend_pid()").fetchone()
    return int(served_by) != int(conn.info.backend_pid)


def warn_detected() -> None:
    """Say, once per process, that an unset ``database_pooling`` was taken as
    ``"transaction"`` because the URL leads to a pooler, and what to set: at
    WARNING in a process that stays up, at DEBUG in a one-shot command
    (`ductline.store.notices`)."""
    notices.once(log, NOTICE,
                 "database_pooling is not set and the database URL leads through a connection pooler: working "
                 "as with DUCTLINE_DATABASE_POOLING=transaction (no prepared statements; LISTEN only on "
                 "DUCTLINE_LISTEN_DATABASE_URL, else polling). Set DUCTLINE_DATABASE_POOLING=transaction (or "
                 "=session if the pooler keeps each client on one server session) to say so and silence this line")
