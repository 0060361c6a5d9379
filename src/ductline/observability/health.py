"""Worker health from the worker table: is a live worker process heartbeating?

Each worker's health is judged by one rule (`ductline.model.workers`): a worker
whose last heartbeat is older than the lease is *lost* (killed without a clean
exit, or cut off from the database; its jobs get rescued) and no longer counts as
live, so a replacement started on the same host makes the check pass again. A
clean exit writes ``stopped``.

``healthy`` overall means at least one live worker (filtered by host if asked),
and every live one heartbeated within ``max_age`` seconds (by default the lease)
and says it is not unhealthy: it holds no more undead slots than it tolerates, and
its step children start (the row's ``problem`` says what is wrong, in the worker's
own words: which app its children cannot import, and the error). Ages are computed on the
database clock, so the host running the check needs no synchronised clock.

This check reads the database: it tells whether the workers work, not whether one
process answers. A process's liveness is its ``/healthz`` (`ductline.observability.probes`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ductline import timestamps
from ductline.model import workers as rule


@dataclass(frozen=True, slots=True)
class WorkerHealth:
    id: str
    host: str
    pid: int
    concurrency: int
    busy: int
    undead: int
    status: str
    started: str
    last_heartbeat: str
    age_seconds: float
    live: bool
    healthy: bool | None  # None for a worker that is not live (stopped or lost)
    problem: str | None = None  # why a live worker is not healthy: STALE, UNDEAD or its own words
    health: str = rule.WorkerHealth.HEALTHY.value  # `ductline.model.workers.WorkerHealth`
    queues: tuple[str, ...] = ()  # the queues it claims from

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HealthReport:
    healthy: bool
    max_age_seconds: float
    workers: list[WorkerHealth]
    message: str

    @property
    def live(self) -> list[WorkerHealth]:
        return [w for w in self.workers if w.live]

    def as_dict(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "max_age_seconds": self.max_age_seconds, "message": self.message,
                "live": len(self.live), "unhealthy": sum(1 for w in self.live if not w.healthy),
                "workers": [w.as_dict() for w in self.workers]}


# Why a live worker is not healthy (one whose row says why in its own words, e.g. that
# its step children fail to start, is named with those words instead).
STALE = "heartbeat stale"          # no heartbeat within the max age
UNDEAD = "too many undead slots"   # heartbeats, but claims nothing (max_undead exceeded)


def iso(ms: Any) -> str:
    """`ductline.timestamps.iso`, ``""`` for ``None`` (a table cell)."""
    return timestamps.iso(ms) or ""


def default_max_age(lease_seconds: float) -> float:
    """The lease: past it a worker is lost anyway (its leases have expired)."""
    return lease_seconds


def worker_table(store: Any, max_age: float, *, lease_seconds: float, host: str | None = None,
                 limit: int = 100, everything: bool = True) -> list[WorkerHealth]:
    """The worker rows (newest first), with their age and health.

    Args:
        max_age: the oldest heartbeat of a healthy live worker (seconds).
        lease_seconds: the workers' lease (seconds); a heartbeat older makes a worker lost.
        host: only the workers of this host.
        everything: every row; ``False``: only those a listing shows by default, the
            live ones and those stopped or lost recently (`ductline.model.workers.shown_within_ms`).
    """
    lease_ms = round(lease_seconds * 1000)
    out = []
    for r in store.list_workers(limit, None if everything else rule.shown_within_ms(lease_ms)):
        if host is not None and r["host"] != host:
            continue
        age_ms = max(0, int(r["now_ms"]) - int(r["heartbeat_ms"]))
        age = age_ms / 1000
        judged = rule.judge(r["status"], age_ms, lease_ms)
        live = rule.is_live(judged)
        # An unhealthy worker heartbeats but claims nothing: not healthy. Its row says
        # why (a worker before that column, or one past max_undead, says nothing: undead).
        unhealthy = judged == rule.WorkerHealth.UNHEALTHY
        problem = (r.get("problem") or UNDEAD) if unhealthy else STALE if age > max_age else None
        out.append(WorkerHealth(
            id=r["id"], host=r["host"], pid=int(r["pid"]), concurrency=int(r["concurrency"]), busy=int(r["busy"]),
            undead=int(r["undead"]), status=r["status"], started=iso(r["started_ms"]),
            last_heartbeat=iso(r["heartbeat_ms"]), age_seconds=round(age, 3), live=live,
            healthy=problem is None if live else None, problem=problem if live else None, health=judged.value,
            queues=tuple(r["queues"]),
        ))
    return out


def check(store: Any, max_age: float, *, lease_seconds: float, host: str | None = None,
          limit: int = 100) -> HealthReport:
    """The health of the live workers (see the module docstring)."""
    workers = worker_table(store, max_age, lease_seconds=lease_seconds, host=host, limit=limit)
    live = [w for w in workers if w.live]
    stale = [w for w in live if not w.healthy]
    where = f" on host {host}" if host else ""
    if not live:
        lost = sum(1 for w in workers if w.health == rule.WorkerHealth.LOST)
        why = f" ({lost} lost: no heartbeat within the {lease_seconds:g} s lease)" if lost else ""
        return HealthReport(False, max_age, workers, f"no live worker process{where}{why}")
    if stale:
        names = ", ".join(f"{w.host}:{w.pid} ({w.problem}: heartbeat {w.age_seconds:.1f} s ago, "
                          f"{w.undead} undead)" for w in stale)
        return HealthReport(False, max_age, workers,
                            f"{len(stale)} of {len(live)} live worker process(es){where} missed their heartbeat "
                            f"(max age {max_age:g} s) or say they are unhealthy: {names}")
    return HealthReport(True, max_age, workers,
                        f"{len(live)} live worker process(es){where} heartbeated within {max_age:g} s")
