"""``ductline mark-succeeded RUN STEP --output JSON``: record a step run succeeded with
an output, without running it, and let the run continue from there."""

from __future__ import annotations

import sys
from typing import Any

import click


@click.command("mark-succeeded")
@click.argument("run_id")
@click.argument("step")
@click.option("--output", "output_json", required=True, metavar="JSON",
              help="The step's output, as JSON (what its next step receives).")
@click.option("--index", type=click.IntRange(min=0), default=None,
              help="The element index of the step run, for a step with several (an expand).")
@click.option("--reason", default=None, help="Why, for the run's history.")
@click.option("--app", "apps", multiple=True, required=True, metavar="MODULE_OR_FILE",
              help="Module or file defining the run's pipeline (the run advances by its graph).")
@click.option("--database", "database", metavar="URL", default=None,
              help="Database URL (default: DUCTLINE_DATABASE_URL or sqlite:///ductline.db).")
def mark_succeeded(run_id: str, step: str, output_json: str, index: int | None, reason: str | None,
                   apps: tuple[str, ...], database: str | None) -> None:
    """Record STEP of run RUN_ID succeeded with --output, without running it.

    For a step that failed, is held by its run's halt, or was cancelled (by a
    fail_fast sibling): say "this step succeeded, here is its output" (a paid call
    that went through although the step failed after it) and the run continues from
    there. A halted run is revived as `retry` revives it. Who, when and why are kept
    in the run's history (`ductline show`). A completed step, or a completed,
    failed or cancelled run, is refused.
    """
    from ductline import views
    from ductline.apps import import_app
    from ductline.config import load_settings
    from ductline.dsl.pipeline import registered
    from ductline.operations.mark import mark_succeeded as mark
    from ductline.store import open_store

    from ductline.command_support import json_option

    output: Any = json_option(output_json, "--output")
    for app in apps:
        import_app(app)
    store = open_store(load_settings(database_url=database).database_url, application_name="ductline-cli")
    try:
        run_id = views.resolve_run_id(store, run_id)
        run = store.get_run(run_id)
        assert run is not None  # resolved just now; a prune in between is reported by mark
        marked = mark(store, registered(run["pipeline"]).definition(), run_id, step, output, index=index,
                      reason=reason)
    finally:
        store.close()
    where = step if index is None else f"{step}[{index}]"
    words = [f"step {where} of run {run_id} marked succeeded"]
    if marked.revived:
        words.append("the halted run was revived")
    if marked.run_completed:
        words.append("the run completed")
    elif marked.enqueued:
        words.append("next: " + ", ".join(f"{s} ({n})" if n > 1 else s for s, n in sorted(marked.enqueued.items())))
    click.echo("; ".join(words))
    sys.stdout.flush()
