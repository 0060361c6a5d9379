"""The ``ductline`` command line: the group, its global options (log level and
format), the entry point that turns errors into an ``error:`` line and an exit
code, and the commands, each from its own ``*_command`` module."""

from __future__ import annotations

import logging
import sys

import click

from ductline.actions_command import cancel, resume, retry, send
from ductline.command_support import fail
from ductline.errors import DuctlineError, TargetError
from ductline.fleet_command import definitions, move
from ductline.loglevels import LEVELS
from ductline.logs import configure
from ductline.logs_command import logs
from ductline.mark_command import mark_succeeded
from ductline.observability.command import health, workers
from ductline.run_command import run, trigger
from ductline.runs_command import runs
from ductline.schedule_command import schedules
from ductline.schema_command import migrate, prune
from ductline.show_command import show
from ductline.store import notices
from ductline.wait_command import wait
from ductline.web.command import dashboard
from ductline.worker_command import worker


# Commands whose process stays up (a worker, the dashboard, a run's own worker): the
# store's notices about the database are said there at WARNING; every other command
# is one-shot and keeps them to DEBUG (`ductline.store.notices`).
STAYING_COMMANDS = frozenset({"worker", "run", "dashboard"})


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
    notices.one_shot(click.get_current_context().invoked_subcommand not in STAYING_COMMANDS)


runs.add_command(move)
for subcommand in (migrate, trigger, run, worker, runs, show, retry, cancel, resume, send, prune, dashboard,
                   health, workers, schedules, logs, wait, mark_succeeded, definitions):
    cli.add_command(subcommand)


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
