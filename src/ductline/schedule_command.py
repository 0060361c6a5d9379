"""``ductline schedules``: list schedules; ``disable NAME`` / ``enable NAME``."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

import click

from ductline.timestamps import iso

_database = click.option("--database", "database", metavar="URL", default=None,
                         help="Database URL (default: DUCTLINE_DATABASE_URL or sqlite:///ductline.db).")


def _open(database: str | None, *, read_only: bool = False) -> Any:
    """The store of ``--database``; never a new database (what these commands read
    or change exists only once a worker started on it). ``read_only``: nor migrated."""
    from ductline.config import load_settings
    from ductline.store import open_store
    from ductline.stores import ensure_schema

    store = open_store(load_settings(database_url=database).database_url, create=False,
                       application_name="ductline-cli")
    try:
        ensure_schema(store, migrate=not read_only)
    except BaseException:
        store.close()
        raise
    return store


def _at(ms: int | None) -> str | None:
    return iso(ms)


def schedule_view(row: dict[str, Any]) -> dict[str, Any]:
    """One schedule row as shown by the CLI and the dashboard (times ISO 8601 UTC)."""
    from ductline import codec
    from ductline.runtime.scheduler import describe

    return {
        "name": row["name"], "pipeline": row["pipeline"], "cron": row["cron"], "args": codec.loads(row["args"], user_types=False),
        "enabled": bool(row["enabled"]), "defined": bool(row["defined"]), "state": describe(row),
        "next_fire": _at(row["next_fire_ms"]), "next_fire_ms": row["next_fire_ms"],
        "last_fire": _at(row["last_fire_ms"]), "last_fire_ms": row["last_fire_ms"],
        "last_run_id": row["last_run_id"],
    }


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@_database
@click.pass_context
def schedules(ctx: click.Context, as_json: bool, database: str | None) -> None:
    """List schedules: name, pipeline, cron (UTC), state, next fire, last fire, last run.

    A schedule is written to the database by the workers that serve its pipeline
    when they start; STATE is enabled, disabled (by `schedules disable`) or removed
    from code (no longer declared by those workers' apps; kept, never fired).
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = database
        return
    from ductline.store import schedules as rows

    store = _open(database, read_only=True)
    try:
        views = [schedule_view(r) for r in rows.list_all(store)]
    finally:
        store.close()
    if as_json:
        print(json.dumps(views))
        return
    from ductline import tables

    console = tables.output_console()
    console.print(tables.schedules_table(console, views))


def _switch(ctx: click.Context, name: str, database: str | None, enabled: bool) -> None:
    from ductline.dsl.schedule import next_tick_ms
    from ductline.store import schedules as rows

    store = _open(database or ctx.obj)
    try:
        changed = rows.set_enabled(store, name, enabled, next_tick_ms)
    finally:
        store.close()
    if changed is None:
        click.echo(f"error: no schedule named {name!r}", err=True)
        sys.exit(2)
    word = "enabled" if enabled else "disabled"
    click.echo(f"schedule {name} {word}" if changed else f"schedule {name} was already {word}")


@schedules.command()
@click.argument("name")
@_database
@click.pass_context
def disable(ctx: click.Context, name: str, database: str | None) -> None:
    """Stop firing schedule NAME (workers keep it disabled across restarts)."""
    _switch(ctx, name, database, False)


@schedules.command()
@click.argument("name")
@_database
@click.pass_context
def enable(ctx: click.Context, name: str, database: str | None) -> None:
    """Fire schedule NAME again, from its first tick after now (missed ticks are not fired)."""
    _switch(ctx, name, database, True)


def _instant(text: str, option: str) -> int:
    """An ISO 8601 time with a UTC offset (or ``Z``) as epoch ms."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not ISO 8601 (e.g. 2030-01-01T00:00:00Z)", param_hint=option) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise click.BadParameter(f"{text!r} has no UTC offset; add one, e.g. Z or +00:00", param_hint=option)
    return int(round(moment.timestamp() * 1000))


@schedules.command()
@click.argument("name")
@click.option("--from", "from_text", required=True, metavar="ISO", help="First instant of the range (ISO 8601 "
              "with offset), included.")
@click.option("--to", "to_text", required=True, metavar="ISO", help="Last instant of the range, included.")
@click.option("--app", "apps", multiple=True, required=True, metavar="MODULE_OR_FILE",
              help="Module or file defining the schedule's pipeline.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@_database
@click.pass_context
def backfill(ctx: click.Context, name: str, from_text: str, to_text: str, apps: tuple[str, ...], as_json: bool,
             database: str | None) -> None:
    """Start a run for every tick of schedule NAME from --from to --to that has none.

    Each tick gets one run ever: repeating a backfill, or racing another one or a
    worker firing the tick, starts nothing twice. At most 1000 ticks per call.
    """
    from ductline.apps import import_app
    from ductline.operations.backfill import backfill as run_backfill

    from_ms, to_ms = _instant(from_text, "--from"), _instant(to_text, "--to")
    for app in apps:
        import_app(app)
    store = _open(database or ctx.obj)
    try:
        report = run_backfill(store, name, from_ms, to_ms)
    finally:
        store.close()
    if as_json:
        print(json.dumps({"schedule": name,
                          "started": [{"tick": t, "run_id": r} for t, r in report.started],
                          "existing": [{"tick": t, "run_id": r} for t, r in report.existing]}))
        return
    for tick, run_id in report.started:
        click.echo(f"{tick} started {run_id}")
    for tick, run_id in report.existing:
        click.echo(f"{tick} had run {run_id}")
    click.echo(f"schedule {name}: {len(report.started)} run(s) started, {len(report.existing)} tick(s) had one")
