"""Liveness and readiness probes, served by a worker's metrics endpoint and by the
dashboard at ``/healthz`` and ``/readyz`` (the Kubernetes convention).

- ``/healthz`` (liveness): the process answers. It never reads the database, so a
  database outage does not get a healthy process restarted.
- ``/readyz`` (readiness): the database answers and its schema is the version
  this ductline expects, and no worker of this process says it is unhealthy (its
  step children cannot start, or too many of its slots are undead: `watch`);
  otherwise 503 with the reason. A rollout of code whose children cannot import
  the app is held there.

Both answer JSON: ``{"status": "ok", ...}`` or ``{"status": "unavailable",
"reason": "..."}``.
"""

from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass
from typing import Any, Callable

from ductline.errors import StoreError
from ductline.store import migrations

READY_TIMEOUT_SECONDS = 3.0
_checker = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="ductline-readyz")
_running: dict[int, concurrent.futures.Future["Probe"]] = {}  # the check under way, per store
_lock = threading.Lock()
# The workers running in this process, each asked why it is unhealthy (``None``: it is not).
_workers: dict[str, Callable[[], str | None]] = {}


@dataclass(frozen=True, slots=True)
class Probe:
    """A probe's answer: ``ok`` (HTTP 200, else 503) and its JSON body."""

    ok: bool
    body: dict[str, Any]

    @property
    def status_code(self) -> int:
        return 200 if self.ok else 503


def watch(worker_id: str, unhealthy: Callable[[], str | None] | None) -> None:
    """Have `readiness` ask the worker ``worker_id`` of this process why it is
    unhealthy (``unhealthy()``, called from the probe's thread: a text, or ``None``);
    ``None`` forgets it (the worker stopped)."""
    with _lock:
        if unhealthy is None:
            _workers.pop(worker_id, None)
        else:
            _workers[worker_id] = unhealthy


def liveness() -> Probe:
    """The process is alive (nothing is read)."""
    return Probe(True, {"status": "ok"})


def readiness(store: Any, timeout_seconds: float = READY_TIMEOUT_SECONDS) -> Probe:
    """The database answers and its schema is current, checked in a thread of its
    own and waited for at most ``timeout_seconds``: an unreachable PostgreSQL makes
    its pool wait up to 15 s, which must hold neither the prober nor the metrics
    endpoint (one thread serves its scrapes). A check still running is joined, not
    started again.

    Args:
        store: a `ductline.store.Store`, or ``None`` (then not ready: nothing to check).
        timeout_seconds: how long to wait for the check (seconds).
    """
    if store is None:
        return Probe(False, {"status": "unavailable", "reason": "no database configured"})
    with _lock:
        future = _running.get(id(store))
        if future is None or future.done():
            future = _running[id(store)] = _checker.submit(_check, store)
    try:
        probe = future.result(timeout_seconds)
    except concurrent.futures.TimeoutError:
        return Probe(False, {"status": "unavailable",
                             "reason": f"database did not answer within {timeout_seconds:g} s"})
    with _lock:
        workers = list(_workers.values())
    for unhealthy in workers:
        why = unhealthy() if probe.ok else None
        if why is not None:
            return Probe(False, {**probe.body, "status": "unavailable", "reason": f"worker unhealthy: {why}"})
    return probe


def _check(store: Any) -> Probe:
    try:
        store.now_ms()
        version = migrations.current_version(store.dialect)
    except StoreError as exc:
        return Probe(False, {"status": "unavailable", "reason": f"database unreachable: {exc}"})
    expected = migrations.latest_version(store.dialect.name)
    if version != expected:
        what = "older" if version < expected else "newer"
        return Probe(False, {"status": "unavailable", "schema_version": version, "expected_version": expected,
                             "reason": f"database schema is version {version}, {what} than this ductline's "
                                       f"{expected}" + ("; run 'ductline migrate'" if version < expected else "")})
    return Probe(True, {"status": "ok", "schema_version": version})
