"""``ductline runs``: list runs, newest first, filtered by status, pipeline, tags,
definition or parent run, as a table that fits the terminal or as JSON (its
``move`` subcommand is `ductline.fleet_command.move`)."""

from __future__ import annotations

import json

import click

from ductline import tables, views
from ductline.command_support import command_store, database_option, fail, out, tags_of
from ductline.model.states import RunStatus
from ductline.store import Store


@click.group(invoke_without_command=True)
@click.option("--status", type=click.Choice([s.value for s in RunStatus]),
              help="Only runs with this status (halted: a step gave up, `retry` revives it; failed: its deadline "
                   "passed, it is over).")
@click.option("--pipeline", help="Only runs of this pipeline.")
@click.option("--tag", "tag_texts", multiple=True, metavar="KEY=VALUE",
              help="Only runs carrying this tag (repeat: runs carrying all of them).")
@click.option("--version", "version", metavar="FINGERPRINT",
              help="Only runs of this definition (its fingerprint or first digits, as `show` prints it; "
                   "'-' for runs started before versions were recorded).")
@click.option("--parent", metavar="RUN_ID", help="Only the child runs this run started (an id or a unique prefix).")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list of runs (whole ids, ISO 8601 UTC times, each run's reason).")
@database_option
@click.pass_context
def runs(ctx: click.Context, status: str | None, pipeline: str | None, tag_texts: tuple[str, ...],
         version: str | None, parent: str | None, limit: int, as_json: bool, database: str | None) -> None:
    """List runs, newest first (`runs move` moves runs to another definition).

    In a narrow terminal runs are shown by a short unique prefix of their id (which
    every command taking RUN_ID accepts) and times compactly, in local time; a wide
    one, or --json, gives whole ids and ISO 8601 UTC times.
    """
    if ctx.invoked_subcommand is not None:
        return
    from ductline.model.tags import check_filter

    try:
        wanted = check_filter(tags_of(tag_texts, "--tag").items())
    except ValueError as exc:
        fail(f"--tag: {exc}")
    if version is not None and wanted:
        fail("give --version or --tag, not both")
    store = command_store(database, read_only=True)
    if parent is not None and (wanted or version is not None):
        fail("give --parent alone, without --tag or --version")
    if version is not None:
        from ductline.store import fleet

        try:
            found = fleet.runs_of(store, version, status=status, pipeline=pipeline, limit=limit)
        except ValueError as exc:
            fail(f"--version: {exc}")
    elif parent is not None:
        from ductline.store import children as child_rows

        parent_id = views.resolve_run_id(store, parent)
        with store.dialect.reader() as session:
            found = child_rows.list_child_runs(session, parent_id, status, pipeline, limit)
    else:
        found = store.list_runs(status, pipeline, limit, tags=wanted)
    if not found and pipeline is not None:
        _note_unknown_pipeline(store, pipeline)
    reasons = views.run_reasons(store, found)
    if as_json:
        print(json.dumps([views.run_summary(r, reasons.get(r["id"])) for r in found]))
        return
    out.print(tables.runs_table(out, found, lambda: views.short_ids(store, [r["id"] for r in found]), reasons))


# The most pipeline names a note about an unknown pipeline lists.
NAMED_PIPELINES = 20


def _note_unknown_pipeline(store: Store, pipeline: str) -> None:
    """Say on stderr that no run at all has ``pipeline`` (a misspelt name reads as an
    empty table otherwise), naming the pipelines that have runs. The answer stays a
    valid empty list: rc 0."""
    if store.list_runs(None, pipeline, 1):
        return
    from ductline.web.reader import DashboardReader

    names = DashboardReader(store).pipeline_names()
    shown = ", ".join(names[:NAMED_PIPELINES]) + (f" and {len(names) - NAMED_PIPELINES} more"
                                                  if len(names) > NAMED_PIPELINES else "")
    known = f"; pipelines with runs: {shown}" if names else "; no pipeline has runs"
    click.echo(f"note: no pipeline named {pipeline!r} has runs{known}", err=True)
