"""``ductline health`` (a liveness probe) and ``ductline workers`` (the worker table)."""

from __future__ import annotations

import json
import sys

import click

from ductline.model.workers import RECENTLY_GONE_MS
from ductline.observability import health as health_checks

RECENT_MINUTES = RECENTLY_GONE_MS // 60_000

_database = click.option("--database", "database", metavar="URL", default=None,
                         help="Database URL (default: DUCTLINE_DATABASE_URL or sqlite:///ductline.db).")
_host = click.option("--host", default=None, metavar="HOST",
                     help="Only worker processes on this host (e.g. $(hostname) in a container probe).")


def _open(database: str | None) -> tuple[object, float]:
    from ductline.config import load_settings
    from ductline.store import open_store
    from ductline.stores import ensure_schema

    settings = load_settings(database_url=database)
    store = open_store(settings.database_url, create=False, application_name="ductline-cli")  # read-only: never creates a database
    try:
        ensure_schema(store, migrate=False)
    except BaseException:
        store.close()
        raise
    return store, settings.lease_seconds


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report and the worker table as JSON.")
@click.option("--max-age", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Oldest acceptable heartbeat of a live worker (default: the lease; a worker "
                   "whose heartbeat is older than the lease is lost and no longer counts).")
@_host
@_database
def health(as_json: bool, max_age: float | None, host: str | None, database: str | None) -> None:
    """Exit 0 if at least one worker process is live and every live one heartbeated
    within --max-age, 1 if one did not or none is live (2 if the database cannot be
    read). A worker without a heartbeat for a whole lease is lost, not live."""
    store, lease_seconds = _open(database)
    try:
        limit = health_checks.default_max_age(lease_seconds) if max_age is None else max_age
        report = health_checks.check(store, limit, lease_seconds=lease_seconds, host=host)
    finally:
        store.close()  # type: ignore[attr-defined]
    if as_json:
        print(json.dumps(report.as_dict()))
    else:
        click.echo(("healthy: " if report.healthy else "unhealthy: ") + report.message,
                   err=not report.healthy)
    sys.exit(0 if report.healthy else 1)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--max-age", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Heartbeat age beyond which a live worker shows as stale (default: the lease).")
@click.option("--all", "everything", is_flag=True,
              help=f"Every worker row, also those that stopped or were lost more than {RECENT_MINUTES} minutes ago.")
@_host
@_database
def workers(as_json: bool, max_age: float | None, everything: bool, host: str | None, database: str | None) -> None:
    """List worker processes: host, pid, the queues each claims from, slots busy/undead, last heartbeat.

    Shown: the live workers and those that stopped or were lost recently (within 15
    minutes, or a lease if longer); --all shows every row.
    """
    store, lease_seconds = _open(database)
    try:
        limit = health_checks.default_max_age(lease_seconds) if max_age is None else max_age
        rows = health_checks.worker_table(store, limit, lease_seconds=lease_seconds, host=host,
                                          everything=everything)
    finally:
        store.close()  # type: ignore[attr-defined]
    if as_json:
        print(json.dumps([w.as_dict() for w in rows]))
        return
    from ductline import tables

    console = tables.output_console()
    console.print(tables.workers_table(console, rows))
