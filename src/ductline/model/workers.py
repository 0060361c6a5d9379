"""How healthy a worker process is, from its row in the worker table (pure).

One rule for every place that judges a worker: ``ductline health``, ``ductline
workers``, the dashboard and ``GET /api/workers``.

A worker heartbeats every third of its lease. Its health, by the age of its last
heartbeat on the database clock:

- ``stopped``: it exited cleanly (status ``stopped``);
- ``lost``: no heartbeat within a whole lease. Its leases have expired and other
  workers rescue its jobs; the process is gone (SIGKILL, OOM, power loss) or cannot
  reach the database. It no longer counts as live: a replacement on the same host is
  judged on its own;
- ``unhealthy``: it heartbeats but holds more undead slots than it tolerates, so it
  claims nothing (status ``unhealthy``);
- ``late``: its last heartbeat is more than half a lease old (it missed one);
- ``healthy``: otherwise.

A worker is *live* while it is neither stopped nor lost.

Which rows a listing shows (`shown_within_ms`): ``ductline workers``, the dashboard
and ``GET /api/workers`` show the workers whose last heartbeat is at most
`RECENTLY_GONE_MS` old (15 minutes), or a lease if that is longer: every live worker,
and those that stopped or were lost within that time. Every ``ductline run`` leaves
a stopped row and a killed worker stays lost until retention deletes its row
(`prune_cutoffs`); older rows are history, shown by ``--all`` (``?all=1``).
"""

from __future__ import annotations

from enum import StrEnum

from ductline.model.states import LIVE_WORKER, WorkerStatus


class WorkerHealth(StrEnum):
    HEALTHY = "healthy"
    LATE = "late"
    UNHEALTHY = "unhealthy"
    LOST = "lost"
    STOPPED = "stopped"


# Worst first: the order a table of workers is shown in.
WORST_FIRST = (WorkerHealth.LOST, WorkerHealth.UNHEALTHY, WorkerHealth.LATE, WorkerHealth.HEALTHY,
               WorkerHealth.STOPPED)


def judge(status: str, age_ms: int, lease_ms: int) -> WorkerHealth:
    """The health of a worker whose row has ``status`` and whose last heartbeat is
    ``age_ms`` milliseconds old (database clock), under a lease of ``lease_ms``."""
    if status not in LIVE_WORKER:
        return WorkerHealth.STOPPED
    if age_ms > lease_ms:
        return WorkerHealth.LOST
    if status == WorkerStatus.UNHEALTHY:
        return WorkerHealth.UNHEALTHY
    if age_ms > lease_ms / 2:
        return WorkerHealth.LATE
    return WorkerHealth.HEALTHY


# How long a stopped or lost worker is still listed by default (milliseconds).
RECENTLY_GONE_MS = 15 * 60 * 1000


def shown_within_ms(lease_ms: int) -> int:
    """The oldest last heartbeat (milliseconds, database clock) of a worker a listing
    shows by default: `RECENTLY_GONE_MS`, or the lease ``lease_ms`` if longer, so that
    no live worker is ever left out (past a lease it is lost)."""
    return max(RECENTLY_GONE_MS, lease_ms)


# The least time a row of a worker that stopped heartbeating without stopping is kept
# (milliseconds), whatever the retention: a process cut off from its database for a
# while heartbeats again once it can, and its row must still be there (a heartbeat
# updates the row, it does not create it).
LOST_ROW_KEPT_MS = 24 * 3600 * 1000


def prune_cutoffs(now_ms: int, older_than_ms: int) -> tuple[int, int]:
    """Which worker rows retention deletes (`ductline.operations.prune`): a stopped
    worker's row whose last heartbeat is at or before the first value, and any other
    (a lost worker's: it never said it stopped) at or before the second, which is
    at least `LOST_ROW_KEPT_MS` ago.

    Args:
        now_ms: the database clock (epoch ms).
        older_than_ms: the retention (ms): rows whose last heartbeat is older go.
    """
    return now_ms - older_than_ms, now_ms - max(older_than_ms, LOST_ROW_KEPT_MS)


def is_live(health: WorkerHealth) -> bool:
    """Whether a worker of this health counts as a running process."""
    return health not in (WorkerHealth.LOST, WorkerHealth.STOPPED)
