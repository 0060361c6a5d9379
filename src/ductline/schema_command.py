"""The database's upkeep: ``ductline migrate`` creates or upgrades the schema;
``ductline prune`` deletes old runs whole."""

from __future__ import annotations

import click

from ductline.command_support import command_store, database_option, duration, fail, out
from ductline.config import load_settings
from ductline.durations import seconds_text
from ductline.store import open_store


@click.command()
@database_option
def migrate(database: str | None) -> None:
    """Create or upgrade the schema."""
    store = open_store(load_settings(database_url=database).database_url, application_name="ductline-cli")
    applied = store.migrate()
    out.print(f"schema at version {store.schema_version()}" + (f" (applied {applied})" if applied else ""))


@click.command()
@click.option("--older-than", "older_than", required=True, metavar="D",
              help="Delete runs that ended more than D ago (a run not ended: created): 30d, 12h, 90m, "
                   "3600s or seconds.")
@click.option("--status", "statuses", multiple=True, metavar="S",
              help="Only runs with this status (repeat for several); default completed, failed, cancelled. "
                   "Halted, paused, pending and running runs go only when named, and never while a worker "
                   "runs one of their steps (cancel such a run first).")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@database_option
def prune(older_than: str, statuses: tuple[str, ...], dry_run: bool, database: str | None) -> None:
    """Delete old runs whole (jobs, attempts, payloads, context), a thousand rows per transaction,
    then the rows of workers gone that long (stopped; lost ones also a day at least)."""
    from ductline.operations.prune import check_statuses, prune as prune_runs

    seconds = duration(older_than, "--older-than")
    assert seconds is not None
    age = seconds_text(seconds)  # with its unit: "--older-than 1" is "1 s"
    try:
        wanted = check_statuses(statuses)
    except ValueError as exc:
        fail(str(exc))
    report = prune_runs(command_store(database, create=False), seconds, statuses=wanted, dry_run=dry_run)
    rows = sum(report.rows.values())
    if dry_run:
        out.print(f"would delete {report.runs} run(s) ({rows} rows) that ended more than {age} ago "
                  f"({', '.join(wanted)}) and {report.workers} row(s) of workers gone that long", highlight=False)
    else:
        detail = ", ".join(f"{table} {n}" for table, n in report.rows.items() if n and table != "runs")
        out.print(f"deleted {report.runs} run(s) in {report.transactions} transaction(s)"
                  + (f": {detail}" if detail else ""), highlight=False)
        if report.workers:
            out.print(f"deleted {report.workers} row(s) of workers gone more than {age} ago", highlight=False)
    if report.busy:
        left = "would leave" if dry_run else "left"
        out.print(f"{left} {report.busy} run(s) whole: a worker is running a step of each "
                  "(cancel them first: ductline cancel RUN)", highlight=False)
