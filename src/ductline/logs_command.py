"""``ductline logs RUN_ID [--step S] [--follow] [--json]``: what a run's steps
logged and printed, per attempt, oldest first (`ductline.execution.steplog`)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

FOLLOW_POLL_SECONDS = 0.5


@click.command()
@click.argument("run_id")
@click.option("--step", metavar="STEP", help="Only this step's records.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new records until the run settles.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--database", "database", metavar="URL", default=None,
              help="Database URL (default: DUCTLINE_DATABASE_URL or sqlite:///ductline.db).")
def logs(run_id: str, step: str | None, follow: bool, as_json: bool, database: str | None) -> None:
    """Print what the steps of RUN_ID logged (a unique prefix of the id will do)."""
    from ductline import views
    from ductline.command_support import command_store
    from ductline.errors import RunNotFound
    from ductline.model.states import SETTLED_RUN, RunStatus
    from ductline.store import steplogs

    store = command_store(database, read_only=True)
    try:
        run_id = views.resolve_run_id(store, run_id)
        seen: set[tuple[str, int, int]] = set()
        while True:
            # Read the status first: records an attempt wrote before the run settled are
            # then all in the read that follows, and the last loop prints them.
            run = store.get_run(run_id)
            if run is None:
                raise RunNotFound(f"run {run_id!r} not found")
            if step is not None and not seen:
                _check_step(store, run, step)
            for record in steplogs.of_run(store.dialect, run_id, step):
                key = (record.job_id, record.attempt, record.seq)
                if key not in seen:
                    seen.add(key)
                    click.echo(_line(record, as_json))
            if not follow or RunStatus(run["status"]) in SETTLED_RUN:
                if not seen:  # said on stderr: stdout stays what was logged (none)
                    click.echo(f"no log records for run {run_id}" + (f", step {step!r}" if step else ""), err=True)
                return
            time.sleep(FOLLOW_POLL_SECONDS)  # a polling loop of a command, not of a test
    finally:
        store.close()


def _check_step(store: Any, run: dict[str, Any], step: str) -> None:
    """Exit with an error (rc 2) naming the run's steps when ``step`` is not one of
    them: an empty answer would read as "that step logged nothing"."""
    from ductline import views
    from ductline.command_support import fail

    steps = views.run_steps(store, run)
    if steps is not None and step not in steps:
        fail(f"run {run['id']} has no step {step!r}; its steps: {', '.join(steps) or '(none)'}")


def _line(record: Any, as_json: bool) -> str:
    """One record as a line. What the step wrote cannot act on the terminal: text
    shows its control characters escaped and indents its further lines
    (`ductline.logs.terminal_lines`); JSON is ASCII with every control character escaped."""
    from ductline import views
    from ductline.logs import terminal_lines

    entry = views.log_entry(record)
    where = record.step + (f"[{record.scope}]" if record.scope else "")
    if as_json:
        return json.dumps({"step": record.step, "scope": record.scope, "attempt": record.attempt, **entry},
                          ensure_ascii=True)
    return terminal_lines(f"{entry['at']} {where} #{record.attempt} {record.level} {record.logger}: "
                          f"{record.message}")
