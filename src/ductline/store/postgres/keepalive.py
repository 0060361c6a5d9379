"""TCP settings for every PostgreSQL connection ductline opens.

Without them, a server that vanished without a reset (a network partition, a host
powered off, a firewall that drops an idle flow) leaves a connection that the kernel
gives up on only after about two hours: a worker's read on it, or its listening
connection, waits that long, and the worker cannot stop gracefully meanwhile.
With keepalive probes after 30 s idle, every 10 s, 3 unanswered (and, where libpq
has it, at most 60 s for sent data to go unacknowledged), such a connection fails
within about a minute with an error the callers already handle (StoreUnavailable:
retried, reconnected). A URL that sets any of these keeps its own value.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

KEEPALIVES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}
# libpq 12 and later (psycopg's binary build bundles a newer one); an older libpq
# refuses an option it does not know.
TCP_USER_TIMEOUT = {"tcp_user_timeout": "60000"}  # milliseconds


def tcp_settings(url: str) -> dict[str, Any]:
    """The connection options to add to ``url``: those above it does not set.

    Raises:
        psycopg.ProgrammingError: ``url`` is not a valid connection string.
    """
    given = conninfo_to_dict(url)
    wanted = dict(KEEPALIVES)
    if psycopg.pq.version() >= 120000:
        wanted.update(TCP_USER_TIMEOUT)
    return {name: value for name, value in wanted.items() if name not in given}
