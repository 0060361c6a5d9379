"""Worker health from the worker table: is every live worker process heartbeating?

A worker process heartbeats every third of the lease (`Settings.lease_seconds`)
and records its busy and undead slots with each beat. It is *live* while its
status is ``running`` or ``stopping`` (a clean exit writes ``stopped``); a live
worker is *healthy* when its last heartbeat is at most ``max_age`` seconds old
on the database clock. A process killed without a clean exit stays live with a
stale heartbeat: unhealthy, which is what a liveness probe must see.

``healthy`` overall means at least one live worker (filtered by host if asked),
and every one of them healthy. Ages are computed on the database clock, so the
host running the check needs no synchronised clock.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from ductline.model.states import LIVE_WORKER, WorkerStatus


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
    healthy: bool | None  # None for a worker that stopped cleanly
    problem: str | None = None  # why a live worker is not healthy: STALE or UNDEAD

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


# Why a live worker is not healthy.
STALE = "heartbeat stale"          # no heartbeat within the max age
UNDEAD = "too many undead slots"   # heartbeats, but claims nothing (max_undead exceeded)


def iso(ms: Any) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(int(ms) / 1000, timezone.utc).isoformat(timespec="milliseconds")


def default_max_age(lease_seconds: float) -> float:
    """Two leases: six missed heartbeats in a row."""
    return 2 * lease_seconds


def worker_table(store: Any, max_age: float, *, host: str | None = None, limit: int = 100) -> list[WorkerHealth]:
    """Every worker row (newest first), with its age and health."""
    out = []
    for r in store.list_workers(limit):
        if host is not None and r["host"] != host:
            continue
        age = max(0.0, (int(r["now_ms"]) - int(r["heartbeat_ms"])) / 1000)
        live = r["status"] in LIVE_WORKER
        # A worker with too many undead slots heartbeats but claims nothing: not healthy.
        problem = STALE if age > max_age else UNDEAD if r["status"] == WorkerStatus.UNHEALTHY else None
        fresh = problem is None
        out.append(WorkerHealth(
            id=r["id"], host=r["host"], pid=int(r["pid"]), concurrency=int(r["concurrency"]), busy=int(r["busy"]),
            undead=int(r["undead"]), status=r["status"], started=iso(r["started_ms"]),
            last_heartbeat=iso(r["heartbeat_ms"]), age_seconds=round(age, 3), live=live,
            healthy=fresh if live else None, problem=problem if live else None,
        ))
    return out


def check(store: Any, max_age: float, *, host: str | None = None, limit: int = 100) -> HealthReport:
    """The health of the live workers (see the module docstring)."""
    workers = worker_table(store, max_age, host=host, limit=limit)
    live = [w for w in workers if w.live]
    stale = [w for w in live if not w.healthy]
    where = f" on host {host}" if host else ""
    if not live:
        return HealthReport(False, max_age, workers, f"no live worker process{where}")
    if stale:
        names = ", ".join(f"{w.host}:{w.pid} ({w.problem}: heartbeat {w.age_seconds:.1f} s ago, "
                          f"{w.undead} undead)" for w in stale)
        return HealthReport(False, max_age, workers,
                            f"{len(stale)} of {len(live)} live worker process(es){where} missed their heartbeat "
                            f"(max age {max_age:g} s) or hold more undead slots than they tolerate: {names}")
    return HealthReport(True, max_age, workers,
                        f"{len(live)} live worker process(es){where} heartbeated within {max_age:g} s")
