"""What the ``ductline`` commands share: the consoles they print to, the ``error:``
line and its exit code, the store a command opens, the options every command
takes (``--database``, ``--tag``) and the parsing of option values (JSON,
durations, times, tags). Each command lives in a ``*_command`` module;
`ductline.cli` gathers them into the ``ductline`` group."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from datetime import datetime
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.text import Text

from ductline import tables, terminal
from ductline.config import load_settings
from ductline.durations import parse_cli_duration
from ductline.errors import StoreUnavailable
from ductline.handle import RunHandle
from ductline.store import Store, open_store
from ductline.stores import ensure_schema

# Error lines are never wrapped: operators grep them and scripts parse them.
console = Console(stderr=True, soft_wrap=True, _environ=terminal.environ())
# Piped output is not cut to 80 columns (tables stay whole for grep and less),
# unless COLUMNS gives a width: tables then fit it (`ductline.tables`).
out = tables.output_console()


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (2: a usage error)."""
    # The message is text, not markup: "[dashboard]" or a step's "[x]" must print as is.
    console.print(Text.assemble(("error:", "red"), " ", message), highlight=False)
    sys.exit(code)


def command_store(database: str | None, *, migrate: bool = False, read_only: bool = False,
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


def store_when_available(database: str | None, stop: threading.Event) -> Store:
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
            return command_store(database, component="ductline-worker")
        except StoreUnavailable as exc:
            if exc.permanent:
                fail(f"{type(exc).__name__}: {exc}")
            log.warning("Database unavailable (%s); retrying in %.1f s", exc, delay)
            if stop.wait(delay):
                log.info("Stopped while waiting for the database: nothing was claimed")
                sys.exit(0)
            delay = min(delay * 2, 10.0)


def refused_for_good(database: str | None) -> None:
    """Exit 2 if the database refuses this process for good (`StoreUnavailable.permanent`);
    a database that is down is left to the worker processes to wait for."""
    try:
        command_store(database, component="ductline-worker").close()
    except StoreUnavailable as exc:
        if exc.permanent:
            fail(f"{type(exc).__name__}: {exc}")


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, until the worker installs its own handlers
    (a stop asked for while the worker waits for its database or imports its apps is
    kept, not lost to the default action that kills the process)."""
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def start_run(store: Store, pipeline: Any, args: list[Any], **options: Any) -> RunHandle:
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


def json_list(text: str | None) -> list[Any]:
    """``--args``: a JSON list of a first step's arguments (``[]`` when not given)."""
    if text is None:
        return []
    value = json_option(text, "--args")
    if not isinstance(value, list):
        fail(f"--args must be a JSON list of arguments, got {type(value).__name__}")
    return value


def duration(text: str | None, field: str) -> int | None:
    """A duration option (``30s``, ``5m``, ``2h``, ``1d`` or seconds) in whole seconds;
    ``None`` when not given; a clear error naming ``field`` and exit 2 when malformed."""
    if text is None:
        return None
    try:
        return parse_cli_duration(text, field=field)
    except ValueError as exc:
        fail(str(exc))


def start_time(text: str | None) -> datetime | None:
    """``--delay-until``: an ISO 8601 time (the trigger refuses one without an offset)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        fail(f"--delay-until must be ISO 8601 with an offset (e.g. 2030-01-01T09:00:00+00:00), got {text!r}")


def tags_of(texts: tuple[str, ...], option: str) -> dict[str, str]:
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
