"""``ductline show RUN_ID``: one run, its steps and every attempt, what it waits for,
its output or why it stopped, as tables that fit the terminal or as JSON."""

from __future__ import annotations

import click
from rich.text import Text

from ductline import safetext, tables, views
from ductline.command_support import command_store, database_option, out
from ductline.config import load_settings
from ductline.model.states import TERMINAL_RUN, JobStatus, RunStatus

# The most characters of a completed run's output `ductline show` prints.
SHOW_OUTPUT_CHARS = 500



@click.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True,
              help="Print the run as one JSON object: its steps, attempts, errors and output, whole.")
@database_option
def show(run_id: str, as_json: bool, database: str | None) -> None:
    """Show one run: its steps, then each attempt with its start, end and duration,
    and a completed run's output (its first 500 characters; --json has all of it).

    RUN_ID is a run id or a unique prefix of one (6 or more characters). A skipped
    step says why, and which step's stop made it unreachable (its root).
    """
    store = command_store(database, read_only=True)
    view = views.run_view(store, views.resolve_run_id(store, run_id),
                          live_within_seconds=load_settings(database_url=database).lease_seconds)
    if as_json:
        print(views.to_json(view))
        return
    out.print(Text.assemble((view["run_id"], "bold"), f" {view['pipeline']}: {view['status']}"
                            + (f" ({view['halt_reason']})" if view["halt_reason"] else "")))
    if view.get("tags"):
        out.print("tags: " + " ".join(safetext.printable(f"{k}={v}", newlines=False) for k, v in view["tags"].items()),
                  highlight=False, soft_wrap=True, markup=False)
    out.print(f"definition {view['definition'] or '- (started before versions were recorded)'}",
              highlight=False, markup=False)
    for moved in (view["metadata"].get("moves") or []) if isinstance(view["metadata"], dict) else []:
        renamed = " ".join(f"{k}={v}" for k, v in (moved.get("steps") or {}).items())
        out.print(safetext.printable(f"moved from {moved.get('from') or '-'} to {moved.get('to')}"
                                     + (f" ({renamed})" if renamed else "")
                                     + f" at {moved.get('at')}", newlines=False),
                  highlight=False, markup=False)
    if view["parent"] is not None:
        p = view["parent"]
        out.print(f"child run {p['index']} of run {p['run_id']} ({p['pipeline']}, step {p['step']})",
                  highlight=False, soft_wrap=True, markup=False)
    out.print(tables.steps_table(out, view))
    # Every attempt with its own timings: where a run spent its time, and how long
    # each failed attempt took before the next one.
    attempts = tables.attempts_table(out, view)
    if attempts.row_count:
        out.print(attempts)
    for line in views.unserved_waits(view):
        out.print(line, highlight=False, soft_wrap=True, markup=False)
    for s in view["steps"]:
        if s["status"] == JobStatus.PAUSED:
            where = s["step"] + ("" if s["index"] is None else f"[{s['index']}]")
            expiry = f"; the pause expires at {s['pause_expires']}" if s["pause_expires"] else ""
            out.print(f"step {where} is paused, waiting for resume: ductline resume {view['run_id']} "
                      f"[--input JSON]{expiry}", highlight=False, soft_wrap=True, markup=False)
        elif s["status"] == JobStatus.DEFERRED:
            expiry = f"; the wait times out at {s['wait_expires']}" if s["wait_expires"] else ""
            event = safetext.printable(str(s["waiting_for"]))
            out.print(f"step {s['step']} waits for event {event!r}: ductline send {view['run_id']} {event} "
                      f"[--data JSON]{expiry}", highlight=False, soft_wrap=True, markup=False)
    kept = [e for e in view["events"] if e["consumed_by"] is None]
    if kept:
        names = ", ".join(repr(safetext.printable(str(e["name"]))) for e in kept)
        # A finished run waits for nothing more: its unused events are only history.
        what = "events never used" if view["status"] in TERMINAL_RUN else "events kept for a wait to come"
        out.print(f"{what}: {names}", highlight=False, soft_wrap=True, markup=False)
    if view["children"]:
        out.print(tables.children_table(out, view))
    if view["status"] == RunStatus.COMPLETED:
        # The run's output, as JSON on one line, cut at SHOW_OUTPUT_CHARS (--json has all of it).
        shown = safetext.printable(views.to_json(view["output"]), newlines=False)
        cut = shown if len(shown) <= SHOW_OUTPUT_CHARS else shown[:SHOW_OUTPUT_CHARS - 1] + "…"
        out.print(f"output: {cut}", highlight=False, soft_wrap=True, markup=False)
    if view["status"] == RunStatus.FAILED and view["metadata"].get("error"):
        out.print(f"failed: {safetext.printable(str(view['metadata']['error']))}", highlight=False, soft_wrap=True,
                  markup=False)
    for action in view.get("operator_actions", []):
        where = action["step"] + ("" if action["index"] is None else f"[{action['index']}]")
        why = f": {action['reason']}" if action["reason"] else ""
        out.print(safetext.printable(f"{action['at']} {action['actor']} marked {where} succeeded (it was "
                                     f"{action['previous_status']}){why}", newlines=False),
                  highlight=False, soft_wrap=True, markup=False)
    if view["status"] == RunStatus.HALTED:
        if view["metadata"].get("error"):  # what the halt recorded, e.g. how often a shutdown interrupted it
            out.print(f"halted ({view['halt_reason']}): "
                      f"{safetext.printable(str(view['metadata']['error']), newlines=False)}",
                      highlight=False, soft_wrap=True, markup=False)
        short = views.short_ids(store, [view["run_id"]])[view["run_id"]]
        out.print(f"halted: {views.retry_hint(view['halt_reason'], short, view['deadline'])}", highlight=False, markup=False)
