"""Liveness and readiness probes, served by a worker's metrics endpoint and by the
dashboard at ``/healthz`` and ``/readyz`` (the Kubernetes convention).

- ``/healthz`` (liveness): the process answers. It never reads the database, so a
  database outage does not get a healthy process restarted.
- ``/readyz`` (readiness): the database answers and its schema is the version
  this ductline expects; otherwise 503 with the reason.

Both answer JSON: ``{"status": "ok", ...}`` or ``{"status": "unavailable",
"reason": "..."}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ductline.errors import StoreError
from ductline.store import migrations


@dataclass(frozen=True, slots=True)
class Probe:
    """A probe's answer: ``ok`` (HTTP 200, else 503) and its JSON body."""

    ok: bool
    body: dict[str, Any]

    @property
    def status_code(self) -> int:
        return 200 if self.ok else 503


def liveness() -> Probe:
    """The process is alive (nothing is read)."""
    return Probe(True, {"status": "ok"})


def readiness(store: Any) -> Probe:
    """The database answers and its schema is current.

    Args:
        store: a `ductline.store.Store`, or ``None`` (then not ready: nothing to check).
    """
    if store is None:
        return Probe(False, {"status": "unavailable", "reason": "no database configured"})
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
