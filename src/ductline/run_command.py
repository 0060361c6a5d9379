"""``ductline trigger`` starts a run of a pipeline and prints its id; ``ductline run``
starts one and runs an embedded worker until it ends, with a progress display, then
reports how it ended (`report_end`, which ``ductline wait`` shares)."""

from __future__ import annotations

import json
import os
import sys
from typing import NoReturn

import click
from rich.text import Text

from ductline import safetext, views
from ductline.command_support import (command_store, console, database_option, duration, fail, json_list,
                                      out, start_run, start_time, tag_option, tags_of)
from ductline.config import load_settings
from ductline.dsl.graph import Definition
from ductline.errors import StoreError
from ductline.model.states import SETTLED_RUN, RunStatus
from ductline.observability import runlog
from ductline.store import Store


@click.command()
@click.argument("target")
@click.option("--args", "args_json", metavar="JSON_LIST", help="Arguments of the first step, as a JSON list.")
@click.option("--delay", metavar="D", help="Start delay: 30s, 5m, 2h, 1d or seconds.")
@click.option("--delay-until", metavar="ISO", help="Start time, ISO 8601 with offset.")
@click.option("--timeout", metavar="D", help="Whole-run deadline: 30s, 5m, 2h, 1d or seconds.")
@click.option("--key", metavar="KEY", help="Idempotency key: while a run holding it is active, "
              "print that run instead of starting another.")
@click.option("--priority", type=click.IntRange(-100, 100), default=None,
              help="This run's priority (-100..100) instead of the pipeline's; higher is claimed first.")
@tag_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@database_option
def trigger(target: str, args_json: str | None, delay: str | None, delay_until: str | None,
            timeout: str | None, key: str | None, priority: int | None, tag_texts: tuple[str, ...],
            as_json: bool, database: str | None) -> None:
    """Trigger a run of TARGET (module:attr or path/to/file.py:attr); prints the run id."""
    from ductline.apps import load_pipeline

    pipeline, _ = load_pipeline(target)
    store = command_store(database)
    handle = start_run(store, pipeline, json_list(args_json), delay=duration(delay, "--delay"),
                       delay_until=start_time(delay_until), timeout=duration(timeout, "--timeout"), key=key,
                       priority=priority, tags=tags_of(tag_texts, "--tag") or None)
    if as_json:
        out.print_json(json.dumps({"run_id": handle.id, "created": handle.created}))
    else:
        out.print(handle.id)
        if not handle.created:
            console.print(f"an active run already holds key {key!r}; nothing new was started", highlight=False)


@click.command()
@click.argument("target")
@click.option("--args", "args_json", metavar="JSON_LIST", help="Arguments of the first step, as a JSON list.")
@click.option("--concurrency", type=click.IntRange(min=1), default=None, help="Child slots (default: CPUs).")
@click.option("--timeout", metavar="D", help="Whole-run deadline: 30s, 5m, 2h, 1d or seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line describing the run on stdout instead of the summary.")
@database_option
def run(target: str, args_json: str | None, concurrency: int | None, timeout: str | None, as_json: bool,
        database: str | None) -> None:
    """Trigger TARGET and run an embedded worker until that run ends.

    Exits 0 if the run completed. A halted run (a step gave up) is named with the
    step and its last error, and `ductline retry` can revive it; a failed one (its
    deadline passed) is over.
    """
    from ductline.apps import load_pipeline, split
    from ductline.operations.trigger import check_start_arguments
    from ductline.progress import RunProgress
    from ductline.runtime.launch import build_worker

    module_part, _ = split(target)
    pipeline, _ = load_pipeline(target)
    args = json_list(args_json)
    seconds = duration(timeout, "--timeout")
    # Refused before the database is touched or a child started (`trigger` checks again).
    check_start_arguments(pipeline.definition(), tuple(args))
    # Every queue of the pipeline: the embedded worker is the whole fleet of this run.
    settings = load_settings(database_url=database, queues=",".join(pipeline.definition().queues))
    store = command_store(database, migrate=True)
    # Only this pipeline, and no schedules: `run` runs one run, not whatever else waits.
    worker = build_worker(store, [module_part], concurrency or os.cpu_count() or 2, settings,
                          only=pipeline.name)
    handle = start_run(store, pipeline, args, timeout=seconds)
    console.print(f"run [bold]{handle.id}[/bold] of pipeline [bold]{pipeline.name}[/bold]", highlight=False)
    _warn_of_other_workers(store, pipeline.definition(), settings.lease_seconds)
    worker.install_signal_handlers()

    def settled() -> bool:
        try:
            return handle.status() in SETTLED_RUN
        except StoreError:  # the database is away for a moment: keep working
            return False

    with RunProgress(store, handle.id, console):
        worker.run(stop_when=settled)
    runlog.uninstall()  # the run's end line is written before the summary
    if worker.interrupted and handle.status() not in SETTLED_RUN:
        status = handle.status()
        if status == RunStatus.PAUSED:
            fail(f"interrupted; run {handle.id} is paused: `ductline resume {handle.id}` lets it go on "
                 f"(with a worker: `ductline worker --app {module_part}`), `ductline cancel {handle.id}` "
                 "stops it", code=130)
        fail(f"interrupted; run {handle.id} is still {status}: `ductline worker --app "
             f"{module_part}` finishes it, `ductline cancel {handle.id}` stops it", code=130)
    report_end(store, handle.id, as_json)


def _warn_of_other_workers(store: Store, definition: Definition, lease_seconds: float) -> None:
    """Say so when live workers already serving this database could claim the run's
    steps: they run the code they imported when they started, which need not be the
    code on disk now (an edited step whose pipeline kept its shape)."""
    from ductline.model.serving import able_to_claim
    from ductline.store import fleet

    try:
        others = able_to_claim(frozenset(definition.queues), definition.fingerprint,
                               fleet.live_offers(store, lease_seconds))
    except StoreError:
        return
    if others:
        console.print(f"note: {others} other live worker(s) on this database serve this pipeline and may run "
                      "its steps with the code they imported when they started; restart them after changing "
                      "the code (`ductline workers` lists them)", highlight=False, markup=False)


def report_end(store: Store, run_id: str, as_json: bool) -> NoReturn:
    """Print how a settled run ended and exit with the code of ``ductline run``: 0 if
    it completed, else 1. A halted run is named with the step that gave up, its last
    error and the commands that show and revive it; a completed run's output is
    printed as JSON on stdout. ``as_json``: the last stdout line is one JSON object,
    ``{"run_id", "pipeline", "status", "output", "halt_reason", "metadata"}``."""
    view = views.run_view(store, run_id)
    status = view["status"]
    colour = "green" if status == RunStatus.COMPLETED else "red"
    metadata = view.get("metadata") or {}
    reason = view["halt_reason"] or (metadata.get("error") if isinstance(metadata, dict) else None)
    console.print(Text.assemble(f"run {run_id}: ", (status, colour),
                                f" ({safetext.printable(str(reason), newlines=False)})" if reason else ""))
    if status == RunStatus.HALTED:
        # The step that stopped the run and its last error, then what to do next.
        for line in views.failed_steps(view):
            console.print(Text("  " + safetext.printable(line, newlines=False)))
        short = views.short_ids(store, [run_id])[run_id]
        revive = views.retry_hint(view["halt_reason"], short, view["deadline"])
        console.print(f"  `ductline show {short}` lists every attempt; {revive}", highlight=False, markup=False)
    if view["output"] is not None and not as_json:
        # ASCII JSON, as `show` and --json print it: re-rendered with other characters
        # as they are, a lone surrogate cannot be encoded and a C1 control would reach
        # the terminal raw.
        out.print_json(views.to_json(view["output"]), ensure_ascii=True)
    if as_json:
        print(views.to_json({k: view[k] for k in ("run_id", "pipeline", "status", "output", "halt_reason",
                                                   "metadata")}))
    sys.exit(0 if status == RunStatus.COMPLETED else 1)
