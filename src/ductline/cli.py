"""The ``ductline`` command line."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from datetime import datetime
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.text import Text

from ductline import safetext, tables, views
from ductline.config import load_settings
from ductline.durations import parse_cli_duration
from ductline.errors import DuctlineError, InvalidStateError, StoreError, StoreUnavailable, TargetError
from ductline.handle import RunHandle
from ductline.loglevels import LEVELS
from ductline.logs import configure
from ductline.model.states import SETTLED_RUN, TERMINAL_RUN, HaltReason, JobStatus, RunStatus
from ductline.observability import runlog
from ductline.store import Store, open_store
from ductline.stores import ensure_schema

# Error lines are never wrapped: operators grep them and scripts parse them.
console = Console(stderr=True, soft_wrap=True)
# Piped output is not cut to 80 columns (tables stay whole for grep and less),
# unless COLUMNS gives a width: tables then fit it (`ductline.tables`).
out = tables.output_console()


def fail(message: str, code: int = 2) -> NoReturn:
    # The message is text, not markup: "[dashboard]" or a step's "[x]" must print as is.
    console.print(Text.assemble(("error:", "red"), " ", message), highlight=False)
    sys.exit(code)


def _store(database: str | None, *, migrate: bool = False, read_only: bool = False,
           create: bool = True, component: str = "ductline-cli") -> Store:
    """The store of ``--database``. ``read_only``: a command that only reads never
    creates or migrates a database (a missing one is an error, not a new file);
    ``create=False``: it may migrate an existing database but not create one."""
    settings = load_settings(database_url=database)
    store = open_store(settings.database_url, create=create and not read_only, application_name=component)
    if migrate:
        store.migrate()
    else:
        ensure_schema(store, migrate=not read_only)
    return store


def _store_when_available(database: str | None, stop: threading.Event) -> Store:
    """A worker started before its database waits for it instead of crash-looping.
    A refusal that waiting does not cure (`StoreUnavailable.permanent`: no such
    database or role, authentication failed) is not waited for: it exits 2 with the
    ``error:`` line of every other command. ``stop`` set (SIGTERM, Ctrl-C) ends the
    wait: the command exits 0, as a worker's graceful stop does, since nothing was
    claimed yet. The wait's lines are log records (``--log-format json`` formats them)."""
    log = logging.getLogger("ductline.worker")
    delay = 0.5
    while True:
        try:
            return _store(database, component="ductline-worker")
        except StoreUnavailable as exc:
            if exc.permanent:
                fail(f"{type(exc).__name__}: {exc}")
            log.warning("Database unavailable (%s); retrying in %.1f s", exc, delay)
            if stop.wait(delay):
                log.info("Stopped while waiting for the database: nothing was claimed")
                sys.exit(0)
            delay = min(delay * 2, 10.0)


def _refused_for_good(database: str | None) -> None:
    """Exit 2 if the database refuses this process for good (`StoreUnavailable.permanent`);
    a database that is down is left to the worker processes to wait for."""
    try:
        _store(database, component="ductline-worker").close()
    except StoreUnavailable as exc:
        if exc.permanent:
            fail(f"{type(exc).__name__}: {exc}")


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, until the worker installs its own handlers
    (a stop asked for while the worker waits for its database or imports its apps is
    kept, not lost to the default action that kills the process)."""
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def _trigger(store: Store, pipeline: Any, args: list[Any], **options: Any) -> RunHandle:
    """Start a run of a loaded pipeline through the operations layer."""
    from ductline.operations.trigger import trigger_run

    _, triggered = trigger_run(pipeline.definition(), tuple(args), database=store, **options)
    return RunHandle(triggered.run_id, store, created=triggered.created)


def json_option(text: str, option: str) -> Any:
    """The value of a JSON option (``--args``, ``--data``...); a clear error and exit 2
    when it is not JSON or nested too deeply for the parser."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{option} is not valid JSON: {exc}")
    except RecursionError:
        fail(f"{option} is nested too deeply")


def _json_list(text: str | None) -> list[Any]:
    if text is None:
        return []
    value = json_option(text, "--args")
    if not isinstance(value, list):
        fail(f"--args must be a JSON list of arguments, got {type(value).__name__}")
    return value


def _duration(text: str | None, field: str) -> int | None:
    if text is None:
        return None
    try:
        return parse_cli_duration(text, field=field)
    except ValueError as exc:
        fail(str(exc))


def _when(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        fail(f"--delay-until must be ISO 8601 with an offset (e.g. 2030-01-01T09:00:00+00:00), got {text!r}")


def _tags(texts: tuple[str, ...], option: str) -> dict[str, str]:
    """``("customer=acme", ...)`` from a repeated ``--tag`` as a dict (a repeated key fails)."""
    from ductline.model.tags import parse_tag

    found: dict[str, str] = {}
    for text in texts:
        try:
            key, value = parse_tag(text)
        except ValueError as exc:
            fail(f"{option}: {exc}")
        if key in found and found[key] != value:
            fail(f"{option}: tag {key!r} is given twice")
        found[key] = value
    return found


tag_option = click.option("--tag", "tag_texts", multiple=True, metavar="KEY=VALUE",
                          help="A tag of the run (repeat for several).")

database_option = click.option("--database", "database", metavar="URL", default=None,
                               help="Database URL (default: DUCTLINE_DATABASE_URL or sqlite:///ductline.db).")


@click.group()
# The version is read from the package metadata only when --version is asked for.
@click.version_option(None, "--version", package_name="ductline", prog_name="ductline",
                      message="%(prog)s %(version)s")
@click.option("--log-level", type=click.Choice(LEVELS, case_sensitive=False), default="INFO", show_default=True,
              help="The lowest level logged (any case). Global, as --log-format: before the command.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Text lines, or one JSON object a line.")
def cli(log_level: str, log_format: str) -> None:
    """ductline: durable pipelines with killable steps.

    A run ends completed, failed or cancelled, or stops halted, and halted is not
    failed. A halted run stopped because a step gave up (it used up max_attempts,
    its error is not retried, or it failed after crossing its boundary); it has not
    ended: it keeps everything, and `ductline retry RUN` revives it from that step.
    A failed run is over: its deadline passed or a pause expired; it cannot be
    retried, only triggered again.
    """
    configure(log_level, log_format)


@cli.command()
@database_option
def migrate(database: str | None) -> None:
    """Create or upgrade the schema."""
    store = open_store(load_settings(database_url=database).database_url, application_name="ductline-cli")
    applied = store.migrate()
    out.print(f"schema at version {store.schema_version()}" + (f" (applied {applied})" if applied else ""))


@cli.command()
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
    store = _store(database)
    handle = _trigger(store, pipeline, _json_list(args_json), delay=_duration(delay, "--delay"),
                      delay_until=_when(delay_until), timeout=_duration(timeout, "--timeout"), key=key,
                      priority=priority, tags=_tags(tag_texts, "--tag") or None)
    if as_json:
        out.print_json(json.dumps({"run_id": handle.id, "created": handle.created}))
    else:
        out.print(handle.id)
        if not handle.created:
            console.print(f"an active run already holds key {key!r}; nothing new was started", highlight=False)


@cli.command()
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
    args = _json_list(args_json)
    seconds = _duration(timeout, "--timeout")
    # Refused before the database is touched or a child started (`trigger` checks again).
    check_start_arguments(pipeline.definition(), tuple(args))
    # Every queue of the pipeline: the embedded worker is the whole fleet of this run.
    settings = load_settings(database_url=database, queues=",".join(pipeline.definition().queues))
    store = _store(database, migrate=True)
    # Only this pipeline, and no schedules: `run` runs one run, not whatever else waits.
    worker = build_worker(store, [module_part], concurrency or os.cpu_count() or 2, settings,
                          only=pipeline.name)
    handle = _trigger(store, pipeline, args, timeout=seconds)
    console.print(f"run [bold]{handle.id}[/bold] of pipeline [bold]{pipeline.name}[/bold]", highlight=False)
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
        revive = (views.retry_hint(view["halt_reason"], short) if view["halt_reason"] == HaltReason.NON_RETRYABLE_ERROR
                  else f"`ductline retry {short}` revives the run")
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


@cli.command()
@click.option("--app", "apps", multiple=True, required=True, metavar="MODULE_OR_FILE",
              help="Module or file defining pipelines (repeat for several).")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Child slots per process (default: CPUs).")
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes, supervised and restarted when they die.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics on this port (process i of --processes uses PORT+i).")
@click.option("--metrics-host", default=None, help="Address for --metrics-port (default 127.0.0.1).")
@click.option("--queue", "queues", multiple=True,
              help="Claim jobs of this queue (repeat for several; default: DUCTLINE_QUEUES, else 'default').")
@database_option
def worker(apps: tuple[str, ...], concurrency: int | None, processes: int, metrics_port: int | None,
           metrics_host: str | None, queues: tuple[str, ...], database: str | None) -> None:
    """Run a worker: claim jobs of the apps' pipelines and run them."""
    from ductline.runtime.launch import build_worker, supervise, worker_argv
    from ductline.runtime.shutdown import bound_startup

    if queues:
        # Through the environment, so the processes of --processes serve them too.
        os.environ["DUCTLINE_QUEUES"] = ",".join(queues)
    if metrics_port is not None:
        os.environ["DUCTLINE_METRICS_PORT"] = str(metrics_port)
    if metrics_host:
        os.environ["DUCTLINE_METRICS_HOST"] = metrics_host

    slots = concurrency or os.cpu_count() or 2
    if processes > 1:
        _refused_for_good(database)  # not N processes restarted forever on the same refusal
        sys.exit(supervise(worker_argv(list(apps), slots, database), processes))
    settings = load_settings(database_url=database)
    stop = _stop_on_signals()
    # A stop asked while the database holds the start-up (a migration waiting for a
    # lock) ends the process at the grace, as it would once the worker runs.
    guard = bound_startup(settings.shutdown_grace_seconds)
    store = _store_when_available(database, stop)
    w = build_worker(store, list(apps), slots, settings)
    w.install_signal_handlers(guard=guard)  # from here a signal stops the worker gracefully
    if stop.is_set():  # asked while the apps were imported
        console.print("stopped before starting: nothing was claimed", highlight=False)
        return
    w.run()
    runlog.uninstall()  # the lines of the last runs it ended are written before it exits


@cli.group(invoke_without_command=True)
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
        wanted = check_filter(_tags(tag_texts, "--tag").items())
    except ValueError as exc:
        fail(f"--tag: {exc}")
    if version is not None and wanted:
        fail("give --version or --tag, not both")
    store = _store(database, read_only=True)
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


# The most characters of a completed run's output `ductline show` prints.
SHOW_OUTPUT_CHARS = 500


@cli.command()
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
    store = _store(database, read_only=True)
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
        out.print(f"halted: {views.retry_hint(view['halt_reason'], short)}", highlight=False, markup=False)


@cli.command()
@click.argument("run_id")
@click.option("--force", "force", multiple=True, metavar="STEP",
              help="Re-run this step although it crossed an irreversible boundary (repeat for several).")
@database_option
def retry(run_id: str, force: tuple[str, ...], database: str | None) -> None:
    """Revive a halted run from its failed step(s) with fresh budgets.

    RUN_ID is a run id or a unique prefix of one (6 or more characters). A failed
    run (its deadline passed) is over and cannot be retried.
    """
    from ductline.operations.revive import retry_run

    store = _store(database)
    run_id = views.resolve_run_id(store, run_id)
    try:
        retry_run(store, run_id, force=force)
    except InvalidStateError as exc:
        fail(f"{type(exc).__name__}: " + str(exc).replace("retry with force naming them",
                                                            "retry with --force STEP for each"))
    out.print(f"run {run_id} revived")


@cli.command()
@click.argument("run_id")
@database_option
def cancel(run_id: str, database: str | None) -> None:
    """Cancel a run: kill its running attempts, skip the rest.

    RUN_ID is a run id or a unique prefix of one (6 or more characters).
    """
    from ductline.operations.cancel import cancel_run

    store = _store(database)
    run_id = views.resolve_run_id(store, run_id)
    cancel_run(store, run_id)
    out.print(f"run {run_id} cancelled")


@cli.command()
@click.argument("run_id")
@click.option("--input", "input_json", metavar="JSON",
              help="A new input for the paused step: one JSON value, passed as its single argument.")
@database_option
def resume(run_id: str, input_json: str | None, database: str | None) -> None:
    """Resume a paused run: its paused step runs now (optionally with a new input).

    RUN_ID is a run id or a unique prefix of one (6 or more characters).
    """
    from ductline.model.inputs import NO_INPUT
    from ductline.operations.resume import resume as resume_run

    value: Any = NO_INPUT
    if input_json is not None:
        value = json_option(input_json, "--input")
    store = _store(database)
    run_id = views.resolve_run_id(store, run_id)
    resumed = resume_run(store, run_id, value)
    steps = ", ".join(sorted({r["step"] for r in resumed}))
    out.print(f"run {run_id} resumed" + (f": {steps}" if steps else "")
              + (" with a new input" if input_json is not None else ""), highlight=False, soft_wrap=True)


@cli.command()
@click.argument("run_id")
@click.argument("event")
@click.option("--data", "data_json", metavar="JSON",
              help="The event's data: one JSON value, the waiting step's single argument (default null).")
@click.option("--key", metavar="KEY",
              help="An idempotency key: a second send with the same key to the run changes nothing.")
@database_option
def send(run_id: str, event: str, data_json: str | None, key: str | None, database: str | None) -> None:
    """Send the event EVENT to a run (a step waiting for it runs with its data).

    RUN_ID is a run id or a unique prefix of one (6 or more characters). An event
    the run does not wait for yet is kept until it does.
    """
    from ductline.operations.send import send as send_event

    value: Any = None
    if data_json is not None:
        value = json_option(data_json, "--data")
    store = _store(database)
    run_id = views.resolve_run_id(store, run_id)
    sent = send_event(store, run_id, event, value, key)
    name = safetext.printable(event)
    if sent.duplicate:
        out.print(f"run {run_id}: event {name!r} with key {safetext.printable(str(key))!r} was sent already; "
                  "nothing changed", highlight=False, soft_wrap=True, markup=False)
    elif sent.step is not None:
        out.print(f"run {run_id}: event {name!r} sent; step {sent.step} runs now", highlight=False,
                  soft_wrap=True, markup=False)
    else:
        out.print(f"run {run_id}: event {name!r} kept until the run waits for it", highlight=False,
                  soft_wrap=True, markup=False)


@cli.command()
@click.option("--older-than", "older_than", required=True, metavar="D",
              help="Delete runs that ended more than D ago: 30d, 12h, 90m, 3600s or seconds.")
@click.option("--status", "statuses", multiple=True, metavar="S",
              help="Only runs with this status (repeat for several); default completed, failed, cancelled. "
                   "Halted, paused and active runs go only when named.")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@database_option
def prune(older_than: str, statuses: tuple[str, ...], dry_run: bool, database: str | None) -> None:
    """Delete old runs whole (jobs, attempts, payloads, context), a thousand rows per transaction."""
    from ductline.operations.prune import check_statuses, prune as prune_runs

    seconds = _duration(older_than, "--older-than")
    assert seconds is not None
    try:
        wanted = check_statuses(statuses)
    except ValueError as exc:
        fail(str(exc))
    report = prune_runs(_store(database, create=False), seconds, statuses=wanted, dry_run=dry_run)
    rows = sum(report.rows.values())
    if dry_run:
        out.print(f"would delete {report.runs} run(s) ({rows} rows) that ended more than {older_than} ago "
                  f"({', '.join(wanted)})", highlight=False)
        return
    detail = ", ".join(f"{table} {n}" for table, n in report.rows.items() if n and table != "runs")
    out.print(f"deleted {report.runs} run(s) in {report.transactions} transaction(s)"
              + (f": {detail}" if detail else ""), highlight=False)


# Options of the `ductline` group itself, given before the command.
GLOBAL_OPTIONS = ("--log-level", "--log-format")


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.NoSuchOption as unknown:
        exc: click.ClickException = unknown
        if unknown.option_name in GLOBAL_OPTIONS:
            # Given after the command: say where it goes rather than only that it is unknown.
            names, ctx = [], unknown.ctx
            while ctx is not None and ctx.parent is not None:  # the command's words, without the program's
                names.append(ctx.info_name or "")
                ctx = ctx.parent
            command = " ".join(reversed(names)) or "COMMAND"
            exc = click.UsageError(f"{unknown.format_message()} {unknown.option_name} is a global option: give it "
                                   f"before the command, as in `ductline {unknown.option_name} ... {command}`.",
                                   ctx=unknown.ctx)
        elif unknown.ctx is not None and unknown.ctx.parent is None:
            hint = _command_option_hint(unknown.option_name, sys.argv[1:])
            if hint:
                exc = click.UsageError(f"{unknown.format_message()} {hint}", ctx=unknown.ctx)
        exc.show()
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except TargetError as exc:
        fail(f"{type(exc).__name__}: {exc}{_import_traceback(exc)}")
    except (DuctlineError, TypeError, ValueError) as exc:
        fail(f"{type(exc).__name__}: {exc}")
    except SystemExit:
        raise


def _command_option_hint(option: str, words: list[str]) -> str:
    """Where an option given before the command goes (``ductline --database URL
    runs``): after the command that takes it, as in ``ductline runs --database
    URL``; for ``--database``, also the environment variable that sets it for every
    command. Empty when no command takes ``option``."""
    takes = sorted(name for name, command in cli.commands.items()
                   if any(option in p.opts for p in command.params))
    if not takes:
        return ""
    command = next((w for w in words if w in cli.commands), None)
    if command is None or command not in takes:
        command = takes[0]
    said = f"{option} is an option of the command: give it after the command, as in `ductline {command} {option} ...`"
    if option == "--database":
        said += ", or set DUCTLINE_DATABASE_URL for every command"
    return said + "."


def _import_traceback(exc: TargetError) -> str:
    """An app that raised while it was imported: its whole traceback logged at DEBUG,
    else a hint saying how to see it (the error names only its last frames)."""
    from ductline.apps import where

    cause = exc.__cause__
    if cause is None or not where(cause):  # no import ran the user's code
        return ""
    log = logging.getLogger("ductline.cli")
    if log.isEnabledFor(logging.DEBUG):
        log.debug("Importing an app failed", exc_info=cause)
        return ""
    return "; `ductline --log-level DEBUG ...` logs the whole traceback"


from ductline.web.command import dashboard  # noqa: E402

cli.add_command(dashboard)

from ductline.observability.command import health, workers  # noqa: E402
cli.add_command(health)
cli.add_command(workers)

from ductline.schedule_command import schedules  # noqa: E402
cli.add_command(schedules)

from ductline.logs_command import logs  # noqa: E402
cli.add_command(logs)

from ductline.wait_command import wait  # noqa: E402
cli.add_command(wait)

from ductline.mark_command import mark_succeeded  # noqa: E402
cli.add_command(mark_succeeded)

from ductline.fleet_command import definitions, move  # noqa: E402
runs.add_command(move)
cli.add_command(definitions)
