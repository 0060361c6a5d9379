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
- ``unhealthy``: it heartbeats but claims nothing (status ``unhealthy``): it holds
  more undead slots than it tolerates, or its step children fail to start
  (`condition`: the row's ``problem`` says which);
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

from dataclasses import dataclass
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


# A worker whose new step children failed to start this many times in a row (each
# raised importing the apps, or died before it said it was ready), with none
# ready since, is unhealthy: it restarts them, but runs nothing. Fewer is a
# passing failure (a flaky import) that the next child may not repeat.
START_FAILURES_TOLERATED = 3
# Past that, a new child waits before it starts: 1 s after the failure that made the
# worker unhealthy, doubling with each further failure up to this cap (seconds). A
# child that cannot import the app fails in a fraction of a second, and each start
# costs an interpreter and an import: unchecked, a worker spent its CPUs on them.
START_BACKOFF_CAP_SECONDS = 30.0


def start_backoff_seconds(failed_starts: int) -> float:
    """How long after its last failed start a worker starts its next child (seconds):
    0 below `START_FAILURES_TOLERATED` failures in a row, then 1 s doubling up to
    `START_BACKOFF_CAP_SECONDS`. Children that fail while the worker waits out such a
    pause (started together with the one that began it) are not counted again
    (`ductline.runtime.starts`)."""
    if failed_starts < START_FAILURES_TOLERATED:
        return 0.0
    return min(START_BACKOFF_CAP_SECONDS, float(2 ** min(failed_starts - START_FAILURES_TOLERATED, 16)))


# The longest problem text a worker row holds (characters).
PROBLEM_MAX_CHARS = 500


@dataclass(frozen=True, slots=True)
class Condition:
    """What a worker writes in its row at each heartbeat: its status, and why it is
    unhealthy when a row of its own says more than the status (else ``None``)."""

    status: WorkerStatus
    problem: str | None = None


def condition(*, stopping: bool, undead: int, max_undead: int, failed_starts: int = 0,
              start_error: str | None = None) -> Condition:
    """The status (and problem) of a worker process, from what it knows of itself.

    Args:
        stopping: it shuts down (no new claims).
        undead: its slots abandoned to children or threads that would not die.
        max_undead: the undead slots it tolerates (``max_undead`` setting).
        failed_starts: its new step children that failed to start in a row, since
            the last one that said it was ready.
        start_error: what the last of them reported (the app and its error), if any.
    """
    problem = None
    if failed_starts >= START_FAILURES_TOLERATED:
        problem = start_problem(failed_starts, start_error)
    if stopping:
        return Condition(WorkerStatus.STOPPING, problem)
    if undead > max_undead or problem is not None:
        return Condition(WorkerStatus.UNHEALTHY, problem)
    return Condition(WorkerStatus.RUNNING)


def start_problem(failed_starts: int, error: str | None) -> str:
    """``"step children fail to start (4 in a row): 'app.py': importing 'app' raised
    RuntimeError: ..."``: the count, and the first and last lines of the error (the
    first names the app, the last ends the error), at most `PROBLEM_MAX_CHARS`."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    said = "no error reported (the child died before it said it was ready)" if not lines else \
        lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    text = f"step children fail to start ({failed_starts} in a row): {said}"
    return text if len(text) <= PROBLEM_MAX_CHARS else text[:PROBLEM_MAX_CHARS - 3] + "..."


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
